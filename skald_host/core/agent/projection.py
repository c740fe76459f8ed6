"""The one projection of a frame's stored history to the OpenAI wire format.

A summary (from compaction) opens the window; interrupted, cancelled or failed
partial answers stay on the member's screen but never reach the model; a tool call
always travels with its result, in call order, right after its assistant message.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from skald_host.core.agent.store import TERMINAL_CALL_STATES
from skald_host.core.files.media import attachments_block, parse_attachments

SUMMARY_PREFIX = "Summary of the earlier part of this conversation:\n\n"

_OUTCOME = {
    "denied": "Denied: {result}",
    "cancelled": "Cancelled by the member.",
    "interrupted": "Interrupted: {result}",
    "error": "{result}",
}


def call_result_text(call: dict[str, Any]) -> str:
    status = call["status"]
    result = call.get("result") or ""
    if status == "done":
        return result
    if status in _OUTCOME:
        return _OUTCOME[status].format(result=result)
    return "Interrupted: this call never finished."


def user_content(message: dict[str, Any], images: Sequence[str] = ()) -> str | list[dict[str, Any]]:
    """A member's message on the wire: its text, a block naming its attachments, and
    for a vision model the turn's images as ``image_url`` parts."""
    attachments = parse_attachments(message.get("attachments"))
    text = message["content"] if not attachments else f"{message['content']}\n\n{attachments_block(attachments)}"
    if not images:
        return text
    return [{"type": "text", "text": text}, *({"type": "image_url", "image_url": {"url": url}} for url in images)]


def project(
    system_prompt: str,
    history: list[dict[str, Any]],
    images: Mapping[int, Sequence[str]] | None = None,
    memo: ProjectionMemo | None = None,
) -> list[dict[str, Any]]:
    """The request's messages: the system prompt, then each history row's entries
    (``message_entries``). With a ``memo``, a row the previous call saw is not
    projected again."""
    wire: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    kept, seen = (memo.kept if memo is not None else {}), {}
    for message in history:
        shown = (images or {}).get(message["id"], ())
        if memo is None or shown:
            wire += message_entries(message, shown)
            continue
        hit = kept.get(id(message))
        entries = hit[1] if hit is not None and hit[0] is message else message_entries(message, ())
        seen[id(message)] = (message, entries)
        wire += entries
    if memo is not None:
        memo.kept = seen
    return wire


class ProjectionMemo:
    """The wire entries of the rows one ``project`` call saw, for the next call on the
    same frame. The store hands every round the same read-only row objects until a
    write replaces a row (``ConversationStore.history``), so a row that is the very
    object seen last time has the same entries; the memo holds the row, so its id
    cannot be reused meanwhile."""

    def __init__(self) -> None:
        self.kept: dict[int, tuple[Mapping[str, Any], list[dict[str, Any]]]] = {}


def message_entries(message: Mapping[str, Any], images: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One history row on the wire: none, one entry, or an assistant entry followed by
    its calls' results."""
    role = message["role"]
    if role == "summary":
        return [{"role": "user", "content": SUMMARY_PREFIX + message["content"]}]
    if role == "user":
        return [{"role": "user", "content": user_content(message, images)}]  # type: ignore[arg-type]
    if role != "assistant":
        return []
    calls = message.get("tool_calls") or []
    if message["status"] != "complete" and not calls:
        return []
    entry: dict[str, Any] = {"role": "assistant", "content": message["content"] or None}
    if calls:
        entry["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls
        ]
    elif not message["content"]:
        return []
    return [entry] + [{"role": "tool", "tool_call_id": call["id"], "content": call_result_text(call)} for call in calls]


def unfinished_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in message.get("tool_calls") or [] if c["status"] not in TERMINAL_CALL_STATES]
