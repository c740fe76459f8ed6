"""The approval gate (seed 001 "Approval gate", check E1).

Rules say allow / deny / require for a tool name pattern and, optionally, a path
class. Deciding: among the rules that apply, any deny wins; otherwise the rule with
the lowest priority number decides; with none, the answer is require (the seeded
catch-all says so explicitly). Paths are normalised before matching — Unicode NFKC,
whitespace trimmed, ``~/`` and ``./`` stripped, ``..`` resolved — and a path that
climbs out of its root matches no allow rule. A memory path is normalised exactly as
``classify_memory`` routes it, so the rule judged is the store the tool reaches.

An approval is bound to (member, conversation, tool, SHA-256 of the canonical
arguments), used once, and expires; a call with other arguments asks again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import fnmatch
import hashlib
import json
import posixpath
import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping

from skald_host.core.files.service import home_relative
from skald_host.core.memory.notes import NoteError, classify_memory
from skald_host.core.refusal import Refusal
from skald_host.core.storage import Database
from skald_host.core.storage.kept import KeptRead

APPROVAL_TTL = dt.timedelta(minutes=30)
ACTIONS = ("allow", "deny", "require")
PATH_ARGUMENTS = ("path", "file", "target", "directory", "cwd", "workdir")


#: The ``reason`` a member's OK for a tool they may no longer use is answered and
#: announced with (``decision`` denied; the approval row keeps the member's "approved"),
#: and what the waiting call is woken with: it ends denied as withdrawn, never run.
WITHDRAWN_REASON = "withdrawn"


class RuleError(Refusal):
    pass


@dataclass(frozen=True)
class Rule:
    id: int
    tool_pattern: str
    path_class: str | None
    action: str
    priority: int
    group_id: str | None
    note: str = ""
    builtin: bool = False

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool_pattern": self.tool_pattern,
            "path_class": self.path_class,
            "action": self.action,
            "priority": self.priority,
            "group_id": self.group_id,
            "note": self.note,
            "builtin": self.builtin,
        }


def canonical_arguments(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def arguments_hash(arguments: Any) -> str:
    return hashlib.sha256(canonical_arguments(arguments).encode("utf-8")).hexdigest()


def normalise_path(raw: Any) -> str | None:
    """The path an argument names, in the one spelling rules match against; None when
    it climbs out of its root (such a path matches no path rule, so it is asked)."""
    if not isinstance(raw, str):
        return None
    # A memory path is judged as the store it reaches: classify_memory clamps `..`
    # inside the store, so `shared-memory/../x` must be matched as `shared-memory/x`,
    # never as the home file `x` (that would let a shared write skip its approval).
    try:
        memory = classify_memory(raw)
    except NoteError:
        return None
    if memory is not None:
        return "/".join(part for part in memory if part)
    # The spelling the file tools resolve (home_relative): `/home/member/shared/x` and
    # `//home/member/shared/x` reach `shared/x`, and a rule must judge them as that.
    path = home_relative(unicodedata.normalize("NFKC", raw).strip())
    if "\x00" in path:
        return None
    absolute = path.startswith("/")
    normal = posixpath.normpath(path) if path else ""
    if normal.startswith("..") or (not absolute and normal.startswith("/")):
        return None
    return normal


def _paths(arguments: Mapping[str, Any]) -> list[str | None]:
    return [normalise_path(arguments[key]) for key in PATH_ARGUMENTS if key in arguments]


def decide(rules: list[Rule], tool: str, arguments: Mapping[str, Any], groups: frozenset[str]) -> str:
    paths = _paths(arguments)
    matching = []
    for rule in rules:
        if rule.group_id is not None and rule.group_id not in groups:
            continue
        if not fnmatch.fnmatchcase(tool, rule.tool_pattern):
            continue
        if rule.path_class is not None:
            # A path rule needs paths, and every one of them inside its class.
            if not paths or any(p is None or not fnmatch.fnmatchcase(p, rule.path_class) for p in paths):
                continue
        matching.append(rule)
    if any(r.action == "deny" for r in matching):
        return "deny"
    if not matching:
        return "require"
    return min(matching, key=lambda r: (r.priority, r.id)).action


#: What a refusal for a card raised before the member's deactivation names in the
#: audit line (``raised_before_deactivation``).
DEACTIVATED = "member:deactivated"


def raised_before_deactivation(approval: Mapping[str, Any], deactivated_at: str | None) -> bool:
    """Whether ``approval``'s call is withdrawn because an admin deactivated the member
    after the card was raised (check C5). Deactivation locks the member and ends their
    turn, but their card stays in their file: reactivated, they could otherwise approve
    it, and it ran. Withdrawn whatever became of it after the deactivation (still
    pending, approved or spent since); a card the member declined, or that expired,
    before it keeps its own end. ``deactivated_at``: ``Member.deactivated_at``."""
    if deactivated_at is None or approval["created_at"] > deactivated_at:
        return False
    if approval["status"] == "expired":
        return False
    resolved_at = approval.get("resolved_at")
    return not (approval["status"] == "denied" and resolved_at is not None and resolved_at <= deactivated_at)


def expiry() -> str:
    return (dt.datetime.now(dt.timezone.utc) + APPROVAL_TTL).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_stamp() -> str:
    """Now, written as ``expiry`` writes (so the two compare as text)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def expired(expires_at: str) -> bool:
    return expires_at < now_stamp()


def seconds_left(expires_at: str) -> float:
    """How long a card written to end at ``expires_at`` still waits (0 when past)."""
    end = dt.datetime.strptime(expires_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    return max(0.0, (end - dt.datetime.now(dt.timezone.utc)).total_seconds())


class RuleStore:
    """Rules and security groups in the registry, edited by the admin."""

    def __init__(self, registry: Database) -> None:
        self.registry = registry
        # Every tool call consults the rules; they change only through this class.
        self._rules = KeptRead(self._read_rules)

    async def rules(self) -> list[Rule]:
        return await self._rules.get()

    async def _read_rules(self) -> list[Rule]:
        rows = await self.registry.run(lambda c: c.execute("SELECT * FROM approval_rules ORDER BY priority, id").fetchall())
        return [
            Rule(r["id"], r["tool_pattern"], r["path_class"], r["action"], r["priority"], r["group_id"], r["note"], bool(r["builtin"]))
            for r in rows
        ]

    @staticmethod
    def _validate(data: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        unknown = set(data) - {"tool_pattern", "path_class", "action", "priority", "group_id", "note"}
        if unknown:
            raise RuleError(f"unknown field(s): {', '.join(sorted(unknown))}", code="fields_unknown", fields=", ".join(sorted(unknown)))
        if "tool_pattern" in data:
            value = data["tool_pattern"]
            if not isinstance(value, str) or not value.strip() or len(value) > 200:
                raise RuleError("tool_pattern must be a tool name or pattern such as 'write_*'", code="tool_pattern_invalid")
            out["tool_pattern"] = value.strip()
        if "path_class" in data:
            value = data["path_class"]
            if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 300):
                raise RuleError("path_class must be a path pattern such as 'user-memory/*', or null", code="path_class_invalid")
            out["path_class"] = value.strip() if isinstance(value, str) else None
        if "action" in data:
            if data["action"] not in ACTIONS:
                raise RuleError("action must be allow, deny or require", code="rule_action_invalid", field="action")
            out["action"] = data["action"]
        if "priority" in data:
            value = data["priority"]
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10_000_000:
                raise RuleError("priority must be a whole number from 0 to 10000000", code="number_between", field="priority", low=0, high=10000000)
            out["priority"] = value
        if "group_id" in data:
            value = data["group_id"]
            if value is not None and not isinstance(value, str):
                raise RuleError("group_id must be a security group id or null", code="field_type", field="group_id")
            out["group_id"] = value
        if "note" in data:
            value = data["note"]
            if not isinstance(value, str) or len(value) > 500:
                raise RuleError("note must be text of at most 500 characters", code="too_long", limit=500)
            out["note"] = value
        return out

    async def create(self, data: Mapping[str, Any]) -> Rule:
        values = self._validate(data)
        for required in ("tool_pattern", "action", "priority"):
            if required not in values:
                raise RuleError(f"'{required}' is required", code="field_required", field=required)
        rule_id = await self._write(
            lambda c: c.execute(
                "INSERT INTO approval_rules (tool_pattern, path_class, action, priority, group_id, note) VALUES (?, ?, ?, ?, ?, ?)",
                (values["tool_pattern"], values.get("path_class"), values["action"], values["priority"], values.get("group_id"), values.get("note", "")),
            ).lastrowid
        )
        return next(r for r in await self.rules() if r.id == rule_id)

    async def update(self, rule_id: int, data: Mapping[str, Any]) -> Rule:
        values = self._validate(data)
        if not any(r.id == rule_id for r in await self.rules()):
            raise RuleError("no such rule", code="rule_not_found")
        if values:
            cols = ", ".join(f"{k} = ?" for k in values)
            await self._write(lambda c: c.execute(f"UPDATE approval_rules SET {cols} WHERE id = ?", (*values.values(), rule_id)))
        return next(r for r in await self.rules() if r.id == rule_id)

    async def delete(self, rule_id: int) -> None:
        rule = next((r for r in await self.rules() if r.id == rule_id), None)
        if rule is None:
            raise RuleError("no such rule", code="rule_not_found")
        if rule.builtin and rule.tool_pattern == "*":
            raise RuleError("the catch-all rule cannot be deleted; change its action instead", code="catch_all_kept")
        await self._write(lambda c: c.execute("DELETE FROM approval_rules WHERE id = ?", (rule_id,)))

    async def _write(self, fn: Any) -> Any:
        try:
            return await self._rules.write(self.registry.transaction(fn))
        except Exception as exc:
            if "FOREIGN KEY" in str(exc):
                raise RuleError("no such security group", code="group_not_found") from None
            raise

    async def groups(self) -> list[dict[str, Any]]:
        rows = await self.registry.run(lambda c: c.execute("SELECT * FROM security_groups ORDER BY id").fetchall())
        return [dict(r) for r in rows]

    async def create_group(self, group_id: Any, label: Any, description: Any = "") -> dict[str, Any]:
        if not isinstance(group_id, str) or not group_id.replace("-", "").replace("_", "").isalnum() or len(group_id) > 40:
            raise RuleError("id must be 1-40 letters, digits, '-' or '_'", code="group_id_invalid")
        if not isinstance(label, str) or not label.strip() or len(label) > 80:
            raise RuleError("label must be 1-80 characters", code="length_between", field="label", limit=80)
        if not isinstance(description, str) or len(description) > 500:
            raise RuleError("description must be text of at most 500 characters", code="too_long", field="description", limit=500)

        def write(conn: Any) -> None:
            if conn.execute("SELECT 1 FROM security_groups WHERE id = ?", (group_id,)).fetchone():
                raise RuleError(f"a group {group_id!r} exists already", code="group_exists", name=group_id)
            conn.execute("INSERT INTO security_groups (id, label, description) VALUES (?, ?, ?)", (group_id, label.strip(), description))

        await self._write(write)
        return {"id": group_id, "label": label.strip(), "description": description}

    async def delete_group(self, group_id: str) -> None:
        # A group's rules go with it (ON DELETE CASCADE): the kept rules are dropped too.
        if not await self._write(lambda c: c.execute("DELETE FROM security_groups WHERE id = ?", (group_id,)).rowcount):
            raise RuleError("no such group", code="group_not_found")


class ApprovalWaiters:
    """Live turns waiting on a member's answer. The durable row is the truth; this
    only wakes the waiting task. After a restart nobody waits, and resolving starts
    the conversation's recovery instead."""

    def __init__(self) -> None:
        self._waiters: dict[str, asyncio.Future[str]] = {}

    async def wait(self, approval_id: str) -> str:
        future = self._waiters.get(approval_id)
        if future is None or future.done():
            future = asyncio.get_running_loop().create_future()
            self._waiters[approval_id] = future
        try:
            return await future
        finally:
            self._waiters.pop(approval_id, None)

    def wake(self, approval_id: str, decision: str) -> bool:
        future = self._waiters.get(approval_id)
        if future is None or future.done():
            return False
        future.set_result(decision)
        return True
