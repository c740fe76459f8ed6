"""The one projection of a frame's stored history to the OpenAI wire format.

A summary (from compaction) opens the window; interrupted, cancelled or failed
partial answers stay on the member's screen but never reach the model; a tool call
always travels with its result, in call order, right after its assistant message.
"""

from __future__ import annotations

from typing import Any

from skald_host.core.agent.store import TERMINAL_CALL_STATES

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


def project(system_prompt: str, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    for message in history:
        role = message["role"]
        if role == "summary":
            wire.append({"role": "user", "content": SUMMARY_PREFIX + message["content"]})
        elif role == "user":
            wire.append({"role": "user", "content": message["content"]})
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
