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
    system_prompt: str, history: list[dict[str, Any]], images: Mapping[int, Sequence[str]] | None = None
) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    for message in history:
        role = message["role"]
        if role == "summary":
            wire.append({"role": "user", "content": SUMMARY_PREFIX + message["content"]})
        elif role == "user":
            wire.append({"role": "user", "content": user_content(message, (images or {}).get(message["id"], ()))})
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if message["status"] != "complete" and not calls:
                continue
            entry: dict[str, Any] = {"role": "assistant", "content": message["content"] or None}
            if calls:
                entry["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ]
            elif not message["content"]:
                continue
            wire.append(entry)
            for call in calls:
                wire.append({"role": "tool", "tool_call_id": call["id"], "content": call_result_text(call)})
    return wire


def unfinished_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in message.get("tool_calls") or [] if c["status"] not in TERMINAL_CALL_STATES]
