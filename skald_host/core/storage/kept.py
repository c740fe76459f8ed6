"""A read kept in memory until the next write through its owner.

For small registry tables every turn consults (enabled models, approval rules): the
read is a hop to the registry's thread on the path to the model's first token, yet
the rows change only when an admin edits them, through one class. That class sends
its writes through ``write``, which drops the kept copy before and after, and a read
that raced a write is used once but not kept.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class KeptRead(Generic[T]):
    def __init__(self, read: Callable[[], Awaitable[T]]) -> None:
        self._read = read
        self._value: T | None = None
        self._kept = False
        self._writes = 0  # writes begun or ended; a read spanning one is not kept

    async def get(self) -> T:
        if self._kept:
            return self._value  # type: ignore[return-value]
        writes = self._writes
        value = await self._read()
        if writes == self._writes:
            self._value, self._kept = value, True
        return value

    def drop(self) -> None:
        self._value, self._kept = None, False
        self._writes += 1

    async def write(self, job: Awaitable[R]) -> R:
        """Await ``job`` (a write to the rows read); the kept copy is dropped before it
        starts and again once it ends, committed or not."""
        self.drop()
        try:
            return await job
        finally:
            self.drop()
