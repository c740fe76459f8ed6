"""skald-hello: greets each member by name.

The smallest plugin that uses each part of the contract a typical plugin needs: who it
is (``plugin_info``, with an instance config and a per-member config), a tool the agent
can call (``hello_greet``), a lifecycle that keeps state in the host (``startup`` /
``shutdown``), HTTP routes, a page of the web shell and UI strings in two languages. It is the walk-through of ``docs/plugins.md``.

The host finds this module through the entry point ``hello = "skald_hello"`` in the
``skald.plugins`` group and registers the module itself as the plugin: every function
below marked ``@hookimpl`` is a hook implementation.

Imports stay cheap on purpose. The host imports every installed plugin at boot, even a
disabled one, times it and warns above 100 ms. Quart alone costs about 180 ms to
import, so ``routes`` (which needs it) is imported inside ``register_routes``, when the
host, which has already imported Quart, asks for the blueprint.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from skald_hookspecs import ConfigField, HostApi, I18nBundle, PluginInfo, Tool, ToolContext, ToolError, WebPage, hookimpl

PLUGIN_ID = "hello"

#: The instance config the admin edits on the plugin's catalog page. The host validates
#: every write against it (a bad value is refused whole, naming the field) and never
#: sends ``api_token`` back to a browser: secret fields are write-only.
CONFIG_SCHEMA = (
    ConfigField(
        "greeting",
        "string",
        label="Greeting",
        description="The word members are greeted with. Leave empty for the member's language default.",
        max_length=80,
    ),
    ConfigField("shout", "boolean", label="Shout", description="Greet in capital letters.", default=False),
    ConfigField(
        "api_token",
        "string",
        label="API token",
        description="A token for an upstream greeting service (stored, never shown again).",
        secret=True,
    ),
)

#: What each member may set for themselves, from the plugin's own page. Stored in the
#: admin-readable registry, so never ask members for a secret here.
USER_CONFIG_SCHEMA = (
    ConfigField("nickname", "string", label="Nickname", description="What the greeting calls you.", max_length=40),
)

#: Keys become ``hello.<key>`` in the merged string table; German falls back to
#: English key by key. What the shell shows of the plugin outside its page (the catalog
#: card, the settings forms, the menu and the header above the page) is looked up under
#: the host's well-known keys: ``plugin.title``, ``plugin.description``,
#: ``config.<field>.label`` / ``.description``, ``user_config.<field>.label`` /
#: ``.description`` and ``page.<page_id>.title``. The texts in ``plugin_info``,
#: ``CONFIG_SCHEMA`` and ``register_web_pages`` are only the fallback for a key no bundle
#: has, so the English here says the same. The rest are the page's own strings, which it
#: reads through its route.
STRINGS: Mapping[str, Mapping[str, str]] = {
    "en": {
        "plugin.title": "Hello",
        "plugin.description": "Greets each member by name.",
        "page.main.title": "Hello",
        "config.greeting.label": "Greeting",
        "config.greeting.description": "The word members are greeted with. Leave empty for the member's language default.",
        "config.shout.label": "Shout",
        "config.shout.description": "Greet in capital letters.",
        "config.api_token.label": "API token",
        "config.api_token.description": "A token for an upstream greeting service (stored, never shown again).",
        "user_config.nickname.label": "Nickname",
        "user_config.nickname.description": "What the greeting calls you.",
        "greeting": "Hello",
        "save": "Save",
        "not_running": "The Hello plugin is not running.",
    },
    "de": {
        "plugin.title": "Hallo",
        "plugin.description": "Begrüßt jedes Mitglied mit seinem Namen.",
        "page.main.title": "Hallo",
        "config.greeting.label": "Gruß",
        "config.greeting.description": "Das Wort, mit dem Mitglieder begrüßt werden. Leer lassen für den Gruß in der Sprache des Mitglieds.",
        "config.shout.label": "Rufen",
        "config.shout.description": "In Großbuchstaben grüßen.",
        "config.api_token.label": "API-Token",
        "config.api_token.description": "Ein Token für einen Begrüßungsdienst im Netz (wird gespeichert und nie wieder angezeigt).",
        "user_config.nickname.label": "Spitzname",
        "user_config.nickname.description": "Wie dich der Gruß nennt.",
        "greeting": "Hallo",
        "save": "Speichern",
        "not_running": "Das Hallo-Plugin läuft nicht.",
    },
}


class _Running:
    """The ``HostApi`` this plugin was started with, for the route handlers.

    ``startup`` is the only place a plugin receives its ``HostApi``, and ``shutdown``
    receives nothing, so the plugin keeps it here. A module is one plugin per process:
    a plugin that must run in two hosts of one process at once (rare outside tests) is
    written as a class and registered as an instance instead.
    """

    host: HostApi | None = None


running = _Running()


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id=PLUGIN_ID,
        title="Hello",
        description="Greets each member by name.",
        icon="hand",
        # The SPEC_VERSION range this code was written for: 1.2 brought ToolError, 1.3 the
        # page kit page.js imports, 1.11 kv_update. A host that cannot satisfy it refuses
        # the plugin by name instead of failing later; the dependency in pyproject.toml
        # says the same.
        spec=">=1.11,<2",
        config_schema=CONFIG_SCHEMA,
        user_config_schema=USER_CONFIG_SCHEMA,
    )


def plus_one(count: int | None) -> int:
    return (count or 0) + 1


@hookimpl
async def startup(host: HostApi) -> None:
    running.host = host
    # kv_update (spec 1.11), not kv_get then kv_set: a read then a write loses an update
    # another call made in between; kv_update applies plus_one under the key's lock.
    await host.kv_update("starts", plus_one)


@hookimpl
async def shutdown() -> None:
    host, running.host = running.host, None
    if host is not None:
        await host.kv_update("stops", plus_one)


@hookimpl
def register_routes(register: Callable[..., None]) -> None:
    from skald_hello.routes import build_blueprint  # imports Quart: only now, not at boot

    register(build_blueprint())


@hookimpl
def register_web_pages(register: Callable[..., None]) -> None:
    # ``entry`` is a path under this plugin's own routes: /api/plugin/hello/page.js.
    register(WebPage("main", "Hello", "page.js", icon="hand"))


async def greet(args: Mapping[str, Any], ctx: ToolContext) -> str:
    """The tool: greet someone by name, the way the admin configured greetings. It
    returns text for the model; a bad argument is a ``ToolError``, whose message the
    model reads (any other exception would reach it only as an error id)."""
    name = args.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolError("'name' must be the name of the person to greet")
    config = await ctx.host.get_config()  # the schema's defaults apply: "shout" is False unless set
    return compose_greeting(config, {}, name=name.strip(), default="Hello")


@hookimpl
def register_tools(register: Callable[..., None]) -> None:
    register(
        Tool(
            name="hello_greet",
            description="Greet a person by name, in this server's configured greeting.",
            parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            run=greet,
            concurrency_safe=True,  # it only reads
            restart="rerun",
        )
    )


@hookimpl
def register_i18n(register: Callable[..., None]) -> None:
    register(I18nBundle(PLUGIN_ID, STRINGS))


def compose_greeting(config: Mapping[str, Any], user_config: Mapping[str, Any], *, name: str, default: str) -> str:
    """``"Hello, Alice!"`` from the instance config, the member's own config and their
    name. ``HostApi.get_config()`` fills in the schema's defaults, so ``shout`` is
    always there; ``greeting`` has no default (the member's language decides)."""
    greeting = config.get("greeting") or default
    text = f"{greeting}, {user_config.get('nickname') or name}!"
    return text.upper() if config["shout"] else text
