"""The channel contract: a messaging surface outside the browser (Telegram, mobile).

A channel plugin registers ``register(name, channel)`` through ``register_channels``
where ``name`` is its plugin id. Inbound, it hands a member's message to
``HostApi.send_message`` (the conversation's source is the plugin id; a plugin cannot
speak as another source). Outbound, the host calls ``channel.deliver(member_id, event)``
for what happens in that member's conversations whose source is this channel, and for
background notifications when this channel is the member's home source.

Since 1.16: a channel that sets ``wants_member_messages = True`` also receives
``member_message`` events (the member's own message, stored in one of its
conversations, from whatever surface wrote it); a channel without the attribute never
sees one.

Since 1.16: a channel may say whether it can reach a member now (``reachable``: a
linked chat, a paired device). The host offers it as a member's home source only when
it can, and sends their background notes to the web while it cannot; a channel
without the method counts as reachable, as before.

Since 1.9: ``stopped`` (the member stopped the turn, from any surface); a channel that
does not know it may ignore it.

Since 1.3: ``question`` and ``question_resolved`` events (a tool asks the member for
input, ``TurnApi.ask``); a channel that does not know them may ignore them.

Since 1.2: a channel that sets ``wants_partials = True`` also receives ``partial``
events while an answer streams (a channel without the attribute never sees one), and
``Delivery``/``MemberLocked`` say why a member is locked (``lock_reason``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Protocol, runtime_checkable

ChannelEventKind = Literal[
    "typing", "partial", "answer", "approval", "approval_resolved", "notification", "error", "question", "question_resolved",
    "stopped", "member_message",
]

#: ``Delivery.lock_reason``/``MemberLocked.lock_reason``: the member logged in since the
#: host started and their last session ended since (logout, idle expiry, revocation) ...
LOCK_LOGGED_OUT = "logged_out"
#: ... or has not logged in since the host started.
LOCK_RESTARTED = "restarted"


@dataclass(frozen=True)
class ChannelEvent:
    """One thing to show the member on the channel.

    - ``typing``: a turn started or is still running (``conversation_id``).
    - ``partial``: (since 1.2, only to a channel with ``wants_partials = True``) the
      answer so far while it streams: ``text`` is the whole text of the current model
      round, not a delta; the host coalesces them (at most one every
      ``PARTIAL_INTERVAL_SECONDS`` of the router, half a second) and the ``answer``
      that follows is authoritative. A round with tool calls is followed by a new round
      whose partials start again from empty; since 1.9 such a round's last ``partial``
      is its whole text (sent as the round ends, however short it was), and
      ``data["message_id"]`` names the round's answer, so a channel can tell a new
      round from more of the same one.
    - ``answer``: a turn finished; ``text`` is the authoritative final answer. Since
      1.13 ``data["message_id"]`` names the round it is (as its ``partial`` events do):
      a channel edits only that round's streamed message into it, never an earlier
      round's (the words said before a tool call).
    - ``approval``: a tool call waits for the member (``approval_id``, ``tool``,
      ``arguments``); resolve it with ``HostApi.resolve_approval``.
    - ``approval_resolved``: that card is settled (``data["status"]``). A member's OK
      for a tool they may no longer use (its plugin disabled, their grant gone) settles
      it ``denied`` with ``data["reason"] == "withdrawn"``: the call does not run (since
      1.17; before, it said ``approved`` and the call was then refused).
    - ``notification``: background work tells the member something (``text``).
    - ``error``: the turn failed; ``text`` says why in words fit for the member, in
      English. Since 1.12 an ``error`` or ``notification`` the host words itself carries
      its cause in ``data`` (``{"code", "values"}``; empty for words of their own): the
      string ``core.error.<code>`` with those values (``HostApi.translate``) says it in
      the member's language, as the web does.
    - ``question`` (since 1.3): a running tool asks the member for input; ``text`` is
      the question, ``data`` ``{"question_id", "fields"}`` (as ``TurnApi.ask`` takes
      them). Answer it with ``HostApi.answer_question``; never store or log the answer.
    - ``question_resolved`` (since 1.3): that question is settled or gone
      (``data["question_id"]``, ``data["status"]``: accept, decline or cancel).
    - ``stopped`` (since 1.9): the member stopped the turn (on this channel or another
      surface, e.g. the web); no ``answer`` follows. ``text`` is what the answer had
      said when it was stopped (empty if it had said nothing), kept in the
      conversation as a stopped answer: a channel that showed ``partial`` text
      finishes that message with it, as it would an ``answer``.
    - ``member_message`` (since 1.16, only to a channel with ``wants_member_messages =
      True``): the member's message was stored in the conversation (sent from this
      channel, the web, the API or another channel), before the answer it starts.
      ``text`` is its words; ``data`` ``{"message_id", "idempotency_key",
      "attachments"}``: the key this channel sent it with (a channel that drew its own
      message when sending knows it by this key and does not draw it twice; None for a
      message sent without one or from another surface) and its files (``[{"name", "mime", "size"}]``).
    """

    kind: ChannelEventKind
    conversation_id: str | None = None
    text: str = ""
    approval_id: str | None = None
    tool: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Delivery:
    """What became of an inbound message.

    ``accepted``: stored in the member's conversation (an ack means durable).
    ``sealed``: the member is locked (no session since the host started); the message
    was sealed to their public key and will be delivered at their next unlock.
    ``refused``: not delivered; ``reason`` says why (no grant, inactive member, ...).
    """

    status: Literal["accepted", "sealed", "refused"]
    conversation_id: str | None = None
    reason: str = ""
    #: With ``sealed`` (since 1.2): why the member is locked, ``LOCK_LOGGED_OUT`` or
    #: ``LOCK_RESTARTED``, so the channel can tell them what happened.
    lock_reason: str = ""


class ChannelRequestError(Exception):
    """A ``HostApi`` channel call that cannot be done (no grant, unknown approval, a
    file too large, ...); the message says why in words fit for the member. ``code``
    (since 1.12) is the host's stable code for a refusal that has one (the core
    bundle's ``error.<code>``, e.g. ``tts_busy_member``: speech is busy, try again
    later), so a plugin can act on the kind without reading the words; empty when the
    refusal has none. ``values`` (since 1.15) fill that string's placeholders, as the
    host knows them: a size is a whole number of bytes for the plugin to word in its
    reader's number format (``home_full``: ``left``, the bytes the member's home may
    still take; ``upload_too_large``: ``limit``, the upload cap); empty when there are
    none."""

    def __init__(self, message: str = "", code: str = "", values: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values: dict[str, Any] = dict(values or {})


class MemberLocked(ChannelRequestError):
    """The member has not logged in since the host started, so their private file is
    closed: ask them to log in on the web first. (``send_message`` does not raise
    this: it seals the message instead.) ``lock_reason`` (since 1.2) says why, as
    ``Delivery.lock_reason`` does; empty when the host does not know."""

    def __init__(self, message: str = "", lock_reason: str = "") -> None:
        super().__init__(message, code="member_locked")
        self.lock_reason = lock_reason


@runtime_checkable
class Channel(Protocol):
    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        """Show ``event`` to the member. Raise to have the host log the failure; the
        host does not retry (a channel that must not lose a reply retries itself).
        Return quickly (queue the work): the host waits for it before the next event
        of the member, and gives up after 30 seconds."""


@runtime_checkable
class ReachableChannel(Channel, Protocol):
    """A ``Channel`` that can say whether it reaches a member now (since 1.16). The
    method is optional: ``Channel`` does not require it, so a channel written for an
    older spec stays a channel and counts as reachable, as before. Implement it when
    ``deliver`` can have nowhere to send (no chat linked, no device paired): the host
    then never makes such a channel a member's home source, and keeps their background
    notes on the web while it cannot reach them."""

    async def reachable(self, member_id: str) -> bool:
        """Whether ``deliver`` can reach this member now: they linked a chat, paired a
        device. The host asks before it offers the channel as the member's home source
        (where background notes go: scheduled prompts' answers, system agents' notes),
        refuses that choice while this is False (``home_source_unreachable``), and asks
        again before each background note: while it is False the note stays on the web
        (the conversation, the open page) instead of vanishing into a ``deliver`` that
        has nowhere to send it, and the member's account page says why. Asked only
        while the plugin runs and the member may use it. Answer from what the plugin
        stored, quickly, without asking the far end: the host gives up after 5 seconds
        and counts the channel unreachable then, as it does when this raises. Since
        1.16."""
