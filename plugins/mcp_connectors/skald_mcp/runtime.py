"""The global runtime: one long-lived MCP session per admin-managed connector.

Each ``Connection`` owns a task that holds the SDK's ``Client`` open (the stdio child
process, or the HTTP session) from ``start`` to ``stop``; every tool call of every
member goes through that one session, so no process is spawned per call. A server's
``notifications/tools/list_changed`` makes the connection list its tools again; every
other notification is discarded here (the global runtime belongs to nobody, so it has
no member's file to append an event to).

Tool pinning (check E5, "a tool definition that changes after approval"): the tools a
connector has when the admin adds it are pinned by the hash of their definition; a tool
that appears later, or whose definition changes, is withheld from every member until
the admin accepts it on the Connectors page.

A lost session (a server redeployed, a stdio process that died) is reconnected by the
call that finds it gone; when that reconnect fails, the connection reads
``reconnecting`` and keeps trying in the background (``RETRY_DELAYS``) until it is ready
again or stopped. A connector that never was ready (its command, address or sign-in is
wrong) is not retried: only a session that was there and went.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import logging
import re
import time
from typing import Any, Awaitable, Callable, Mapping

from skald_hookspecs import Tool, ToolContext, ToolError
from skald_mcp.spec import LOGIN_TOOLS, ServerSpec, tool_names

log = logging.getLogger(__name__)

CONNECT_SECONDS = 20.0
#: The longest a TCP (and TLS) connect to a remote server may take: well inside
#: ``CONNECT_SECONDS``, so an address that swallows the connect says so as a failed
#: connect (``ConnectTimeout``), not as a server that "did not answer". A refused
#: connection, an unknown name or a TLS failure ends the start at once (``_run``).
HTTP_CONNECT_SECONDS = 10.0
STOP_SECONDS = 5.0
MAX_DESCRIPTION = 2000
MAX_RESULT = 100_000
#: The largest server-sent event (one answer, over streamable HTTP) read from a
#: connector: the SDK's default (1 MiB) refused answers the model would get cut to
#: ``MAX_RESULT`` anyway; a larger one is refused by the SDK before it is buffered
#: whole, and the call says so (``_too_large``).
MAX_EVENT_BYTES = 8 * 1024 * 1024
#: The waits (seconds) between the background reconnect attempts of a connection whose
#: session was lost and whose reconnect failed; the last repeats until it is back. Read
#: at each wait, so a test may patch it.
RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0, 5.0, 15.0, 30.0, 60.0)
#: How old a session's tool listing may be when a call relies on it (check E5: "a
#: changed tool definition triggers re-approval through its pinned hash"). A server
#: sends ``tools/list_changed`` to one session at most (the one whose request changed a
#: tool, or none at all), so several connectors on one server, or a server that never
#: notifies, would keep running a redefined tool under its old pin. A call finding the
#: listing older than this lists the tools again first; within it a call costs no
#: extra round trip (bench/mcp.py). Read at each call, so a test may patch it.
LISTING_FRESH_SECONDS = 30.0


class _Closing:
    """Whether one session is being closed on purpose (``Connection._halt``). One per
    session, shared by reference with every task the SDK starts inside it."""

    on = False


#: The session whose task (or one the SDK started inside it) is logging; tasks inherit
#: the value, so the holder reaches the SDK's stream readers and its closing DELETE.
_session: contextvars.ContextVar[_Closing | None] = contextvars.ContextVar("skald_mcp_session", default=None)
#: The SDK logger whose lines a deliberate close provokes: the GET stream's reader
#: finding its stream closed (``BrokenResourceError``, at ERROR), the closing DELETE
#: failing against a server that is already gone (WARNING).
SDK_HTTP_LOGGER = "mcp.client.streamable_http"


class QuietWhileClosing(logging.Filter):
    """A deliberate stop (the plugin disabled, a connector removed or restarted, a
    member's file closing) breaks the session's streams on purpose; what the SDK says of
    that is INFO, not an ERROR the admin should act on. Only the lines of a session
    being closed on purpose are lowered: any other keeps its level."""

    def filter(self, record: logging.LogRecord) -> bool:
        closing = _session.get()
        if closing is not None and closing.on and record.levelno > logging.INFO:
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        return True


def _quiet_sdk_closes() -> None:
    """Install ``QuietWhileClosing`` on the SDK's HTTP logger, once per process (a filter
    on a logger sees the records logged on it; the plugin may be loaded anew)."""
    logger = logging.getLogger(SDK_HTTP_LOGGER)
    if not any(getattr(f, "skald_mcp_quiet", False) for f in logger.filters):
        quiet = QuietWhileClosing()
        quiet.skald_mcp_quiet = True  # type: ignore[attr-defined]
        logger.addFilter(quiet)


def definition_hash(tool: Any) -> str:
    """What a pin is bound to: the tool's name, description and input schema."""
    blob = json.dumps(
        {"name": tool.name, "description": tool.description or "", "schema": tool.input_schema or {}},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def offered_tools(tools: list[Any], pins: Mapping[str, str], *, login_contract: bool) -> list[Any]:
    """The server's tools the agent is offered, for a global connector and a member's
    own alike: each one pinned as it is now (a new or changed one waits for review).
    ``login_contract``: the connector uses the login contract (a member's from a
    ``"login": "qr"`` template), whose tools (``LOGIN_TOOLS``) Skald calls itself: an
    agent that could call ``logout`` would unlink the member's device. A connector
    without it keeps a ``logout`` or ``login_status`` of its own, which is simply its
    tool. A global connector passes True: it cannot say whether its server's are the
    contract's, and there one ``logout`` would unlink a device every granted member shares."""
    return [t for t in tools if pins.get(t.name) == definition_hash(t) and not (login_contract and t.name in LOGIN_TOOLS)]


def withheld(tools: list[Any], pins: Mapping[str, str]) -> list[dict[str, Any]]:
    """The definitions of the tools a pin withholds (new, or changed since pinned), as
    the page shows them before anyone accepts: accepting a name alone is accepting blind.
    Each carries the ``hash`` it would be pinned at, which the accept sends back
    (``accepted_pins``): the proof of which definition was looked at."""
    hashes = [(t, definition_hash(t)) for t in tools]
    return [
        {"name": t.name, "description": t.description or "", "input_schema": t.input_schema or {}, "hash": current}
        for t, current in hashes
        if pins.get(t.name) != current
    ]


class ReviewOutdated(Exception):
    """An accept named tools as a page showed them, and the server has changed (or
    dropped) some of them since: pinning them now would accept a definition nobody saw."""

    def __init__(self, tools: list[str]) -> None:
        super().__init__(f"changed since they were shown: {', '.join(tools)}")
        self.tools = tools


def accepted_pins(tools: list[Any], pins: Mapping[str, str], shown: Mapping[str, str]) -> dict[str, str]:
    """The pins after accepting ``shown`` (tool -> the ``hash`` its ``withheld`` entry
    showed): each pinned at that hash, only if the server's tool has it now, else
    ``ReviewOutdated`` and nothing changes. Pinning the tools as they are when the click
    arrives let a server change a tool between the page's drawing and the click and have
    the newer version accepted unseen. A withheld tool the accept does not name stays
    withheld; a pin of a tool the server no longer lists is dropped (vetted afresh if it
    comes back), as accepting always did."""
    current = {t.name: definition_hash(t) for t in tools}
    outdated = sorted(name for name, shown_hash in shown.items() if current.get(name) != shown_hash)
    if outdated:
        raise ReviewOutdated(outdated)
    return {name: shown.get(name) or pins[name] for name in current if name in shown or name in pins}


def result_text(result: Any) -> str:
    """A ``CallToolResult`` as the text the model reads."""
    parts: list[str] = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and getattr(block.resource, "text", None) is not None:
            parts.append(block.resource.text)
        else:
            parts.append(f"[{kind or 'content'}{': ' + block.mime_type if getattr(block, 'mime_type', None) else ''}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    return text if len(text) <= MAX_RESULT else text[:MAX_RESULT] + "\n[truncated]"


class Connection:
    """One connector's session. ``tools`` is the server's current list (MCP types)."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        on_change: Callable[["Connection"], None],
        on_notification: Callable[[Any], None] | None = None,
        spawn: Callable[[], Awaitable[Any]] | None = None,
        elicit: Callable[[Any, str, Any], Awaitable[Any]] | None = None,
    ) -> None:
        self.spec = spec
        #: The elicitation bridge (elicitation.py): (call's ToolContext, connector, params).
        self._elicit = elicit
        #: The ToolContexts of the calls in flight on this session.
        self._inflight: list[Any] = []
        #: A member's own remote server: every connection must reach a public address,
        #: or a private one while ``allow_private()`` says the admin allows it (asked at
        #: each connection and, once one relied on it, at each request: guard.py).
        self.public_only = False
        self.allow_private: Callable[[], Awaitable[bool]] | None = None
        #: The current session's use of that allowance (``guard.Guard``), or None.
        self._guard: Any = None
        #: The HTTP client the current session talks through, closed when it ends.
        self._http: Any = None
        self._stderr: Any = None  # a stdio session's ``StderrLog``
        #: A member's own connector: its name and address are theirs, so the log (which
        #: the admin reads) names neither, and says a failure by its cause alone.
        self.private = False
        #: For a member's stdio connector: starts its command in the member's sandbox
        #: (``HostApi.sandbox_spawn``); the host never runs a member's command itself.
        self._spawn = spawn
        self.state = "stopped"  # starting | ready | reconnecting | failed | stopped
        self.error: str | None = None
        #: The failure in a word the page has a sentence for (``FAILURE_CAUSES``);
        #: ``error`` keeps the technical detail.
        self.cause: str | None = None
        #: The plugin's own coded refusal it failed with (a ``SpecError`` with a
        #: ``code``), so a route can say it in the reader's language (``said_error``).
        self.refusal: Any = None
        #: The failure's kind without its words (``failure_kind``): what the log says of
        #: a member's connector, whose error may quote their address or key.
        self.kind: str | None = None
        self.tools: list[Any] = []
        #: When ``tools`` was last listed (monotonic): a call relies on a listing no
        #: older than ``LISTING_FRESH_SECONDS``.
        self.listed_at = 0.0
        #: The listing a stale call started, shared by the calls that found it stale together.
        self._relisting: asyncio.Future[None] | None = None
        self.discarded = 0  # notifications the global runtime dropped
        self._on_change = on_change
        self._on_notification = on_notification
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        #: The current session's ``_Closing``: set by ``_halt`` (``QuietWhileClosing``).
        self._closing = _Closing()
        self._ready = asyncio.Event()
        self._refreshing: asyncio.Task[None] | None = None
        #: One reconnect at a time: the calls that found the session gone together
        #: share the new one.
        self._reconnecting = asyncio.Lock()
        self._retired = False
        #: The admin removed the connector (``Runtime.remove``): a call it broke says so.
        self.removed = False
        #: The background reconnect loop of a lost session (``_retry``): one at most.
        self._retrying: asyncio.Task[None] | None = None
        #: This start stands for a session that was lost (a Restart of a connector that
        #: was reconnecting): if it fails, it keeps trying, as the loop it replaced did.
        self._resume = False
        #: How many sessions have been ready on this connection (a reconnect is a new
        #: one): what a member's device login is checked again at (members.py).
        self.sessions = 0
        #: The calls in flight now, and every call ever started: whether a call had the
        #: session to itself, which decides what its broken connection tells (``call``).
        self._active = 0
        self._started = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, wait: float | None = CONNECT_SECONDS, *, resume: bool = False) -> None:
        """Start the session; with ``wait``, until it is ready or has failed. An
        attempt of the background reconnect keeps reading ``reconnecting``, with the
        last failure's cause, until it is ready. ``resume``: in place of a session that
        was lost and is being reconnected (a Restart meanwhile): failing, it keeps
        trying in the background. A first start that fails is never retried (its
        command, address or sign-in is what is wrong)."""
        if self._retrying is None:
            self.state, self.error, self.cause, self.refusal = "starting", None, None, None
        self._retired = False
        self.removed = False
        self._resume = resume
        self._stop.clear()
        self._ready.clear()
        self._closing = _Closing()
        context = contextvars.copy_context()
        context.run(_session.set, self._closing)
        self._task = asyncio.create_task(self._run(), name=f"mcp:{self.spec.name}", context=context)
        if wait:
            try:
                await asyncio.wait_for(self._ready.wait(), wait)
            except TimeoutError:
                self.fail(TimeoutError(f"the server did not answer within {wait:g} s"))
                # Never ready, so nothing to close in order: ended at once, not after
                # another ``STOP_SECONDS`` of waiting for a server that is not answering.
                await self._halt(grace=0)
                self.fail(TimeoutError(f"the server did not answer within {wait:g} s"))
                if resume:
                    self._keep_trying()

    def _transport(self) -> Any:
        from mcp import StdioServerParameters

        if self._spawn is not None:
            from skald_mcp.sandbox_transport import sandbox_transport

            return sandbox_transport(self._spawn)
        if self.spec.transport == "stdio":
            # An argv array, never a shell; the environment is the SDK's safe default
            # plus what the admin set.
            from mcp.client.stdio import get_default_environment, stdio_client

            from skald_mcp.stderr import StderrLog

            # Its stderr as log lines named by the connector, not raw into the host's
            # stderr (the SDK's default): a failing call's traceback read as Skald's crash.
            self._stderr = StderrLog(self.spec.name)
            parameters = StdioServerParameters(command=self.spec.command, args=list(self.spec.args), env={**get_default_environment(), **self.spec.env})
            return stdio_client(parameters, errlog=self._stderr.file)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        _quiet_sdk_closes()

        if self.public_only:
            from skald_mcp.guard import guarded_client

            self._http = guarded_client(dict(self.spec.headers), self.allow_private, connect_seconds=HTTP_CONNECT_SECONDS)
            self._guard = self._http.guard
        else:
            import httpx2

            # The SDK's timeouts, with a connect that gives up before ``CONNECT_SECONDS``.
            self._http = create_mcp_http_client(headers=dict(self.spec.headers), timeout=httpx2.Timeout(30.0, connect=HTTP_CONNECT_SECONDS, read=300.0))
        return streamable_http_client(self.spec.url, http_client=self._http, max_sse_event_size=MAX_EVENT_BYTES)

    async def _run(self) -> None:
        from mcp import Client

        http = None
        try:
            transport = self._transport()
            http = self._http
            # "legacy": the initialize handshake every server speaks, whose session
            # carries list_changed notifications; no response cache (a list_changed
            # must reach the server's new list).
            async with Client(
                transport, mode="legacy", cache=None, message_handler=self._message, elicitation_callback=self._elicitation
            ) as client:
                self._client = client
                await self._list_tools()
                self.state, self.error, self.cause, self.refusal = "ready", None, None, None
                self._resume = False
                self.sessions += 1
                if self._stderr is not None:  # from now on its stderr may quote members' calls
                    self._stderr.session_ready()
                self._ready.set()
                self._on_change(self)
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - a dead server is a state, never the host's crash
            # A session that was ready and ended by itself (not stopped) was lost; so
            # was the one a resumed start stands for.
            lost = (self.state == "ready" or self._resume) and not self._stop.is_set() and not self._retired
            self.fail(exc)
            if self._retrying is None:  # an attempt of the background reconnect: ``_retry`` says it
                log.warning("connector %s: %s", *self._logged(self.error))
            if lost:
                self._keep_trying()
            # The session's end, for a call that broke with it (``_never_sent``).
            return exc
        finally:
            self._client = None
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None
            if http is not None:
                # The SDK leaves a client it was given open: no connection of an ended
                # session stays behind (one to a home server outlasting its allowance).
                if self._http is http:
                    self._http = None
                try:
                    await http.aclose()
                except Exception:  # noqa: BLE001 - closing what is done with
                    pass
            if self.state not in ("failed", "reconnecting"):
                self.state = "stopped"
            self._ready.set()
            self._on_change(self)

    def fail(self, exc: BaseException, *, as_said: bool = False) -> None:
        """Failed, with why: its cause for the page's sentence, and the technical
        detail with the connector's own secrets (environment, headers) masked, since
        an error may quote what it was given. ``as_said``: the plugin's own refusal,
        a sentence already, so without its class name. While the background reconnect
        runs, it still reads ``reconnecting`` (with this failure's cause)."""
        self.state, self.cause = ("reconnecting" if self._retrying is not None else "failed"), failure_cause(exc)
        self.refusal = exc if as_said and getattr(exc, "code", "") else None
        self.kind = failure_kind(exc)
        detail = (str(exc) or type(exc).__name__) if as_said else _describe(exc)
        self.error = redact(detail, [*self.spec.env.values(), *self.spec.headers.values()])

    def _logged(self, detail: str | None) -> tuple[str, str | None]:
        """The connector and a failure's detail as a log line may say them: a member's
        own by neither name nor detail (an error may quote its address, key and all)."""
        if not self.private:
            return (self.spec.name, detail)
        return ("of a member", f"{self.cause} ({self.kind})" if self.cause and self.kind else self.cause)

    def said_error(self, say: Callable[[Any], str] = str) -> str | None:
        """``error`` for a reader: a coded refusal in the words ``say`` gives it (the
        routes': the caller's language), masked as ``error`` is."""
        if self.refusal is None:
            return self.error
        return redact(say(self.refusal), [*self.spec.env.values(), *self.spec.headers.values()])

    async def stop(self) -> None:
        """Stop for good: a call that finds the session lost afterwards reconnects
        nothing, and the background reconnect ends (the connector was removed,
        replaced or restarted, or its member's file closed)."""
        self._retired = True
        retrying, self._retrying = self._retrying, None
        if retrying is not None and retrying is not asyncio.current_task():
            retrying.cancel()
            await asyncio.gather(retrying, return_exceptions=True)
        await self._halt()
        if self.state == "reconnecting":
            self.state = "stopped"

    async def _halt(self, grace: float = STOP_SECONDS) -> None:
        """End the session: it is given ``grace`` seconds to close in order (the HTTP
        session's DELETE, a stdio child's exit), then cancelled."""
        self._closing.on = True
        self._stop.set()
        task, self._task = self._task, None
        if self._refreshing is not None:
            self._refreshing.cancel()
        if task is None:
            return
        if grace > 0:
            try:
                await asyncio.wait_for(asyncio.shield(task), grace)
                return
            except asyncio.CancelledError:
                task.cancel()  # the halt itself was cancelled (a stop): leave no session behind
                raise
            except (TimeoutError, Exception):
                pass
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    # -- the background reconnect ------------------------------------------------------------

    def _keep_trying(self) -> None:
        """The lost session could not be had again: read ``reconnecting`` and try in
        the background until it is back (``_retry``). Once: a loop already running is
        the one; never after ``stop``."""
        if self._retired or self._retrying is not None:
            return
        self.state = "reconnecting"
        self._retrying = asyncio.create_task(self._retry(), name=f"mcp-retry:{self.spec.name}")
        log.info("connector %s: the server cannot be reached; trying again in the background", self._logged(None)[0])
        self._on_change(self)

    async def _retry(self) -> None:
        attempt = 0
        try:
            while not self._retired:
                delays = RETRY_DELAYS
                delay = delays[min(attempt, len(delays) - 1)]
                await asyncio.sleep(delay)
                attempt += 1
                async with self._reconnecting:
                    if self._retired:
                        return
                    await self._halt()
                    if self._retired:
                        return
                    await self.start()
                if self.state == "ready":
                    self._retrying = None
                    log.info("connector %s: reconnected (attempt %d)", self._logged(None)[0], attempt)
                    return
                self.state = "reconnecting"  # whatever the attempt ended as
                if attempt <= len(delays) or attempt % 10 == 0:  # not a line a minute for a server gone for days
                    who, why = self._logged(self.error)
                    log.info("connector %s: reconnect attempt %d failed: %s", who, attempt, why)
        except Exception as exc:  # noqa: BLE001 - never a loop that died and a state that says it runs
            if self._retrying is asyncio.current_task():
                self._retrying = None
                self.fail(exc)
                log.warning("connector %s: reconnecting stopped: %s", *self._logged(self.error))
                self._on_change(self)
        finally:
            if self._retrying is asyncio.current_task():
                self._retrying = None

    # -- the session ------------------------------------------------------------------------

    async def _list_tools(self) -> None:
        tools: list[Any] = []
        cursor = None
        while True:
            page = await self._client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                break
        self.tools = tools
        self.listed_at = time.monotonic()

    async def _fresh_listing(self) -> None:
        """The tool listing no older than ``LISTING_FRESH_SECONDS``: listed again when
        it is older, once for the calls that find it so together. A changed listing is
        handed on (``on_change``) as a notified one is, so a redefined tool is withheld
        and waits for review."""
        if time.monotonic() - self.listed_at <= LISTING_FRESH_SECONDS:
            return
        if self._relisting is None or self._relisting.done():
            self._relisting = asyncio.ensure_future(self._relist())
            # Read here too: a call cancelled while it waited leaves no unread failure.
            self._relisting.add_done_callback(lambda done: done.cancelled() or done.exception())
        await asyncio.shield(self._relisting)

    async def _relist(self) -> None:
        before = [definition_hash(t) for t in self.tools]
        await self._list_tools()
        if [definition_hash(t) for t in self.tools] != before:
            self._on_change(self)

    async def _message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method == "notifications/tools/list_changed":
            # Listed from a task of its own: a request from inside the handler would
            # wait for the receive loop that is running the handler.
            if self._refreshing is None or self._refreshing.done():
                self._refreshing = asyncio.create_task(self._refresh())
            return
        if method is not None and method.startswith("notifications/"):
            if self._on_notification is not None:
                self._on_notification(message)
            else:
                self.discarded += 1

    async def _elicitation(self, context: Any, params: Any) -> Any:
        """A server asks for input during a call: the member of that call answers,
        when it is the only member with a call in flight here; else it is declined."""
        import mcp_types as types

        calls = list(self._inflight)
        if self._elicit is None or len({c.member_id for c in calls}) != 1:
            return types.ElicitResult(action="decline")
        return await self._elicit(calls[-1], self.spec.name, params)

    async def _refresh(self) -> None:
        # A request on the session like a call's (``call`` counts them).
        self._active += 1
        self._started += 1
        try:
            await self._list_tools()
        except Exception as exc:  # noqa: BLE001
            log.warning("connector %s: listing tools failed: %s", *self._logged(_describe(exc)))
            return
        finally:
            self._active -= 1
        self._on_change(self)

    async def call(
        self, tool: str, arguments: Mapping[str, Any], cancelled: asyncio.Event | None = None, ctx: Any = None, *, pinned: str | None = None,
    ) -> str:
        """Call ``tool`` on the session. ``pinned``: the definition hash the tool was
        offered at (``make_tool``); the call runs only while the server's current
        definition has it, checked against a listing no older than
        ``LISTING_FRESH_SECONDS``. Without it (Skald's own calls of the login contract)
        the last listing's definition is what a reconnect must keep."""
        if ctx is not None:
            self._inflight.append(ctx)
        self._active += 1
        self._started += 1
        started, alone = self._started, self._active == 1
        try:
            if self.state == "reconnecting":
                # Its server went away and the connector is trying to reach it again:
                # said at once, not waited for.
                raise ToolError(self._reconnecting_sentence())
            vetted = pinned if pinned is not None else next((definition_hash(t) for t in self.tools if t.name == tool), None)
            guard = self._guard
            if guard is not None and self.state == "ready" and await guard.withdrawn():
                await self._allowance_withdrawn(guard)
                if self.state == "ready":  # its address is a public one now
                    self._same_tool(tool, vetted)
            client = self._client
            if client is not None and self.state == "ready" and _transport_closed(client):
                # The server went away (a stdio process that exited) before this call
                # was sent: it never saw it, so a new session serves it.
                client = await self._reconnect(client)
                if client is not None:
                    self._same_tool(tool, vetted)
            if self.state == "reconnecting":
                raise ToolError(self._reconnecting_sentence())
            if client is None or self.state != "ready":
                raise ToolError(f"the connector {self.spec.name!r} is not running ({self.error or self.state})")
            session = self._task  # the session ``client`` belongs to
            try:
                if pinned is not None:
                    # A definition changed since it was offered (told to this session or
                    # not: ``LISTING_FRESH_SECONDS``) is not run; it waits for review.
                    await self._fresh_listing()
                    self._same_tool(tool, vetted)
                return await self._call(client, tool, arguments, cancelled)
            except Exception as exc:
                if _session_gone(exc):
                    # The server no longer knows the session (it restarted): it refused
                    # the request before running the tool, so the one retry cannot run
                    # it twice. Never after a tool error, a timeout or a broken stream.
                    client = await self._reconnect(client)
                    if client is None:
                        raise ToolError(self._reconnecting_sentence() if self.state == "reconnecting" else self._unreachable()) from None
                    self._same_tool(tool, vetted)
                    return await self._call(client, tool, arguments, cancelled)
                limit = _too_large(exc)
                if limit is not None:
                    # The server answered, more than the transport reads: an answer,
                    # not a broken connection. The SDK dropped that one stream only,
                    # so the session is kept and nothing is sent again.
                    raise ToolError(
                        f"the connector {self.spec.name!r} answered with more than {limit / 1024 / 1024:g} MB, "
                        "which was not read; ask it for a smaller result"
                    ) from None
                if _connection_closed(exc):
                    # Closed while the call was out: it may have run, so it is not
                    # repeated; the next call finds a new session.
                    await self._reconnect(client)
                    if alone and self._started == started and _never_sent(session):
                        # Its request could not even connect to the server (refused, no
                        # such host): the server never saw it.
                        raise ToolError(self._not_sent_sentence()) from None
                    if self.removed:
                        raise ToolError(f"the connector {self.spec.name!r} was removed during the call; it may or may not have run") from None
                    raise ToolError(f"the connection to the connector {self.spec.name!r} broke during the call; it may or may not have run") from None
                raise
        except Exception as exc:
            error = _protocol_error(exc)
            if error is None:
                raise
            # The SDK's own error, in its words: a sentence for the model, not a withheld traceback.
            raise ToolError(f"the connector {self.spec.name!r} answered: {error.message or error.code}") from None
        finally:
            self._active -= 1
            if ctx is not None:
                self._inflight.remove(ctx)

    async def _allowance_withdrawn(self, guard: Any) -> None:
        """The admin turned *Allow private addresses* off, and this session reaches a
        private address by it: it is not used again (its client refuses every request
        already: guard.py). A new session is checked as any is, so the connector reads
        failed, with the address check's refusal, until its Restart (or the member's
        next unlock) once private addresses are allowed again."""
        async with self._reconnecting:
            if self._guard is not guard or self._retired:
                return  # another call found it first, or it was stopped
            log.info("connector %s: private addresses are no longer allowed; connecting anew through the address check", self._logged(None)[0])
            await self._halt()
            if not self._retired:
                await self.start()

    async def _reconnect(self, lost: Any) -> Any:
        """A new session in place of ``lost`` (once for the calls that found it gone
        together), with the tool list listed again; the new client, or None when the
        server cannot be reached (the connector then reads reconnecting, with why, and
        keeps trying in the background: ``_keep_trying``)."""
        if self._retrying is not None:
            return None  # the background reconnect is at it: this call does not wait
        async with self._reconnecting:
            if self._retired or self._retrying is not None or (self._client is not None and self._client is not lost):
                # Stopped for good, the background reconnect is at it, or another call
                # has reconnected it meanwhile.
                return self._client if self.state == "ready" else None
            log.info("connector %s: the session was lost, reconnecting", self._logged(None)[0])
            await self._halt()
            if self._retired:
                return None  # stopped while the old session closed
            await self.start()
            if self.state != "ready":
                log.warning("connector %s: reconnecting failed: %s", *self._logged(self.error))
                if not self._retired:
                    self._keep_trying()
                return None
            return self._client

    def _same_tool(self, tool: str, vetted: str | None) -> None:
        """A call goes on only to the definition it was offered with, as the server
        lists it now (after a reconnect, or a listing found stale): a changed one
        waits to be accepted."""
        current = next((definition_hash(t) for t in self.tools if t.name == tool), None)
        if vetted is None or current != vetted:
            raise ToolError(f"the tool {tool!r} of the connector {self.spec.name!r} has changed on its server since it was accepted; it waits to be accepted again")

    def _unreachable(self) -> str:
        return f"the connector {self.spec.name!r} lost its session and could not reconnect ({self.error or self.state})"

    def _not_sent_sentence(self) -> str:
        if self.state == "reconnecting":
            return (
                f"the connector {self.spec.name!r} could not reach its server, so the call was not sent and did not run; "
                f"it is reconnecting by itself ({self.error or 'not reachable yet'}) and can be used again once it is back"
            )
        return f"the connector {self.spec.name!r} could not reach its server ({self.error or self.state}), so the call was not sent and did not run"

    def _reconnecting_sentence(self) -> str:
        return (
            f"the connector {self.spec.name!r} lost its connection to its server and is reconnecting by itself "
            f"({self.error or 'not reachable yet'}); it can be used again once it is back"
        )

    async def _call(self, client: Any, tool: str, arguments: Mapping[str, Any], cancelled: asyncio.Event | None) -> str:
        # Awaited directly: stopping the turn cancels the task running this call (the
        # SDK then cancels the request), so no watcher of ``cancelled`` is needed on
        # the path of every call.
        result = await client.call_tool(tool, dict(arguments))
        text = result_text(result)
        if result.is_error:
            # The server's own words about its tool's failure are meant for the model.
            raise ToolError(text or "the connector reported an error")
        return text


def _protocol_error(exc: BaseException) -> Any:
    """The JSON-RPC error (``ErrorData``) an SDK ``MCPError`` carries, else None."""
    from mcp.shared.exceptions import MCPError

    return exc.error if isinstance(exc, MCPError) else None


#: How servers say a session id is unknown to them: the SDK's server ("Session not
#: found", HTTP 404), the SDK's client for a bare 404 ("Session terminated"), others.
_SESSION_GONE = re.compile(r"session (not found|terminated|expired)|(unknown|expired|invalid) session", re.IGNORECASE)


def _session_gone(exc: BaseException) -> bool:
    """The server refused the request because it no longer knows the session: the
    tool did not run. A timeout or a broken stream is never this."""
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    error = _protocol_error(exc)
    if error is None or error.code in (CONNECTION_CLOSED,):
        return False
    if error.code == REQUEST_TIMEOUT and not _SESSION_GONE.search(error.message or ""):
        return False  # the SDK's own timeout (some servers reuse the code for a lost session)
    return bool(_SESSION_GONE.search(error.message or ""))


#: How the SDK says an answer's server-sent event outgrew ``max_sse_event_size``
#: (httpx2's ``SSEError``, wrapped as a closed connection); an SDK upgrade that
#: rewords it needs a look: the call would then read "broke during the call" again.
_TOO_LARGE = re.compile(r"exceeded the (\d+) byte limit")


def _too_large(exc: BaseException) -> int | None:
    """The byte limit an answer exceeded, if that is why the call failed, else None."""
    from mcp_types import CONNECTION_CLOSED

    error = _protocol_error(exc)
    if error is None or error.code != CONNECTION_CLOSED:
        return None
    found = _TOO_LARGE.search(error.message or "")
    return int(found.group(1)) if found else None


def _connection_closed(exc: BaseException) -> bool:
    from mcp_types import CONNECTION_CLOSED

    error = _protocol_error(exc)
    return error is not None and error.code == CONNECTION_CLOSED


#: The failures of a request that never reached the server: no connection was made
#: (refused, no such host, the address check refused it, the connect timed out).
_NOT_CONNECTED = frozenset({"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "gaierror"})


def _never_sent(session: "asyncio.Task[Any] | None") -> bool:
    """Whether the session a call broke with ended because a request could not connect
    to the server, and for nothing else: a session ``_run`` ended with only connection
    failures (the SDK's HTTP transport fails as a whole when a request's connection is
    refused; a stream that broke midway, a protocol error or a stopped session is
    anything but this). Asked only of a call that had the session to itself, so the
    refused request was that call's. Unknown reads as sent: "it may or may not have run"."""
    if session is None or not session.done() or session.cancelled():
        return False
    failure = session.result()
    if not isinstance(failure, BaseException):
        return False
    leaves, seen = [], [failure]
    while seen:
        current = seen.pop()
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
        else:
            leaves.append(current)
    return bool(leaves) and all({cls.__name__ for cls in type(leaf).__mro__} & _NOT_CONNECTED for leaf in leaves)


def _transport_closed(client: Any) -> bool:
    """Whether the session's transport has closed (its receive loop saw the end: a
    stdio server that exited). The SDK keeps no public flag for it, so its
    dispatcher's is read; an SDK upgrade that renames it needs a look (as guard.py's
    reach into the HTTP pool does). Unknown reads as open: the call then fails as it
    would have, and is not repeated."""
    dispatcher = getattr(getattr(client, "_session", None), "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


def make_tool(
    server: str, mcp_tool: Any, may_call: Callable[[str], bool], connection: Callable[[], "Connection | None"], name: str | None = None,
    capability: str | None = None, settle: Callable[[], Awaitable[None]] | None = None,
) -> Tool:
    """One MCP tool as a Skald tool named ``name`` (``<server>__<tool>``, unique within
    the server: ``tool_names``), calling the server's tool by its real name.
    ``may_call(member_id)`` is asked when the call runs, not only when the round
    offered it. ``capability``: the role capability the member must hold for it (a
    member's own connector: ``Tool.capability``, which the host asks as each round
    offers it and as each call starts). ``settle``: awaited before a call's answer
    is handed on (a member's connector writes the notifications the call sent first)."""
    schema = dict(mcp_tool.input_schema or {})
    if schema.get("type") != "object":
        schema = {"type": "object", "properties": {}}
    description = (mcp_tool.description or mcp_tool.title or mcp_tool.name or "")[:MAX_DESCRIPTION]
    remote = mcp_tool.name
    # Offered only as pinned (``offered_tools``): the definition a call may run.
    pinned = definition_hash(mcp_tool)

    async def run(args: Mapping[str, Any], ctx: ToolContext) -> str:
        if not may_call(ctx.member_id):
            raise ToolError(f"the connector {server!r} is not available to you")
        current = connection()
        if current is None:
            raise ToolError(f"the connector {server!r} is not running")
        try:
            try:
                answer = await current.call(remote, args, ctx.cancelled, ctx, pinned=pinned)
            except ToolError:
                if current.removed or may_call(ctx.member_id):
                    raise
                # Their access ended while the call was out (the grant revoked, the
                # plugin or the capability taken, the template closed): that stopped
                # it, not a broken connection.
                raise ToolError(f"the connector {server!r} is no longer available to you: your access to it ended during the call; it may or may not have run") from None
            # A call already out when the access ended (a global connector's session is
            # shared, so nothing stops for one member) finishes with its answer: it ran.
            return answer
        finally:
            if settle is not None:
                await settle()

    # A connector's answer is the outside service's text (a page, a mail, an issue):
    # after one, a side-effecting call the rules allow asks first (check E2).
    return Tool(
        name or tool_names(server, [remote])[remote], f"[{server}] {description}", schema, run, capability=capability, untrusted_output=True,
    )


#: The failures the page explains in a sentence (``cause_<name>`` in strings.py),
#: each with the exception classes it is known by, by name: the SDK's HTTP clients
#: (httpx, httpx2) have their own classes of the same names.
FAILURE_CAUSES = (
    ("command_not_found", ("FileNotFoundError", "NotADirectoryError", "PermissionError")),
    ("timeout", ("TimeoutError", "TimeoutException")),
    ("connection_failed", ("ConnectionError", "ConnectError", "gaierror")),
)


def failure_cause(exc: BaseException) -> str:
    """The first known cause in ``exc`` (a group's members and what they were raised
    from included), else ``"other"``."""
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop(0)
        names = {cls.__name__ for cls in type(current).__mro__}
        for cause, known in FAILURE_CAUSES:
            if names.intersection(known):
                return cause
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
        seen.extend(e for e in (current.__cause__, current.__context__) if e is not None and e not in seen)
    return "other"


def failure_kind(exc: BaseException) -> str:
    """What failed, in words that quote nothing it was given: the exception classes
    (a group's members, and what each was raised from), and for the plugin's own coded
    refusal its code (``SpecError``'s ``destination_changed``). The admin's log says a
    member's connector failed by this, never by its message, which may quote the
    member's address, header or key."""
    kinds: list[str] = []
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop(0)
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
        else:
            code = getattr(current, "code", None)
            kind = f"{type(current).__name__} {code}" if isinstance(code, str) and code.isidentifier() else type(current).__name__
            if kind not in kinds:
                kinds.append(kind)
        seen.extend(e for e in (current.__cause__,) if e is not None and e not in seen)
    return ", ".join(kinds[:5])


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every secret value masked, and each long word of one: an error
    may quote the token of ``Bearer <token>`` alone."""
    words = {value for value in secrets if len(value) >= 4} | {w for value in secrets for w in value.split() if len(w) >= 8}
    for word in sorted(words, key=len, reverse=True):
        text = text.replace(word, "********")
    return text


#: The connect failures an HTTP client's ``ConnectError`` hides under "All connection
#: attempts failed": said beside it, so a refused connection reads as refused.
_CONNECT_ROOTS = frozenset({"ConnectionRefusedError", "gaierror", "SSLError", "SSLCertVerificationError"})


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    root, seen = exc.__cause__ or exc.__context__, 0
    while root is not None and seen < 10:
        if type(root).__name__ in _CONNECT_ROOTS:
            return f"{said} ({type(root).__name__}: {root})" if str(root) not in said else said
        root, seen = root.__cause__ or root.__context__, seen + 1
    return said


class Runtime:
    """The admin-managed connectors and who may use them.

    ``access`` (connector → member ids) and ``pins`` (connector → tool → hash) are the
    stored state, mirrored here so ``member_tools`` (asked in every model round) reads
    memory only. A grant change replaces the in-memory set before the admin's request
    is answered, and every call checks it again: revocation is synchronous.
    """

    def __init__(self, host: Any) -> None:
        self.host = host
        self.specs: dict[str, ServerSpec] = {}
        self.connections: dict[str, Connection] = {}
        self.access: dict[str, set[str]] = {}
        self.pins: dict[str, dict[str, str]] = {}
        #: connector → the skald Tools of its pinned tools, rebuilt when its list changes
        #: (the same objects round after round, so the host encodes each once).
        self._offered: dict[str, list[Tool]] = {}
        self._pin_writes: set[asyncio.Task[Any]] = set()
        #: Connectors a member created later receives (default access, the second
        #: moment; the first is the admin's form granting every member at the birth).
        self.by_default: set[str] = set()
        #: The catalog: admin-vetted templates members activate (never live credentials).
        self.templates: dict[str, Any] = {}
        #: Template -> the members who may see and activate it; None: every member the
        #: plugin is granted to (templates from before per-template access existed).
        self.template_access: dict[str, set[str] | None] = {}
        #: Templates a member created later receives (default access, as for globals).
        self.template_defaults: set[str] = set()
        #: (connector, member) pairs already logged as hidden by a member's own
        #: connector of the same name (``member_tools``): said once, not every round.
        self._clashes_logged: set[tuple[str, str]] = set()
        #: connector -> the lock held from stopping its session to storing the next one
        #: (``_open``): two Restarts (or an edit and a Restart) at once never both store
        #: a session, and none is left running that ``connections`` does not hold.
        self._connect_locks: dict[str, asyncio.Lock] = {}
        from skald_mcp.members import MemberConnectors
        from skald_mcp.oauth import OAuth

        from skald_mcp.elicitation import Elicitations

        self.oauth = OAuth(host)
        self.elicitations = Elicitations(host)
        self.members = MemberConnectors(
            host, lambda: self.templates, self.oauth.bearer, self.elicitations.ask, self.may_use_template, self.oauth.credential,
            provider=lambda name: self.oauth.providers.get(name),  # the dict is replaced on load
        )

    # -- state ---------------------------------------------------------------------------

    async def load(self) -> None:
        from skald_mcp.spec import spec_from_json

        servers = await self.host.kv_get("servers") or {}
        self.specs = {name: spec_from_json(data) for name, data in servers.items()}
        access = await self.host.kv_get("access") or {}
        self.access = {name: set(access.get(name) or ()) for name in self.specs}
        self.by_default = set(await self.host.kv_get("defaults") or ()) & set(self.specs)
        pins = await self.host.kv_get("pins") or {}
        self.pins = {name: dict(pins.get(name) or {}) for name in self.specs if name in pins}
        from skald_mcp.spec import template_from_json

        self.templates = {name: template_from_json(data) for name, data in (await self.host.kv_get("catalog") or {}).items()}
        stored = await self.host.kv_get("catalog_access") or {}
        self.template_access = {name: (set(stored[name]) if stored.get(name) is not None else None) for name in self.templates}
        self.template_defaults = set(await self.host.kv_get("catalog_defaults") or ()) & set(self.templates)
        await self.oauth.load()

    async def _save(self) -> None:
        await self.host.kv_set("servers", {name: spec.as_json() for name, spec in self.specs.items()})
        await self.host.kv_set("access", {name: sorted(members) for name, members in self.access.items()})
        await self.host.kv_set("pins", self.pins)
        await self.host.kv_set("defaults", sorted(self.by_default))

    async def member_created(self, member_id: str) -> None:
        """Default access at a member's birth: the connectors marked so, when the member
        received this plugin by default too (their role auto-grants: the host decided,
        and ``member_has_grant`` says so). Additive and best-effort, like the host's own
        seeding; a member created while the plugin is off is granted by hand."""
        if not (self.by_default or self.template_defaults) or not await self.host.member_has_grant(member_id):
            return
        for name in self.by_default:
            self.access.setdefault(name, set()).add(member_id)
        await self._save()
        opened = False
        for name in self.template_defaults:
            access = self.template_access.get(name)
            if access is not None:
                access.add(member_id)
                opened = True
        if opened:
            await self._save_template_access()

    async def start_all(self) -> None:
        """Connect every connector in the background (a slow server must not hold the
        plugin's start past the host's hook timeout), and the own connectors of the
        members who are unlocked already."""
        for spec in self.specs.values():
            # Added and saved before: a server that was working and is not up yet (it
            # starts after the host) is tried again in the background, not left failed
            # until a Restart. One that never connected (its tools are pinned at its
            # first contact, and only then) is started once and reads failed if it fails
            # again: its address or command is what is wrong, not a server that went
            # away (as a member's own connector, ``MemberConnectors.load``).
            await self._connect(spec, wait=None, resume=spec.name in self.pins)
        for member_id in self.host.unlocked_members():
            self.members.unlocked(member_id)

    async def save_catalog(self) -> None:
        await self.host.kv_set("catalog", {name: t.as_json() for name, t in self.templates.items()})

    # -- per-template access ------------------------------------------------------------------

    def may_use_template(self, member_id: str, name: str) -> bool:
        """Whether the member may see, activate and use the template ``name`` (asked
        per call too: a revoked template's tools stop at once). Deny by default."""
        if name not in self.templates:
            return False
        access = self.template_access.get(name, set())
        return access is None or member_id in access

    async def set_template_access(self, name: str, members: set[str] | None, by_default: bool | None = None) -> None:
        """``members``: who may use the template; None: every member the plugin is
        granted to."""
        # Replaced in memory before anything awaits, like a global connector's grants.
        self.template_access[name] = None if members is None else set(members)
        if by_default is not None:
            (self.template_defaults.add if by_default else self.template_defaults.discard)(name)
        self.elicitations.recheck()
        await self._save_template_access()

    async def set_template_member(self, name: str, member_id: str, allowed: bool) -> None:
        """Open or close the template to one member, the others untouched (see
        ``set_member_access``). Open to everyone (None) already includes them; closing
        it to one member of everyone is the caller's refusal to make."""
        access = self.template_access.get(name, set())
        if access is None:
            return
        (access.add if allowed else access.discard)(member_id)
        self.template_access[name] = access
        self.elicitations.recheck()  # their activation's waiting question ends now
        await self._save_template_access()

    async def forget_template(self, name: str) -> None:
        self.template_access.pop(name, None)
        self.template_defaults.discard(name)
        self.elicitations.recheck()
        await self._save_template_access()

    async def _save_template_access(self) -> None:
        await self.host.kv_set("catalog_access", {n: (sorted(a) if a is not None else None) for n, a in self.template_access.items()})
        await self.host.kv_set("catalog_defaults", sorted(self.template_defaults))

    def template_status(self, name: str) -> dict[str, Any]:
        access = self.template_access.get(name, set())
        return {**self.templates[name].as_json(), "access": sorted(access) if access is not None else None, "grant_by_default": name in self.template_defaults}

    async def stop_all(self) -> None:
        await self.members.stop_all()
        connections, self.connections = list(self.connections.values()), {}
        self._offered.clear()
        await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)
        if self._pin_writes:
            await asyncio.gather(*self._pin_writes, return_exceptions=True)

    def _lock(self, name: str) -> asyncio.Lock:
        """The connector's lock (``_connect_locks``), kept for the process's life."""
        return self._connect_locks.setdefault(name, asyncio.Lock())

    async def _connect(self, spec: ServerSpec, wait: float | None = CONNECT_SECONDS, *, resume: bool = False) -> Connection:
        async with self._lock(spec.name):
            connection = await self._open(spec)
        return await self._start(connection, wait, resume=resume)

    async def _open(self, spec: ServerSpec) -> Connection:
        """Under the connector's lock: the session there is stopped, and a new one,
        not started yet, stored in its place."""
        name = spec.name

        async def elicit(ctx: Any, connector: str, params: Any) -> Any:
            # Access is asked before the question, when it changes, and at the answer.
            return await self.elicitations.ask(ctx, connector, params, allowed=lambda member_id: self.may_call(name, member_id))

        await self._disconnect(name)
        connection = Connection(spec, on_change=self._changed, elicit=elicit)
        self.connections[name] = connection
        return connection

    async def _start(self, connection: Connection, wait: float | None = CONNECT_SECONDS, *, resume: bool = False) -> Connection:
        """Start a session ``_open`` stored, after the lock (a slow server must not hold
        the next Restart, edit or removal): one replaced or removed while it started was
        stopped by what replaced it, and is stopped again here, so no session stays
        running that ``connections`` does not hold."""
        await connection.start(wait=wait, resume=resume)
        if self.connections.get(connection.spec.name) is not connection:
            await connection.stop()
            return self.connections.get(connection.spec.name) or connection
        return connection

    # -- admin operations -------------------------------------------------------------------

    async def add(self, spec: ServerSpec, members: set[str], by_default: bool = True) -> Connection:
        if spec.name in self.specs:
            raise KeyError(spec.name)
        self.specs[spec.name] = spec
        self.access[spec.name] = set(members)
        if by_default:
            self.by_default.add(spec.name)
        await self._save()
        return await self._connect(spec)

    async def replace(self, spec: ServerSpec) -> Connection:
        """The admin's edit. The same server (``ServerSpec.identity``: its program and
        arguments, or its address; a rotated key is the same server) keeps its pins, so
        a tool held back stays held back. Another server keeps none and is pinned
        nothing at its first contact (an empty set is not the first add's): each of its
        tools waits for the admin's accept."""
        async with self._lock(spec.name):
            previous = self.specs.get(spec.name)
            await self._disconnect(spec.name)
            self.specs[spec.name] = spec
            if previous is None or previous.identity() != spec.identity():
                self.pins[spec.name] = {}
            await self._save()
            connection = await self._open(spec)
        return await self._start(connection)

    async def restart(self, name: str) -> Connection | None:
        """A new session now. One that was working, or reconnecting by itself, and
        cannot reach its server now goes on trying (``Connection.start``'s ``resume``):
        a Restart pressed during an outage must not leave it failed for good."""
        async with self._lock(name):
            # Under the lock from the stop to the new session's place in ``connections``:
            # a concurrent Restart waits here, then stops this one (stored by then).
            spec = self.specs.get(name)
            if spec is None:
                return None  # removed while it waited
            previous = self.connections.get(name)
            resume = previous is not None and previous.state in ("ready", "reconnecting")
            connection = await self._open(spec)
        return await self._start(connection, resume=resume)

    async def remove(self, name: str) -> None:
        self.specs.pop(name)
        self.access.pop(name, None)
        self.by_default.discard(name)
        self.pins.pop(name, None)
        self._offered.pop(name, None)  # gone from every member's list before anything awaits
        self.elicitations.recheck()
        async with self._lock(name):  # a Restart storing a session meanwhile: stopped here
            if name in self.connections:
                self.connections[name].removed = True  # a call it breaks says so
            await self._disconnect(name)
        await self._save()

    async def _disconnect(self, name: str) -> None:
        self._offered.pop(name, None)
        connection = self.connections.pop(name, None)
        if connection is not None:
            await connection.stop()

    async def set_access(self, name: str, members: set[str]) -> None:
        # DELIBERATELY SYNCHRONOUS: the in-memory set is replaced before anything is
        # awaited, so a revoked member's next round (and any call of theirs) no
        # longer sees the connector — nothing rides a bus.
        self.access[name] = set(members)
        self.elicitations.recheck()  # a revoked member's waiting question ends now
        await self._save()

    async def set_member_access(self, name: str, member_id: str, allowed: bool) -> None:
        """Grant or revoke one member, leaving the others as they are now: a page drawn
        before someone else's change must not undo it by sending the whole list it saw.
        Synchronous like ``set_access``."""
        (self.access.setdefault(name, set()).add if allowed else self.access.setdefault(name, set()).discard)(member_id)
        self.elicitations.recheck()
        await self._save()

    async def accept(self, name: str, shown: Mapping[str, str]) -> None:
        """The admin vetted the withheld tools ``shown`` as their page showed them
        (``accepted_pins``; ``ReviewOutdated`` when one changed since)."""
        connection = self.connections.get(name)
        self.pins[name] = accepted_pins(connection.tools if connection else [], self.pins.get(name, {}), shown)
        self._rebuild(name)
        await self._save()

    # -- what members see -------------------------------------------------------------------

    def _changed(self, connection: Connection) -> None:
        name = connection.spec.name
        if self.connections.get(name) is not connection:
            return  # a connection that was replaced or removed
        if connection.state == "ready" and name not in self.pins:
            # First contact since the admin added it: the tools it has now are the ones
            # the admin added it for. (One re-pointed by an edit has an empty set:
            # ``replace``.)
            self.pins[name] = {t.name: definition_hash(t) for t in connection.tools}
            task = asyncio.ensure_future(self.host.kv_set("pins", self.pins))
            self._pin_writes.add(task)
            task.add_done_callback(self._pin_writes.discard)
        self._rebuild(name)

    def _rebuild(self, name: str) -> None:
        connection = self.connections.get(name)
        # Reconnecting by itself: its tools stay offered, so a call is told it is
        # reconnecting (``Connection.call``), not that there is no such tool.
        if connection is None or connection.state not in ("ready", "reconnecting"):
            self._offered.pop(name, None)
            return
        pins = self.pins.get(name, {})
        names = tool_names(name, [t.name for t in connection.tools])
        self._offered[name] = [self._tool(name, t, names[t.name]) for t in offered_tools(connection.tools, pins, login_contract=True)]

    def pending(self, name: str) -> list[str]:
        """Tools the server has that are withheld: new, or changed since they were pinned."""
        connection = self.connections.get(name)
        pins = self.pins.get(name, {})
        return [t.name for t in (connection.tools if connection else ()) if pins.get(t.name) != definition_hash(t)]

    def member_tools(self, member_id: str) -> list[Tool]:
        """One view of two sources: the global connectors granted to the member, and
        the member's own. One name, one connector: a global connector named like one
        of the member's own (a clash made while their file was closed, or by an earlier
        version) is not offered to them, so their calls never go to the other server;
        their page says why (``shadowed``), the log says it once."""
        out: list[Tool] = []
        own = self.members.records.get(member_id, {})
        for name, tools in self._offered.items():
            if member_id in self.access.get(name, ()):
                if name in own:
                    self._log_clash(name, member_id)
                    continue
                out.extend(tools)
        out.extend(self.members.member_tools(member_id))
        return out

    def may_call(self, server: str, member_id: str) -> bool:
        """Whether the member may use the global connector ``server`` now: granted, the
        connector there, and not hidden by one of their own (``shadowed``)."""
        return member_id in self.access.get(server, ()) and server in self.specs and not self.shadowed(member_id, server)

    def shadowed(self, member_id: str, name: str) -> bool:
        """Whether the global connector ``name`` is hidden from the member by one of
        their own connectors of the same name (``member_tools``)."""
        return name in self.members.records.get(member_id, {})

    def _log_clash(self, name: str, member_id: str) -> None:
        if (name, member_id) not in self._clashes_logged:
            self._clashes_logged.add((name, member_id))
            # The connector by the admin's name for it; the member by neither name nor id.
            log.warning("connector %s: not offered to a member who has a connector of their own with the same name (theirs is used)", name)

    def _tool(self, server: str, mcp_tool: Any, name: str) -> Tool:
        # Checked again at call time: a grant revoked after the round offered the tool,
        # the connector removed, or the member's own of that name, refuses the call.
        return make_tool(
            server,
            mcp_tool,
            lambda member_id: self.may_call(server, member_id),
            lambda: self.connections.get(server),
            name,
        )

    def status(self, name: str) -> dict[str, Any]:
        connection = self.connections.get(name)
        offered = {t.name for t in self._offered.get(name, ())}
        tools = connection.tools if connection else []
        names = tool_names(name, [t.name for t in tools])
        return {
            **self.specs[name].public(),
            "state": connection.state if connection else "stopped",
            "error": connection.error if connection else None,
            "cause": connection.cause if connection else None,
            "tools": [
                {"name": t.name, "exposed_as": names[t.name], "description": t.description or "", "offered": names[t.name] in offered}
                for t in tools
            ],
            "pending": self.pending(name),
            "pending_tools": withheld(connection.tools if connection else [], self.pins.get(name, {})),
            "access": sorted(self.access.get(name, ())),
            "grant_by_default": name in self.by_default,
            "discarded_notifications": connection.discarded if connection else 0,
        }
