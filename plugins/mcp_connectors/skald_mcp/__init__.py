"""skald-mcp: connect the Skald agent to MCP servers ("connectors" in the UI).

A plugin installed as its own distribution and found through the entry point
``mcp = "skald_mcp"`` in the ``skald.plugins`` group. It imports only the contract
(``skald_hookspecs``); the ``mcp`` SDK is imported in ``startup``.

- The global runtime: connectors the admin adds on the Connectors page (a stdio command
  given as an argv array, or a streamable-HTTP address), one long-lived session each,
  granted per member. Their tools reach a member through the ``member_tools`` hook
  (contract 1.2) as ``<connector>__<tool>`` and pass the host's approval gate like any
  tool.
- Revocation is synchronous: the grant set is replaced in memory before the admin's
  request is answered, and each call checks it again.
- Tool pinning: a tool that appears or changes after the admin added the connector is
  withheld until the admin accepts it.
"""

from __future__ import annotations

from typing import Any, Callable

from skald_hookspecs import ConfigField, HostApi, I18nBundle, PluginInfo, Tool, WebPage, hookimpl
from skald_mcp.strings import STRINGS

PLUGIN_ID = "mcp"

#: Who may activate templates and register remote servers is a role capability
#: (``connectors.activate``, ``connectors.remote``: the Roles page), no longer a switch here.
CONFIG_SCHEMA = (
    ConfigField(
        "allow_private_addresses",
        "boolean",
        label="Allow private addresses",
        description="Let members' connectors and sign-in discovery reach loopback and private-network addresses.",
        default=False,
        # Read where it is used (routes, each connection and request of a member's own
        # server: guard.py): saving it restarts nothing, no call in flight breaks.
        live=True,
    ),
)


class _Running:
    """The runtime of the current enablement (``startup`` to ``shutdown``). None while
    the plugin is disabled, so no connector tool reaches anyone."""

    runtime: Any = None  # skald_mcp.runtime.Runtime, imported lazily


running = _Running()


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id=PLUGIN_ID,
        title="Connectors",
        description="Connect the assistant to MCP servers (connectors), granted per member.",
        icon="plug",
        spec=">=1.19,<2",  # member_tools, member secrets and events (1.2); questions, Caller.may (1.3); net (1.5); AddressRefused.reason (1.6); ConfigField.live (1.12); Tool.capability (1.13); member_access_changed, HostApi.member_may (1.15); Tool.untrusted_output (1.18); Caller.session_id (1.19)
        config_schema=CONFIG_SCHEMA,
        grant_by_default=True,
    )


@hookimpl
async def startup(host: HostApi) -> None:
    from skald_mcp.runtime import Runtime

    runtime = Runtime(host)
    await runtime.load()
    await runtime.start_all()
    running.runtime = runtime

    async def on_system(event: Any) -> None:
        if event.kind == "member_created" and event.subject_id and running.runtime is runtime:
            await runtime.member_created(event.subject_id)

    host.subscribe_system(on_system)


@hookimpl
async def shutdown(reason: str) -> None:
    runtime, running.runtime = running.runtime, None
    if runtime is not None:
        await runtime.stop_all()


@hookimpl
def member_tools(member_id: str) -> list[Tool]:
    runtime = running.runtime
    return runtime.member_tools(member_id) if runtime is not None else []


@hookimpl
def member_unlocked(member_id: str) -> None:
    runtime = running.runtime
    if runtime is not None:
        runtime.members.unlocked(member_id)


@hookimpl
async def member_locking(member_id: str) -> None:
    runtime = running.runtime
    if runtime is not None:
        await runtime.members.locking(member_id)
        runtime.oauth.forget(member_id)


@hookimpl
async def member_access_changed(member_id: str) -> None:
    """The member's grant of the plugin, their role or its capabilities may have changed
    (contract 1.15): their own connectors' sessions follow (``MemberConnectors.access_changed``)."""
    runtime = running.runtime
    if runtime is not None:
        if not await runtime.members.access_changed(member_id):
            runtime.oauth.forget(member_id)  # the plugin taken from them: their tokens leave RAM too


@hookimpl
def register_routes(register: Callable[..., None], host: HostApi) -> None:
    from skald_mcp.routes import build_blueprint  # imports Quart: only now

    register(build_blueprint(host))


@hookimpl
def register_web_pages(register: Callable[..., None]) -> None:
    register(WebPage("connectors", "Connectors", "page.js", icon="plug"))
    # The member's connector grants, on their page in the admin's Members area (1.3).
    register(WebPage("member-grants", "Connector access", "member.js", icon="plug", slot="member_admin"))


@hookimpl
def register_i18n(register: Callable[..., None]) -> None:
    register(I18nBundle(PLUGIN_ID, STRINGS))
