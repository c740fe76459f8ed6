"""Providers and models as registry rows, managed by the admin.

API keys are instance secrets: stored in the registry, handed to the SDK, and only
ever returned masked. A model's ``strength`` picks it for agents that ask for a
strength instead of a model; ``priority`` orders the fallback chain.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from skald_host.core.plugins.config_schema import MASK
from skald_host.core.refusal import Refusal
from skald_host.core.storage import Database
from skald_host.core.storage.kept import KeptRead
from skald_host.core.storage.sealing import Sealer
from skald_host.core.text import check_shown_name

#: An API key's longest accepted length. Keys of the common providers are well under
#: 200 characters, but a JWT-style token (a gateway's, a cloud identity's) runs to
#: 1-2 KB; 4096 takes those and still keeps a pasted document out of the registry.
MAX_API_KEY_CHARS = 4096
#: A base URL's longest accepted length: what browsers and most servers take in a URL.
MAX_BASE_URL_CHARS = 2048


class ModelCatalogError(Refusal):
    pass


@dataclass(frozen=True)
class ModelChoice:
    """One callable model, with what the SDK needs to reach it."""

    id: str
    model: str
    label: str
    provider_id: str
    provider_name: str
    base_url: str
    api_key: str | None = field(repr=False)
    vision: bool
    strength: int
    priority: int


def _check_url(value: Any) -> str:
    if not isinstance(value, str):
        raise ModelCatalogError("base_url must be text", code="field_type", field="base_url")
    if len(value.strip()) > MAX_BASE_URL_CHARS:
        raise ModelCatalogError(
            f"base_url is longer than {MAX_BASE_URL_CHARS} characters", code="base_url_too_long", field="base_url",
            limit=MAX_BASE_URL_CHARS,
        )
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ModelCatalogError("base_url must be an http(s) URL such as https://api.openai.com/v1", code="base_url_invalid", field="base_url")
    return value.strip().rstrip("/")


def _check_name(value: Any, what: str, limit: int = 100) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise ModelCatalogError(f"{what} must be 1-{limit} characters", code="length_between", field=what, limit=limit)
    return check_shown_name(value.strip(), what, ModelCatalogError)


def _check_key(value: Any) -> str | None:
    """An API key as given (None or "" for none), or a refusal that names the field."""
    if value is not None and not isinstance(value, str):
        raise ModelCatalogError("api_key must be text", code="field_type", field="api_key")
    if value is not None and len(value) > MAX_API_KEY_CHARS:
        raise ModelCatalogError(
            f"api_key is longer than {MAX_API_KEY_CHARS} characters", code="api_key_too_long", field="api_key",
            limit=MAX_API_KEY_CHARS,
        )
    return value


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ModelCatalogError(f"{what} must be a whole number from {low} to {high}", code="number_between", field=what, low=low, high=high)
    return value


class ModelCatalog:
    """Providers and models in the registry. Every write to them goes through this
    class, so the enabled models a request chooses from are kept in memory between
    writes (``KeptRead``): every turn asks for them."""

    def __init__(self, registry: Database, sealer: Sealer) -> None:
        self.registry = registry
        self._sealer = sealer  # API keys are sealed in the registry (check B1)
        self._enabled = KeptRead(self._read_enabled)
        #: (provider name, model) of every model row, enabled or not, as of the last
        #: write through this class (None: not read yet, ``read_known``). Synchronous
        #: readers use it: agent definitions naming an inline provider + model are
        #: checked against it when a generation loads (seed 004 §2.2).
        self.known: frozenset[tuple[str, str]] | None = None

    async def _write(self, fn: Callable[[Any], Any]) -> None:
        try:
            await self._enabled.write(self.registry.transaction(fn))
        finally:
            await self.read_known()

    async def read_known(self) -> frozenset[tuple[str, str]]:
        rows = await self.registry.run(
            lambda c: c.execute("SELECT p.name, m.model FROM llm_models m JOIN llm_providers p ON p.id = m.provider_id").fetchall()
        )
        self.known = frozenset((r[0], r[1]) for r in rows)
        return self.known

    # -- providers -------------------------------------------------------------------

    async def providers(self) -> list[dict[str, Any]]:
        rows = await self.registry.run(lambda c: c.execute("SELECT * FROM llm_providers ORDER BY name").fetchall())
        return [
            {"id": r["id"], "name": r["name"], "base_url": r["base_url"], "api_key": MASK if r["api_key"] else None}
            for r in rows
        ]

    async def create_provider(self, name: Any, base_url: Any, api_key: Any = None) -> dict[str, Any]:
        name, url = _check_name(name, "name"), _check_url(base_url)
        api_key = _check_key(api_key)
        provider_id = uuid.uuid4().hex

        def write(conn: Any) -> None:
            if conn.execute("SELECT 1 FROM llm_providers WHERE name = ?", (name,)).fetchone():
                raise ModelCatalogError(f"a provider named {name!r} exists already", code="provider_exists", name=name)
            conn.execute(
                "INSERT INTO llm_providers (id, name, base_url, api_key) VALUES (?, ?, ?, ?)",
                (provider_id, name, url, self._seal_key(provider_id, api_key or None)),
            )

        await self._write(write)
        return await self.provider(provider_id)

    async def provider(self, provider_id: str) -> dict[str, Any]:
        for provider in await self.providers():
            if provider["id"] == provider_id:
                return provider
        raise ModelCatalogError("no such provider", code="not_found")

    async def update_provider(self, provider_id: str, **changes: Any) -> dict[str, Any]:
        await self.provider(provider_id)
        fields: dict[str, Any] = {}
        if "name" in changes:
            fields["name"] = _check_name(changes["name"], "name")
        if "base_url" in changes:
            fields["base_url"] = _check_url(changes["base_url"])
        if "api_key" in changes and changes["api_key"] != MASK:
            key = _check_key(changes["api_key"])
            fields["api_key"] = self._seal_key(provider_id, key or None)
        if fields:
            cols = ", ".join(f"{k} = ?" for k in fields)

            def write(conn: Any) -> None:
                # Checked here, not left to the UNIQUE index: a rename onto another
                # provider's name is the admin's mistake to be told about, not a 500.
                name = fields.get("name")
                if name and conn.execute("SELECT 1 FROM llm_providers WHERE name = ? AND id != ?", (name, provider_id)).fetchone():
                    raise ModelCatalogError(f"a provider named {name!r} exists already", code="provider_exists", name=name)
                conn.execute(f"UPDATE llm_providers SET {cols} WHERE id = ?", (*fields.values(), provider_id))

            await self._write(write)
        return await self.provider(provider_id)

    async def delete_provider(self, provider_id: str) -> None:
        await self.provider(provider_id)
        await self._write(lambda c: c.execute("DELETE FROM llm_providers WHERE id = ?", (provider_id,)))

    async def provider_secret(self, provider_id: str) -> tuple[str, str | None]:
        row = await self.registry.run(
            lambda c: c.execute("SELECT base_url, api_key FROM llm_providers WHERE id = ?", (provider_id,)).fetchone()
        )
        if row is None:
            raise ModelCatalogError("no such provider", code="not_found")
        return row[0], self._open_key(provider_id, row[1])

    def _seal_key(self, provider_id: str, key: str | None) -> str | None:
        return self._sealer.seal(key, "llm_providers", "api_key", provider_id)

    def _open_key(self, provider_id: str, stored: str | None) -> str | None:
        return self._sealer.open(stored, "llm_providers", "api_key", provider_id)

    # -- models ------------------------------------------------------------------------

    async def models(self) -> list[dict[str, Any]]:
        rows = await self.registry.run(
            lambda c: c.execute(
                "SELECT m.*, p.name AS provider_name FROM llm_models m JOIN llm_providers p ON p.id = m.provider_id"
                " ORDER BY m.priority, m.strength DESC, m.model"
            ).fetchall()
        )
        return [
            {
                "id": r["id"],
                "provider_id": r["provider_id"],
                "provider_name": r["provider_name"],
                "model": r["model"],
                "label": r["label"] or r["model"],
                "vision": bool(r["vision"]),
                "strength": r["strength"],
                "priority": r["priority"],
                "enabled": bool(r["enabled"]),
            }
            for r in rows
        ]

    async def create_model(self, provider_id: Any, model: Any, **fields: Any) -> dict[str, Any]:
        if not isinstance(provider_id, str):
            raise ModelCatalogError("provider_id must be text", code="field_type", field="provider_id")
        await self.provider(provider_id)
        model = _check_name(model, "model", 200)
        values = self._model_fields(fields)
        model_id = uuid.uuid4().hex

        def write(conn: Any) -> None:
            if conn.execute("SELECT 1 FROM llm_models WHERE provider_id = ? AND model = ?", (provider_id, model)).fetchone():
                raise ModelCatalogError(f"model {model!r} exists already for this provider", code="model_exists", model=model)
            conn.execute(
                "INSERT INTO llm_models (id, provider_id, model, label, vision, strength, priority, enabled)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    model_id, provider_id, model, values.get("label", ""), int(values.get("vision", False)),
                    values.get("strength", 50), values.get("priority", 100), int(values.get("enabled", True)),
                ),
            )

        await self._write(write)
        return next(m for m in await self.models() if m["id"] == model_id)

    @staticmethod
    def _model_fields(fields: dict[str, Any]) -> dict[str, Any]:
        unknown = set(fields) - {"label", "vision", "strength", "priority", "enabled"}
        if unknown:
            raise ModelCatalogError(f"unknown field(s): {', '.join(sorted(unknown))}", code="field_invalid", field=sorted(unknown)[0])
        out: dict[str, Any] = {}
        if "label" in fields:
            out["label"] = "" if fields["label"] is None else _check_name(fields["label"], "label")
        for flag in ("vision", "enabled"):
            if flag in fields:
                if not isinstance(fields[flag], bool):
                    raise ModelCatalogError(f"{flag} must be true or false", code="field_type", field=flag)
                out[flag] = fields[flag]
        if "strength" in fields:
            out["strength"] = _int(fields["strength"], "strength", 0, 100)
        if "priority" in fields:
            out["priority"] = _int(fields["priority"], "priority", 0, 100000)
        return out

    async def update_model(self, model_id: str, **fields: Any) -> dict[str, Any]:
        values = self._model_fields(fields)
        if not any(m["id"] == model_id for m in await self.models()):
            raise ModelCatalogError("no such model", code="not_found")
        if values:
            cols = ", ".join(f"{k} = ?" for k in values)
            params = [int(v) if isinstance(v, bool) else v for v in values.values()]
            await self._write(lambda c: c.execute(f"UPDATE llm_models SET {cols} WHERE id = ?", (*params, model_id)))
        return next(m for m in await self.models() if m["id"] == model_id)

    async def delete_model(self, model_id: str) -> None:
        if not any(m["id"] == model_id for m in await self.models()):
            raise ModelCatalogError("no such model", code="not_found")
        await self._write(lambda c: c.execute("DELETE FROM llm_models WHERE id = ?", (model_id,)))

    async def candidates(
        self, *, pin: str | None = None, strength: int | None = None, vision: bool = False, provider: str | None = None,
    ) -> list[ModelChoice]:
        """The fallback chain for one request: a pinned model first (by model name or
        id), then the others by priority, preferring those at or above the strength
        asked for and, when images are sent, those that can see them. With
        ``provider`` (an agent's inline provider + model pair): that provider's
        enabled ``pin`` model alone, with no fallback to another (empty when it is not
        enabled): an agent bound to one provider never quietly talks to another."""
        choices = await self._enabled.get()
        if provider is not None:
            return [c for c in choices if provider in (c.provider_name, c.provider_id) and pin in (c.model, c.id)]

        def rank(choice: ModelChoice) -> tuple[int, int, int, int]:
            pinned = 0 if pin and pin in (choice.model, choice.id, choice.label) else 1
            sees = 0 if (not vision or choice.vision) else 1
            strong = 0 if strength is None or choice.strength >= strength else 1
            return (pinned, sees, strong, choice.priority)

        return sorted(choices, key=lambda c: (rank(c), -c.strength, c.model))

    async def _read_enabled(self) -> list[ModelChoice]:
        rows = await self.registry.run(
            lambda c: c.execute(
                "SELECT m.*, p.name AS provider_name, p.base_url, p.api_key FROM llm_models m"
                " JOIN llm_providers p ON p.id = m.provider_id WHERE m.enabled = 1"
            ).fetchall()
        )
        return [
            ModelChoice(
                r["id"], r["model"], r["label"] or r["model"], r["provider_id"], r["provider_name"], r["base_url"],
                self._open_key(r["provider_id"], r["api_key"]), bool(r["vision"]), r["strength"], r["priority"],
            )
            for r in rows
        ]


