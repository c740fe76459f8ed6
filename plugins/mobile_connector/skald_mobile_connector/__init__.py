"""skald-mobile-connector: the phone app for Skald members.

A binding-managed channel plugin (seed 001: ``manages_own_access``, absent from the
grant lists, ``grant_by_default`` false): a member pairs a phone from the plugin's page
with a short single-use code or its QR code, and the phone receives a device token the
host keeps hashed and checks in its one authentication path (spec 1.3). The phone then
talks to the mobile API under ``/api/plugin/mobile-connector/``: conversations of the
``mobile-connector`` source, send, a stream of the turn, approve, stop, upload, and an
outbox of notifications that waits, per device, until the device acknowledges it.

It imports only the contract; segno and pywebpush are imported where they are used.
"""

from __future__ import annotations

from typing import Any, Callable

from skald_hookspecs import ChannelEvent, ConfigField, HostApi, I18nBundle, PluginInfo, WebPage, hookimpl
from skald_mobile_connector.strings import STRINGS

PLUGIN_ID = "mobile-connector"

CONFIG_SCHEMA = (
    ConfigField(
        "public_url",
        "url",
        label="Public address",
        description="The https address phones reach this server at (the QR code points there). Empty: the address of the page.",
    ),
    ConfigField(
        "allow_http_push",
        "boolean",
        label="Allow push services over plain http",
        description="For tests with a local push service only; real push services are https.",
        default=False,
    ),
)


class _Running:
    """The service of the current enablement (``startup`` to ``shutdown``): the routes
    and the channel resolve it per request, so a disabled plugin holds nothing."""

    service: Any = None  # skald_mobile_connector.service.MobileService


running = _Running()


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id=PLUGIN_ID,
        title="Mobile app",
        description="Use your assistant from your phone: pair it with a code, chat, approve, and get notified.",
        icon="chat",
        # The plugin page kit, device tokens, conversations read back, returns(); net (1.5);
        # the kit's confirm (1.6); stopped and the partials' message_id (1.9); uploads up
        # to the host's upload limit (1.10), streamed to save_upload (1.12); member_deleted
        # (1.14): a deleted member's pending pairing code goes; ChannelRequestError.values
        # (1.15): a refused upload's sizes, worded in the member's language.
        spec=">=1.15,<2",
        config_schema=CONFIG_SCHEMA,
        # A pairing is the binding: an admin grant would be a box that controls nothing.
        manages_own_access=True,
        grant_by_default=False,
    )


@hookimpl
async def startup(host: HostApi) -> None:
    from skald_mobile_connector.service import MobileService

    service = MobileService(host)
    await service.start()
    running.service = service


@hookimpl
async def shutdown(reason: str) -> None:
    service, running.service = running.service, None
    if service is not None:
        await service.stop()


@hookimpl
def register_routes(register: Callable[..., None], host: HostApi) -> None:
    from skald_mobile_connector.routes import build_blueprint  # imports Quart: only now

    register(build_blueprint(host))


@hookimpl
def register_web_pages(register: Callable[..., None]) -> None:
    register(WebPage("main", "Mobile app", "page.js", icon="chat"))


@hookimpl
def member_unlocked(member_id: str) -> None:
    """A phone on the locked screen goes on once the member logged in on the web."""
    service = running.service
    if service is not None:
        service.lock_changed(member_id, locked=False)


@hookimpl
def member_locking(member_id: str) -> None:
    """An open app says at once that the member's data is locked, not at its next request."""
    service = running.service
    if service is not None:
        service.lock_changed(member_id, locked=True)


@hookimpl
def member_reset(member_id: str) -> None:
    """The account starts over with a new password holder: a code shown before is not
    theirs to trade (the host took the device tokens already)."""
    service = running.service
    if service is not None:
        service.codes.forget_member(member_id)


@hookimpl
def member_deleted(member_id: str) -> None:
    """A deleted member's pending code stops working with them."""
    service = running.service
    if service is not None:
        service.codes.forget_member(member_id)


@hookimpl
def register_i18n(register: Callable[..., None]) -> None:
    register(I18nBundle(PLUGIN_ID, STRINGS))


class MobileChannel:
    """What the host calls with the member's answers, approvals and notifications: live
    streams get everything, the outbox keeps what must wait for a sleeping phone."""

    wants_partials = True
    #: Spec 1.16: the member's messages written elsewhere (the web, the API) reach the
    #: open app, which drew only the answer to them.
    wants_member_messages = True

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        service = running.service
        if service is None:
            raise RuntimeError("the mobile connector is not running")
        await service.deliver(member_id, event)

    async def reachable(self, member_id: str) -> bool:
        """Spec 1.16: only a member with a paired phone can be reached (the outbox and
        Web Push serve devices), so only they are offered the app as the home of their
        background notes, and one who unpaired their last phone gets them on the web."""
        service = running.service
        return service is not None and await service.paired(member_id)


@hookimpl
def register_channels(register: Callable[..., None]) -> None:
    register(PLUGIN_ID, MobileChannel())
