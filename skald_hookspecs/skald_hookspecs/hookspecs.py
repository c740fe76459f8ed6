"""Hook specifications: what a plugin may implement.

Conventions (STYLE.md "Hooks"):

- ``register_*`` hooks are one-shot registries called once per plugin at load, with a
  ``register`` callback bound to that plugin, so the host stamps provenance on every
  contribution and a failure marks only that plugin failed. Return value: ignored.
- ``startup`` / ``shutdown`` are lifecycle hooks, called per plugin; an impl may be
  ``async def`` (the host awaits whatever it gets back). A startup that raises or
  exceeds the hook timeout marks the plugin unhealthy; it never stops the host.
- No hook is ``firstresult``: results, where any, are merged.

Every hook says since which ``SPEC_VERSION`` it exists. To rename or remove one, add
the new one beside it and deprecate the old with pluggy's ``warn_on_impl_args``.
"""

from __future__ import annotations

from typing import Any, Callable

from skald_hookspecs import hookspec
from skald_hookspecs.types import PluginInfo


@hookspec
def plugin_info() -> PluginInfo:
    """Who this plugin is: id, title, description, icon, the spec range it needs, its
    instance and per-member config schemas, ``manages_own_access`` and
    ``grant_by_default``. Called once per plugin at load, before anything else; a
    plugin without it, or whose spec range this host cannot satisfy, is refused.
    The version shown in the catalog comes from the distribution's metadata.
    Since 1.0."""


@hookspec
def startup(host: Any) -> None:
    """The plugin was enabled (at boot, or when an admin enables it): start its
    background work. ``host`` is this plugin's ``HostApi``; keep it. May be async.
    Bounded by the host's hook timeout; raising marks the plugin unhealthy.
    Since 1.0."""


@hookspec
def shutdown(reason: str) -> None:
    """The plugin was disabled or the host is stopping: stop everything started in
    ``startup``. May be async. Bounded by the hook timeout. ``reason`` says which:
    ``"disabled"`` (an admin turned the plugin off: also undo what it registered
    outside the host, such as a webhook, which would otherwise keep being called),
    ``"stopping"`` (the host stops and starts it again with the next start) or
    ``"reconfigured"`` (an admin saved changed settings: ``startup`` follows at once,
    on the new values; treat it as ``"stopping"``). An impl may leave ``reason`` out.
    Since 1.0; ``reason`` since 1.1; ``"reconfigured"`` since 1.8."""


@hookspec
def register_tools(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute LLM tools: call ``register(Tool(...))`` for each. A name another
    plugin already registered is refused with both plugins named. Tools reach a
    member only while the plugin is enabled, running (its ``startup`` succeeded) and
    granted to them. A tool's ``run``
    returns ``str`` (or ``None``); anything else fails the call. Raise ``ToolError``
    for a failure the model should read; any other exception reaches the model as a
    generic failure with an error id, its traceback goes to the log and the plugin's
    catalog page (since 1.2). Since 1.0."""


@hookspec
def register_routes(register: Callable[..., None], host: Any) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute HTTP routes: call ``register(blueprint)`` with one Quart blueprint.
    It is mounted at ``/api/plugin/<id>/`` at boot, behind authentication and an
    enabled gate re-checked per request (404 while disabled). Handlers must tolerate
    the plugin not running. ``host`` is this plugin's ``HostApi`` for handlers to use;
    ``skald_hookspecs.current_caller()`` tells a handler who is calling. Since 1.0."""


@hookspec
def register_web_pages(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute pages of the web shell: call ``register(WebPage(...))``. Shown to
    members who may see the plugin (admins: all; ``admin_only`` pages: admins only).
    Since 1.0."""


@hookspec
def register_i18n(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute UI strings: call ``register(I18nBundle(domain, {locale: {key: text}}))``.
    Bundles merge by domain; a key missing in a locale falls back to English.
    A plugin's bundle is under its own id; under ``core`` or another installed plugin's
    id it may only add a language that domain lacks (never replace a string), and that
    counts only while the plugin is enabled (since 1.17; before, another plugin's domain
    failed the plugin, and ``core`` additions counted even while it was disabled).
    Since 1.0."""


@hookspec
def register_config_sets(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute instance settings: call ``register(ConfigSet(...))``. A set whose
    ``owner`` is None is rendered on the general settings page, any other on the
    registering plugin's page in the catalog (since 1.2). The plugin reads the values
    with ``HostApi.get_settings(set_id)`` (since 1.2). Since 1.0."""


@hookspec
def register_system_agents(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute background agents run by the host's one scheduler: call
    ``register(SystemAgent(...))`` (``skald_hookspecs.system_agents``), and register
    one ``ConfigSet`` per agent whose ``owner`` is the agent's id, with the fields
    ``enabled`` and (but for ``per_subject`` agents) ``interval``: a plugin whose agents
    and sets disagree is refused.
    Agents run only while their plugin is enabled and their ``enabled`` setting is on;
    the scheduler calls ``has_work`` then ``run`` per member, subject or instance
    (the scope). Since 1.0; the context, scopes and settings since 1.3."""


@hookspec
def register_tts_engines(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute text-to-speech engines: call ``register(name, engine)`` where
    ``engine`` is a ``TtsEngine`` (``skald_hookspecs.tts``): ``voices()`` says which
    languages it speaks, ``async synthesize(text, voice, locale)`` returns one WAV file.
    The host uses an engine only while its plugin is enabled and healthy; members reach
    it through ``/api/tts`` and plugins through ``HostApi.synthesize_speech``. Since 1.0;
    ``voices()`` and the WAV format since 1.2."""


@hookspec
def register_channels(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute messaging surfaces (Telegram, mobile): call ``register(name, channel)``
    where ``name`` is the plugin's own id and ``channel`` has ``async deliver(member_id,
    event)``; inbound messages enter through ``HostApi.send_message``. Since 1.0."""


@hookspec
def register_sandbox_backends(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute places where members' commands run: call ``register(name, backend)``.
    The host picks one by configuration or availability. Since 1.0."""


@hookspec
def register_agent_dirs(register: Callable[..., None]) -> None:
    """Called once per plugin while the host starts, before any plugin starts. Contribute directories of agent definitions: call ``register(path)``. Since 1.0.

    Each definition is a folder ``<id>/`` with ``AGENT.md`` (the prompt) and ``meta.yaml``,
    whose keys are ``title``, ``description``, ``kind`` (``chat``: members talk with it;
    ``task``: others delegate to it; ``system``: a system agent's ``run_turn`` uses it;
    ``project`` is the host's project chat),
    ``allow_tools`` and ``tools`` (names or patterns such as ``"*"``), ``model`` or
    ``strength``, ``inject_memory`` and ``id`` (its folder's name, if given); copy a chat
    or task agent from the host's ``agents/`` folder to start (it has no system agent:
    the guide's "System agents" shows a ``kind: system`` one's ``meta.yaml``). Since 1.3 a task agent's ``meta.yaml`` may also say ``delegates``, ``skills``, ``limits``
    (``timeout_secs``, ``max_iterations``, ``max_result_chars``), ``signal`` (a contract for
    ``emit_signal``), ``enabled`` and an inline ``provider`` + ``model`` pair (a provider
    name and a model of the instance's model catalog; the agent's runs use that model
    alone). A ``skills/`` folder beside the definitions holds skills, ``<name>.md`` each
    (optional front matter: ``description``), which a definition's ``skills`` lets its
    agent read with ``get_skill``. All definitions and skills (the host's and every
    plugin's) load as one generation, checked whole: one bad file (an unknown key, an id
    that is not its folder's name, a reserved id, a symlink, a file over 256 KiB, an
    unknown tool, delegate target, skill or provider + model) refuses the generation,
    the last good one stays in use, and the admin's Helpers page says why. When there is
    no good one yet (the first read after a start), a plugin's folders at fault are left
    out instead (its page lists why) and the other definitions are used. A disabled
    plugin's folders are checked too: its definitions reach no one until it is enabled."""


@hookspec
def user_config_updated(member_id: str, values: dict, host: Any) -> None:
    """A member saved this plugin's per-member config; ``values`` were validated
    against the plugin's ``user_config_schema`` and are the whole config (what was
    stored merged with what the member sent). Implementing it takes over storing:
    the host stores nothing itself, so keep what should be kept with
    ``host.set_user_config(member_id, values)`` (which replaces the stored config).
    Raise ``ValueError("for the member")`` to refuse. Without it, the values are
    stored as they are. May be async. Since 1.0."""


@hookspec
def member_tools(member_id: str) -> list:
    """Called in every model round of a member's turn, for each enabled plugin the
    member may use: the plugin's tools *for this member right now*, beside the fixed
    ones of ``register_tools`` (a list of ``Tool``; None or ``[]`` for none). For tool
    sets that differ per member and change at runtime (an MCP connector's tools). Must
    be synchronous and cheap: return what the plugin already holds in memory, never
    do I/O here. The host validates each tool as ``register_tools`` does; a name that
    another tool already uses is dropped (logged), never shadows it. A tool offered
    here passes through the approval gate like any other; the host re-asks this hook
    before running a call it did not just offer, so withdrawing a tool from the list
    withdraws it at once (a revocation needs no bus). ``Tool.run`` should still check
    access itself at call time. Since 1.2."""


@hookspec
def member_unlocked(member_id: str, host: Any) -> None:
    """Called when a member's private file was opened (they logged in since the host
    started), for each started plugin: start what the plugin runs for that member (a
    per-member runtime). ``HostApi.member_secret_*`` and ``append_member_event`` work
    from now until ``member_locking``. May be async; bounded by the hook timeout and
    awaited within the login, so start slow work in a task and return. The plugins'
    implementations run concurrently, each under its own hook timeout: a login waits
    for the slowest of them, at most one hook timeout (``plugins.hook_timeout_seconds``,
    5 s by default), however many plugins implement the hook. Members already
    unlocked when the plugin starts are in ``HostApi.unlocked_members()``. Since 1.2."""


@hookspec
def member_reset(member_id: str, host: Any) -> None:
    """Called when an admin reset the password of a member whose data was encrypted
    with it, for each started plugin: their data was set aside, and the account starts
    over in the hands of whoever holds the new password (the admin who chose it among
    them). Drop what binds the account to identities outside the server (a linked chat,
    a login the plugin keeps for them), so that nothing the member sends from there
    reaches the new holder and nothing reaches the member from the account. The
    member's sessions and device tokens are already gone, and so is what the host
    stored as their per-member config (``get_user_config`` answers the defaults). Awaited within the reset's
    request, bounded by the hook timeout; a failure is logged and the reset stands.
    A plugin that was not running at the reset (disabled, failed to start or to load,
    uninstalled, or the password reset with ``skald reset-password`` while the server
    was stopped) is called once for the member when it next starts, right after its
    ``startup`` (since 1.18), unless the member was deleted since (then it gets
    ``member_deleted`` instead). Since 1.7."""


@hookspec
def member_deleted(member_id: str, host: Any) -> None:
    """Called when an admin deleted a member, for each started plugin, once the member
    is gone (their row, their file and what the host stored as their per-member config;
    ``member_locking`` ran before, if their file was open): drop what the plugin keeps for that id (a linked
    chat, its waiting messages, its own keys), so that nothing the account's outside
    identities send reaches a member who no longer exists, and a new account can take
    them up. No ``HostApi`` call succeeds for the member any more
    (``set_user_config`` included; the per-member data calls raise ``MemberLocked``
    with ``code`` ``"member_not_found"``, saying the member was deleted). Awaited within the deletion's request, bounded by
    the hook timeout; a failure is logged and the deletion stands. A plugin that was
    not running at the deletion (disabled, failed to start or to load, uninstalled) is
    called once for the member when it next starts, right after its ``startup`` (and
    after any ``member_reset`` it missed for other members), since 1.18. Since 1.14."""


@hookspec
def member_access_changed(member_id: str, host: Any) -> None:
    """Called after what decides a member's access may have changed, for each started
    plugin: an admin changed the member (their role, their active flag), the
    capabilities or attributes of their role (then once for each member of the role),
    or their plugin grants (a grant given or taken, default grants seeded when a
    plugin is first seen). Called once the change is stored, whether the member's file
    is open or not, and before the admin's request is answered. It carries no detail,
    and may come when nothing that concerns the plugin changed: ask again what matters
    (``HostApi.member_has_grant``, ``HostApi.member_may``) and stop what the member may
    no longer run (a session opened with their credentials, a watcher working for
    them), or start again what they may run once more. Awaited within the admin's
    request, bounded by the hook timeout (start slow work in a task); a failure is
    logged and the change stands. Since 1.15."""


@hookspec
def member_locking(member_id: str) -> None:
    """Called when a member's private file is about to close (logout of the last
    session, deactivation, deletion), for each started plugin: stop what runs for that
    member and drop what the plugin holds of their secrets. Called once per close, and
    only when the file was open: not for a member whose file is already closed (a
    deletion or reset of a member who was not logged in). May be async; bounded by
    the hook timeout. Since 1.2."""
