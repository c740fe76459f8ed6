"""Startup check that sqlcipher3 really encrypts, in the SQLCipher 4 format.

A wheel of the binding built against plain SQLite imports fine and accepts ``PRAGMA key``
silently, writing members' files in clear text. And a build whose defaults are an older
compatibility level would report every existing owner file as "wrong key", because a
raw-key open decrypts with the default settings. Both must stop the host at boot.
"""

import re
from types import ModuleType

from .errors import SqlCipherUnavailable

# SQLCipher 4 defaults. The library has no readable "compatibility" pragma: both
# `PRAGMA cipher_compatibility` and `PRAGMA cipher_default_compatibility` are set-only and
# return no rows (4.19.0). Setting compatibility 3 or 4 rewrites exactly these defaults,
# so they are what we compare.
SQLCIPHER_4_DEFAULTS: dict[str, str] = {
    "cipher_default_page_size": "4096",
    "cipher_default_use_hmac": "1",
    "cipher_default_hmac_algorithm": "HMAC_SHA512",
    "cipher_default_kdf_algorithm": "PBKDF2_HMAC_SHA512",
    "cipher_default_kdf_iter": "256000",
    "cipher_default_plaintext_header_size": "0",
}


def check_sqlcipher_build(module: ModuleType | None = None) -> str:
    """Return the SQLCipher version string, or raise SqlCipherUnavailable.

    ``module`` is the DB-API module to check (``sqlcipher3.dbapi2`` by default); tests pass
    the stdlib ``sqlite3`` to see the refusal a plain-SQLite build gets.
    """
    if module is None:
        try:
            from sqlcipher3 import dbapi2 as module
        except ImportError as error:
            raise SqlCipherUnavailable(
                f"cannot import sqlcipher3 ({error}): install the 'sqlcipher3' package "
                "(>=0.6.4) so member databases can be encrypted"
            ) from error
    conn = module.connect(":memory:")
    try:
        row = conn.execute("PRAGMA cipher_version").fetchone()
        version = str(row[0]) if row and row[0] else ""
        if not version:
            raise SqlCipherUnavailable(
                f"{module.__name__} is linked against plain SQLite {module.sqlite_version} "
                "(PRAGMA cipher_version returns nothing), so it cannot encrypt member "
                "databases: reinstall sqlcipher3 from a wheel that bundles SQLCipher 4"
            )
        major = re.match(r"\d+", version)
        if major is None or int(major.group()) < 4:
            raise SqlCipherUnavailable(
                f"SQLCipher {version} is too old: Skald writes the SQLCipher 4 file format; "
                "upgrade sqlcipher3 to >=0.6.4"
            )
        wrong = []
        for pragma, expected in SQLCIPHER_4_DEFAULTS.items():
            row = conn.execute(f"PRAGMA {pragma}").fetchone()
            actual = str(row[0]) if row else "nothing"
            if actual != expected:
                wrong.append(f"{pragma} is {actual}, expected {expected}")
        if wrong:
            raise SqlCipherUnavailable(
                f"SQLCipher {version} is not set to the SQLCipher 4 file format "
                f"({'; '.join(wrong)}): existing member databases would not open. Remove "
                "any `PRAGMA cipher_default_compatibility` or other cipher_default_* "
                "setting made in this process, or reinstall sqlcipher3"
            )
        return version
    finally:
        conn.close()
