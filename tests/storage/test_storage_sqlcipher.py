import sqlite3

import pytest
from sqlcipher3 import dbapi2 as sqlcipher

from skald_host.core.storage import SqlCipherUnavailable, check_sqlcipher_build


def test_sqlcipher_build_is_4x():
    version = check_sqlcipher_build()
    assert int(version.split(".")[0]) >= 4


def test_sqlcipher_build_check_refuses_plain_sqlite():
    with pytest.raises(SqlCipherUnavailable, match="plain SQLite"):
        check_sqlcipher_build(sqlite3)


def test_sqlcipher_build_check_refuses_v3_default_compatibility():
    # The cipher_default_* settings are process-wide: restore them whatever happens.
    conn = sqlcipher.connect(":memory:")
    conn.execute("PRAGMA cipher_default_compatibility = 3")
    try:
        with pytest.raises(SqlCipherUnavailable, match="HMAC_SHA1"):
            check_sqlcipher_build(sqlcipher)
    finally:
        conn.execute("PRAGMA cipher_default_compatibility = 4")
        conn.close()
    check_sqlcipher_build(sqlcipher)
