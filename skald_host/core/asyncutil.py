"""The one helper through which the host consumes hook results (STYLE.md "Hooks"):
pluggy is synchronous, so an impl may be ``async def`` and return a coroutine."""

from __future__ import annotations

import inspect
from typing import Any


async def await_me_maybe(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
