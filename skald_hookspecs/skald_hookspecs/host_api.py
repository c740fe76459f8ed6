"""The narrow facade a plugin receives at start.

Everything a plugin may do to the host goes through here; a plugin never gets a
database connection or another plugin's object. Methods are async because the host
serves every database from a worker thread.
"""

from __future__ import annotations

from typing import Any, AsyncIterable, Awaitable, Callable, Mapping, Protocol, Sequence, runtime_checkable

from skald_hookspecs.channels import Delivery

from skald_hookspecs.events import SystemEvent, UserEvent


@runtime_checkable
class HostApi(Protocol):
    plugin_id: str

    async def get_config(self) -> Mapping[str, Any]:
        """This plugin's instance config (secrets included: the plugin needs them): the
        stored values over the ``config_schema`` fields' defaults, so a field the admin
        never set reads as its ``default``. Every value satisfies the schema of the
        version running: one stored under an older version that this schema refuses
        (or of a field it has no more) reads as the default until the admin saves."""

    async def get_user_config(self, member_id: str) -> Mapping[str, Any]:
        """This plugin's per-member config for one member, over the ``user_config_schema``
        fields' defaults; a schema field's stored value the current schema refuses reads
        as the default. Keys outside the schema (stored with ``set_user_config``) are
        returned as stored."""

    async def get_settings(self, set_id: str) -> Mapping[str, Any]:
        """The values of a settings set this plugin registered (``register_config_sets``),
        over its fields' defaults, secrets included, each valid for the set's current
        fields (a stored value they refuse reads as the default). ``KeyError`` for a set
        id this plugin did not register. Since 1.2."""

    async def set_user_config(self, member_id: str, values: Mapping[str, Any]) -> None:
        """Store this plugin's per-member config (admin-readable: never secrets), replacing
        what was stored. A value of a ``user_config_schema`` field is checked as a
        member's save is: a refused one raises ``ValueError`` naming the field, and
        nothing is stored. Keys outside the schema are stored as given."""

    async def kv_get(self, key: str) -> Any:
        """A value from this plugin's own small key-value store, or None."""

    async def kv_set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value in this plugin's key-value store (in the
        instance registry, the value sealed with the instance key like the plugin's
        secret settings, the key in clear: a plugin may keep its own keys here, never a
        member's private words, in a value or a key: those go through
        ``seal_for_member`` or ``member_secret_set``). ``None``
        removes the key (since 1.10; before, a JSON null was stored under it).
        A ``kv_get`` then a ``kv_set`` of what it read (a counter) loses what another
        call wrote in between: change a value with ``kv_update``."""

    async def kv_update(self, key: str, update: Callable[[Any], Any]) -> Any:
        """Change one value of this plugin's key-value store atomically and return the
        new value. ``update`` is a plain function (not async) that gets the current
        value (``None`` when the key is missing) and returns the new one (``None``
        removes the key): ``await host.kv_update("count", lambda n: (n or 0) + 1)``.
        No other ``kv_update`` (nor ``kv_set``) of this plugin on the same key in this
        host lands between its read and its write, so concurrent updates are never
        lost. ``update`` runs on the server's event loop: keep it quick, never block in
        it. When it raises (or returns something that is not JSON-serialisable), the
        value stays as it was and the exception reaches the caller. Since 1.11."""

    async def kv_keys(self, prefix: str = "") -> list[str]:
        """The keys of this plugin's key-value store that start with ``prefix``
        (all of them by default), sorted; never another plugin's. Since 1.11."""

    async def member_has_grant(self, member_id: str) -> bool:
        """Whether the member may use this plugin right now (re-read on every call).
        False for a member who does not exist (deleted)."""

    async def member_may(self, member_id: str, capability: str) -> bool:
        """Whether the member's role holds ``capability`` right now (re-read on every
        call; an admin holds every one), as ``Caller.may`` answers within a request of
        theirs, for a plugin outside one (a hook, a task). False for a member who does
        not exist or is deactivated, and for a name no role can hold. Since 1.15."""

    def subscribe_system(self, handler: Callable[[SystemEvent], Awaitable[None]]) -> Callable[[], None]:
        """Receive system-bus events until the plugin stops (best-effort delivery).
        Returns a handle: call it (or its ``close()``) to unsubscribe (since 1.17;
        before, None). A handler's exception is recorded on the plugin's page
        (``failures``, its message withheld, repeats folded), as a hook's is."""

    def subscribe_member(self, member_id: str, handler: Callable[[UserEvent], Awaitable[None]]) -> Callable[[], None]:
        """Receive one member's events (``UserEvent``: kind ``chat`` with the real step
        in ``data["type"]``, such as ``user_message`` with the member's words; see
        docs/plugins.md) until the member locks, the handle is closed, or the plugin
        stops. Since 1.17: each event is delivered only while this plugin is enabled
        and the member may use it (``member_has_grant``, asked at delivery: a revoked
        grant stops the events at once; ``sessions_revoked`` and ``access_changed``,
        which carry nothing of the member's, always reach it, so a plugin can drop what it
        holds for them); the subscription ends when the member locks
        (subscribe again in ``member_unlocked``, which is called for every member,
        granted or not); the returned handle unsubscribes when called (or its
        ``close()``), and no event reaches the handler after that. A handler's
        exception is recorded on the plugin's page (``failures``, its message
        withheld, repeats folded), never logged with its text. Before 1.17 it
        returned None and delivered until the plugin stopped, whatever the grant."""

    def translate(self, key: str, locale: str | None = None, **values: Any) -> str:
        """An i18n string of the merged bundles in ``locale`` (None: English), English
        when the locale lacks it. ``key`` is the full key, ``"<plugin id>.<key>"`` (any
        plugin's, or the host's ``"core.<key>"``), taken as it is: unlike
        ``SystemAgentContext.translate``, which puts its own plugin's ``"<plugin id>."``
        before a key that lacks it and reads the member's language. A key no bundle has
        comes back as the key itself. ``values`` fill the ``{name}`` placeholders; when
        one of them has no value (or none are given) the text comes back unformatted,
        every ``{name}`` left in it."""

    async def send_message(
        self,
        member_id: str,
        text: str,
        *,
        attachments: Sequence[str] = (),
        idempotency_key: str | None = None,
    ) -> Delivery:
        """Deliver a member's message into their current conversation whose source is
        this plugin (one is created when there is none). ``attachments`` are agent
        paths returned by ``save_upload``. The member's grant for this plugin is
        re-checked first (``refused`` without it, and for an unknown or inactive member
        or a malformed message; ``reason`` says which); a locked member's message is
        sealed and delivered at their next unlock (``sealed``). ``idempotency_key``
        (1-200 characters, scoped to this plugin, e.g. the update id) makes a replay
        store nothing twice, sealed or not; a replay is answered as a first delivery
        would be now (``accepted``, or ``sealed`` while the member is locked).
        Never raises for the member's state. Replies reach the plugin's
        channel through ``Channel.deliver``."""

    async def new_conversation(self, member_id: str) -> str:
        """Start a fresh conversation for this source; later messages go there.
        Raises ``MemberLocked`` for a locked member, ``ChannelRequestError`` without
        the grant (as do ``stop_turn`` and ``resolve_approval``)."""

    async def stop_turn(self, member_id: str) -> bool:
        """Stop the running turn of the member's current conversation of this source;
        False when none runs."""

    async def agent_tasks(self, member_id: str) -> Sequence[Mapping[str, Any]]:
        """Since 1.3. The sub-agent runs of the member's current conversation of this
        source that are still going or failed in the last day (a cancelled one: in the
        last minute, as the chat's task strip), newest first: each
        ``{"id", "agent_id", "title", "status", "task", "created_at"}`` (``task`` cut to
        200 characters; ``title``, since 1.15: the helper's title in the member's
        language, as the web shows it, else its id). Raises like ``stop_turn``."""

    async def resolve_approval(self, member_id: str, approval_id: str, approve: bool) -> Mapping[str, Any]:
        """Approve or deny one pending card of a conversation of this source (the
        ``approval_id`` of an ``approval`` event); returns ``{"approval_id",
        "decision"}``, and ``"reason": "withdrawn"`` with ``"decision": "denied"`` when
        the member approved a tool they may no longer use (it does not run; since 1.17). An
        unknown, foreign or already answered card raises ``ChannelRequestError``."""

    async def member_questions(self, member_id: str) -> list[Mapping[str, Any]]:
        """The questions waiting for the member (``TurnApi.ask``) that this plugin may
        answer (see ``answer_question``): ``{"question_id", "conversation_id",
        "message", "fields"}``, for a page of the plugin's own. ``MemberLocked`` for a
        locked member. Since 1.3."""

    async def answer_question(self, member_id: str, question_id: str, action: str, content: Mapping[str, Any] | None = None) -> None:
        """Answer a question a running tool asks the member (``TurnApi.ask``; a channel
        receives it as a ``question`` event): ``action`` ``"accept"`` with ``content``
        (field name -> value, checked against the question's fields) or ``"decline"``.
        Allowed for a question of a conversation of this source (a channel) or one this
        plugin's own tool asked (its own page). The answer goes to the waiting tool only,
        never stored or logged. Raises ``ChannelRequestError`` for a bad answer (its
        message says what was wrong; the question keeps waiting) and for an unknown,
        foreign or settled question, ``MemberLocked`` for a locked member. Since 1.3."""

    async def save_upload(
        self, member_id: str, filename: str, data: bytes | AsyncIterable[bytes], *, conversation_id: str | None = None
    ) -> Mapping[str, Any]:
        """Save a file the member sent through the host's one upload seam (size limit,
        collision-free name, sniffed type). Returns ``{"path", "mime", "size"}`` where
        ``path`` is the agent path to pass as an attachment. ``conversation_id`` must be
        one of this plugin's conversations of the member (else ``ChannelRequestError``
        "no such conversation", as for any other id); without it the file goes to the
        current one. Works for a locked member too, without ``conversation_id`` (the
        file waits under ``uploads/<plugin id>/``); a refused file raises
        ``ChannelRequestError``. Since 1.12 ``data`` may also be an async iterable of
        ``bytes`` chunks, such as a file route's ``request.body``: the host writes each
        chunk to disk as it comes and never holds the whole file, so a route hands over
        an upload as large as ``files.upload_max_bytes`` without reading it into memory
        first. The host pulls the chunks only after the checks above passed. A file is
        kept only once all of it arrived: past the upload limit (or the member's disk
        limit) it raises ``ChannelRequestError`` as for bytes; an exception the iterable
        raises (a body cut off, or a file route's body read past the upload limit)
        reaches the caller as it is; either way nothing of the file is left. Let a
        route's body-read exception propagate out of the view: the host answers it with
        its uploads' 413 ``upload_too_large`` (see ``accepts``). Since 1.15 a file over a
        limit is refused with its ``code`` and ``values``: ``upload_too_large`` with
        ``limit`` (the upload cap), ``home_full`` with ``left`` (what the member's disk
        limit still takes), both whole bytes, for the plugin to word from the core
        bundle's ``error.<code>`` or its own strings, in its reader's number format."""

    async def member_locale(self, member_id: str) -> str:
        """The member's UI locale (``en``, ``de``, ...), for strings the plugin sends."""

    async def member_name(self, member_id: str) -> Mapping[str, str]:
        """``{"username", "display_name"}`` of a member who may use this plugin, to name
        the account in what the plugin says where the member may not be the one
        reading (a channel confirming which account a chat was just linked to: someone
        talked into handing over a pairing code sees it went to another account). The
        display name is the username when the member set none. Raises
        ``ChannelRequestError`` for an unknown member or one without the plugin's
        grant. Since 1.14."""

    # -- this source's conversations, read back (since 1.3) --------------------------------
    #
    # A channel with its own screen (the mobile app) shows the member what they said
    # there. Each raises ``MemberLocked`` while the member's file is closed and
    # ``ChannelRequestError`` without this plugin's grant; only conversations whose
    # source is this plugin are reachable (another's id reads as "no such
    # conversation").

    async def conversations(self, member_id: str, *, limit: int = 50) -> list[Mapping[str, Any]]:
        """This source's conversations of the member, newest first: ``{"id", "title",
        "created_at", "updated_at", "running", "current"}`` (``current``: the one
        ``send_message`` goes to). ``limit`` 1-200. Since 1.3."""

    async def conversation_messages(self, member_id: str, conversation_id: str) -> Mapping[str, Any]:
        """One conversation of this source: ``{"conversation", "messages": [{"id",
        "role", "content", "status", "created_at", "reason"}], "approvals": [{"approval_id",
        "tool", "arguments", "expires_at"}], "running"}``; messages of the top-level
        agent only, oldest first. Since 1.3. ``reason`` (since 1.10): ``{"code",
        "values"}`` for a message the host wrote for a cause it words in every language
        (``stopped_unanswered``, ``answer_resumed``, ...; ``content`` is its English
        text), so a screen shows it in its reader's language; ``None`` otherwise.
        Since 1.16 each message also has ``idempotency_key`` (a member's message sent
        through this channel: the key it sent it with, else None), ``attachments`` (a member's files:
        ``[{"name", "mime", "size"}]``) and ``tool_calls`` (an answer's calls: ``[{"id",
        "tool", "status", "approval"}]``, ``approval`` the member's decision on it —
        ``approved``, ``denied``, ``expired``, ``used`` — or None when none was asked)."""

    async def use_conversation(self, member_id: str, conversation_id: str) -> None:
        """Make an existing conversation of this source the one ``send_message`` (and
        ``stop_turn``) act on from now. Since 1.3."""

    # -- the member's projects, read-only (since 1.3) ---------------------------------------
    #
    # What the member's own project pages show, for a channel with a screen. Each
    # raises ``MemberLocked`` while the member is locked (as the web needs a login),
    # ``ChannelRequestError`` without this plugin's grant and for a project the member
    # is not in ("no such project", whether it exists or not) or a path that leaves it.

    async def member_projects(self, member_id: str) -> list[Mapping[str, Any]]:
        """The projects the member belongs to: ``{"id", "title", "description",
        "can_write", "created_at"}``. Since 1.3."""

    async def project_files(self, member_id: str, project_id: str, path: str = "") -> Mapping[str, Any]:
        """One folder of a project (``path`` relative to the project, ``""`` its top):
        ``{"path", "entries": [{"name", "path", "kind", "is_dir", "size",
        "modified_at"}]}``, folders first; links are listed, never followed. Since 1.3."""

    async def read_project_file(self, member_id: str, project_id: str, path: str) -> Mapping[str, Any]:
        """One file of a project: ``{"name", "size", "data"}`` (``data``: the bytes),
        up to the host's viewing limit. Since 1.3."""

    # -- device tokens (since 1.3) -----------------------------------------------------------
    #
    # A plugin that pairs devices (``manages_own_access``) hands each one a durable
    # bearer token. The host keeps only its hash, checks it in its one authentication
    # path, accepts it on this plugin's own routes only (``current_caller().device_id``
    # names the device) and deletes every token of a member whose sessions it revokes
    # (password change, admin reset, deactivation, deletion). A device token unlocks
    # nothing: a locked member's device gets ``MemberLocked`` from the calls above.

    async def issue_device_token(self, member_id: str, label: Mapping[str, Any]) -> Mapping[str, str]:
        """A new token for one of the member's devices: ``{"id", "token"}``. Show the
        token to the device once; it is never readable again. ``label`` (JSON of at
        most 2 KiB, e.g. name and platform) is metadata kept beside the hash:
        admin-readable, never secrets. Raises ``ChannelRequestError`` for an unknown
        or inactive member. Since 1.3."""

    async def device_tokens(self, member_id: str) -> list[Mapping[str, Any]]:
        """The member's live tokens of this plugin: ``{"id", "label", "created_at",
        "last_seen_at", "used"}`` (``last_seen_at`` to the minute, ``created_at`` until
        first used), oldest first. ``used`` (since 1.5) is False for a token no request
        has carried yet: a pairing whose answer never reached the device (a crash, a
        dropped connection) leaves one. Since 1.3."""

    async def revoke_device_token(self, member_id: str, token_id: str) -> bool:
        """Delete one of the member's tokens (unlink a device): the device's next
        request is refused. False when there was no such token. Since 1.3."""

    # -- the credential of the request being served (since 1.12) ------------------------------

    def watch_caller(self, on_end: Callable[[str], None]) -> Callable[[], None]:
        """Learn when the credential the request being served was authenticated with
        ends, for a response that outlives the request's check (a stream of events, a
        long poll): the host checks a credential once per request, so a long response
        must end itself, as the host's own WebSocket does. Call it in a handler of this
        plugin's routes (``/api/plugin/<id>/…``, not ``@public``: where
        ``current_caller()`` is set). ``on_end(reason)`` is then called once, plain (not
        awaited) on the server's event loop, when the caller's browser session ends (a
        logout, the member's password change from another session, the admin's "end
        sessions" or reset, deactivation, deletion, expiry) or, for a request made with a
        device token (``current_caller().device_id``), when that token is revoked (by
        this plugin, or with the member's sessions). ``reason`` is a short English word
        for the log (``"logout"``, ``"password changed"``, ``"device revoked"``, ...).
        Revocation is pushed, not polled: a session's listeners are called before the
        revoking request responds. If the credential already ended, ``on_end`` is called
        before this returns (a session) or soon after (a device token). Keep ``on_end``
        short and non-blocking (set an ``asyncio.Event``, put on a queue); an exception
        it raises is logged and ignored. Returns a plain function that stops watching:
        call it when the response ends, or the watch is kept until the credential
        ends. ``RuntimeError`` outside such a handler. Since 1.12."""

    async def seal_for_member(self, member_id: str, data: bytes) -> str:
        """Since 1.2. ``data`` sealed to the member's public inbox key (as the host seals
        a locked member's inbound messages): a printable string a plugin may keep in its
        key-value store, which lives in the admin-readable registry, without keeping the
        member's words there in clear. Works whether the member is locked or not; only
        this plugin can open it, for this member. Raises ``ChannelRequestError`` for an
        unknown member, or for one without an inbox key: a member created by a version
        before 1.2 who has not logged in since (members get theirs when created)."""

    async def open_for_member(self, member_id: str, sealed: str) -> bytes:
        """Since 1.2. What ``seal_for_member`` sealed, opened with the member's private
        key, which exists only while they are unlocked: raises ``MemberLocked`` while
        they are locked (try again after they log in), ``ChannelRequestError`` for a
        box that does not open (made by another plugin, for another member, altered, or
        sealed to a key an admin reset replaced)."""
    # -- per-member data in the member's own encrypted file (since 1.2) ---------------------
    #
    # Each raises ``MemberLocked`` while the member's file is closed (they have not
    # logged in since the host started), and for a member who no longer exists (deleted:
    # ``code`` ``"member_not_found"``, its message says so). The rows are this plugin's own: another plugin
    # cannot read them, and neither ``system.db`` nor a log ever holds them.

    async def member_secret_get(self, member_id: str, name: str) -> str | None:
        """A secret this plugin stored for the member (a token, a connector's settings),
        or None. Since 1.2."""

    async def member_secret_set(self, member_id: str, name: str, value: str | None) -> None:
        """Store (or with ``None`` delete) a secret for the member in their encrypted
        file. ``name``: 1-200 characters; ``value``: at most 64 KiB. Since 1.2."""

    async def member_secret_names(self, member_id: str, prefix: str = "") -> list[str]:
        """The names of this plugin's secrets for the member (starting with
        ``prefix``), sorted. Since 1.2."""

    async def append_member_event(self, member_id: str, kind: str, data: Mapping[str, Any]) -> int:
        """Append an event (``kind`` 1-100 characters, ``data`` JSON of at most 64 KiB)
        to the member's file, for the member's own agents to read later (an MCP
        server's notification, say); returns its id. Since 1.2."""

    async def member_events(self, member_id: str, *, after: int = 0, limit: int = 100) -> list[Mapping[str, Any]]:
        """This plugin's events of the member with an id above ``after``, oldest first:
        ``{"id", "kind", "data", "created_at"}``. Since 1.2."""

    async def prune_member_events(
        self,
        member_id: str,
        *,
        kind: str | None = None,
        through_id: int | None = None,
        before: str | None = None,
        keep_last: int | None = None,
    ) -> int:
        """Delete this plugin's events of the member (never another plugin's), of
        ``kind`` only when given, that match any of: an id up to ``through_id``
        (what every reader has acknowledged), ``created_at`` before ``before`` (an
        ISO-8601 UTC time such as ``2026-01-31T00:00:00Z``: an age bound), or not among
        the newest ``keep_last`` (a count bound). At least one of the three is
        required. One transaction; returns how many were deleted. Raises
        ``MemberLocked`` while the member's file is closed. Since 1.3."""

    async def notify_member(self, member_id: str, text: str) -> bool:
        """Tell a member something now, from background work: on the web (a notice in
        the open page) and on their home source when that is a channel (Telegram,
        mobile). ``text`` at most 4000 characters (longer is cut there), in the member's language (see
        ``member_locale``). Returns False for an unknown or inactive member. Needs this
        plugin's grant unless it manages its own access. Since 1.3."""

    def unlocked_members(self) -> list[str]:
        """The members whose private files are open now (see ``member_unlocked``).
        Since 1.2."""

    async def sandbox_spawn(
        self, member_id: str, argv: Sequence[str], *, workdir: str | None = None, env: Mapping[str, str] | None = None
    ) -> Any:
        """Start ``argv`` (a program and its arguments, never through a shell) in the
        member's sandbox, never on the bare host, with its standard input and output
        connected: a ``SandboxProcess`` that lives until it exits or is killed, or the
        member's sandbox is removed. ``workdir`` as for ``TurnApi.run_command``; ``env``
        is added to the sandbox's environment (credentials go here, never in a file).
        Raises ``SandboxUnavailable`` (no backend, or one that cannot stream) and
        ``ValueError`` for bad arguments. The caller kills what it started. The host
        kills it too when the member loses a folder it could reach or may only read it
        now (removed from a project or shared folder, made read-only, the folder
        deleted; since 1.12): its output ends, and a caller that still needs it spawns
        it again, with the member's folders as they are then. Since 1.2."""
    async def synthesize_speech(self, member_id: str, text: str, *, format: str = "ogg") -> bytes:
        """Speak ``text`` for one member with the voice the host picks for them (their
        own choice when it speaks the text's language, else the instance default for
        that language) through the engines of ``register_tts_engines``; the language is
        the one the text is written in, told by the host (since 1.12; the member's own
        when it cannot be told). Returns the whole audio, ``format`` ``"ogg"``
        (OGG/Opus mono: a Telegram voice note) or ``"wav"``. Uses and fills the
        member's cache when their file is open. Raises ``ChannelRequestError`` without
        this plugin's grant, for an unknown member or a text over the length limit (the
        host's ``tts.max_chars``, counting what is read aloud: code blocks, links and
        Markdown marks are not; its message says so in the member's language, and since
        1.16 its ``values["limit"]`` gives the limit: pass the whole text first, never cut
        it to a length of your own; a channel that would rather read the beginning than
        nothing may cut it to that limit and ask again, saying so), and ``TtsUnavailable`` when
        no enabled engine speaks the language (its message says so) or none could speak
        (one that fails on the first sentence is passed over for the next). Since 1.2."""

    # -- the plugin's own health, after startup (since 1.12) ---------------------------------

    def set_degraded(self, reason: str | None, *, key: str | None = None, values: Mapping[str, Any] | None = None) -> None:
        """Tell the admin that the plugin runs but something keeps it from doing its job
        right now (a service it cannot reach and keeps retrying, a model that failed to
        load); ``None`` once it works again. Its catalog card then reads "Running ·
        <reason>" with an amber dot (not the red of a failed start), so does its page in
        the catalog, and ``GET /api/admin/status`` lists it among its warnings. Nothing
        else changes: the plugin stays started and healthy, and its tools, channels and
        system agents go on. As for ``NotReady``: ``reason`` (at most 1000 characters,
        longer is cut) is in English, what the log says (once per change, never
        ``values``: keep secrets out of the reason) and what a reader sees when the
        plugin's bundle lacks ``key``; ``key`` is a string of the plugin's own
        ``I18nBundle`` (``"error.unreachable"`` for ``<bundle>.error.unreachable``),
        shown in the reader's language with ``values`` filling its ``{placeholders}``
        (a key no bundle has is listed among the missing translations). Plain (not
        async) and cheap: call it from any task of the plugin on the server's event
        loop, as often as it likes (the same reason again changes nothing). Kept in
        memory only: cleared when the plugin stops, is disabled or starts again; a call
        after the plugin stopped (from a task it left running) is ignored. What the
        admin must fix before the plugin can run at all is a ``NotReady`` from
        ``startup``. ``ValueError`` for an empty ``reason`` or ``key``. Since 1.12."""
