"""The plugin's HTTP routes, mounted at ``/api/plugin/mobile-connector/`` behind the host's
gate (a session or one of this plugin's device tokens; 404 while the plugin is disabled).

- The member's page (browser session only): ``POST /pairing`` makes a code and its QR
  code, ``GET /devices`` and ``DELETE /devices/<id>`` list and unlink paired phones.
- The app shell (public: it holds nothing of anyone): ``/app/…`` and ``POST /pair``,
  which trades a code for a device token once.
- The mobile API (a device token, or a session): conversations, send, the event
  stream, approve, stop, upload, the outbox and the push subscription.

A locked member's phone gets 423 with ``code: "locked"`` and words that say so, except
when it sends a message: that is sealed for their next login (202, ``status: "sealed"``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from importlib.resources import files
from typing import Any, AsyncIterator

from quart import Blueprint, Response, request

from skald_hookspecs import ChannelRequestError, HostApi, MemberLocked, TtsUnavailable, accepts, current_caller, public, returns
from skald_hookspecs.channels import LOCK_LOGGED_OUT, LOCK_RESTARTED
from skald_mobile_connector import PLUGIN_ID, running
from skald_mobile_connector.service import DRAFT_KEY_MAX, MAX_STREAMS_PER_MEMBER, PairingError, dumps
from skald_mobile_connector.service import unfinished_pairing
from skald_mobile_connector.strings import APP_KEYS, PAGE_KEYS, STRINGS

#: How often an idle stream re-checks that its device is still paired (a revocation by
#: the host, such as a password change, reaches an open stream within this).
STREAM_HEARTBEAT_SECONDS = 5.0
MAX_TEXT = 100_000
#: The host's refusals of a file over a limit (contract 1.15: with their sizes).
SIZE_REFUSALS = ("upload_too_large", "home_full")
#: The locked member's words by the host's reason; an older host names none ("locked").
log = logging.getLogger(__name__)
LOCK_TEXT = {LOCK_RESTARTED: "locked_restarted", LOCK_LOGGED_OUT: "locked_logged_out"}
APP_FILES = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "app.css": "text/css",
    "sw.js": "text/javascript",
    "manifest.webmanifest": "application/manifest+json",
    "icon.svg": "image/svg+xml",
}

TEXT = {"type": "string"}
#: ``values`` fill a coded refusal's words (``home_full``: ``left``, ``upload_too_large``:
#: ``limit``, whole bytes), for the app to say it in the member's language and number format.
ERROR = {"type": "object", "properties": {"error": TEXT, "code": TEXT, "lock_reason": TEXT, "values": {"type": "object"}}, "required": ["error"]}
DEVICE = {
    "type": "object",
    "properties": {"id": TEXT, "name": TEXT, "platform": TEXT, "created_at": TEXT, "last_seen_at": TEXT, "current": {"type": "boolean"}},
}
CONVERSATION = {
    "type": "object",
    "properties": {"id": TEXT, "title": TEXT, "created_at": TEXT, "updated_at": TEXT, "running": {"type": "boolean"}, "current": {"type": "boolean"}},
}
#: ``reason``: why the host wrote this message (a Stop left it unanswered, an answer cut
#: off was asked for again), for the app to word in the member's language; null for others.
REASON = {"type": ["object", "null"], "properties": {"code": TEXT, "values": {"type": "object"}}}
#: ``attachments``: a member's files, by name; ``tool_calls``: an answer's calls with
#: their outcome and the member's decision (``approval``: null when none was asked).
ATTACHMENT = {"type": "object", "properties": {"name": TEXT, "mime": {"type": ["string", "null"]}, "size": {"type": ["integer", "null"]}}}
TOOL_CALL = {"type": "object", "properties": {"id": TEXT, "tool": TEXT, "status": TEXT, "approval": {"type": ["string", "null"]}}}
MESSAGE = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"}, "role": TEXT, "content": TEXT, "status": TEXT, "created_at": TEXT, "reason": REASON,
        "idempotency_key": {"type": ["string", "null"]},
        "attachments": {"type": "array", "items": ATTACHMENT}, "tool_calls": {"type": "array", "items": TOOL_CALL},
    },
}
PROJECT = {"type": "object", "properties": {"id": TEXT, "title": TEXT, "description": TEXT, "can_write": {"type": "boolean"}, "created_at": TEXT}}
ENTRY = {"type": "object", "properties": {"name": TEXT, "path": TEXT, "kind": TEXT, "is_dir": {"type": "boolean"}, "size": {"type": ["integer", "null"]}, "modified_at": TEXT}}
APPROVAL = {"type": "object", "properties": {"approval_id": TEXT, "tool": TEXT, "arguments": {}, "expires_at": TEXT}}
#: Every event of ``GET /stream`` and of the outbox (``kind`` says which).
EVENT = {
    "type": "object",
    "description": (
        "One event. kind: hello (the stream opened, or the member's data was unlocked or locked since: cursor, locked), "
        "typing (a turn runs), member_message (the member's message was stored, from this phone or elsewhere: text, "
        "data.message_id, data.idempotency_key, data.attachments), partial (the answer so far, whole text of the round; data.message_id names the round, a "
        "new one is a new answer after tool calls), answer (the final text), stopped (the member stopped the turn: text "
        "is what the answer had said; no answer follows), approval (a tool call waits: approval_id, tool, arguments), "
        "approval_resolved (data.status), conversation_changed (one of this app's conversations was titled or renamed: "
        "data.title), notification (background work: text), error (the turn failed: text), "
        "closed (the stream ends: the device was unlinked or the plugin stopped). answer, approval and notification "
        "also wait in the outbox: cursor is their place there."
    ),
    "properties": {
        "kind": {"enum": ["hello", "typing", "member_message", "partial", "answer", "stopped", "approval", "approval_resolved", "conversation_changed", "notification", "error", "closed"]},
        "conversation_id": TEXT,
        "text": TEXT,
        "approval_id": TEXT,
        "tool": TEXT,
        "arguments": {"type": "object"},
        "data": {"type": "object"},
        "cursor": {"type": "integer"},
        "locked": {"type": "boolean"},
        "created_at": TEXT,
    },
    "required": ["kind"],
}


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` names this machine only (127.0.0.0/8, ::1, localhost): an
    address a phone cannot reach."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


def build_blueprint(host: HostApi) -> Blueprint:
    blueprint = Blueprint(PLUGIN_ID, __name__)
    package = files("skald_mobile_connector")
    page_script = package.joinpath("page.js").read_text(encoding="utf-8")

    def t(key: str, locale: str | None = None, **values: Any) -> str:
        return host.translate(f"{PLUGIN_ID}.{key}", locale, **values)

    def caller_locale() -> str | None:
        caller = current_caller()
        return caller.locale if caller else None

    def fail(key: str, status: int, **extra: Any) -> tuple[dict[str, Any], int]:
        return {"error": t(key, caller_locale(), **extra), "code": key.removeprefix("err_"), **extra}, status

    def locked_answer(lock_reason: str) -> tuple[dict[str, Any], int]:
        """423 with words for why the data is locked (spec 1.2's reason), as the
        Telegram bot says it: "the server restarted or you logged out" left the member
        to guess which, and so what to do."""
        return {"error": t(LOCK_TEXT.get(lock_reason, "locked"), caller_locale()), "code": "locked", "lock_reason": lock_reason}, 423

    def service() -> Any:
        return running.service

    def member_id() -> str:
        caller = current_caller()
        assert caller is not None  # every route below but the public ones has passed the gate
        return caller.id

    async def guarded(work: Any) -> Any:
        """The member's state as answers: locked → 423 in plain words, a refusal → 4xx."""
        if service() is None:
            return fail("err_not_running", 503)
        try:
            return await work
        except MemberLocked as exc:
            return locked_answer(exc.lock_reason)
        except ChannelRequestError as exc:
            message = str(exc)
            if exc.code in SIZE_REFUSALS:  # a file over a limit: the kind and its size, not the host's English
                return {"error": message, "code": exc.code, "values": dict(exc.values)}, 413
            if message.startswith("no such"):
                return {"error": message, "code": "not_found"}, 404
            # A refusal of access (the plugin, or a role that may not chat): 403, as the
            # host's own routes answer; it said 400 "bad_request" for the role (a sweep).
            if exc.code == "forbidden" or "may not use" in message:
                return {"error": message, "code": "refused"}, 403
            if "already" in message:
                return {"error": message, "code": "conflict"}, 409
            return {"error": message, "code": "bad_request"}, 400

    async def unlocked(work: Any) -> Any:
        """``work`` once the member's data is open: ``MemberLocked`` (423) first while it
        is closed, for routes whose host call would work regardless (an upload waits
        under the plugin's folder, speech is made without the member's cache) though
        the README promises 423 on every route but sending a message."""
        await host.conversations(member_id(), limit=1)  # raises MemberLocked with its lock_reason
        return await work()

    async def body() -> dict[str, Any]:
        data = await request.get_json()
        return data if isinstance(data, dict) else {}

    # -- the member's page in the browser ------------------------------------------------------

    @blueprint.get("/page.js")
    async def page_js() -> Response:
        """The member's pairing page (an ES module the web shell mounts)."""
        return Response(page_script, mimetype="text/javascript")

    @blueprint.get("/page/strings")
    @returns(_obj({"strings": {"type": "object"}}))
    async def page_strings() -> Any:
        """The pairing page's words in the caller's language."""
        return {"strings": {key: t(key, caller_locale()) for key in PAGE_KEYS}}

    @blueprint.post("/pairing")
    @returns(_obj({"code": TEXT, "expires_in": {"type": "integer"}, "app_url": TEXT, "pair_url": TEXT, "qr_svg": TEXT, "loopback": {"type": "boolean"}}), 201)
    @returns(ERROR, 403)
    async def new_pairing() -> Any:
        """A short single-use pairing code (10 minutes) and its QR code, for a browser
        session only: a paired phone cannot pair more phones."""
        import segno

        caller = current_caller()
        if caller is None or caller.device_id is not None:
            return fail("err_browser_only", 403)
        current = service()
        if current is None:
            return fail("err_not_running", 503)
        await current.tidy_devices(caller.id)  # a pairing of theirs that never finished goes now
        current.watch(caller.id)  # their sessions revoked (a password change): the code ends
        code, ttl = current.codes.create(caller.id, host.watch_caller)  # and with this session
        base = str(current.config.get("public_url") or request.host_url).rstrip("/")
        app_url = f"{base}/api/plugin/{PLUGIN_ID}/app/"
        pair_url = f"{app_url}#pair={code}"
        qr = await asyncio.to_thread(lambda: segno.make(pair_url, error="m").svg_data_uri(scale=4, border=2))
        # 127.0.0.1 (the README's ``make run``) in the code: no phone reaches it, and the
        # page says so beside the code (a newcomer scanned it and got nothing, unwarned).
        loopback = is_loopback_url(base)
        return {"code": code, "expires_in": int(ttl), "app_url": app_url, "pair_url": pair_url, "qr_svg": qr, "loopback": loopback}, 201

    @blueprint.get("/devices")
    @returns(_obj({"devices": {"type": "array", "items": DEVICE}}))
    async def devices() -> Any:
        """The caller's paired devices: name, platform, when paired and last seen. A read
        only (check A4): a pairing that never finished is left out, and revoked where
        state changes anyway (``MobileService.tidy_devices``)."""
        caller = current_caller()
        assert caller is not None
        rows = [row for row in await host.device_tokens(caller.id) if not unfinished_pairing(row)]
        return {
            "devices": [
                {
                    "id": row["id"],
                    "name": str(row["label"].get("name", "")),
                    "platform": str(row["label"].get("platform", "")),
                    "created_at": row["created_at"],
                    "last_seen_at": row["last_seen_at"],
                    "current": row["id"] == caller.device_id,
                }
                for row in rows
            ]
        }

    @blueprint.delete("/devices/<device_id>")
    @returns(_obj({"ok": {"type": "boolean"}}))
    @returns(ERROR, 404)
    async def unlink(device_id: str) -> Any:
        """Unlink one of the caller's devices: its next request is refused."""
        if not await host.revoke_device_token(member_id(), device_id):
            return fail("err_no_device", 404)
        current = service()
        if current is not None:
            await current.forget_device(member_id(), device_id)
            current.recheck_streams(member_id())  # an open stream of that device ends now
            await current.tidy_devices(member_id())
        return {"ok": True}

    # -- the app shell (public) ----------------------------------------------------------------

    @blueprint.get("/app/")
    @public
    async def app_index() -> Response:
        """The installable app (HTML shell)."""
        return _app_file("index.html")

    @blueprint.get("/app/<name>")
    @public
    async def app_asset(name: str) -> Any:
        """The app's script, styles, service worker, manifest and icon."""
        if name not in APP_FILES:
            return {"error": "not found"}, 404
        return _app_file(name)

    def _shell_locale() -> str:
        """The language the shell opens in: the request's ``Accept-Language`` among the
        plugin's locale files (the whole tag, else its language), else English. The
        member is not known here (a page load carries no device token: it lives in the
        app's storage, never in a cookie), so this is what the app itself starts in
        before it knows the account; it then switches to the account's."""
        by_case = {locale.lower(): locale for locale in STRINGS}
        for tag, _quality in request.accept_languages:
            tag = str(tag).strip().replace("_", "-").lower()
            for wanted in (tag, tag.split("-")[0]):
                if wanted in by_case:
                    return by_case[wanted]
        return "en"

    def _app_file(name: str) -> Response:
        text = package.joinpath("app", name).read_text(encoding="utf-8")
        if name in ("index.html", "manifest.webmanifest"):
            # In the reader's language from the first byte: the page announced itself as
            # English (and the installed app described itself in English) until its
            # script replaced the lang, or never (the manifest).
            locale = _shell_locale()
            if name == "index.html":
                text = text.replace('<html lang="en">', f'<html lang="{locale}">', 1)
            else:
                manifest = json.loads(text)
                manifest.update(lang=locale, description=t("app_description", locale))
                text = json.dumps(manifest, ensure_ascii=False, indent=2)
        response = Response(text, mimetype=APP_FILES[name])
        if name in ("index.html", "manifest.webmanifest"):
            response.headers["Vary"] = "Accept-Language"
        if name == "sw.js":
            response.headers["Service-Worker-Allowed"] = f"/api/plugin/{PLUGIN_ID}/app/"
        return response

    @blueprint.get("/app/strings")
    @public
    @returns(_obj({"locale": TEXT, "locales": {"type": "array", "items": TEXT}, "strings": {"type": "object"}}))
    async def app_strings() -> Any:
        """The app's words (``?locale=de``), English for a language it lacks."""
        wanted = request.args.get("locale", "en")
        locale = wanted if wanted in STRINGS else "en"
        return {"locale": locale, "locales": sorted(STRINGS), "strings": {key: t(key, locale) for key in APP_KEYS}}

    @blueprint.post("/pair")
    @public
    @accepts(_obj({"code": {"type": "string", "maxLength": 32}, "name": {"type": "string", "maxLength": 80}, "platform": {"type": "string", "maxLength": 40}}, ("code",)))
    @returns(_obj({"token": TEXT, "device_id": TEXT}), 201)
    @returns(ERROR, 400)
    @returns(ERROR, 429)
    async def pair() -> Any:
        """Trade a pairing code for this device's token (shown once). Five wrong codes
        aimed at one member's code burn that code (they show a new one); more than
        thirty wrong codes a minute from one address → 429 for that address for the
        rest of that minute, more than a thousand from all addresses → 429 for everyone
        (``PairingCodes`` has the arithmetic)."""
        current = service()
        if current is None:
            return fail("err_not_running", 503)
        data = await body()
        locale = request.args.get("locale")
        try:
            owner = current.codes.redeem(data.get("code"), request.remote_addr)
        except PairingError as exc:
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
            return {"error": t(exc.key, locale), "code": exc.key.removeprefix("err_")}, exc.status, headers
        label = {"name": str(data.get("name") or "Phone")[:80], "platform": str(data.get("platform") or "")[:40]}
        try:
            issued = await host.issue_device_token(owner, label)
        except ChannelRequestError:
            return {"error": t("err_code", locale), "code": "code"}, 400
        await current.remember_devices(owner, [issued["id"]])
        await current.start_cursor(owner, issued["id"])
        await current.tidy_devices(owner)
        return {"token": issued["token"], "device_id": issued["id"]}, 201

    # -- the mobile API ------------------------------------------------------------------------

    @blueprint.get("/me")
    @returns(_obj({"member": _obj({"id": TEXT, "display_name": TEXT}), "device_id": {"type": ["string", "null"]}, "locked": {"type": "boolean"}, "lock_message": TEXT, "vapid_public_key": TEXT, "push": {"type": "boolean"}, "locale": TEXT}))
    async def me() -> Any:
        """Who this device speaks for, whether their data is readable now, the server's
        Web Push key, and ``locale``: the member's account language (their own choice,
        else the instance's: what the web shows them), which the app speaks unless a
        language was chosen in its own settings."""
        caller = current_caller()
        assert caller is not None
        current = service()
        if current is None:
            return fail("err_not_running", 503)
        try:
            await host.conversations(caller.id, limit=1)
            locked, lock_reason = False, ""
        except MemberLocked as exc:
            locked, lock_reason = True, exc.lock_reason
        subscribed = False
        if caller.device_id is not None and not locked:
            subscribed = await current.subscription(caller.id, caller.device_id) is not None
        return {
            "member": {"id": caller.id, "display_name": caller.display_name},
            "device_id": caller.device_id,
            "locked": locked,
            "lock_message": t(LOCK_TEXT.get(lock_reason, "locked"), caller.locale) if locked else "",
            "vapid_public_key": current.vapid_public_key,
            "push": subscribed,
            "locale": caller.locale or await host.member_locale(caller.id),
        }

    @blueprint.get("/conversations")
    @returns(_obj({"conversations": {"type": "array", "items": CONVERSATION}}))
    @returns(ERROR, 423, "the member is locked: they must log in on the web first")
    async def conversations() -> Any:
        """The member's conversations started in the mobile app, newest first. Only
        these: the contract lets a channel read and continue its own conversations
        (``HostApi.conversations``), so those begun on the web are not listed."""

        async def work() -> Any:
            return {"conversations": list(await host.conversations(member_id()))}

        return await guarded(work())

    @blueprint.post("/conversations")
    @accepts({
        "type": ["object", "null"],
        "properties": {"draft": {"type": ["string", "null"], "minLength": 8, "maxLength": DRAFT_KEY_MAX, "pattern": "^[A-Za-z0-9_-]+$"}},
        "additionalProperties": False,  # a misspelt field is refused, not ignored
    })
    @returns(_obj({"id": TEXT}), 201)
    @returns(ERROR, 423)
    async def new_conversation() -> Any:
        """Start a fresh conversation; the next message goes there. The app asks for one
        only when the first message of its "New chat" is sent (until then the chat is a
        draft on the phone, as on the web, so a chat left without a word leaves nothing
        behind); ``draft``, the app's key for that draft, answers the same conversation
        when it is asked again (a phone that never got the answer)."""
        draft = (await body()).get("draft")

        async def work() -> Any:
            return {"id": await service().start_conversation(member_id(), draft)}, 201

        return await guarded(work())

    @blueprint.get("/conversations/<conversation_id>")
    @returns(_obj({"conversation": CONVERSATION, "messages": {"type": "array", "items": MESSAGE}, "approvals": {"type": "array", "items": APPROVAL}, "running": {"type": "boolean"}}))
    @returns(ERROR, 423)
    async def conversation(conversation_id: str) -> Any:
        """One conversation's messages and the approvals waiting in it."""
        return await guarded(host.conversation_messages(member_id(), conversation_id))

    @blueprint.post("/conversations/<conversation_id>/messages")
    @accepts(_obj({
        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
        "attachments": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
        "idempotency_key": {"type": "string", "minLength": 8, "maxLength": 128},
    }, ("text",)))
    @returns(_obj({"status": {"enum": ["accepted", "sealed"]}, "conversation_id": TEXT, "reason": TEXT, "notice": TEXT, "lock_reason": TEXT}), 202)
    @returns(ERROR, 400)
    async def send(conversation_id: str) -> Any:
        """Send a message into a conversation; the answer arrives on ``GET /stream``.
        The same ``idempotency_key`` twice stores it once. While the member is locked the
        message is accepted ``sealed`` (``notice`` says so in their language): it waits
        sealed to them and is delivered once, at their next login on the web, into this
        app's current conversation."""
        data = await body()

        async def work() -> Any:
            who = member_id()
            try:
                await host.use_conversation(who, conversation_id)
            except MemberLocked:
                # Her file is closed, so the conversation cannot be checked or chosen
                # now: the host seals the message to her (nothing of it in clear in the
                # registry) and delivers it once, at her next login, into this app's
                # current conversation (the one the phone last sent into).
                pass
            delivery = await host.send_message(
                who, data["text"], attachments=tuple(data.get("attachments") or ()), idempotency_key=data.get("idempotency_key")
            )
            if delivery.status == "refused":
                return {"error": delivery.reason, "code": "refused"}, 400
            answer = {"status": delivery.status, "conversation_id": delivery.conversation_id or conversation_id, "reason": delivery.reason}
            if delivery.status == "sealed":
                answer["notice"] = t("sealed_notice", caller_locale())
                answer["lock_reason"] = delivery.lock_reason
            return answer, 202

        return await guarded(work())

    @blueprint.post("/conversations/<conversation_id>/stop")
    @returns(_obj({"stopped": {"type": "boolean"}}))
    @returns(ERROR, 423)
    async def stop(conversation_id: str) -> Any:
        """Stop the running turn of this conversation (and everything it started)."""

        async def work() -> Any:
            who = member_id()
            await host.use_conversation(who, conversation_id)
            return {"stopped": await host.stop_turn(who)}

        return await guarded(work())

    @blueprint.post("/approvals/<approval_id>")
    @accepts(_obj({"approve": {"type": "boolean"}}, ("approve",)))
    @returns(_obj({"approval_id": TEXT, "decision": TEXT}))
    @returns(ERROR, 423)
    async def approve(approval_id: str) -> Any:
        """Approve or deny a tool call that waits."""
        data = await body()
        return await guarded(host.resolve_approval(member_id(), approval_id, bool(data["approve"])))

    @blueprint.post("/uploads")
    @accepts({"type": "string", "format": "binary"}, content_type="application/octet-stream")
    @returns(_obj({"path": TEXT, "mime": TEXT, "size": {"type": "integer"}}), 201)
    @returns(ERROR, 400, "an empty file (code upload_empty)")
    @returns(ERROR, 413)
    async def upload() -> Any:
        """Upload a photo or file (the raw bytes; ``?name=`` its file name,
        ``?conversation_id=`` where it goes); attach the returned path to a message. A
        file over a limit → 413 with ``code`` ``upload_too_large`` (``values.limit``) or
        ``home_full`` (the member's disk limit: ``values.left``), sizes in bytes; an
        empty file → 400 ``upload_empty``."""
        name = request.args.get("name", "upload")[:200]
        conversation_id = request.args.get("conversation_id") or None

        async def work() -> Any:
            # The body's chunks, written by the host as they come (contract 1.12): never
            # the whole file in memory. Read past the upload limit, the body raises what
            # the host answers with its 413 ``upload_too_large`` (not caught here), and
            # a body cut off leaves no file. Its first bytes are waited for here: an
            # empty body was stored as a file of nothing (labelled text/plain), which the
            # model was then handed as the member's attachment.
            chunks = request.body.__aiter__()
            first = b""
            async for chunk in chunks:
                if chunk:
                    first = chunk
                    break
            if not first:
                return fail("err_upload_empty", 400)

            async def whole() -> AsyncIterator[bytes]:
                yield first
                async for chunk in chunks:
                    yield chunk

            return dict(await host.save_upload(member_id(), name, whole(), conversation_id=conversation_id)), 201

        return await guarded(unlocked(work))

    @blueprint.post("/speech")
    @accepts(_obj({"text": {"type": "string", "minLength": 1}}, ("text",)))
    @returns({"type": "string", "format": "binary"}, 200, "WAV audio", content_types=("audio/wav",))
    @returns(ERROR, 400, "nothing to read aloud, or more than the host reads aloud at once (its tts.max_chars)")
    @returns(ERROR, 404, "no text-to-speech engine speaks the text's language")
    @returns(ERROR, 423)
    async def speech() -> Any:
        """Read a text aloud with the member's voice for the text's language (when a TTS
        engine is installed). The length limit is the host's alone (``tts.max_chars``,
        counting what is read aloud, not code blocks or links): a text over it is
        refused with its reason, never cut here."""
        data = await body()

        async def work() -> Any:
            try:
                audio = await host.synthesize_speech(member_id(), data["text"], format="wav")
            except TtsUnavailable as exc:
                return {"error": str(exc), "code": "no_voice"}, 404
            response = Response(audio, mimetype="audio/wav")
            response.timeout = None  # minutes of audio to a slow phone: not cut at Quart's 60 s
            return response

        return await guarded(unlocked(work))

    @blueprint.get("/projects")
    @returns(_obj({"projects": {"type": "array", "items": PROJECT}}))
    @returns(ERROR, 423)
    async def projects() -> Any:
        """The member's projects, read-only."""

        async def work() -> Any:
            return {"projects": list(await host.member_projects(member_id()))}

        return await guarded(work())

    @blueprint.get("/projects/<project_id>/files")
    @returns(_obj({"path": TEXT, "entries": {"type": "array", "items": ENTRY}}))
    @returns(ERROR, 404)
    async def project_files(project_id: str) -> Any:
        """One folder of a project (``?path=`` inside it), folders first."""
        return await guarded(host.project_files(member_id(), project_id, request.args.get("path", "")))

    @blueprint.get("/projects/<project_id>/file")
    @returns({"type": "string", "format": "binary"}, 200, "the file's bytes", content_types=("application/octet-stream",))
    @returns(ERROR, 404)
    async def project_file(project_id: str) -> Any:
        """One file of a project (``?path=``), for the app's viewer: always a download,
        never a page of ours."""

        async def work() -> Any:
            found = await host.read_project_file(member_id(), project_id, request.args.get("path", ""))
            response = Response(found["data"], mimetype="application/octet-stream")
            response.headers["Content-Disposition"] = "attachment"
            return response

        return await guarded(work())

    @blueprint.get("/notifications")
    @returns(_obj({"notifications": {"type": "array", "items": EVENT}, "cursor": {"type": "integer"}}))
    @returns(ERROR, 423)
    async def notifications() -> Any:
        """What waits for this device: the outbox after its acknowledged cursor (or
        ``?after=``), oldest first."""
        caller = current_caller()
        assert caller is not None
        after = request.args.get("after")
        if after is not None and not after.isdigit():
            return {"error": "after must be a whole number", "code": "bad_cursor"}, 400

        async def work() -> Any:
            device = caller.device_id or f"browser:{caller.id}"
            current = service()
            waiting = await current.waiting(caller.id, device, int(after) if after is not None else None)
            return {"notifications": waiting, "cursor": await current.cursor(device)}

        return await guarded(work())

    @blueprint.post("/notifications/ack")
    @accepts(_obj({"cursor": {"type": "integer", "minimum": 0}}, ("cursor",)))
    @returns(_obj({"cursor": {"type": "integer"}}))
    @returns(ERROR, 423)
    async def acknowledge() -> Any:
        """This device has everything up to ``cursor``: it will not be offered again. A
        cursor past the newest notification is taken as the newest (the answer says
        where the device stands), so a wrong one cannot hide those still to come."""
        caller = current_caller()
        assert caller is not None
        data = await body()

        async def work() -> Any:
            device = caller.device_id or f"browser:{caller.id}"
            return {"cursor": await service().acknowledge(caller.id, device, int(data["cursor"]))}

        return await guarded(work())

    @blueprint.put("/push")
    @accepts(_obj({
        "endpoint": {"type": "string", "maxLength": 2000},
        "keys": _obj({"p256dh": {"type": "string", "maxLength": 200}, "auth": {"type": "string", "maxLength": 100}}, ("p256dh", "auth")),
    }, ("endpoint", "keys")))
    @returns(_obj({"ok": {"type": "boolean"}}))
    @returns(ERROR, 400)
    async def subscribe_push() -> Any:
        """Web Push for this device (the browser's PushSubscription); the payload says
        only that something is new."""
        caller = current_caller()
        current = service()
        if caller is None or caller.device_id is None:
            return fail("err_device_only", 403)
        if current is None:
            return fail("err_not_running", 503)
        data = await body()
        problem = await current.check_subscription(data)
        if problem:
            return fail(problem, 400)
        keys = data["keys"]
        subscription = {"endpoint": data["endpoint"], "keys": {"p256dh": keys["p256dh"], "auth": keys["auth"]}}
        try:
            await current.set_subscription(caller.id, caller.device_id, subscription)
        except MemberLocked as exc:
            return locked_answer(exc.lock_reason)
        return {"ok": True}

    @blueprint.delete("/push")
    @returns(_obj({"ok": {"type": "boolean"}}))
    async def unsubscribe_push() -> Any:
        """No more Web Push for this device."""
        caller = current_caller()
        current = service()
        if caller is not None and caller.device_id is not None and current is not None:
            try:
                await current.set_subscription(caller.id, caller.device_id, None)
            except MemberLocked as exc:
                return locked_answer(exc.lock_reason)
        return {"ok": True}

    @blueprint.get("/stream")
    @returns(EVENT, 200, "Server-sent events, one JSON object per `data:` line", content_types=("text/event-stream",))
    @returns(ERROR, 429, "the member holds MAX_STREAMS_PER_MEMBER (20) streams open already (`limit` says how many)")
    async def stream() -> Any:
        """The member's live events (server-sent events over a plain GET, so a client
        can send its device token in the Authorization header). A fresh ``hello`` says
        when the member's data was unlocked (they logged in on the web) or locked since.
        Ends when the device is unlinked, the session it was opened with ends (logout,
        password change elsewhere, the admin's "end sessions", deactivation), the
        member's access ends or the plugin stops."""
        caller = current_caller()
        current = service()
        if caller is None or current is None:
            return fail("err_not_running", 503)
        who, device = caller.id, caller.device_id
        if current.streams_open(who) >= MAX_STREAMS_PER_MEMBER:
            log.warning("member %s: event stream refused, %d open already", who, MAX_STREAMS_PER_MEMBER)
            return fail("err_too_many_streams", 429, limit=MAX_STREAMS_PER_MEMBER)
        # The host checked the credential once, for this request; a stream outlives it, so
        # it listens for the credential's end (as the host's own /api/ws does).
        ended = asyncio.Event()
        stop_watching = host.watch_caller(lambda _reason: ended.set())

        async def still_allowed() -> bool:
            if running.service is not current or ended.is_set():
                return False
            if device is None:
                return True
            return any(row["id"] == device for row in await host.device_tokens(who))

        current.watch(who)

        async def hello(locked: bool) -> bytes:
            payload = {"kind": "hello", "locked": locked, "cursor": await current.cursor(device or f"browser:{who}")}
            return f"data: {dumps(payload)}\n\n".encode()

        async def next_event(queue: asyncio.Queue[dict[str, Any]]) -> dict[str, Any]:
            """The next event of the queue, ``closed`` as soon as the credential ended;
            ``TimeoutError`` after a heartbeat's time without either."""
            getting = asyncio.ensure_future(queue.get())
            ending = asyncio.ensure_future(ended.wait())
            try:
                done, _ = await asyncio.wait((getting, ending), timeout=STREAM_HEARTBEAT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            finally:
                ending.cancel()
                if not getting.done():
                    getting.cancel()
            if getting in done:
                return getting.result()
            if ending in done:
                return {"kind": "closed"}
            raise asyncio.TimeoutError

        async def events() -> AsyncIterator[bytes]:
            try:
                async for chunk in stream_events():
                    yield chunk
            finally:
                stop_watching()

        async def stream_events() -> AsyncIterator[bytes]:
            with current.stream(who) as queue:
                if queue is None:
                    yield f"data: {dumps({'kind': 'closed', 'reason': 'too_many_streams'})}\n\n".encode()
                    return
                try:
                    await host.conversations(who, limit=1)
                    locked = False
                except MemberLocked:
                    locked = True
                except ChannelRequestError:
                    return
                if ended.is_set():  # the session ended while the stream was being opened
                    yield f"data: {dumps({'kind': 'closed'})}\n\n".encode()
                    return
                yield await hello(locked)
                while True:
                    try:
                        event = await next_event(queue)
                    except asyncio.TimeoutError:
                        if not await still_allowed():
                            yield f"data: {dumps({'kind': 'closed'})}\n\n".encode()
                            return
                        yield b": ping\n\n"
                        continue
                    if event.get("kind") == "closed" or not await still_allowed():
                        yield f"data: {dumps({'kind': 'closed'})}\n\n".encode()
                        return
                    if event.get("kind") == "recheck":
                        continue
                    if event.get("kind") == "lock_changed":
                        yield await hello(bool(event["locked"]))
                        continue
                    yield f"data: {dumps(event)}\n\n".encode()

        response = Response(events(), mimetype="text/event-stream")
        response.timeout = None  # a stream lives as long as the phone looks
        response.headers["X-Accel-Buffering"] = "no"
        return response

    return blueprint

