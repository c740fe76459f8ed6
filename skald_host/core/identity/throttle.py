"""Failed-login limits per account and per client (check A3).

Sliding windows in RAM: after ``limit`` failures inside ``window`` seconds, further
attempts are refused with the seconds until the oldest failure ages out, *before* any
Argon2 work is spent on them. A success clears the failures counted against the account
(the account's, or the device's for it), not the address's, so one valid account cannot
launder guesses against others.

An attempt counts against its account and its network address (an IPv6 one by its /64,
``address_key``), unless it shows a *device token* for the account it names (OWASP's
"device cookies"): a browser that signed in to that account before. That attempt counts
against the device's own budget for the account (as many failures per window as the
account's) and nothing else, and is refused only when that budget is spent: failures
from clients without a token cannot keep it out, and its failures keep out nobody but
itself. Without this, ten wrong passwords from anywhere locked any member out, the admin
included, for as long as someone repeated them; and anyone sharing the address (a NAT,
or a reverse proxy not listed in ``server.trusted_proxies``) could spray made-up names
until the address was refused. A stolen device cookie still guesses only at that pace:
tokens are minted only by a successful sign-in, so nobody gets more of them for an
account whose password they do not know. The account and address limits stay for every
client without a token: they are what bounds the Argon2 work a flood of unknown names
costs and how many accounts one address may spray, and they cannot spare only the names
that exist without telling a guesser which ones do (a token proves its holder signed in,
so sparing it tells nothing).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import hmac
import ipaddress
import re
import secrets
import time
from typing import Callable

#: Device tokens one browser keeps (one per account signed in there); the oldest goes.
DEVICE_TOKENS_KEPT = 8
_DEVICE_PREFIX = "device:"

#: What an attempt counts against (``LoginThrottle.newly_throttled`` names them).
ACCOUNT, ADDRESS, DEVICE = "account", "address", "device"

#: How long an attempt held only by others still being checked waits for its turn
#: (``LoginThrottle.admit``): an Argon2 check takes a fraction of a second, so a burst
#: of correct sign-ins from one address is let through in rounds.
BUSY_PATIENCE_SECONDS = 10.0
BUSY_POLL_SECONDS = 0.05


def address_key(address: str) -> str:
    """The key a client address counts under in the per-address window. Every IPv6
    line is handed a /64 at least, so keyed by its full address one host would own
    2^64 fresh budgets: it counts as its /64. An IPv4-mapped address is the IPv4
    client it carries, and a zone id (``fe80::1%eth0``) names the interface, not
    another client. Device keys, and anything that is no address, count as given."""
    if address.startswith(_DEVICE_PREFIX):
        return address
    try:
        ip = ipaddress.ip_address(address.partition("%")[0] if ":" in address else address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.IPv6Network((ip, 64), strict=False))


class LoginThrottled(Exception):
    """``busy``: refused because of attempts not answered yet, not of failures (they
    count as failures while Argon2 checks them): soon either way."""

    def __init__(self, retry_after: int, *, busy: bool = False) -> None:
        super().__init__("too many sign-in attempts at once; try again in a moment" if busy else "too many failed logins; try again later")
        self.retry_after = retry_after
        self.busy = busy


class _Window:
    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._hits: dict[str, collections.deque[float]] = {}
        #: When each key was last reported full, oldest report first.
        self._reported: dict[str, float] = {}

    def _live(self, key: str, now: float) -> collections.deque[float]:
        hits = self._hits.get(key)
        if hits is None:
            return collections.deque()
        while hits and now - hits[0] >= self.window:
            hits.popleft()
        if not hits:
            self._hits.pop(key, None)
        return hits

    def retry_after(self, key: str, now: float, pending: int = 0) -> int:
        """Seconds until one more attempt may start, counting ``pending`` attempts not
        answered yet as failures (they may be)."""
        hits = self._live(key, now)
        if len(hits) + pending < self.limit:
            return 0
        if len(hits) < self.limit:
            return 1  # held by attempts still being checked: soon either way
        return max(1, int(self.window - (now - hits[0])) + 1)

    def full(self, key: str, now: float) -> bool:
        """Whether failures alone fill the window for ``key``."""
        return len(self._live(key, now)) >= self.limit

    def add(self, key: str, now: float) -> None:
        self._hits.setdefault(key, collections.deque()).append(now)
        if len(self._hits) > 100_000:  # bound memory under a spray of random names
            oldest = min(self._hits, key=lambda k: self._hits[k][-1])
            self._hits.pop(oldest, None)

    def clear(self, key: str) -> None:
        self._hits.pop(key, None)

    def newly_full(self, key: str, now: float) -> bool:
        """Whether ``key`` has ``limit`` failures now and was not said to yet in the
        last ``window`` seconds: one log line per key and window, however many
        attempts the flood makes, so it cannot flood the log too."""
        if len(self._live(key, now)) < self.limit:
            return False
        reported = self._reported.pop(key, None)
        if reported is not None and now - reported < self.window:
            self._reported[key] = reported
            return False
        self._reported[key] = now
        if len(self._reported) > 100_000:  # bounded like the hits; a forgotten key is said again
            del self._reported[next(iter(self._reported))]
        return True


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
        #: Per device and account: the device's own budget, as large as the account's.
        self._devices = _Window(per_account, window_seconds)
        self._windows = {ACCOUNT: self._accounts, ADDRESS: self._addresses, DEVICE: self._devices}
        self._clock = clock
        # In RAM like the sessions: a restart ends every device token, and a browser
        # earns a new one at its next sign-in.
        self._device_key = secrets.token_bytes(32)
        #: Attempts admitted and not answered yet, per window and key.
        self._pending: collections.Counter[tuple[str, str]] = collections.Counter()
        self.enabled = True

    def begin(self, account: str, client: str) -> "Attempt":
        """Admit one attempt of ``client`` (as ``client`` returns it) on ``account``, or
        raise ``LoginThrottled``. Admitted, it counts against its limits at once, as a
        failure would, until it is answered: the Argon2 work that checks it takes long
        enough for a burst of parallel guesses to be admitted all together otherwise
        (they were). An attempt with a device token for the account meets only that
        device's limit, never the account-wide one others' failures built up."""
        account = account.lower()
        counts = self._counts(account, client)
        if self.enabled:
            now = self._clock()
            wait = max(self._windows[kind].retry_after(key, now, self._pending[(kind, key)]) for kind, key in counts)
            if wait:
                raise LoginThrottled(wait, busy=not any(self._windows[kind].full(key, now) for kind, key in counts))
        return Attempt(self, counts)

    async def admit(self, account: str, client: str, patience: float = BUSY_PATIENCE_SECONDS) -> "Attempt":
        """``begin``, waiting up to ``patience`` seconds while only attempts still being
        checked hold the limits: correct sign-ins at the same moment from one address
        wait their turn (SECURITY.md) instead of reading "too many failed logins" (a
        security sweep saw ten of twenty refused so). Failures still refuse at once."""
        deadline = time.monotonic() + patience
        while True:
            try:
                return self.begin(account, client)
            except LoginThrottled as refused:
                if not refused.busy or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(BUSY_POLL_SECONDS)

    def newly_throttled(self, account: str, client: str) -> list[str]:
        """What this client's attempts on ``account`` count against (``ACCOUNT``,
        ``ADDRESS``, ``DEVICE``) that failures have just filled: each is named once
        per window, for the one log line that says an attack reached a limit."""
        now = self._clock()
        return [kind for kind, key in self._counts(account.lower(), client) if self._windows[kind].newly_full(key, now)]

    def _counts(self, account: str, client: str) -> tuple[tuple[str, str], ...]:
        """The windows, and the key in each, an attempt counts against."""
        if client.startswith(_DEVICE_PREFIX):
            return ((DEVICE, f"{client}\0{account}"),)
        return ((ACCOUNT, account), (ADDRESS, address_key(client)))

    def _hold(self, counts: tuple[tuple[str, str], ...], change: int) -> None:
        for key in counts:
            self._pending[key] += change
            if self._pending[key] <= 0:
                del self._pending[key]

    def client(self, account: str, address: str, device_tokens: str | None) -> str:
        """The key an attempt on ``account`` counts under: the device when one of
        ``device_tokens`` (the cookie's value) was issued for this account, else the
        address. A token for another account changes nothing."""
        nonce = self._device_for(account, device_tokens)
        return f"{_DEVICE_PREFIX}{nonce}" if nonce else address

    def remember_device(self, account: str, device_tokens: str | None) -> str:
        """The cookie value after a sign-in to ``account``: the browser's token for it
        (kept if it had a valid one, so its failures stay counted; minted otherwise)
        last, after its tokens for other accounts, at most ``DEVICE_TOKENS_KEPT``."""
        tokens = _split(device_tokens)
        mine = [t for t in tokens if self._token_nonce(account, t)]
        others = [t for t in tokens if t not in mine]
        if mine:
            token = mine[0]
        else:
            nonce = secrets.token_urlsafe(12)
            token = f"{nonce}.{self._sign(account, nonce)}"
        return "~".join([*others[-(DEVICE_TOKENS_KEPT - 1):], token])

    def _device_for(self, account: str, device_tokens: str | None) -> str | None:
        for token in _split(device_tokens):
            nonce = self._token_nonce(account, token)
            if nonce:
                return nonce
        return None

    def _token_nonce(self, account: str, token: str) -> str | None:
        nonce, _, signature = token.partition(".")
        if nonce and signature and hmac.compare_digest(signature.encode(), self._sign(account, nonce).encode()):
            return nonce
        return None

    def _sign(self, account: str, nonce: str) -> str:
        message = f"{account.lower()}\0{nonce}".encode()
        digest = hmac.new(self._device_key, message, hashlib.sha256).digest()[:18]  # 144 bits
        return base64.urlsafe_b64encode(digest).decode()


#: A token as ``remember_device`` makes it: a 12-byte nonce and a 144-bit signature.
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{24}")


def _split(device_tokens: str | None) -> list[str]:
    """The well-formed tokens of a cookie value, at most twice as many as are kept:
    anything else (a planted or oversized cookie) is neither checked nor sent back."""
    if not device_tokens:
        return []
    return [t for t in device_tokens[:4096].split("~") if _TOKEN.fullmatch(t)][: DEVICE_TOKENS_KEPT * 2]


class Attempt:
    """One admitted attempt (``LoginThrottle.begin``): answered once, as a failure, a
    success (which clears what it counted against the account: the account's failures,
    or its device's for the account) or neither (``release``, e.g. an error that was no
    verdict on the password); ``release`` after an answer does nothing, so callers
    release in ``finally``."""

    def __init__(self, throttle: LoginThrottle, counts: tuple[tuple[str, str], ...]) -> None:
        self._throttle, self._counts = throttle, counts
        self._open = True
        throttle._hold(counts, +1)

    def failed(self) -> None:
        if self._settle():
            now = self._throttle._clock()
            for kind, key in self._counts:
                self._throttle._windows[kind].add(key, now)

    def succeeded(self) -> None:
        if self._settle():
            for kind, key in self._counts:
                if kind != ADDRESS:
                    self._throttle._windows[kind].clear(key)

    def release(self) -> None:
        self._settle()

    def _settle(self) -> bool:
        if not self._open:
            return False
        self._open = False
        self._throttle._hold(self._counts, -1)
        return True
