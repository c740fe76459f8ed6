"""``docs/plugins.md`` keeps up with the contract and with the example it walks through.

A hook, a ``HostApi`` method or a contract type added without documentation fails here,
as does a reference section older than the code it was generated from.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pluggy

import skald_hookspecs
from skald_hookspecs import PROJECT_NAME, hookspecs
from skald_hookspecs.host_api import HostApi

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugins.md"
GENERATOR = ROOT / "docs" / "tools" / "plugin_reference.py"
EXAMPLE = ROOT / "examples" / "skald-hello"
REGENERATE = ".venv/bin/python docs/tools/plugin_reference.py --write"


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def generator():
    spec = importlib.util.spec_from_file_location("plugin_reference", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hook_names() -> set[str]:
    """The hooks as pluggy sees them, independent of the generator's discovery."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    return {name for name in vars(manager.hook) if not name.startswith("_")}


def host_api_methods() -> set[str]:
    return {name for name, value in vars(HostApi).items() if inspect.isfunction(value) and not name.startswith("_")}


def test_every_hook_is_documented():
    text = doc_text()
    hooks = hook_names()
    assert len(hooks) >= 14
    missing = sorted(name for name in hooks if f"`{name}`" not in text)
    assert missing == [], f"hooks missing from docs/plugins.md: {missing} (run {REGENERATE})"


def test_every_host_api_method_is_documented():
    text = doc_text()
    methods = host_api_methods()
    assert {"get_config", "kv_set", "member_has_grant", "translate"} <= methods
    missing = sorted(name for name in methods if not re.search(rf"`(async )?{name}\(", text))
    assert missing == [], f"HostApi methods missing from docs/plugins.md: {missing} (run {REGENERATE})"


def test_everything_the_contract_exports_is_documented():
    text = doc_text()
    missing = sorted(name for name in skald_hookspecs.__all__ if f"`{name}" not in text)
    assert missing == [], f"skald_hookspecs exports {missing}, which docs/plugins.md never mentions (run {REGENERATE})"
    documented = {cls.__name__ for cls in generator().contract_types()}
    assert {"PluginInfo", "ConfigField", "WebPage", "I18nBundle", "ConfigSet", "Tool", "ToolContext", "SystemAgent"} <= documented
    exceptions = {cls.__name__ for cls in generator().contract_exceptions()}
    assert {"ToolError", "ChannelRequestError", "MemberLocked", "SandboxUnavailable"} <= exceptions
    assert "#### `ToolError(Exception)`" in text


def test_the_reference_covers_everything_the_contract_exports():
    """Mentioned somewhere in the guide is not enough: ``current_caller``, ``Caller`` and
    ``returns`` were used in the walk-through and absent from the Reference, where a
    stranger looks a name up. Each exported name is a heading, a signature or an entry
    of the generated reference."""
    reference = generator().reference()
    missing = sorted(name for name in skald_hookspecs.__all__ if not re.search(rf"`(async )?{re.escape(name)}[`( =]", reference))
    assert missing == [], f"skald_hookspecs exports {missing}, which the generated Reference leaves out (docs/tools/plugin_reference.py)"
    current = generator().current_section(doc_text())
    assert current is not None and "#### `Caller`" in current and "`current_caller() -> Caller | None`" in current


def test_every_hook_says_since_which_spec_version_it_exists():
    for name in hook_names():
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert re.search(r"Since \d+\.\d+", doc), f"hookspec {name} has no 'Since <version>' in its docstring"


def test_the_generated_reference_is_up_to_date():
    reference = generator()
    current = reference.current_section(doc_text())
    assert current is not None, "the reference markers are missing from docs/plugins.md"
    assert current == reference.reference(), f"docs/plugins.md is out of date: run {REGENERATE}"


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def walk_through() -> str:
    """The section of the guide that walks through examples/skald-hello."""
    text = doc_text()
    start = text.index("## Walk-through: `examples/skald-hello`")
    return text[start : text.index("\n## ", start + 1)]


def test_the_tests_shown_are_the_examples_tests():
    shown = [b for b in code_blocks(walk_through(), "python") if "async def test_" in b]
    assert len(shown) == 2 and len(shown[0].strip().splitlines()) == 5
    tests = (EXAMPLE / "tests" / "test_hello.py").read_text(encoding="utf-8")
    for block in shown:
        assert block in tests
    end_to_end = next(b for b in shown if ".chat(" in b)
    assert len(end_to_end.strip().splitlines()) - 1 <= 6  # the tool through the agent, at most six lines


def test_the_code_shown_is_the_examples_code():
    source = (EXAMPLE / "skald_hello" / "__init__.py").read_text(encoding="utf-8")
    tool = next(b for b in code_blocks(walk_through(), "python") if "async def greet(" in b)
    assert tool in source


def test_the_page_shown_reads_what_the_examples_route_answers():
    """The walk-through's page.js and routes.py are excerpts: what the page reads of the
    route's answer (``data.greeting``) must be what the example's page reads and its route
    answers, so an answer field dropped from the example (``title``) leaves the guide too."""
    shown_page = next(b for b in code_blocks(walk_through(), "js") if "HelloPage" in b)
    shown_route = next(b for b in code_blocks(walk_through(), "python") if "def build_blueprint" in b)
    page = (EXAMPLE / "skald_hello" / "page.js").read_text(encoding="utf-8")
    route = (EXAMPLE / "skald_hello" / "routes.py").read_text(encoding="utf-8")
    answered = set(re.findall(r'^\s*[{(]?"(\w+)": ', route, flags=re.M))
    assert set(re.findall(r'[{(]?"(\w+)": ', shown_route)) <= answered | {"error"}
    read = set(re.findall(r"data\.(\w+)", page))
    assert read and read <= answered, (read, answered)
    assert set(re.findall(r"data\.(\w+)", shown_page)) <= read


def test_the_packaging_shown_is_the_examples_packaging():
    pyproject = (EXAMPLE / "pyproject.toml").read_text(encoding="utf-8")
    shown = next(b for b in code_blocks(walk_through(), "toml") if "skald.plugins" in b)
    for line in shown.splitlines():
        assert line in pyproject.splitlines(), f"docs/plugins.md shows {line!r}, which the example does not have"


def test_the_files_the_walk_through_names_exist():
    for name in re.findall(r"^### `([^`]+)`$", doc_text(), flags=re.M):
        if "/" in name or name.endswith((".toml", ".py", ".js")):
            assert (EXAMPLE / name).exists(), f"docs/plugins.md walks through {name}, which examples/skald-hello lacks"


# -- the tutorial ("Write a tool plugin") ----------------------------------------------------


def tutorial_files() -> dict[str, str]:
    """The files of the tutorial plugin, each the code block after a
    ``<!-- tutorial-file: path -->`` marker: what tests/catalog/test_plugin_tutorial.py builds."""
    found = re.findall(r"<!-- tutorial-file: (\S+) -->\n```\w+\n(.*?)```", doc_text(), flags=re.S)
    return dict(found)


def test_the_tutorial_shows_a_whole_plugin_whose_end_to_end_test_is_six_lines_at_most():
    files = tutorial_files()
    assert set(files) == {"pyproject.toml", "skald_dice/__init__.py", "tests/test_dice.py"}
    assert 'dependencies = ["skald-hookspecs>=1.2,<2"]' in files["pyproject.toml"]
    assert 'test = ["skald-host[test]"]' in files["pyproject.toml"]
    assert "skald_host" not in files["skald_dice/__init__.py"]
    compile(files["skald_dice/__init__.py"], "skald_dice/__init__.py", "exec")
    tests = files["tests/test_dice.py"]
    compile(tests, "tests/test_dice.py", "exec")
    first = tests[tests.index("async def test_the_agent_rolls_dice") :].split("\n\n\n")[0]
    assert len(first.strip().splitlines()) - 1 <= 6
    assert ".chat(" in first and "allow_tool" in first


# -- what the prose promises ------------------------------------------------------------------


def prose() -> str:
    """The whole document with its lines joined, so a phrase is found across a wrap."""
    return " ".join(doc_text().split())


async def test_the_approval_rule_shown_is_one_the_admin_api_takes(skald):
    import json

    [request] = [b for b in code_blocks(doc_text(), "http") if "/api/admin/approval-rules" in b]
    head, body = request.split("\n\n", 1)
    method, path = head.splitlines()[0].split()
    rule = json.loads(body)
    assert (method, rule["tool_pattern"], rule["action"]) == ("POST", "roll_dice", "allow")

    host = await skald.start()
    created = await (await host.admin()).post(path, json=rule)
    assert created.status_code == 201, created.text
    assert {k: created.json()[k] for k in rule} == rule


def test_the_german_title_shown_is_the_examples():
    namespace: dict = {}
    source = (EXAMPLE / "skald_hello" / "__init__.py").read_text(encoding="utf-8")
    exec(compile(source.split("\nclass _Running")[0], "skald_hello", "exec"), namespace)  # the constants, not the hooks
    german = namespace["STRINGS"]["de"]
    section = prose()[prose().index("The API answers these in the reader's language") :][:600]
    titles = re.findall(r'"title": "([^"]+)"', section)
    assert titles and all(title == german["page.main.title"] for title in titles), (titles, german["page.main.title"])


async def test_saving_changed_settings_restarts_a_running_plugin_on_them_as_the_docs_say(skald, caplog):
    """What only ``startup`` reads (a bot's token) takes effect when saved: the plugin is
    told ``reconfigured`` and started on the new values; the same values again restart
    nothing, and a disabled plugin is not started by a save."""
    from skald_hookspecs import ConfigField, hookimpl

    from .support import Routed

    class Remembering(Routed):
        seen: list[str] = []

        @hookimpl
        async def startup(self, host) -> None:
            self.api = host
            Remembering.seen.append(f"start:{(await host.get_config())['greeting']}")

        @hookimpl
        def shutdown(self, reason: str) -> None:
            Remembering.seen.append(f"shutdown:{reason}")

    import logging

    caplog.set_level(logging.INFO, logger="skald_host")
    plugin = Remembering("remembering", config_schema=(ConfigField("greeting", default="Hello"),))
    host = await skald.start(plugins=[plugin], enable=["remembering"])
    admin = await host.admin()
    assert Remembering.seen == ["start:Hello"]
    saved = await admin.put("/api/admin/plugins/remembering/config", json={"config": {"greeting": "Moin"}})
    assert saved.status_code == 200, saved.text
    assert Remembering.seen == ["start:Hello", "shutdown:reconfigured", "start:Moin"]
    assert (await admin.get("/api/admin/plugins")).status_code == 200
    assert host.core.plugins.status("remembering").healthy
    again = await admin.put("/api/admin/plugins/remembering/config", json={"config": {"greeting": "Moin"}})
    assert again.status_code == 200 and Remembering.seen[-1] == "start:Moin" and len(Remembering.seen) == 3
    assert (await admin.put("/api/admin/plugins/remembering/enabled", json={"enabled": False})).status_code == 200
    assert (await admin.put("/api/admin/plugins/remembering/config", json={"config": {"greeting": "Hej"}})).status_code == 200
    assert Remembering.seen == ["start:Hello", "shutdown:reconfigured", "start:Moin", "shutdown:disabled"]
    logged = [r.getMessage() for r in caplog.records if "plugin remembering" in r.getMessage()]
    assert logged[-4:] == [  # the admin's log says what each save and switch did
        "plugin remembering configured; restarting it on the new values", "plugin remembering configured (nothing changed)",
        "plugin remembering disabled", "plugin remembering configured",
    ], logged

    # A field the plugin reads where it uses it (``live``) changes without a restart;
    # with any other field changed beside it, the plugin restarts.
    live = Remembering("attentive", config_schema=(ConfigField("greeting", default="Hello"), ConfigField("mood", default="calm", live=True)))
    Remembering.seen = []
    await host.stop()
    host = await skald.start(plugins=[live], enable=["attentive"])
    admin = await host.admin()
    assert Remembering.seen == ["start:Hello"]
    saved = await admin.put("/api/admin/plugins/attentive/config", json={"config": {"mood": "cheerful"}})
    assert saved.status_code == 200 and saved.json()["config"]["mood"] == "cheerful", saved.text
    assert Remembering.seen == ["start:Hello"]
    assert (await live.api.get_config())["mood"] == "cheerful"  # what the plugin reads now
    assert (await admin.put("/api/admin/plugins/attentive/config", json={"config": {"mood": "calm", "greeting": "Moin"}})).status_code == 200
    assert Remembering.seen == ["start:Hello", "shutdown:reconfigured", "start:Moin"]
    logged = [r.getMessage() for r in caplog.records if "plugin attentive" in r.getMessage()]
    assert "plugin attentive configured; its new values apply without a restart" in logged, logged

    text = prose()
    assert "A running plugin whose settings the admin changed is restarted (since 1.8)" in text
    assert "changed fields are all `live=True` (since 1.12)" in text
    assert "`shutdown(\"reconfigured\")`, then `startup`" in text
    assert "the next `host.get_config()` returns the new values" in text


def test_the_host_version_the_guide_names_is_this_hosts():
    """The guide said "this host: 1.7" after the contract moved on: its examples of the
    spec check must name the version a reader's host provides."""
    from skald_hookspecs import SPEC_VERSION

    text = prose()
    assert f"(this host: `{SPEC_VERSION}`)" in text and f"this host provides {SPEC_VERSION}" in text
    assert f"this host provides spec **{SPEC_VERSION}**" in text


def test_the_system_agent_example_labels_its_settings():
    """An author copies the example: a field without a label shows its bare name
    ("interval") on the plugin's page and the System agents page, in every language."""
    [block] = [b for b in code_blocks(doc_text(), "python") if "register(SystemAgent(" in b]
    example: dict = {"__name__": "digest_example"}
    exec(compile(block, str(DOC), "exec"), example)
    sets: list = []
    example["register_config_sets"](sets.append)

    fields = [field for config_set in sets for field in config_set.fields]
    assert fields and [field.name for field in fields if not field.label] == []
