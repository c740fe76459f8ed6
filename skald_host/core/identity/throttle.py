"""Failed-login limits per account and per client address (check A3).

Sliding windows in RAM: after ``limit`` failures inside ``window`` seconds, further
attempts are refused with the seconds until the oldest failure ages out, *before* any
Argon2 work is spent on them. A success clears the account's failures, not the
address's, so one valid account cannot launder guesses against others.
"""

from __future__ import annotations

import collections
import time
from typing import Callable


class LoginThrottled(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__("too many failed logins; try again later")
        self.retry_after = retry_after


class _Window:
    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._hits: dict[str, collections.deque[float]] = {}

    def _live(self, key: str, now: float) -> collections.deque[float]:
        hits = self._hits.get(key)
        if hits is None:
            return collections.deque()
        while hits and now - hits[0] >= self.window:
            hits.popleft()
        if not hits:
            self._hits.pop(key, None)
        return hits

    def retry_after(self, key: str, now: float) -> int:
        hits = self._live(key, now)
        if len(hits) < self.limit:
            return 0
        return max(1, int(self.window - (now - hits[0])) + 1)

    def add(self, key: str, now: float) -> None:
        self._hits.setdefault(key, collections.deque()).append(now)
        if len(self._hits) > 100_000:  # bound memory under a spray of random names
            oldest = min(self._hits, key=lambda k: self._hits[k][-1])
            self._hits.pop(oldest, None)

    def clear(self, key: str) -> None:
        self._hits.pop(key, None)


class LoginThrottle:
    def __init__(
        self,
        per_account: int,
        per_address: int,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._accounts = _Window(per_account, window_seconds)
        self._addresses = _Window(per_address, window_seconds)
        self._clock = clock
        self.enabled = True

    def check(self, account: str, address: str) -> None:
        if not self.enabled:
            return
        now = self._clock()
        wait = max(self._accounts.retry_after(account.lower(), now), self._addresses.retry_after(address, now))
        if wait:
            raise LoginThrottled(wait)

    def failed(self, account: str, address: str) -> None:
        now = self._clock()
        self._accounts.add(account.lower(), now)
        self._addresses.add(address, now)

    def succeeded(self, account: str) -> None:
        self._accounts.clear(account.lower())
