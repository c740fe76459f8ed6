"""The running connector: pairing codes, live streams, the per-device outbox and Web Push.

- Pairing codes live in RAM only (a code is worth 10 minutes; a restart simply means
  "show a new code"), single use, their secret kept as a SHA-256, and never outlive
  the member's credentials: the browser session that showed one, or any revocation of
  the member's sessions (password change, reset, "end sessions", deactivation,
  deletion), ends it. A code names its pairing session, so wrong guesses count
  against the one member's code they aim at (``MAX_FAILURES`` burn it), against the
  client's address (one guesser locks out only themselves) and against a global
  limit far above one address's and far below what would make a code guessable
  (``PairingCodes`` has the arithmetic; check A6).
- The outbox is the member's own plugin event log (``HostApi.append_member_event``: in
  their encrypted file, never in the registry); each device keeps its own acknowledged
  cursor over it, so a phone that slept gets what it missed and nothing twice. What
  every paired device acknowledged is deleted (``HostApi.prune_member_events``), and
  the outbox is bounded by age and count whatever the acknowledgements say.
- Web Push carries no content: a push service learns only that something is new.
- A device's stored state (its cursor, its push subscription) ends with its token, however
  the token went: unlinked here, or revoked by the host with the member's sessions
  (password change, reset, deactivation, "end sessions", deletion). The contract has no
  hook for the latter, so the plugin keeps an index of the devices it paired and drops
  the state of those whose token is gone: when the member's bus says their sessions were
  revoked, when the system bus says they were deactivated or deleted, and in
  ``tidy_devices`` (a bus is best-effort: that catches what it lost).
- ``tidy_devices`` also revokes a pairing that never finished (a token issued whose
  answer never reached its phone). It runs where state changes anyway: a pairing
  started or completed, a device unlinked, and the plugin's own sweep (at start and every
  ``SWEEP_SECONDS``). Never on a GET (check A4): the device list leaves such a token out
  of its answer and writes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import secrets
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import urlsplit

from skald_hookspecs import ChannelEvent, ChannelRequestError, HostApi, MemberLocked
from skald_hookspecs.net import AddressRefused, public_addresses, public_addresses_now

log = logging.getLogger(__name__)

CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32: 5 bits a symbol
#: A code is ``SSSS-XXXX-XXXX``: four symbols name the pairing session (20 bits, so the
#: host knows which member's code a wrong guess was aimed at), eight are its secret
#: (40 bits), compared in constant time.
SESSION_LENGTH = 4
SECRET_LENGTH = 8
CODE_TTL_SECONDS = 600.0
#: Wrong secrets against one pairing session burn its code: the member shows a new one.
MAX_FAILURES = 5
#: Wrong codes from one client address (an IPv6 one by its /64, ``client_key``) in a
#: minute: past this many, ``/pair`` answers that address 429 until the minute has
#: passed, before it looks at the code. Other addresses pair on.
ADDRESS_FAILURES = 30
#: Wrong codes from all addresses together in a minute: past this many, ``/pair``
#: answers everyone 429 for the rest of the minute. Far above what one address may send
#: (it takes ``GLOBAL_FAILURES / ADDRESS_FAILURES`` addresses), far below what would make
#: a code guessable (``PairingCodes``).
GLOBAL_FAILURES = 1000
GLOBAL_WINDOW_SECONDS = 60.0
#: What waits in the outbox for a phone that is not looking.
OUTBOX_KINDS = frozenset({"approval", "notification", "answer"})
OUTBOX_EVENT = "outbox"
#: The outbox is pruned: what every paired device acknowledged goes, and whatever the
#: acknowledgements say, nothing older than this and no more than this many per member
#: (a phone that was lost and never unlinked cannot make it grow for ever).
OUTBOX_MAX_AGE_DAYS = 30
OUTBOX_MAX_PER_MEMBER = 1000
#: Besides after each acknowledgement, the bounds are applied every this many appends.
OUTBOX_PRUNE_EVERY = 50
STREAM_QUEUE = 256
#: Event streams one member may hold open at once, as many as the host's own sockets
#: (``server.websocket_max_per_member``'s default): every event of theirs is copied to
#: each, so a script opening thousands held up every member's events. A phone holds one.
MAX_STREAMS_PER_MEMBER = 20
#: The whole Web Push payload: nothing a push service could read beyond "something is new".
PUSH_PAYLOAD = b'{"t":"new"}'
PUSH_TTL_SECONDS = 24 * 3600
#: The key-value row indexing the paired devices, ``{member id: [device id, ...]}``: ids
#: only (the registry is admin-readable), so a device's state can be found once its
#: token is gone.
DEVICES_KEY = "devices"
#: A paired token no request carried for this long never reached its phone (the app asks
#: ``/me`` at once): the server died, or the connection dropped before the answer.
UNFINISHED_PAIRING_MINUTES = 10
#: How often the plugin tidies the devices of every member it paired one for.
SWEEP_SECONDS = 300.0
#: How long the conversation a chat of the app's started from a draft is remembered under
#: that draft's key (``MobileService.start_conversation``): long enough for a phone to send
#: again a request whose answer it never got.
DRAFT_TTL_SECONDS = 3600.0
DRAFT_KEY_MAX = 64


class PairingError(Exception):
    """``key``: the string key (``mobile-connector.<key>``) that says what went wrong."""

    def __init__(self, key: str, status: int = 400, retry_after: int | None = None) -> None:
        super().__init__(key)
        self.key = key
        self.status = status
        self.retry_after = retry_after  # seconds, for a 429's Retry-After


def normalise_code(code: Any) -> str:
    text = str(code or "").upper().replace("-", "").replace(" ", "")
    return text.replace("O", "0").replace("I", "1").replace("L", "1")


def _digest(secret: str) -> bytes:
    return hashlib.sha256(f"skald-mobile-pairing\n{secret}".encode()).digest()


def client_key(address: Any) -> str:
    """The key a client address counts under in the per-address limit: the host's
    (``request.remote_addr``, the rightmost untrusted hop when ``server.trusted_proxies``
    lists the reverse proxy). Every IPv6 line is handed a /64 at least, so one host
    would own 2^64 fresh budgets: it counts as its /64. An IPv4-mapped address is the
    IPv4 client it carries, a zone id names an interface, not another client."""
    text = str(address or "unknown")
    try:
        ip = ipaddress.ip_address(text.partition("%")[0] if ":" in text else text)
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass
class _Pairing:
    member_id: str
    digest: bytes
    expires: float
    failures: int = 0
    #: Stops watching the browser session that showed the code (``HostApi.watch_caller``).
    unwatch: Callable[[], None] | None = None


class PairingCodes:
    """Codes in RAM, one live code per member.

    A code is worth the member's credentials as they stood when it was shown: it ends
    with the browser session that showed it (``create``'s ``watch``: the host tells
    before the revoking request answers, so a logout, the admin's "end sessions" or
    reset, a deactivation, a deletion or a password change made from another session
    leave no code behind) and with every revocation of the member's sessions
    (``forget_member``: their bus, the reset and deletion hooks, the system bus).
    Otherwise a code shown before the revocation would be traded afterwards for a
    device token of the account, in the hands of whoever holds it now.

    Guessing. A code is 12 symbols of 32 (60 bits): 4 name the pairing session, 8 are
    its secret. A wrong guess counts against its client address (``ADDRESS_FAILURES`` a
    minute), against everyone's (``GLOBAL_FAILURES`` a minute) and, when it names a
    live pairing session, against that one code (``MAX_FAILURES`` burn it). Both
    minute limits are checked before the code, so a refused guess learns nothing.

    - Unguessable within the global budget: one guess matches one given code with
      probability 32^-12 = 2^-60. In a code's life (``CODE_TTL_SECONDS`` = 600 s, ten
      windows) at most 10 x 1000 = 10^4 wrong guesses are looked at, whoever sends
      them: a given code is hit with probability <= 10^4 / 2^60 ~ 8.7e-15; with 10^4
      codes live at once, some code with <= 8.7e-11 per ten minutes, ~ 4.6e-6 for a
      whole year of flooding at the limit (52,560 ten-minute spans).
    - Codes are not burnt by a flood either: a guess names a live session with
      probability N / 2^20, so at the global limit a given code is aimed at about
      1000 x 10 / 2^20 ~ 0.01 times in its life; five such hits (a burnt code) come
      with probability ~ 1e-12.
    - One stranger locks out only themselves: their address is refused after 30 wrong
      codes a minute; others, and a member's right code from another address, pass.
      Slowing everyone takes ``GLOBAL_FAILURES / ADDRESS_FAILURES`` ~ 34 addresses
      (IPv4 addresses, or IPv6 /64s) for a minute at a time.
    - Behind a reverse proxy not listed in ``server.trusted_proxies`` every phone has
      the proxy's address: the address limit is then a limit for all of them (30 wrong
      codes a minute, as before there was one per address). List the proxy there, as
      the host's sign-in limits also need.
    """

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._sessions: dict[str, _Pairing] = {}
        #: Every counted wrong guess of the window, oldest first: (when, client key).
        self._failures: deque[tuple[float, str]] = deque()
        #: The same guesses by client key (a key goes when its last guess ages out).
        self._by_client: dict[str, deque[float]] = {}

    def create(self, member_id: str, watch: Callable[[Callable[[str], None]], Callable[[], None]] | None = None) -> tuple[str, float]:
        """A fresh code for the member; an earlier unused one of theirs stops working.
        ``watch`` (``HostApi.watch_caller``): the code ends with the caller's session."""
        now = self._clock()
        for key, old in list(self._sessions.items()):
            if old.member_id == member_id or old.expires <= now:
                self._remove(key)
        while True:
            session = "".join(secrets.choice(CODE_ALPHABET) for _ in range(SESSION_LENGTH))
            if session not in self._sessions:
                break
        secret = "".join(secrets.choice(CODE_ALPHABET) for _ in range(SECRET_LENGTH))
        pairing = _Pairing(member_id, _digest(secret), now + CODE_TTL_SECONDS)
        self._sessions[session] = pairing
        if watch is not None:

            def ended(_reason: str) -> None:
                if self._sessions.get(session) is pairing:
                    del self._sessions[session]  # told once: nothing to unwatch

            stop = watch(ended)
            if self._sessions.get(session) is pairing:
                pairing.unwatch = stop
            else:  # the session had ended already
                stop()
        return f"{session}-{secret[:4]}-{secret[4:]}", CODE_TTL_SECONDS

    def _remove(self, session: str) -> None:
        pairing = self._sessions.pop(session, None)
        if pairing is not None and pairing.unwatch is not None:
            pairing.unwatch()

    def forget_member(self, member_id: str) -> bool:
        """The member's pending code stops working (their sessions or device tokens were
        revoked, or they were deactivated or deleted); whether there was one."""
        doomed = [key for key, pairing in self._sessions.items() if pairing.member_id == member_id]
        for key in doomed:
            self._remove(key)
        return bool(doomed)

    def _age(self, now: float) -> None:
        while self._failures and now - self._failures[0][0] >= GLOBAL_WINDOW_SECONDS:
            _, key = self._failures.popleft()
            mine = self._by_client.get(key)
            if mine:
                mine.popleft()
            if not mine:
                self._by_client.pop(key, None)

    def _fail(self, now: float, client: str) -> None:
        self._failures.append((now, client))
        self._by_client.setdefault(client, deque()).append(now)

    def _retry_after(self, now: float, oldest: float) -> int:
        return max(1, math.ceil(GLOBAL_WINDOW_SECONDS - (now - oldest)))

    def redeem(self, code: Any, client: Any = None) -> str:
        """The member whose code this is (it stops working). ``client``: the caller's
        address (``request.remote_addr``), for the per-address limit."""
        now = self._clock()
        self._age(now)
        key = client_key(client)
        mine = self._by_client.get(key)
        if mine is not None and len(mine) >= ADDRESS_FAILURES:
            raise PairingError("err_too_many", 429, retry_after=self._retry_after(now, mine[0]))
        if len(self._failures) >= GLOBAL_FAILURES:
            raise PairingError("err_too_many", 429, retry_after=self._retry_after(now, self._failures[0][0]))
        text = normalise_code(code)
        session, secret = text[:SESSION_LENGTH], text[SESSION_LENGTH:]
        pairing = self._sessions.get(session) if len(text) == SESSION_LENGTH + SECRET_LENGTH else None
        if pairing is None:
            self._fail(now, key)
            raise PairingError("err_code", 400)
        if pairing.expires <= now:
            self._remove(session)
            raise PairingError("err_expired", 400)
        if not hmac.compare_digest(pairing.digest, _digest(secret)):
            self._fail(now, key)
            pairing.failures += 1
            if pairing.failures >= MAX_FAILURES:
                self._remove(session)  # burnt: guessing at it is over
            raise PairingError("err_code", 400)
        self._remove(session)  # single use
        return pairing.member_id


def unfinished_pairing(row: Mapping[str, Any]) -> bool:
    """A device token whose pairing never finished: no request carried it in the
    ``UNFINISHED_PAIRING_MINUTES`` since it was issued. Not a paired phone: the device
    list leaves it out, ``tidy_devices`` revokes it."""
    from datetime import datetime, timedelta, timezone

    cutoff = (datetime.now(timezone.utc) - timedelta(minutes=UNFINISHED_PAIRING_MINUTES)).strftime("%Y-%m-%dT%H:%M:%S")
    return row.get("used") is False and str(row["created_at"])[:19] < cutoff


def event_payload(event: ChannelEvent) -> dict[str, Any]:
    data = asdict(event)
    data["arguments"] = dict(event.arguments)
    data["data"] = dict(event.data)
    return {k: v for k, v in data.items() if v not in (None, "", {})} | {"kind": event.kind}


class MobileService:
    def __init__(self, host: HostApi) -> None:
        self.host = host
        self.codes = PairingCodes()
        self._streams: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watched: dict[str, Any] = {}  # member id -> subscription handle
        self._index_lock = asyncio.Lock()  # the index is read, changed and written whole
        self.vapid_public_key = ""
        self._vapid_private_pem = b""
        self.config: Mapping[str, Any] = {}
        #: For the bench and tests: when each push left the host (monotonic seconds).
        self.push_log: list[tuple[str, float]] = []
        #: (member id, draft key) -> (conversation id, monotonic time it was made).
        self._drafts: dict[tuple[str, str], tuple[str, float]] = {}
        self._drafts_lock = asyncio.Lock()

    async def start(self) -> None:
        self.config = await self.host.get_config()
        stored = await self.host.kv_get("vapid")
        if not isinstance(stored, dict) or "private_pem" not in stored:
            stored = await asyncio.to_thread(_new_vapid_keys)
            await self.host.kv_set("vapid", stored)
        self._vapid_private_pem = stored["private_pem"].encode()
        self.vapid_public_key = stored["public_key"]
        self.host.subscribe_system(self._on_system_event)
        for member_id in await self._device_index():
            self.watch(member_id)
        self._spawn(self._sweep())  # at once: revoked while the plugin was not running

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for queues in self._streams.values():
            for queue in queues:
                queue.put_nowait({"kind": "closed"})
        self._streams.clear()

    # -- live streams ------------------------------------------------------------------------

    def streams_open(self, member_id: str) -> int:
        return len(self._streams.get(member_id, ()))

    @contextmanager
    def stream(self, member_id: str) -> Iterator[asyncio.Queue[dict[str, Any]] | None]:
        """The member's events, as a queue; ``None`` when they hold
        ``MAX_STREAMS_PER_MEMBER`` open already (the route refused the most, this the
        rest: a burst of requests all passed its count before any stream opened)."""
        if self.streams_open(member_id) >= MAX_STREAMS_PER_MEMBER:
            yield None
            return
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(STREAM_QUEUE)
        self._streams.setdefault(member_id, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self._streams.get(member_id)
            if queues is not None:
                queues.discard(queue)
                if not queues:
                    self._streams.pop(member_id, None)

    def _fan_out(self, member_id: str, payload: dict[str, Any]) -> None:
        for queue in list(self._streams.get(member_id, ())):
            try:
                queue.put_nowait(payload)
            except asyncio.QueueFull:  # a reader that stopped reading: it re-reads on reconnect
                log.warning("mobile stream of member %s fell behind; an event was dropped from it", member_id)

    def watch(self, member_id: str) -> None:
        """Follow the member's bus once (until the plugin stops): when the host revokes
        their sessions (password change, reset, deactivation), their pending pairing
        code ends and their open streams check their device at once instead of at the
        next heartbeat. Called for a member with a paired device or a pending code."""
        handle = self._watched.get(member_id)
        if handle is not None and getattr(handle, "active", True):
            return  # a member's lock ends the subscription (spec 1.17): watched again after

        async def on_event(event: Any) -> None:
            if event.kind == "sessions_revoked":
                self.codes.forget_member(member_id)  # a code shown before is not worth the new password
                self.recheck_streams(member_id)
                await self.forget_revoked(member_id)  # the host took their device tokens with them
            elif event.kind == "chat" and event.data.get("type") == "conversation_changed":
                await self._conversation_changed(member_id, event.data)

        self._watched[member_id] = self.host.subscribe_member(member_id, on_event)

    async def _on_system_event(self, event: Any) -> None:
        """A member deactivated or deleted lost every device token: their devices'
        state goes (``device_tokens`` refuses such a member, so it cannot be compared)."""
        gone = event.kind == "member_deleted" or (event.kind == "member_active_changed" and not event.data.get("active", True))
        if gone and event.subject_id:
            self.codes.forget_member(event.subject_id)
            await self.forget_revoked(event.subject_id, gone=True)

    async def _conversation_changed(self, member_id: str, data: Mapping[str, Any]) -> None:
        """A conversation's title changed (its first message named it, the web renamed
        it): the open streams say so, so the app's header follows without a reload. Only
        for this source's conversations: the member's bus carries the web's too, and a
        channel shows only its own (``HostApi.conversations``)."""
        conversation_id = data.get("conversation_id")
        if not self._streams.get(member_id) or not isinstance(conversation_id, str):
            return
        try:
            ours = any(row["id"] == conversation_id for row in await self.host.conversations(member_id, limit=200))
        except (MemberLocked, ChannelRequestError):
            return
        if ours:
            payload = {"kind": "conversation_changed", "conversation_id": conversation_id, "data": {"title": str(data.get("title") or "")}}
            self._fan_out(member_id, payload)

    def recheck_streams(self, member_id: str) -> None:
        """Each open stream of the member checks at once that its device is still paired."""
        self._fan_out(member_id, {"kind": "recheck"})

    def lock_changed(self, member_id: str, locked: bool) -> None:
        """The member's file opened (a login on the web) or is closing: each open stream
        of theirs says so with a fresh ``hello``. A phone showing "locked" has nothing
        else to wait on (its requests were refused), so without this it stayed locked
        after the member did what it asked."""
        self._fan_out(member_id, {"kind": "lock_changed", "locked": locked})

    # -- what the host delivers ---------------------------------------------------------------

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        """Durable first: an event the phone must not miss is in the outbox (the member's
        file) before any stream or push hears of it."""
        payload = event_payload(event)
        if event.kind in OUTBOX_KINDS:
            try:
                payload["cursor"] = await self.host.append_member_event(member_id, OUTBOX_EVENT, payload)
            except MemberLocked:
                log.warning("member %s is locked: a %s event could not be kept for their phone", member_id, event.kind)
            else:
                self._spawn(self.push(member_id))
                if payload["cursor"] % OUTBOX_PRUNE_EVERY == 0:
                    self._spawn(self.prune(member_id))
        self._fan_out(member_id, payload)

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- a chat started from a draft -----------------------------------------------------------

    async def start_conversation(self, member_id: str, draft: str | None = None) -> str:
        """A fresh conversation for the member (the one their next message goes to). The
        app opens "New chat" as a draft and asks for the conversation only when its first
        message is sent, so a chat left without a word leaves nothing in the member's
        list. ``draft`` (the app's key for that draft) makes asking twice answer the same
        conversation: a phone whose answer was lost asks again, and must not leave an
        empty one behind. Kept in RAM for ``DRAFT_TTL_SECONDS``."""
        if not draft:
            return await self.host.new_conversation(member_id)
        async with self._drafts_lock:
            now = time.monotonic()
            self._drafts = {k: v for k, v in self._drafts.items() if now - v[1] < DRAFT_TTL_SECONDS}
            known = self._drafts.get((member_id, draft))
            if known is not None:
                return known[0]
            conversation_id = await self.host.new_conversation(member_id)
            self._drafts[(member_id, draft)] = (conversation_id, now)
            return conversation_id

    # -- the outbox -------------------------------------------------------------------------------

    async def paired(self, member_id: str) -> bool:
        """The member has a paired device: a live token of this plugin whose pairing
        finished (one that never reached its phone, ``unfinished_pairing``, is none)."""
        return any(not unfinished_pairing(row) for row in await self.host.device_tokens(member_id))

    async def cursor(self, device_id: str) -> int:
        value = await self.host.kv_get(f"cursor:{device_id}")
        return value if isinstance(value, int) else 0

    async def waiting(self, member_id: str, device_id: str, after: int | None = None, limit: int = 100) -> list[dict[str, Any]]:
        start = await self.cursor(device_id) if after is None else after
        events = await self.host.member_events(member_id, after=start, limit=limit)
        return [{"cursor": e["id"], "created_at": e["created_at"], **e["data"]} for e in events if e["kind"] == OUTBOX_EVENT]

    async def acknowledge(self, member_id: str, device_id: str, cursor: int) -> int:
        """Move the device's cursor forward to ``cursor``, never past the newest event in
        the outbox: a cursor from the future (a client's bug, a restored phone) would
        hide every notification made until the outbox caught up with it. Reads the
        member's file: ``MemberLocked`` while it is closed."""
        current = await self.cursor(device_id)
        if cursor > current:
            cursor = await self._newest_through(member_id, current, cursor)
        if cursor > current:
            await self.host.kv_set(f"cursor:{device_id}", cursor)
            try:
                await self.prune(member_id)
            except MemberLocked:
                pass  # pruned at a later acknowledgement
            return cursor
        return current

    async def _newest_through(self, member_id: str, after: int, cursor: int) -> int:
        """The id of the newest outbox event after ``after`` and up to ``cursor``; ``after``
        when there is none (only the events past the device's cursor are read)."""
        newest = after
        while True:
            page = await self.host.member_events(member_id, after=newest, limit=1000)
            if not page:
                return min(newest, cursor)
            if page[-1]["id"] >= cursor:
                return cursor
            newest = page[-1]["id"]

    async def prune(self, member_id: str) -> int:
        """Delete from the member's outbox what every paired device acknowledged, what
        is older than ``OUTBOX_MAX_AGE_DAYS`` and what lies beyond the newest
        ``OUTBOX_MAX_PER_MEMBER`` (one transaction in their file); how many went."""
        from datetime import datetime, timedelta, timezone

        devices = await self.host.device_tokens(member_id)
        cursors = [await self.cursor(device["id"]) for device in devices]
        oldest = (datetime.now(timezone.utc) - timedelta(days=OUTBOX_MAX_AGE_DAYS)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return await self.host.prune_member_events(
            member_id,
            kind=OUTBOX_EVENT,
            through_id=min(cursors) if cursors else None,  # no phone: only the bounds
            before=oldest,
            keep_last=OUTBOX_MAX_PER_MEMBER,
        )

    async def start_cursor(self, member_id: str, device_id: str) -> None:
        """A new phone starts after what already happened (it is not the member's inbox
        of the past); a locked member's phone starts from the beginning."""
        after = 0
        try:
            while True:
                page = await self.host.member_events(member_id, after=after, limit=1000)
                if not page:
                    break
                after = page[-1]["id"]
        except MemberLocked:
            after = 0
        await self.host.kv_set(f"cursor:{device_id}", after)

    async def forget_device(self, member_id: str, device_id: str) -> None:
        await self.host.kv_set(f"cursor:{device_id}", None)
        async with self._index_lock:
            index = await self._device_index()
            kept = [known for known in index.get(member_id, []) if known != device_id]
            if kept != index.get(member_id, []):
                await self._store_index({**index, member_id: kept})
        try:
            await self.set_subscription(member_id, device_id, None)
            await self.prune(member_id)  # what only this phone had not acknowledged
        except ChannelRequestError:  # locked, deactivated or deleted
            pass  # it stays in their file, unused: pushes go only to live devices

    # -- which devices have state here --------------------------------------------------------

    async def _device_index(self) -> dict[str, list[str]]:
        stored = await self.host.kv_get(DEVICES_KEY)
        return {str(k): [str(d) for d in v] for k, v in stored.items() if isinstance(v, list)} if isinstance(stored, dict) else {}

    async def _store_index(self, index: Mapping[str, list[str]]) -> None:
        await self.host.kv_set(DEVICES_KEY, {member: devices for member, devices in index.items() if devices})

    async def remember_devices(self, member_id: str, device_ids: list[str]) -> None:
        """These devices of the member have (or will have) state here: their cursor, a
        push subscription. A device paired before the index existed joins it when its
        member's devices are listed."""
        async with self._index_lock:
            index = await self._device_index()
            known = index.get(member_id, [])
            added = [d for d in device_ids if d not in known]
            if added:
                await self._store_index({**index, member_id: [*known, *added]})
        self.watch(member_id)

    async def tidy_devices(self, member_id: str) -> None:
        """Revoke the member's pairings that never finished (``unfinished_pairing``),
        index the devices they have (one paired before the index existed joins it) and
        drop the state of those whose token the host revoked. A write: called where state
        changes anyway and by the sweep, never by a GET."""
        try:
            rows = await self.host.device_tokens(member_id)
        except ChannelRequestError:
            return  # deactivated or deleted: the system event that says so decides
        kept = []
        for row in rows:
            if unfinished_pairing(row):
                await self.host.revoke_device_token(member_id, row["id"])
                await self.forget_device(member_id, str(row["id"]))
                log.info("mobile: a pairing of member %s that never reached its phone was revoked", member_id)
                continue
            kept.append(str(row["id"]))
        if kept:
            await self.remember_devices(member_id, kept)
        await self.forget_revoked(member_id)

    async def _sweep(self) -> None:
        """The plugin's own background pass: at start, then every ``SWEEP_SECONDS``, each
        member it paired a device for is tidied (``tidy_devices``)."""
        while True:
            try:
                members = list(await self._device_index())
            except Exception:
                log.exception("mobile: the index of paired devices could not be read")
                members = []
            for member_id in members:
                try:
                    await self.tidy_devices(member_id)
                except Exception:  # one member's failure must not end the sweep for all
                    log.exception("mobile: the devices of member %s could not be tidied", member_id)
            await asyncio.sleep(SWEEP_SECONDS)

    async def forget_revoked(self, member_id: str, *, gone: bool = False) -> int:
        """Drop the state of the member's devices whose token no longer exists (``gone``:
        the member was deactivated or deleted, so none does); how many. A member who
        may not use the plugin now (no grant) keeps it: their tokens may still exist."""
        known = (await self._device_index()).get(member_id, [])
        if not known:
            return 0
        if gone:
            live: set[str] = set()
        else:
            try:
                live = {str(row["id"]) for row in await self.host.device_tokens(member_id)}
            except ChannelRequestError:
                return 0  # decided by the system event that says why, if any
        revoked = [device_id for device_id in known if device_id not in live]
        for device_id in revoked:
            await self.forget_device(member_id, device_id)
        if revoked:
            log.info("mobile: the state of %d revoked device(s) of member %s was dropped", len(revoked), member_id)
        return len(revoked)

    # Push subscriptions live in the member's own file: the endpoint and its keys name
    # the phone, and the registry is admin-readable. Nothing is pushed while the member
    # is locked anyway (no turn runs then).

    async def subscription(self, member_id: str, device_id: str) -> dict[str, Any] | None:
        stored = await self.host.member_secret_get(member_id, f"push:{device_id}")
        return json.loads(stored) if stored else None

    async def set_subscription(self, member_id: str, device_id: str, subscription: Mapping[str, Any] | None) -> None:
        await self.host.member_secret_set(member_id, f"push:{device_id}", json.dumps(dict(subscription)) if subscription else None)

    # -- Web Push ---------------------------------------------------------------------------------

    async def check_subscription(self, subscription: Mapping[str, Any]) -> str | None:
        """Why a subscription is refused (a string key), or None. A push endpoint is a
        URL the host will POST to: https only, and its name must resolve to public
        addresses only, never this machine or its network (the config may allow plain
        http and a private address, for a local test service). The addresses are
        checked again on every push (``_send_push``): a name may point elsewhere later."""
        parts = urlsplit(str(subscription.get("endpoint", "")))
        insecure = bool(self.config.get("allow_http_push"))
        if parts.scheme != "https" and not (insecure and parts.scheme == "http"):
            return "err_push_endpoint"
        if not parts.hostname:
            return "err_push_endpoint"
        if not insecure:
            try:
                await public_addresses(parts.hostname, parts.port or 443)
            except (AddressRefused, ValueError):
                return "err_push_endpoint"
        return None

    async def push(self, member_id: str) -> None:
        """One content-free message to every live device of the member that subscribed.
        Revoked devices are not in ``device_tokens`` any more, so they hear nothing."""
        for device in await self.host.device_tokens(member_id):
            try:
                subscription = await self.subscription(member_id, device["id"])
            except MemberLocked:
                return
            if subscription is None:
                continue
            try:
                await asyncio.to_thread(self._send_push, subscription)
                self.push_log.append((device["id"], time.monotonic()))
            except Exception as exc:  # the push service's answer may quote nothing of ours, but log the type only
                status = getattr(exc, "status_code", None)
                if status in (404, 410):
                    # RFC 8030: the subscription is gone (the app was uninstalled, the
                    # permission withdrawn); stop pushing to it. The outbox still waits.
                    try:
                        await self.set_subscription(member_id, device["id"], None)
                    except MemberLocked:
                        pass
                    log.info("mobile push: a subscription of member %s expired; forgotten", member_id)
                else:
                    log.warning("mobile push to a device of member %s failed (%s)", member_id, type(exc).__name__)

    def _send_push(self, subscription: Mapping[str, Any]) -> None:
        from py_vapid import Vapid02
        from pywebpush import webpush

        endpoint = str(subscription["endpoint"])
        parts = urlsplit(endpoint)
        vapid = Vapid02.from_pem(self._vapid_private_pem)  # RFC 8292: "vapid t=…, k=…"
        claims = {"sub": "mailto:skald@localhost", "aud": f"{parts.scheme}://{parts.netloc}"}
        webpush(
            subscription_info={"endpoint": endpoint, "keys": dict(subscription["keys"])},
            requests_session=_push_session(private_allowed=bool(self.config.get("allow_http_push"))),
            data=PUSH_PAYLOAD,
            vapid_private_key=vapid,
            vapid_claims=claims,
            ttl=PUSH_TTL_SECONDS,
            timeout=10,
        )


def _push_session(*, private_allowed: bool) -> Any:
    """The ``requests`` session a push goes out through: every connection it opens goes
    to an address checked public just before (``skald_hookspecs.net``), never to the
    name resolved again, so a push endpoint whose name now points at this machine or its
    network (DNS rebinding) reaches nothing; TLS still verifies the certificate against
    the name. No redirect is followed and no proxy from the environment is used (it
    would be the peer, unchecked). ``private_allowed``: the admin's test setting."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
    from urllib3.exceptions import NewConnectionError
    from urllib3.util import connection

    class Pinned:
        def _new_conn(self) -> Any:
            try:
                addresses = public_addresses_now(self._dns_host, self.port)  # type: ignore[attr-defined]
            except AddressRefused as exc:
                raise NewConnectionError(self, str(exc)) from None  # type: ignore[arg-type]
            return connection.create_connection(
                (str(addresses[0]), self.port),  # type: ignore[attr-defined]
                self.timeout,  # type: ignore[attr-defined]
                source_address=self.source_address,  # type: ignore[attr-defined]
                socket_options=self.socket_options,  # type: ignore[attr-defined]
            )

    class PinnedHTTP(Pinned, HTTPConnection):
        pass

    class PinnedHTTPS(Pinned, HTTPSConnection):
        pass

    class PinnedHTTPPool(HTTPConnectionPool):
        ConnectionCls = PinnedHTTP

    class PinnedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = PinnedHTTPS

    class PinnedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": PinnedHTTPPool, "https": PinnedHTTPSPool}

    session = requests.Session()
    session.trust_env = False
    session.max_redirects = 0
    if not private_allowed:
        session.mount("http://", PinnedAdapter())
        session.mount("https://", PinnedAdapter())
    return session


def _new_vapid_keys() -> dict[str, str]:
    """VAPID keys, made once at the plugin's first start (RFC 8292): the public key in
    the applicationServerKey form the browser wants (uncompressed point, base64url)."""
    import base64

    from cryptography.hazmat.primitives import serialization
    from py_vapid import Vapid02

    vapid = Vapid02()
    vapid.generate_keys()
    private_pem = vapid.private_pem().decode()
    raw = vapid.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return {"private_pem": private_pem, "public_key": base64.urlsafe_b64encode(raw).rstrip(b"=").decode()}


def dumps(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)
