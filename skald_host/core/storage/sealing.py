"""Instance secrets sealed at rest (check B1): a provider's API key, a plugin's
instance settings (a Telegram bot token), the settings sets plugins register and each
plugin's own key-value store (the mobile connector's VAPID key) live
in ``system.db``, which has no key of its own. They are stored there sealed with
AES-256-GCM under the instance key, a file of its own in the data dir
(``instance.key``, 0600), so a copy of ``system.db`` alone, a ``.dump`` pasted into an
issue, or a scan of the database files shows none of them. A backup carries the key
beside the database (a restore needs it): keep backups as private as the data dir.

Each sealed value names the cell it belongs to (table, column, row) as associated
data: a value moved to another row does not open. Values written before sealing
existed are read as they are and sealed at the next start (``seal_registry``).
Registry migrations run before the key is loaded: a migration may not read these cells
(the one that read ``plugins.config``, ``_connector_capabilities``, ran on every data
dir before sealing existed).
"""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from skald_host.core.storage.errors import StorageError
from skald_host.core.storage.permissions import fsync_dir

KEY_FILE = "instance.key"
PREFIX = "sealed:v1:"
_NONCE = 12

#: Registry cells that hold instance secrets: (table, the row's id, value column, rows).
SEALED_CELLS: tuple[tuple[str, str, str, str], ...] = (
    ("llm_providers", "id", "api_key", "api_key IS NOT NULL"),
    ("plugins", "id", "config", "1"),
    ("config", "key", "value", "key LIKE 'set:%'"),
    ("plugin_kv", "length(plugin_id) || ':' || plugin_id || '/' || key", "value", "1"),  # kv_cell
    ("device_tokens", "id", "label", "1"),  # a paired phone's name: often its owner's
)


def kv_cell(plugin_id: str, key: str) -> str:
    """The row id of a plugin's key-value entry, unambiguous whatever the two hold."""
    return f"{len(plugin_id)}:{plugin_id}/{key}"


class SealedValueError(StorageError):
    """A sealed value that does not open with this data dir's instance key."""


class Sealer:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    @classmethod
    def load_or_create(cls, data_dir: Path, *, create: bool = True) -> Sealer:
        """The data dir's instance key, made (and synced) the first time. ``create``
        False: the registry already holds sealed values, so a missing key is put back,
        never replaced by a new one that opens nothing. Blocking."""
        path = data_dir / KEY_FILE
        if not create and not path.exists():
            raise StorageError(
                f"{path} is missing, and system.db holds the instance's secrets sealed with it:"
                " put back the instance.key from the same data dir or backup as system.db"
            )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            text = path.read_text().strip()
            try:
                key = base64.b64decode(text, validate=True)
            except ValueError:
                key = b""
            if len(key) != 32:
                raise StorageError(f"{path} is not an instance key (32 bytes, base64); restore it from a backup") from None
            return cls(key)
        key = secrets.token_bytes(32)
        try:
            os.write(fd, base64.b64encode(key) + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(data_dir)
        return cls(key)

    def seal(self, text: str | None, table: str, column: str, row_id: str) -> str | None:
        if text is None:
            return None
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._aead.encrypt(nonce, text.encode(), _cell(table, column, row_id))
        return PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, stored: str | None, table: str, column: str, row_id: str) -> str | None:
        """The clear value of a cell; a value from before sealing comes back as it is."""
        if stored is None or not stored.startswith(PREFIX):
            return stored
        raw = base64.b64decode(stored[len(PREFIX):])
        try:
            return self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _cell(table, column, row_id)).decode()
        except InvalidTag:
            raise SealedValueError(
                f"system.db: {table}.{column} of {row_id!r} does not open with this data dir's {KEY_FILE}: "
                f"the database and its key come from different data dirs (restore both from the same backup)"
            ) from None


def _cell(table: str, column: str, row_id: str) -> bytes:
    return f"{table}.{column}:{row_id}".encode()


def holds_sealed(conn: Any) -> bool:
    """Whether any registry cell is sealed already (its key must then exist)."""
    return any(
        conn.execute(f"SELECT 1 FROM {table} WHERE {rows} AND {column} LIKE '{PREFIX}%' LIMIT 1").fetchone()
        for table, _, column, rows in SEALED_CELLS
    )


def seal_registry(conn: Any, sealer: Sealer) -> int:
    """In one transaction: check every sealed cell opens (refusing a database sealed
    under another key before anything reads it) and seal the ones still in clear,
    zeroing the clear text's old bytes (secure_delete). The number sealed."""
    conn.execute("PRAGMA secure_delete = ON")
    sealed = 0
    for table, id_column, column, rows in SEALED_CELLS:
        for row_id, value in conn.execute(f"SELECT {id_column}, {column} FROM {table} WHERE {rows}").fetchall():
            if value is None:
                continue
            if value.startswith(PREFIX):
                sealer.open(value, table, column, row_id)
                continue
            conn.execute(
                f"UPDATE {table} SET {column} = ? WHERE {id_column} = ?", (sealer.seal(value, table, column, row_id), row_id)
            )
            sealed += 1
    return sealed
