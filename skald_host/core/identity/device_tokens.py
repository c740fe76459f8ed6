"""Device tokens: durable credentials a binding-managed plugin issues to a member's
paired device (the mobile app), checked by the host's one authentication path.

Unlike a web session a device token survives a restart (a phone must not re-pair each
time the box reboots); it unlocks nothing: the member's private file opens only at a
password login, so a device of a locked member is told that, never handed data.

- 256 bits from ``secrets``; only the SHA-256 is stored (check A1).
- Scoped: a token opens its issuing plugin's routes (``/api/plugin/<id>/``) and no
  other route of the host.
- The label (a phone's name, often its owner's: "Alice's iPhone") is sealed under the
  instance key like the registry's secrets, so ``sqlite3 system.db`` shows none.
- Revoked with the member's sessions (``AuthService.revoke_member``: password change,
  admin reset, deactivation, deletion, "end all sessions"), by the plugin per device
  (unlink), and by the row cascade when the member is deleted.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from skald_host.core.storage.sealing import Sealer

#: ``last_seen_at`` is written at most this often per device: a phone polling every
#: few seconds must not turn every read into a registry write.
LAST_SEEN_RESOLUTION_SECONDS = 60.0
MAX_LABEL_BYTES = 2048
TOKEN_PREFIX = "skd_"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class DeviceCredential:
    id: str
    plugin_id: str
    member_id: str


class DeviceTokens:
    def __init__(self, registry: Any, sealer: Sealer) -> None:
        self.registry = registry
        self.sealer = sealer
        self._touched: dict[str, float] = {}
        #: token id -> the listeners of requests made with it still open (a plugin's
        #: stream, ``HostApi.watch_caller``), told once when the token is revoked.
        self._watchers: dict[str, dict[object, Callable[[str], None]]] = {}

    async def issue(self, plugin_id: str, member_id: str, label: Mapping[str, Any]) -> tuple[str, str]:
        blob = json.dumps(dict(label), ensure_ascii=False)
        if len(blob.encode()) > MAX_LABEL_BYTES:
            raise ValueError(f"a device label must encode to at most {MAX_LABEL_BYTES} bytes of JSON")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = uuid.uuid4().hex
        await self.registry.transaction(
            lambda c: c.execute(
                "INSERT INTO device_tokens (id, plugin_id, member_id, token_hash, label) VALUES (?, ?, ?, ?, ?)",
                (token_id, plugin_id, member_id, _digest(token), self.sealer.seal(blob, "device_tokens", "label", token_id)),
            )
        )
        return token_id, token

    async def resolve(self, plugin_id: str, token: str | None) -> DeviceCredential | None:
        """The credential behind ``token`` if it was issued by ``plugin_id``; None for
        an unknown, revoked or foreign-plugin token."""
        if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 512:
            return None
        digest = _digest(token)
        row = await self.registry.run(
            lambda c: c.execute("SELECT id, plugin_id, member_id FROM device_tokens WHERE token_hash = ?", (digest,)).fetchone()
        )
        if row is None or row[1] != plugin_id:
            return None
        credential = DeviceCredential(row[0], row[1], row[2])
        now = time.monotonic()
        if now - self._touched.get(credential.id, -LAST_SEEN_RESOLUTION_SECONDS) >= LAST_SEEN_RESOLUTION_SECONDS:
            self._touched[credential.id] = now
            await self.registry.transaction(
                lambda c: c.execute(
                    "UPDATE device_tokens SET last_seen_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?", (credential.id,)
                )
            )
        return credential

    async def list(self, plugin_id: str, member_id: str) -> list[dict[str, Any]]:
        rows = await self.registry.run(
            lambda c: c.execute(
                "SELECT id, label, created_at, last_seen_at FROM device_tokens WHERE plugin_id = ? AND member_id = ?"
                " ORDER BY created_at",
                (plugin_id, member_id),
            ).fetchall()
        )
        return [
            {"id": r[0], "label": json.loads(self.sealer.open(r[1], "device_tokens", "label", r[0]) or "{}"), "created_at": r[2],
             "last_seen_at": r[3] or r[2], "used": r[3] is not None}
            for r in rows
        ]

    async def revoke(self, plugin_id: str, member_id: str, token_id: str) -> bool:
        count = await self.registry.transaction(
            lambda c: c.execute(
                "DELETE FROM device_tokens WHERE id = ? AND plugin_id = ? AND member_id = ?", (token_id, plugin_id, member_id)
            ).rowcount
        )
        self._touched.pop(token_id, None)
        if count:
            self._ended([token_id], "device revoked")
        return bool(count)

    async def revoke_member(self, member_id: str) -> int:
        def delete(c: Any) -> list[str]:
            ids = [r[0] for r in c.execute("SELECT id FROM device_tokens WHERE member_id = ?", (member_id,)).fetchall()]
            c.execute("DELETE FROM device_tokens WHERE member_id = ?", (member_id,))
            return ids

        ids = await self.registry.transaction(delete)
        self._ended(ids, "sessions revoked")
        return len(ids)

    async def exists(self, token_id: str) -> bool:
        row = await self.registry.run(lambda c: c.execute("SELECT 1 FROM device_tokens WHERE id = ?", (token_id,)).fetchone())
        return row is not None

    def watch(self, token_id: str, on_end: Callable[[str], None]) -> Callable[[], None]:
        """Call ``on_end(reason)`` once when the token is revoked; returns the function
        that stops watching. In memory: the caller checks the token still exists."""
        handle = object()
        self._watchers.setdefault(token_id, {})[handle] = on_end

        def stop() -> None:
            watchers = self._watchers.get(token_id)
            if watchers is not None:
                watchers.pop(handle, None)
                if not watchers:
                    self._watchers.pop(token_id, None)

        return stop

    def ended(self, token_id: str, reason: str) -> None:
        """Tell the token's watchers now (found revoked by ``exists``)."""
        self._ended([token_id], reason)

    def _ended(self, token_ids: list[str], reason: str) -> None:
        for token_id in token_ids:
            for on_end in list(self._watchers.pop(token_id, {}).values()):
                on_end(reason)
