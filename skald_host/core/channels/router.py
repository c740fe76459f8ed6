"""Outbound: what happens in a member's conversations reaches the channel they came
from (``Channel.deliver``), and background notes reach their home source.

The router follows each unlocked member's bus (it subscribes at unlock, before their
chat runtime exists, and lets go before their file closes). It is a listener, never a
participant: a channel that raises or hangs is logged by plugin id and cut off by a
timeout; the turn it reports on never notices.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping

from skald_hookspecs.channels import Channel, ChannelEvent, ReachableChannel
from skald_host.core.asyncutil import await_me_maybe
from skald_host.core.channels.inbox import channel_key
from skald_host.core.identity.users import Member, MemberNotFound
from skald_host.core.plugins.failures import record_failure
from skald_host.core.plugins.manager import PluginError
from skald_host.core.refusal import Refusal

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

WEB_SOURCE = "web"
TYPING_INTERVAL_SECONDS = 4.0
DELIVER_TIMEOUT_SECONDS = 30.0
#: A streaming answer reaches a channel that wants partials at most this often.
PARTIAL_INTERVAL_SECONDS = 0.5
#: ``ReachableChannel.reachable`` answers from the plugin's own store: one slower than
#: this is counted unreachable (the page and the note must not hang on it).
REACHABLE_TIMEOUT_SECONDS = 5.0


def validate_channel(plugin_id: str, args: tuple[Any, ...]) -> tuple[str, Channel]:
    """``register(name, channel)``: the name is the plugin's own id (a conversation's
    source names the plugin that speaks for it), the channel has ``async deliver``."""
    if len(args) != 2:
        raise PluginError("register() expects (name, channel)")
    name, channel = args
    if name != plugin_id:
        raise PluginError(f"a channel is named by its plugin's id: register({plugin_id!r}, channel), not {name!r}")
    if not isinstance(channel, Channel) or not inspect.iscoroutinefunction(channel.deliver):
        raise PluginError("the channel must have an async deliver(member_id, event) method")
    return name, channel


@dataclass(frozen=True)
class Home:
    """Where a member's background notes go now (``source``), and the home they chose
    (``stored``). The two differ when the chosen channel cannot reach them:
    ``unavailable`` (its plugin is off, or the member may no longer use it) or
    ``unreachable`` (it runs, but nothing links it to them: a Telegram chat unlinked,
    the last phone unpaired). Then the notes stay on the web, where they are anyway (the
    conversation keeps them, the open page shows them), rather than go nowhere."""

    source: str
    stored: str
    reason: Literal["unavailable", "unreachable"] | None = None


class _Partial:
    __slots__ = ("message_id", "text", "flusher")

    def __init__(self, message_id: Any) -> None:
        self.message_id = message_id
        self.text = ""
        self.flusher: asyncio.Task[None] | None = None


class ChannelRouter:
    def __init__(self, core: "Skald", channels: Mapping[str, Channel]) -> None:
        self.core = core
        self.channels = dict(channels)
        self._follows: dict[str, asyncio.Task[None]] = {}
        self._typing: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._sources: dict[tuple[str, str], str] = {}
        self._scheduled: set[tuple[str, str]] = set()
        # (member, conversation) -> the streaming round's text so far and its flusher.
        self._partials: dict[tuple[str, str], _Partial] = {}
        # (member, conversation) -> what a stopped answer kept, until the turn's ``cancelled``.
        self._stopped_text: dict[tuple[str, str], str] = {}

    # -- who may use which channel ----------------------------------------------------------

    def usable(self, member: Member) -> list[str]:
        return sorted(name for name in self.channels if self.core.catalog.usable(member, name))

    def _running(self, member: Member, name: str) -> bool:
        status = self.core.plugins.status(name)
        return name in self.channels and status is not None and status.started and self.core.catalog.usable(member, name)

    async def reachable(self, member: Member, name: str) -> bool:
        """The channel's plugin runs, the member may use it, and (spec 1.16) the channel
        says it can reach them: a channel without ``reachable`` counts as reachable.
        Telegram and the phone app are usable by any member, linked or not: offered
        and chosen without a link, the member's notes went to a ``deliver`` that
        dropped them."""
        if not self._running(member, name):
            return False
        channel = self.channels[name]
        if not isinstance(channel, ReachableChannel):
            return True
        try:
            return await asyncio.wait_for(await_me_maybe(channel.reachable(member.id)), REACHABLE_TIMEOUT_SECONDS) is True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
            log.error("channel %s: asking whether it reaches member %s failed (%s): counted unreachable", name, member.id, reason)
            return False

    async def home_choices(self, member: Member) -> list[str]:
        """What the member may choose as their home source: the web, and each channel
        that can reach them now."""
        return [WEB_SOURCE, *[name for name in self.usable(member) if await self.reachable(member, name)]]

    async def home_source(self, member_id: str) -> str:
        """The home the member chose (stored), whether or not it reaches them now: see ``home``."""
        row = await self.core.registry.run(lambda c: c.execute("SELECT home_source FROM users WHERE id = ?", (member_id,)).fetchone())
        return row[0] if row else WEB_SOURCE

    async def home(self, member: Member) -> Home:
        """Where the member's background notes go now. The choice stays stored: once the
        chat is linked again (the plugin enabled again), the notes follow it again."""
        stored = await self.home_source(member.id)
        if stored == WEB_SOURCE:
            return Home(WEB_SOURCE, stored)
        if not self._running(member, stored):
            return Home(WEB_SOURCE, stored, "unavailable")
        if not await self.reachable(member, stored):
            return Home(WEB_SOURCE, stored, "unreachable")
        return Home(stored, stored)

    async def set_home_source(self, member: Member, source: Any) -> str:
        choices = await self.home_choices(member)
        if source not in choices:
            listed = ", ".join(choices)
            if source in self.usable(member):
                raise Refusal(
                    f"{source} cannot reach you now (link it first, on its page); home_source must be one of {listed}",
                    code="home_source_unreachable", field="home_source", channel=self._title(source), choices=listed,
                )
            raise Refusal(f"home_source must be one of {listed}", code="home_source_invalid", field="home_source", choices=listed)
        await self.core.registry.transaction(
            lambda c: c.execute("UPDATE users SET home_source = ? WHERE id = ?", (source, member.id))
        )
        return source

    def _title(self, name: str) -> str:
        status = self.core.plugins.status(name)
        return status.info.title if status is not None and status.info is not None else name

    # -- following members ----------------------------------------------------------------

    async def follow(self, member_id: str) -> None:
        """At unlock (``UserManager.after_unlock``)."""
        if not self.channels or member_id in self._follows:
            return
        subscription = self.core.buses.members.subscribe(member_id)
        self._follows[member_id] = asyncio.create_task(self._pump(member_id, subscription), name=f"channels:{member_id}")

    async def unfollow(self, member_id: str) -> None:
        """Before lock (``UserManager.before_lock``)."""
        task = self._follows.pop(member_id, None)
        for key in [k for k in self._typing if k[0] == member_id]:
            self._typing.pop(key).cancel()
        for key in [k for k in self._sources if k[0] == member_id]:
            self._sources.pop(key, None)
        self._scheduled = {k for k in self._scheduled if k[0] != member_id}
        for key in [k for k in self._partials if k[0] == member_id]:
            self._drop_partial(key)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        for member_id in list(self._follows):
            await self.unfollow(member_id)

    async def _pump(self, member_id: str, subscription: Any) -> None:
        try:
            async for event in subscription:
                if event.kind != "chat":
                    continue
                try:
                    await self._on_chat(member_id, event.data)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("channel routing failed for an event of member %s", member_id)
        finally:
            subscription.close()

    async def _source(self, member_id: str, conversation_id: str) -> str | None:
        key = (member_id, conversation_id)
        if key not in self._sources:
            runtime = self.core.chat.live_runtime(member_id)
            conversation = await runtime.store.conversation(conversation_id) if runtime else None
            if conversation is None:
                return None
            self._sources[key] = conversation["source"]
        return self._sources[key]

    async def _on_chat(self, member_id: str, data: Mapping[str, Any]) -> None:
        kind, conversation_id = data.get("type"), data.get("conversation_id")
        if not isinstance(conversation_id, str) or kind in ("tool_start", "tool_result"):
            return
        if kind == "token":
            await self._on_token(member_id, conversation_id, data)
            return
        source = await self._source(member_id, conversation_id)
        top = not data.get("depth")
        if source in self.channels and top and kind in ("done", "assistant", "answer_cancelled", "error", "turn_finished", "cancelled"):
            self._drop_partial((member_id, conversation_id))  # the round is over: no late partial
        if source in self.channels:
            await self._on_channel_event(source, member_id, conversation_id, kind, data, top)
            return
        # A conversation of the web: only background work crosses to the home source.
        key = (member_id, conversation_id)
        if kind == "user_message" and data.get("scheduled"):
            self._scheduled.add(key)
        elif kind == "notification":
            await self._to_home(member_id, ChannelEvent("notification", conversation_id, text=str(data.get("content", ""))))
        elif kind == "done" and top and key in self._scheduled:
            self._scheduled.discard(key)
            await self._to_home(member_id, ChannelEvent("notification", conversation_id, text=str(data.get("content", ""))))
        elif kind in ("turn_finished", "cancelled"):
            self._scheduled.discard(key)

    async def _on_channel_event(
        self, name: str, member_id: str, conversation_id: str, kind: Any, data: Mapping[str, Any], top: bool
    ) -> None:
        if kind == "turn_started":
            await self.deliver(name, member_id, ChannelEvent("typing", conversation_id))
            self._start_typing(name, member_id, conversation_id)
        elif kind == "assistant" and top and str(data.get("content") or "").strip() and getattr(self.channels[name], "wants_partials", False) is True:
            # A round that ends in tool calls: its words as they ended. Its flush was
            # dropped with the round, and one quicker than the flush interval was never
            # seen at all (a phone missed "Let me write it." before the tool ran).
            event = ChannelEvent("partial", conversation_id, text=str(data["content"]), data={"message_id": data.get("message_id")})
            await self.deliver(name, member_id, event)
        elif kind == "user_message" and getattr(self.channels[name], "wants_member_messages", False) is True:
            # The member's own message, from wherever it was written (the web, the API,
            # another phone): without it an open channel showed the answer alone, as if
            # the assistant spoke out of nowhere (spec 1.16).
            event = await self._member_message(name, member_id, conversation_id, data.get("message_id"))
            if event is not None:
                await self.deliver(name, member_id, event)
        elif kind == "answer_cancelled" and top:
            self._stopped_text[(member_id, conversation_id)] = str(data.get("content", ""))
        elif kind == "cancelled":
            self._stop_typing(member_id, conversation_id)
            text = self._stopped_text.pop((member_id, conversation_id), "")
            await self.deliver(name, member_id, ChannelEvent("stopped", conversation_id, text=text))
        elif kind == "turn_finished":
            self._stop_typing(member_id, conversation_id)
            self._stopped_text.pop((member_id, conversation_id), None)
        elif kind == "done" and top:
            self._stop_typing(member_id, conversation_id)
            # The round it ends (as its partials name it): a channel that streamed an
            # earlier round (before tool calls) must not edit that one into the answer.
            event = ChannelEvent("answer", conversation_id, text=str(data.get("content", "")), data={"message_id": data.get("message_id")})
            await self.deliver(name, member_id, event)
        elif kind == "approval_required":
            arguments = data.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments or "{}")
                except ValueError:
                    arguments = {"raw": arguments}
            event = ChannelEvent(
                "approval", conversation_id, approval_id=data.get("approval_id"), tool=data.get("name"),
                arguments=arguments if isinstance(arguments, dict) else {"value": arguments},
            )
            await self.deliver(name, member_id, event)
        elif kind == "approval_resolved":
            event = ChannelEvent(
                "approval_resolved", conversation_id, approval_id=data.get("approval_id"),
                data={"status": data.get("decision"), **({"reason": data["reason"]} if data.get("reason") else {})},
            )
            await self.deliver(name, member_id, event)
        elif kind == "question":
            event = ChannelEvent(
                "question", conversation_id, text=str(data.get("message", "")),
                data={"question_id": data.get("question_id"), "fields": list(data.get("fields") or ())},
            )
            await self.deliver(name, member_id, event)
        elif kind == "question_resolved":
            event = ChannelEvent("question_resolved", conversation_id, data={"question_id": data.get("question_id"), "status": data.get("status")})
            await self.deliver(name, member_id, event)
        elif kind == "error" and top:
            self._stop_typing(member_id, conversation_id)
            await self.deliver(name, member_id, ChannelEvent("error", conversation_id, text=str(data.get("error", "")), data=_cause(data)))
        elif kind == "notification":
            await self.deliver(name, member_id, ChannelEvent("notification", conversation_id, text=str(data.get("content", "")), data=_cause(data)))

    async def _member_message(self, name: str, member_id: str, conversation_id: str, message_id: Any) -> ChannelEvent | None:
        """A stored member's message as a ``member_message`` event, read back from their
        file: the bus event of a message queued behind a turn names only its id, and
        none carries the key its sender sent it with."""
        runtime = self.core.chat.live_runtime(member_id)
        message = await runtime.store.member_message(message_id) if runtime else None
        if message is None or message["conversation_id"] != conversation_id:
            return None
        files = [
            {"name": str(a.get("name") or str(a.get("path", "")).rsplit("/", 1)[-1]), "mime": a.get("mime"), "size": a.get("size")}
            for a in message["attachments"] if isinstance(a, Mapping)
        ]
        data = {"message_id": message["id"], "idempotency_key": channel_key(name, message["idempotency_key"]), "attachments": files}
        return ChannelEvent("member_message", conversation_id, text=str(message["content"] or ""), data=data)

    # -- partials: the streaming answer, coalesced --------------------------------------------

    async def _on_token(self, member_id: str, conversation_id: str, data: Mapping[str, Any]) -> None:
        """A top-level content delta of a conversation whose channel wants partials: the
        round's text grows here, and a flusher hands the latest text over at most every
        ``PARTIAL_INTERVAL_SECONDS`` (what came meanwhile is coalesced into it)."""
        if data.get("depth") or data.get("channel", "content") != "content":
            return
        source = await self._source(member_id, conversation_id)
        channel = self.channels.get(source) if source else None
        if channel is None or getattr(channel, "wants_partials", False) is not True:
            return
        key = (member_id, conversation_id)
        partial = self._partials.get(key)
        if partial is None or partial.message_id != data.get("message_id"):
            if partial is not None:
                self._drop_partial(key)
            partial = self._partials[key] = _Partial(data.get("message_id"))
        partial.text += str(data.get("delta", ""))
        if partial.flusher is None:
            partial.flusher = asyncio.create_task(self._flush_partial(str(source), key, partial), name=f"channels:partial:{conversation_id}")

    async def _flush_partial(self, name: str, key: tuple[str, str], partial: "_Partial") -> None:
        try:
            await asyncio.sleep(PARTIAL_INTERVAL_SECONDS)
        finally:
            partial.flusher = None
        if self._partials.get(key) is partial and partial.text.strip():
            await self.deliver(name, key[0], ChannelEvent("partial", key[1], text=partial.text, data={"message_id": partial.message_id}))

    def _drop_partial(self, key: tuple[str, str]) -> None:
        partial = self._partials.pop(key, None)
        if partial is not None and partial.flusher is not None:
            partial.flusher.cancel()

    # -- typing ---------------------------------------------------------------------------------

    def _start_typing(self, name: str, member_id: str, conversation_id: str) -> None:
        key = (member_id, conversation_id)
        if key in self._typing:
            return

        async def repeat() -> None:
            while True:
                await asyncio.sleep(TYPING_INTERVAL_SECONDS)
                await self.deliver(name, member_id, ChannelEvent("typing", conversation_id))

        self._typing[key] = asyncio.create_task(repeat(), name=f"channels:typing:{conversation_id}")

    def _stop_typing(self, member_id: str, conversation_id: str) -> None:
        task = self._typing.pop((member_id, conversation_id), None)
        if task is not None:
            task.cancel()

    # -- delivery ---------------------------------------------------------------------------------

    async def notify_home(self, member_id: str, text: str) -> None:
        """Background work outside any conversation (a system agent) tells the member:
        their home source gets a ``notification`` when it is a channel."""
        await self._to_home(member_id, ChannelEvent("notification", None, text=text))

    async def _to_home(self, member_id: str, event: ChannelEvent) -> None:
        """To the home channel when it reaches the member now (``home``); else the note
        stays on the web, which has it already: a web conversation's note and scheduled
        answer are in the conversation, a system agent's note on the open page."""
        try:
            member = await self.core.users.get(member_id)
        except MemberNotFound:
            return
        home = await self.home(member)
        if home.source in self.channels:
            await self.deliver(home.source, member_id, event)
        elif home.reason is not None:
            log.info("member %s: a background note stays on the web: their home %s is %s", member_id, home.stored, home.reason)

    async def deliver(self, name: str, member_id: str, event: ChannelEvent) -> bool:
        """Hand ``event`` to the channel if its plugin runs and the member may use it
        (re-read now: a revoked grant silences the channel at once). A failure is the
        plugin's (``_deliver_failed``), its message withheld: it may quote the member's text."""
        channel, status = self.channels.get(name), self.core.plugins.status(name)
        if channel is None or status is None or not status.started:
            return False
        try:
            member = await self.core.users.get(member_id)
        except MemberNotFound:  # deleted meanwhile: nothing to deliver
            return False
        if not self.core.catalog.usable(member, name):
            return False
        try:
            await asyncio.wait_for(channel.deliver(member_id, event), DELIVER_TIMEOUT_SECONDS)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._deliver_failed(name, event, exc)
            return False
        return True

    def _deliver_failed(self, name: str, event: ChannelEvent, exc: Exception) -> None:
        """On the plugin's page and in the log as a tool's or a route's failure is: with
        only a log line by type, the card said "Running" while every reply was lost.
        ``record_failure`` folds a repeat within a minute into one entry, as a channel
        whose far end is down fails at every event. A timeout's frames are where the
        channel was waiting when it was cut off, as for a tool."""
        if isinstance(exc, asyncio.TimeoutError):
            cut_off = exc.__context__ if isinstance(exc.__context__, asyncio.CancelledError) else exc
            stuck = TimeoutError(f"channel {name} did not deliver a {event.kind} event within {DELIVER_TIMEOUT_SECONDS:g} s")
            record_failure(self.core.plugins, name, "channel deliver", stuck.with_traceback(cut_off.__traceback__), say=True, level=logging.WARNING)
        else:
            record_failure(self.core.plugins, name, "channel deliver", exc)


def _cause(data: Mapping[str, Any]) -> dict[str, Any]:
    """The host's code and values of an ``error`` or ``notification`` (since 1.12), for
    the channel to say it in the member's language as ``core.error.<code>``; nothing
    when the event has no code (a background note in its own words)."""
    code = data.get("code")
    if not isinstance(code, str) or not code:
        return {}
    values = data.get("values")
    return {"code": code, "values": dict(values) if isinstance(values, Mapping) else {}}
