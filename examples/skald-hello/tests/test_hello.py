"""skald-hello against a real host: the ``skald`` fixture (installed with ``skald-host[test]``)
starts Hypercorn on 127.0.0.1 with exactly the plugins named, and stops it afterwards."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import skald_hello
from skald_host.testing import Reply, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

PACKAGE = Path(skald_hello.__file__).parent


async def test_admin_is_greeted(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    admin = await host.admin()
    response = await admin.get("/api/plugin/hello/greeting")
    assert response.json()["greeting"] == "Hello, admin!"


async def test_the_agent_greets_through_the_tool(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    await host.use_model(await skald.model_server(Reply(tool_calls=[ToolCall("hello_greet", {"name": "Ada"})]), Reply("Done.")))
    await host.allow_tool("hello_greet")
    turn = await (await host.member("alice")).chat("Please greet Ada")
    assert (turn.result("hello_greet"), turn.text) == ("Hello, Ada!", "Done.")


async def test_a_bad_argument_reaches_the_model_as_the_tools_own_words(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    await host.use_model(await skald.model_server(Reply(tool_calls=[ToolCall("hello_greet", {"name": " "})]), Reply("Sorry.")))
    await host.allow_tool("hello_greet")
    turn = await (await host.member("alice")).chat("Greet nobody")
    assert turn.result("hello_greet") == "Error: 'name' must be the name of the person to greet"


# -- the gate in front of the routes ----------------------------------------------------


async def test_routes_answer_404_while_the_plugin_is_disabled(skald):
    host = await skald.start(plugins=[skald_hello])  # installed plugins start disabled
    admin = await host.admin()
    assert (await admin.get("/api/plugin/hello/greeting")).status_code == 404

    enabled = await admin.put("/api/admin/plugins/hello/enabled", json={"enabled": True})
    assert enabled.status_code == 200, enabled.text
    assert (await admin.get("/api/plugin/hello/greeting")).status_code == 200

    await admin.put("/api/admin/plugins/hello/enabled", json={"enabled": False})
    assert (await admin.get("/api/plugin/hello/greeting")).status_code == 404


async def test_a_member_without_a_grant_gets_403(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    # The seeded "restricted" role has auto_grant off: its members receive no plugin
    # until the admin ticks the box on their page.
    kid = await host.member("kid", role="restricted")
    assert (await kid.get("/api/plugin/hello/greeting")).status_code == 403

    alice = await host.member("alice", display_name="Alice")  # auto_grant role: granted at creation
    assert (await alice.get("/api/plugin/hello/greeting")).json()["greeting"] == "Hello, Alice!"


# -- config -------------------------------------------------------------------------------


async def test_config_is_validated_and_the_error_names_the_field(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    admin = await host.admin()
    before = await host.core.host_api("hello").get_config()

    refused = await admin.put("/api/admin/plugins/hello/config", json={"config": {"greeting": "Hi", "shout": "yes"}})
    assert refused.status_code == 400
    first = {"error": "shout: must be true or false", "field": "shout", "code": "config_boolean", "values": {}}
    assert refused.json() == {**first, "errors": [first]}  # every refused field is listed; here one
    assert await host.core.host_api("hello").get_config() == before  # refused whole: "Hi" was not stored

    saved = await admin.put("/api/admin/plugins/hello/config", json={"config": {"greeting": "Hi", "shout": True}})
    assert saved.status_code == 200, saved.text
    assert (await admin.get("/api/plugin/hello/greeting")).json()["greeting"] == "HI, ADMIN!"


async def test_the_api_token_is_stored_but_never_sent_back(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    admin = await host.admin()
    token = "hello-token-5f2c9a"

    saved = await admin.put("/api/admin/plugins/hello/config", json={"config": {"api_token": token}})
    assert saved.json()["config"]["api_token"] == "********"
    detail = await admin.get("/api/admin/plugins/hello")
    greeting = await admin.get("/api/plugin/hello/greeting")
    for response in (saved, detail, greeting):
        assert token not in response.text
    assert greeting.json()["token_configured"] is True

    # Sending the mask back (what a settings form does) keeps the stored token.
    await admin.put("/api/admin/plugins/hello/config", json={"config": {"api_token": "********", "greeting": "Hey"}})
    assert (await host.core.host_api("hello").get_config())["api_token"] == token


# -- per-member config, strings, lifecycle, page -------------------------------------------


async def test_a_member_sets_a_nickname_and_is_greeted_in_german(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    alice = await host.member("alice", display_name="Alice")

    saved = await alice.put("/api/plugins/hello/my-config", json={"config": {"nickname": "Ali"}})
    assert saved.status_code == 200, saved.text
    mine = {p["id"]: p for p in (await alice.get("/api/plugins/mine")).json()["plugins"]}
    assert mine["hello"]["user_config"] == {"nickname": "Ali"}

    too_long = await alice.put("/api/plugins/hello/my-config", json={"config": {"nickname": "x" * 41}})
    assert too_long.status_code == 400
    assert too_long.json()["error"].startswith("nickname:")

    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    body = (await alice.get("/api/plugin/hello/greeting")).json()
    assert body["greeting"] == "Hallo, Ali!"


async def test_a_german_reader_sees_the_catalog_card_settings_menu_and_page_in_german(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    admin = await host.admin()
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200

    card = next(p for p in (await admin.get("/api/admin/plugins")).json()["plugins"] if p["id"] == "hello")
    assert (card["title"], card["description"]) == ("Hallo", "Begrüßt jedes Mitglied mit seinem Namen.")
    detail = (await admin.get("/api/admin/plugins/hello")).json()
    assert detail["title"] == "Hallo"
    assert [(f["label"], f["description"]) for f in detail["config_schema"]] == [
        ("Gruß", "Das Wort, mit dem Mitglieder begrüßt werden. Leer lassen für den Gruß in der Sprache des Mitglieds."),
        ("Rufen", "In Großbuchstaben grüßen."),
        ("API-Token", "Ein Token für einen Begrüßungsdienst im Netz (wird gespeichert und nie wieder angezeigt)."),
    ]
    member_form = [("Spitzname", "Wie dich der Gruß nennt.")]
    assert [(f["label"], f["description"]) for f in detail["user_config_schema"]] == member_form
    assert [p["title"] for p in detail["pages"]] == ["Hallo"]

    alice = await host.member("alice")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    mine = next(p for p in (await alice.get("/api/plugins/mine")).json()["plugins"] if p["id"] == "hello")
    assert (mine["title"], mine["description"]) == ("Hallo", "Begrüßt jedes Mitglied mit seinem Namen.")
    assert [(f["label"], f["description"]) for f in mine["user_config_schema"]] == member_form
    assert [p["title"] for p in (await alice.get("/api/plugins/pages")).json()["pages"]] == ["Hallo"]  # the menu
    page = (await alice.get("/api/plugin/hello/greeting")).json()
    assert page["strings"] == {"nickname": "Spitzname", "save": "Speichern"}

    # Nothing of the plugin's falls back to English for lack of a German key.
    missing = (await admin.get("/api/admin/status")).json()["missing_translations"]
    assert [key for keys in missing.values() for key in keys if key.startswith("hello.")] == []


async def test_startup_and_shutdown_count_in_the_plugins_store(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    store = host.core.host_api("hello")
    assert (await store.kv_get("starts"), await store.kv_get("stops")) == (1, None)

    await host.core.set_plugin_enabled("hello", False)
    await host.core.set_plugin_enabled("hello", True)
    assert (await store.kv_get("starts"), await store.kv_get("stops")) == (2, 1)


async def test_the_start_counter_loses_no_start_that_ran_at_the_same_time(skald):
    """Counted with ``kv_update``: a ``kv_get`` then a ``kv_set`` of what it read lost
    every start that read the same old value (twenty at once stored a handful)."""
    import asyncio

    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    store = host.core.host_api("hello")
    await asyncio.gather(*(skald_hello.startup(store) for _ in range(20)))
    assert await store.kv_get("starts") == 21


async def test_the_page_is_listed_and_served_as_a_javascript_module(skald):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    alice = await host.member("alice")

    pages = (await alice.get("/api/plugins/pages")).json()["pages"]
    assert [(p["plugin_id"], p["page_id"], p["entry_url"]) for p in pages] == [
        ("hello", "main", "/api/plugin/hello/page.js")
    ]
    script = await alice.get(pages[0]["entry_url"])
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "export default class HelloPage extends HTMLElement" in script.text
    for markup_sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write"):
        assert markup_sink not in script.text  # text goes in through textContent only


# -- packaging ---------------------------------------------------------------------------


def test_the_package_imports_only_the_contract():
    """Boundary 1 of DESIGN.md: a plugin depends on ``skald_hookspecs``, never on
    ``skald_host``; Quart is allowed for the blueprint."""
    allowed = {"skald_hookspecs", "skald_hello", "quart", "__future__"} | set(sys.stdlib_module_names)
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_importing_the_plugin_is_cheap():
    """The host imports every installed plugin at boot; Quart waits for register_routes."""
    probe = (
        "import json, sys, time; t = time.perf_counter(); import skald_hello;"
        " print(json.dumps([time.perf_counter() - t, sorted(m for m in sys.modules if m.split('.')[0] in ('quart', 'skald_host'))]))"
    )
    seconds, heavy = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert heavy == []
    assert seconds < 0.5  # the host warns above 0.1 s; this guards the order of magnitude


@pytest.fixture
def installed_entry_point():
    found = [ep for ep in importlib.metadata.entry_points(group="skald.plugins") if ep.value == "skald_hello"]
    if not found:
        pytest.skip("skald-hello is not installed (pip install -e examples/skald-hello)")
    return found[0]


async def test_the_host_finds_the_installed_distribution_through_its_entry_point(skald, installed_entry_point):
    assert installed_entry_point.name == "hello"
    host = await skald.start(use_entry_points=True)
    status = host.core.plugins.status("hello")
    assert (status.state, status.distribution, status.builtin) == ("disabled", "skald-hello", False)
    assert status.version == importlib.metadata.version("skald-hello")


# -- the page in a real browser ------------------------------------------------------------




async def test_the_page_shows_the_greeting_and_saves_a_nickname_in_a_browser(skald, plugin_browser):
    host = await skald.start(plugins=[skald_hello], enable=["hello"])
    await host.create_member("alice", display_name="Alice <b>")
    # Signs alice in and mounts the page as the shell does, under skald-p-hello-main.
    page = await plugin_browser.open(host, "alice", MEMBER_PASSWORD, "hello", "main")
    greeting = page.locator("skald-p-hello-main .hello-greeting")
    await greeting.filter(has_text="Hello, Alice <b>!").wait_for(timeout=10_000)  # shown as text, not markup
    assert await page.locator("skald-p-hello-main b").count() == 0

    await page.fill("skald-p-hello-main input[name=nickname]", "Ali")
    await page.click("skald-p-hello-main button[type=submit]")
    await greeting.filter(has_text="Hello, Ali!").wait_for(timeout=10_000)
    member = await host.core.users.find("alice")
    assert await host.core.host_api("hello").get_user_config(member.id) == {"nickname": "Ali"}
