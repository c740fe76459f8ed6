"""The one projection of a frame's stored history to the OpenAI wire format.

A summary (from compaction) opens the window; interrupted, cancelled or failed
partial answers stay on the member's screen but never reach the model; a tool call
always travels with its result, in call order, right after its assistant message.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Mapping, Sequence

from skald_host.core.agent.store import TERMINAL_CALL_STATES
from skald_host.core.files.media import attachments_block, parse_attachments
from skald_host.core.llm.client import wire_json

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
    history: Sequence[Mapping[str, Any]],
    images: Mapping[int, Sequence[str]] | None = None,
    memo: ProjectionMemo | None = None,
) -> list[dict[str, Any]]:
    """The request's messages: the system prompt, then each history row's entries
    (``message_entries``). With a ``memo``, the rows the previous call saw, up to the
    first one that changed, are not looked at again: a round costs what it adds, not
    what the conversation holds."""
    images = images or {}
    if memo is None:
        wire: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
        for message in history:
            wire += message_entries(message, images.get(message["id"], ()))
        return wire
    if memo.system != system_prompt:
        memo.system, memo.rows, memo.wire, memo.ends = system_prompt, [], [{"role": "system", "content": system_prompt}], [1]
        memo.call_ids, memo.encoded = set(), []
    # Rows are read-only and replaced, never edited, when a write changes them
    # (ConversationStore.history): the same objects mean the same entries.
    kept = len(list(itertools.takewhile(bool, map(operator.is_, memo.rows, history))))
    first_image_row = next((i for i, m in enumerate(history) if m["id"] in images), len(history)) if images else len(history)
    kept = min(kept, memo.first_image_row, first_image_row)  # rows shown with images, then or now, are projected afresh
    wire = memo.wire[: memo.ends[kept]]
    ends = memo.ends[: kept + 1]
    for message in history[kept:]:
        wire += message_entries(message, images.get(message["id"], ()) if images else ())
        ends.append(len(wire))
        memo.call_ids.update(c["id"] for c in message.get("tool_calls") or ())
    memo.rows, memo.wire, memo.ends, memo.first_image_row = list(history), wire, ends, first_image_row
    del memo.encoded[ends[kept]:]  # the entries of the rows from the first changed one are new objects
    return list(wire)


class ProjectionMemo:
    """The previous ``project`` call on a frame: its rows, its wire, and where each
    row's entries end in it. The store hands every round the same read-only row
    objects until a write replaces one, so the rows up to the first one that is not
    the very object seen last time project to the same entries; the memo holds the
    rows, so their ids cannot be reused meanwhile."""

    def __init__(self) -> None:
        self.system: str | None = None
        self.rows: list[Mapping[str, Any]] = []
        self.wire: list[dict[str, Any]] = []
        self.ends: list[int] = [1]  # wire length after the system prompt and after each row
        self.first_image_row = 0  # rows from here were shown with images
        self.call_ids: set[str] = set()  # every tool call id these rows carried (rows since replaced too)
        self.encoded: list[bytes] = []  # the JSON of the wire's first entries, as far as asked for

    def wire_json(self, messages: Sequence[Mapping[str, Any]]) -> bytes | None:
        """``messages`` as a JSON array, when they are the entries the last ``project``
        returned: the entries kept from earlier rounds are not encoded again (a round's
        request repeats the whole conversation). None for any other list."""
        wire = self.wire
        if len(messages) != len(wire) or not all(map(operator.is_, messages, wire)):
            return None
        encoded = self.encoded
        encoded += [wire_json(entry) for entry in wire[len(encoded):]]
        return b"[" + b",".join(encoded) + b"]"


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
