"""The per-chat outbox: every call the bot makes to a chat leaves through that chat's
queue, paced to Telegram's limits, and what a member must receive survives flood waits,
network failures and a restart of the server.

Limits (Bot API FAQ): about one message a second in one chat, thirty a second overall.
Each chat has one worker: its jobs leave in order, a message call waits until a second
has passed since the chat's previous one, and a flood wait (429 with ``retry_after``)
holds that chat — and only that chat — for exactly ``retry_after`` seconds from the
answer, after which the same call is made again. No attempt limit: a job ends when it
was sent, when Telegram refuses it for good (400 or 403: logged as a WARNING with the
kind of refusal, ``refusal_kind``, never silently), or when the member unlinks the chat.

Durability and privacy: a job for a member (an answer, a note, an approval card, an
error) is written to the plugin's key-value store before ``deliver`` returns, and
removed when it was sent. That store lives in the admin-readable registry
(``system.db``), and a member's words must not sit there in clear, so the job's words
are sealed to the member's public inbox key (``HostApi.seal_for_member``, the same
sealed box as the host's inbox for locked members) and only the sealed string is
stored; the clear text stays in memory. After a restart the member is locked until
they log in, so a restored job waits (retrying every ``LOCKED_RETRY_SECONDS``) until
``HostApi.open_for_member`` can open it — and is sent then, in order. (Keeping only a
reference to the answer in the member's conversation would need the same unlock, and
would not cover approval cards and error texts, which are not stored there.) A job not
bound to a member (a pairing code for an unknown chat) is never written anywhere:
losing it to a restart costs a "write again".

At-least-once: a crash between Telegram's acknowledgement and the store's update sends
that piece again after the restart. So does a send whose answer never came back (a read
timeout, a connection cut after the request left): Telegram may have taken it, and the
Bot API offers no way to ask, so it is sent again — a lost answer is worse than one that
arrives twice — and the log says so (``may_have_arrived``). A call that surely never
reached Telegram (no connection, or none free in the pool) is simply made again, and
edits are made again without harm. Everything else is sent exactly once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import httpx
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError

from skald_hookspecs import ChannelRequestError, HostApi, MemberLocked

log = logging.getLogger("skald_telegram")

#: Telegram: "avoid sending more than one message per second" in one chat.
CHAT_INTERVAL_SECONDS = 1.0
#: Telegram: about 30 messages a second overall; kept a little below.
GLOBAL_PER_SECOND = 25
#: A restored job of a locked member is tried again this often.
LOCKED_RETRY_SECONDS = 3.0
NETWORK_BACKOFF_MAX_SECONDS = 60.0
#: A typing indicator older than this is skipped, not sent late.
TYPING_STALE_SECONDS = 5.0
INDEX_KEY = "outbox:chats"


def retry_after_seconds(exc: RetryAfter) -> float:
    """PTB 22 returns an int and warns that it will become a timedelta; take either."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wait = exc.retry_after
    return wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)


#: Calls that can be made twice without the member seeing anything twice: an edit to
#: the same text is answered "not modified", a second typing indicator is one.
REPEATABLE_METHODS = frozenset({"editMessageText", "editMessageReplyMarkup", "sendChatAction"})


def may_have_arrived(exc: NetworkError) -> bool:
    """Whether a call that failed on the network may still have been done by Telegram.
    PTB's ``HTTPXRequest`` raises ``TimedOut`` (or ``NetworkError``) from httpx's own
    exception: no connection (``ConnectError``, ``ConnectTimeout``) or none free in the
    pool (``PoolTimeout``) means the request never left; a read or write timeout, or a
    connection cut while the answer was awaited, means it may have been taken. A
    ``NetworkError`` not caused by httpx is an answer of the server (a 5xx): not done."""
    cause = exc.__cause__
    if isinstance(cause, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return False
    return isinstance(cause, httpx.TransportError)


class Later(Exception):
    """The runner cannot do this job now but can soon (the member's read-aloud slots
    are busy): it goes back to the front of the chat's queue and runs again after
    ``seconds``, while the jobs behind it that are not of its kind go ahead."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"again in {seconds:.0f} s")
        self.seconds = seconds


class Refused(Exception):
    """Telegram refused a job for good (400/403): dropped, with a WARNING. Its message
    goes to the log: the method and ``refusal_kind``, never Telegram's own words."""


#: The beginnings of Telegram's refusals that the log repeats (as PTB words them: "Bad
#: Request: " taken off; "Forbidden: " and "Conflict: " kept, matched without). Only the
#: beginning: what follows may repeat what was sent ("Message is too long: …", a card's
#: text), and the admin reads the log. Lower case, longest first where one begins another.
KNOWN_REFUSALS = (
    "message is too long", "message text is empty", "message must be non-empty", "message can't be edited",
    "message to edit not found", "message is not modified", "message to delete not found", "reply message not found",
    "can't parse entities", "chat not found", "user not found", "bot was blocked by the user", "bot was kicked",
    "bot is not a member", "user is deactivated", "bot can't initiate conversation with a user",
    "have no rights to send a message", "not enough rights", "query is too old", "invalid file_id",
    "wrong file identifier", "file is too big", "terminated by other getupdates request", "bad gateway",
    "unauthorized", "not found",
)
_REFUSAL_STATUS = ((BadRequest, 400), (Forbidden, 403), (Conflict, 409))


def refusal_kind(exc: TelegramError) -> str:
    """What the log says of a Telegram error: a recognised kind ("message is too long",
    "chat not found"), else its HTTP status or its type, never the rest of Telegram's description —
    it may quote the member's words it refused (the same rule as the host's
    ``WithholdLibraryText`` and its model-failure lines: the kind, not the words)."""
    said = exc.message.lower()
    for prefix in ("forbidden: ", "conflict: "):
        said = said.removeprefix(prefix)
    for known in KNOWN_REFUSALS:
        if said.startswith(known):
            return known
    for kind, status in _REFUSAL_STATUS:
        if isinstance(exc, kind):
            return f"refused (HTTP {status})"
    return type(exc).__name__  # a 5xx (NetworkError), a token refused (InvalidToken)


@dataclass
class Job:
    """One thing for a chat. ``payload`` holds the words (memory only); ``sealed`` is
    what the store keeps of them; ``public`` holds what is not private (a message id,
    how many pieces left already)."""

    kind: str
    member_id: str | None = None
    payload: dict[str, Any] | None = None
    public: dict[str, Any] = field(default_factory=dict)
    sealed: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    created: float = field(default_factory=time.monotonic)
    due: float = 0.0  # monotonic: not before then (``Later``); memory only

    @property
    def durable(self) -> bool:
        return self.sealed is not None

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "member_id": self.member_id, "sealed": self.sealed, "public": self.public}

    @classmethod
    def restored(cls, record: Any) -> "Job | None":
        if not isinstance(record, dict) or not isinstance(record.get("sealed"), str) or not isinstance(record.get("kind"), str):
            return None
        public = record.get("public") if isinstance(record.get("public"), dict) else {}
        return cls(record["kind"], record.get("member_id"), None, public, record["sealed"], str(record.get("id") or uuid.uuid4().hex[:16]))


class ChatQueue:
    def __init__(self, chat_id: int) -> None:
        self.chat_id = chat_id
        self.jobs: deque[Job] = deque()
        self.running: Job | None = None
        self.not_before = 0.0  # monotonic: the end of the chat's flood wait
        self.next_message_at = 0.0  # monotonic: a second after the previous message call
        self.wake = asyncio.Event()
        self.lock = asyncio.Lock()  # serialises this chat's writes to the store
        self.worker: asyncio.Task[None] | None = None
        self.in_flight = False  # a call was sent and its answer is not yet taken in


Runner = Callable[[ChatQueue, Job], Awaitable[None]]


class Outbox:
    def __init__(self, host: HostApi, runner: Runner, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.runner = runner
        self.clock = clock
        self.chats: dict[int, ChatQueue] = {}
        self._sent: deque[float] = deque()  # the last second's calls, for the overall limit
        self._global = asyncio.Lock()
        self._index_lock = asyncio.Lock()
        self._index: set[int] = set()
        self._closed = False

    # -- queueing ----------------------------------------------------------------------

    def chat(self, chat_id: int) -> ChatQueue:
        queue = self.chats.get(chat_id)
        if queue is None:
            queue = self.chats[chat_id] = ChatQueue(chat_id)
        if (queue.worker is None or queue.worker.done()) and not self._closed:
            queue.worker = asyncio.create_task(self._work(queue), name=f"telegram:outbox:{chat_id}")
        return queue

    async def put(self, chat_id: int, job: Job) -> None:
        """Queue a job; a member's job is sealed and stored first (durable before
        this returns), unless the member cannot be sealed for (never logged in)."""
        if job.member_id is not None and job.sealed is None:
            if job.payload is None:
                job.sealed = ""  # nothing private in it: its ``public`` part is all there is
            else:
                try:
                    job.sealed = await self.host.seal_for_member(job.member_id, json.dumps(job.payload).encode())
                except ChannelRequestError as exc:
                    log.warning("telegram: a %s for chat %s is kept in memory only: %s", job.kind, chat_id, exc)
                except Exception as exc:  # the host's store failing: still sent, if not kept
                    log.error("telegram: a %s for chat %s could not be sealed, kept in memory only: %s", job.kind, chat_id, type(exc).__name__)
        queue = self.chat(chat_id)
        queue.jobs.append(job)
        queue.wake.set()
        if job.durable:
            try:
                await self._persist(queue)
            except Exception as exc:
                log.error("telegram: the outbox of chat %s could not be stored: %s", chat_id, type(exc).__name__)

    def put_nowait(self, chat_id: int, job: Job) -> None:
        """A job with nothing to keep (a typing indicator, a streaming edit, a pairing
        code for a stranger): memory only."""
        queue = self.chat(chat_id)
        queue.jobs.append(job)
        queue.wake.set()

    def pending(self, chat_id: int, kind: str) -> Job | None:
        """A job of this kind still waiting (not started) in the chat's queue."""
        queue = self.chats.get(chat_id)
        return next((j for j in queue.jobs if j.kind == kind), None) if queue else None

    def discard(self, chat_id: int, job: Job) -> None:
        queue = self.chats.get(chat_id)
        if queue is not None and job in queue.jobs:
            queue.jobs.remove(job)

    async def forget(self, chat_id: int, member_id: str) -> None:
        """The member unlinked the chat: what waited for them there is dropped."""
        queue = self.chats.get(chat_id)
        if queue is None:
            return
        dropped = [j for j in queue.jobs if j.member_id == member_id]
        for job in dropped:
            queue.jobs.remove(job)
        if dropped:
            log.info("telegram: %d waiting message(s) for chat %s dropped: the chat was unlinked", len(dropped), chat_id)
            await self._persist(queue)

    # -- the store -----------------------------------------------------------------------

    @staticmethod
    def _key(chat_id: int) -> str:
        return f"outbox:{chat_id}"

    async def _persist(self, queue: ChatQueue) -> None:
        async with queue.lock:
            jobs = [j.record() for j in ([queue.running] if queue.running else []) + list(queue.jobs) if j.durable]
            wait = max(0.0, queue.not_before - self.clock())
            record = {"jobs": jobs, "not_before": time.time() + wait if wait else 0} if jobs else None
            await self.host.kv_set(self._key(queue.chat_id), record)
        async with self._index_lock:
            changed = (queue.chat_id in self._index) != bool(jobs)
            (self._index.add if jobs else self._index.discard)(queue.chat_id)
            if changed:
                await self.host.kv_set(INDEX_KEY, sorted(self._index))

    async def restore(self) -> int:
        """At start: the jobs a previous run left, each chat's flood wait included (as
        the wall-clock time it ends). Returns how many jobs were restored."""
        index = await self.host.kv_get(INDEX_KEY)
        count = 0
        for chat_id in index if isinstance(index, list) else []:
            if not isinstance(chat_id, int):
                continue
            record = await self.host.kv_get(self._key(chat_id))
            jobs = [j for j in (Job.restored(r) for r in (record or {}).get("jobs", [])) if j is not None] if isinstance(record, dict) else []
            if not jobs:
                continue
            self._index.add(chat_id)
            queue = self.chat(chat_id)
            wait = float(record.get("not_before") or 0) - time.time()
            if wait > 0:
                queue.not_before = self.clock() + wait
            queue.jobs.extendleft(reversed(jobs))
            queue.wake.set()
            count += len(jobs)
        if count:
            log.info("telegram: %d waiting message(s) restored", count)
        return count

    # -- the worker ----------------------------------------------------------------------

    async def _work(self, queue: ChatQueue) -> None:
        while not self._closed:
            queue.wake.clear()
            job = await self._next(queue)
            if job is None:  # empty, or only jobs of a locked member or not due yet: a new job or a retry wakes it
                try:
                    await asyncio.wait_for(queue.wake.wait(), self._idle_wait(queue))
                except TimeoutError:
                    pass
                continue
            queue.running = job
            try:
                await self.runner(queue, job)
            except asyncio.CancelledError:
                queue.jobs.appendleft(job)  # kept (and still stored) for the next start
                queue.running = None
                raise
            except Later as exc:
                job.due = self.clock() + exc.seconds
                queue.jobs.appendleft(job)  # its place kept: it goes before its kind's later jobs
            except Refused as exc:
                log.warning("telegram: a %s for chat %s was refused by Telegram and dropped: %s", job.kind, queue.chat_id, exc)
            except Exception as exc:  # by type only: an error's message may quote the text
                log.warning("telegram: a %s for chat %s failed and was dropped: %s", job.kind, queue.chat_id, type(exc).__name__)
            queue.running = None
            if job.durable:
                try:
                    await self._persist(queue)
                except Exception as exc:
                    log.error("telegram: the outbox of chat %s could not be stored: %s", queue.chat_id, type(exc).__name__)

    async def _next(self, queue: ChatQueue) -> Job | None:
        """The first job that can run, taken off the queue. A restored job whose words
        cannot be opened yet (its member is locked since the restart) stays where it is
        while the jobs behind it that are in memory go ahead — among them the words that
        ask the member to log in, which would otherwise wait behind it for ever. So does a
        job deferred by ``Later`` until it is due, holding back only the later jobs of its
        own kind (voice notes stay in the order of their answers)."""
        locked: set[str | None] = set()
        waiting: set[str] = set()  # kinds held back by a job of theirs not due yet: kept in order
        now = self.clock()
        for job in list(queue.jobs):
            if job.kind in waiting:
                continue
            if job.due > now:
                waiting.add(job.kind)
                continue
            if job.payload is None and job.sealed:
                if job.member_id in locked:
                    continue
                try:
                    job.payload = await self._open(job)
                except Refused as exc:
                    queue.jobs.remove(job)
                    log.warning("telegram: a %s for chat %s was dropped: %s", job.kind, queue.chat_id, exc)
                    await self._persist(queue)
                    continue
                if job.payload is None:
                    locked.add(job.member_id)
                    continue
            queue.jobs.remove(job)
            return job
        return None

    def _idle_wait(self, queue: ChatQueue) -> float | None:
        """How long an idle worker sleeps unless woken: for ever when nothing waits,
        until the first deferred job is due, at most ``LOCKED_RETRY_SECONDS``."""
        if not queue.jobs:
            return None
        now = self.clock()
        due = [job.due - now for job in queue.jobs if job.due > now]
        return max(0.01, min([LOCKED_RETRY_SECONDS, *due]))

    async def _open(self, job: Job) -> dict[str, Any] | None:
        try:
            opened = json.loads(await self.host.open_for_member(str(job.member_id), str(job.sealed)))
        except MemberLocked:
            return None
        except (ChannelRequestError, ValueError) as exc:
            raise Refused(f"its sealed words do not open any more ({exc})") from None
        return opened if isinstance(opened, dict) else {}

    async def progress(self, queue: ChatQueue, job: Job) -> None:
        """A job that sends several pieces records each one, so a restart resumes
        after the last piece sent instead of repeating it."""
        if job.durable:
            await self._persist(queue)

    # -- calls, paced ---------------------------------------------------------------------

    async def _overall(self) -> None:
        async with self._global:
            while True:
                now = self.clock()
                while self._sent and now - self._sent[0] >= 1.0:
                    self._sent.popleft()
                if len(self._sent) < GLOBAL_PER_SECOND:
                    self._sent.append(now)
                    return
                await asyncio.sleep(1.0 - (now - self._sent[0]))

    async def call(self, queue: ChatQueue, make: Callable[[], Awaitable[Any]], what: str, *, message: bool = True) -> Any:
        """One Bot API call to the chat: after its flood wait, a second after its
        previous message, within the overall limit; a 429 waits ``retry_after`` and
        tries again, a network failure backs off and tries again, for as long as it
        takes. 400/403 raise ``Refused`` (``BadRequest`` itself for the caller to try
        another form first)."""
        failures = 0
        while True:
            ready = max(queue.not_before, queue.next_message_at if message else 0.0)
            delay = ready - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
                continue  # a 429 of another call may have moved it meanwhile
            await self._overall()
            queue.in_flight = True
            try:
                return await make()
            except RetryAfter as exc:
                seconds = retry_after_seconds(exc)
                queue.not_before = self.clock() + seconds
                log.info("telegram: flood wait of %.0f s for chat %s before %s", seconds, queue.chat_id, what)
                # Whatever call drew the 429 (a typing indicator too), the wait holds the
                # whole chat: store it whenever a durable job waits, so a restart keeps it.
                if any(job.durable for job in ([queue.running] if queue.running else []) + list(queue.jobs)):
                    await self._persist(queue)
            except BadRequest:
                raise
            except (Forbidden, InvalidToken) as exc:
                raise Refused(f"{what}: {refusal_kind(exc)}") from None
            except NetworkError as exc:
                failures += 1
                backoff = min(NETWORK_BACKOFF_MAX_SECONDS, 0.5 * 2 ** min(failures, 7))
                cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else refusal_kind(exc)
                if may_have_arrived(exc) and what not in REPEATABLE_METHODS:
                    # Deliberate: Telegram may have taken it, and there is no way to ask.
                    # Sent again rather than risk that the member never gets it.
                    log.warning(
                        "telegram: %s for chat %s got no answer (%s) after it may have reached Telegram: "
                        "sending it again in %.0f s, so it may arrive twice", what, queue.chat_id, cause, backoff,
                    )
                else:
                    log.warning("telegram: %s for chat %s failed (%s), trying again in %.0f s", what, queue.chat_id, cause, backoff)
                queue.not_before = max(queue.not_before, self.clock() + backoff)
            finally:
                queue.in_flight = False
                if message:
                    queue.next_message_at = self.clock() + CHAT_INTERVAL_SECONDS

    async def call_unbound(self, make: Callable[[], Awaitable[Any]], what: str, *, until: float) -> Any:
        """A call that belongs to no chat's queue (answering a button press): the
        overall limit, flood waits honoured until the monotonic deadline ``until``."""
        while True:
            await self._overall()
            try:
                return await make()
            except RetryAfter as exc:
                seconds = retry_after_seconds(exc)
                if self.clock() + seconds > until:
                    log.warning("telegram: %s dropped: its flood wait ends after the request expires", what)
                    return None
                await asyncio.sleep(seconds)
            except NetworkError as exc:  # BadRequest included: an expired query
                log.warning("telegram: %s failed: %s", what, refusal_kind(exc))
                return None
            except (Forbidden, InvalidToken) as exc:
                log.warning("telegram: %s refused: %s", what, refusal_kind(exc))
                return None

    # -- stopping -------------------------------------------------------------------------

    async def drain(self, timeout: float = 2.0) -> None:
        """Let what is ready leave before the connection closes (best effort: what is
        still waiting is stored, and restored at the next start)."""
        deadline = self.clock() + timeout
        while self.clock() < deadline and any(q.jobs or q.running for q in self.chats.values()):
            await asyncio.sleep(0.05)

    async def close(self, in_flight_timeout: float = 5.0) -> None:
        """Stop the workers, but first let a call already sent take in its answer: a 429
        that the stopping process never read would leave the next start without that
        flood wait, and it would call the chat before ``retry_after`` has passed."""
        self._closed = True
        deadline = self.clock() + in_flight_timeout
        while self.clock() < deadline and any(q.in_flight for q in self.chats.values()):
            await asyncio.sleep(0.02)
        workers = [q.worker for q in self.chats.values() if q.worker is not None]
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        self.chats.clear()
