"""What a stranger who wrote a plugin from ``docs/plugins.md`` alone got wrong, because
the guide showed or said it so: a counter kept with ``kv_get`` then ``kv_set`` (lost
concurrent updates), per-member data in the key-value store (``member_secret_*`` is the
per-member store, its name notwithstanding), a raw ``fetch`` for a file upload (the page
kit had no upload), and ``skald plugins`` run beside a running server (it refuses)."""

from __future__ import annotations

import re

from .test_docs import EXAMPLE, code_blocks, doc_text, prose, walk_through


def test_the_walk_through_counts_with_kv_update_as_the_example_does_and_says_why():
    [lifecycle] = [b for b in code_blocks(walk_through(), "python") if "async def startup(" in b]
    assert "kv_update(" in lifecycle and "kv_get(" not in lifecycle and "kv_set(" not in lifecycle
    source = (EXAMPLE / "skald_hello" / "__init__.py").read_text(encoding="utf-8")
    assert "kv_get(" not in source and "kv_set(" not in source
    shown = [line.strip() for line in lifecycle.splitlines() if line.strip()]
    assert all(line in {l.strip() for l in source.splitlines()} for line in shown), "the walk-through's lifecycle is not the example's"
    assert "a read then a write loses whatever another call wrote in between" in prose()
    assert 'spec=">=1.11,<2"' in source  # what it uses: kv_update came with 1.11


def test_the_guide_says_where_per_member_data_goes():
    text = prose()
    section = text[text.index("## Where a plugin keeps its data") :][:2500]
    for name in ("member_secret_get", "member_secret_set", "seal_for_member", "MemberLocked", "kv_update"):
        assert f"`{name}" in section, name
    assert "Despite the name, they are the per-member store for any value of yours, not only secrets" in section
    assert "](#where-a-plugin-keeps-its-data)" in doc_text()  # reached from the kv paragraph


def test_the_guide_shows_a_page_uploading_a_file_with_the_kit():
    text = doc_text()
    kit = (EXAMPLE.parents[1] / "web" / "lib" / "plugin-kit.js").read_text(encoding="utf-8")
    assert "export async function upload(path, file," in kit
    assert "| `upload(path, file, {method, type, filename})` |" in text
    [page] = [b for b in code_blocks(text, "js") if "await upload(" in b]
    assert 'import { upload, KitError } from "/ui/lib/plugin-kit.js";' in page
    [route] = [b for b in code_blocks(text, "python") if "X-Filename" in b]
    assert '@accepts({"type": "string", "format": "binary"}' in route
    assert "fetch(" not in page and "csrf" not in page.lower()


def test_the_shipping_steps_say_skald_plugins_needs_the_server_stopped():
    from skald_host.cli import _busy_message

    text = prose()
    step = text[text.index("## Shipping") :][:1200]
    assert "`skald plugins` lists it too, but only with the server stopped" in step
    assert "with the server running, look at the Plugins page instead" in step
    quoted = re.search(r"\(`('skald plugins' needs the server stopped)`\)", step)
    assert quoted and quoted[1] in _busy_message("plugins", RuntimeError("busy"))
    assert "Then restart the host. `skald plugins` lists the plugin as `disabled`" not in text


# -- a second stranger: three plugins written from the guide alone -----------------------------


def test_the_model_server_by_hand_says_it_needs_the_test_extra():
    """``python -m skald_host.testing.model_server`` imports the test kit (httpx): in a
    venv with skald-host installed as "Shipping" says, it stopped at ModuleNotFoundError."""
    import importlib.util

    text = doc_text()
    command = ".venv/bin/python -m skald_host.testing.model_server --port 8091 --api-key sk-test"
    before = text[: text.index(command)]
    assert before.rstrip().endswith(".venv/bin/pip install -e '/path/to/skald[test]'   # or 'skald-host[test]' from an index that carries it")
    assert "`ModuleNotFoundError: No module named 'httpx'` until you install the extra" in " ".join(before[-600:].split())
    client = importlib.util.find_spec("skald_host.testing.client")
    assert client is not None and "import httpx" in open(client.origin, encoding="utf-8").read()  # what the extra brings


def test_the_tutorial_says_register_i18n_hands_its_bundle_to_register():
    text = prose()
    assert "register_i18n(I18nBundle(" not in text
    assert 'implement the hook `register_i18n(register)` and call `register(I18nBundle("dice", {"en": {...}, "de": {...}}))` in it' in text


def test_the_guide_says_a_plugins_strings_have_no_plural_forms_and_what_to_do(tmp_path):
    """A German count read "1 Notizen": only ``{name}`` placeholders were documented. The
    host has no plural forms for a plugin's strings (the shell's own ``.one``/``.other``
    are its own): the guide says so and shows a key per form. Should the host ever pick
    forms itself, this fails, and the guide must say how."""
    from skald_host.core.i18n import Strings
    from skald_hookspecs import I18nBundle

    text = prose()
    assert "**Counts: a plugin's strings have no plural forms.**" in text
    [strings] = [b for b in code_blocks(doc_text(), "json") if '"notes.one"' in b]
    [python] = [b for b in code_blocks(doc_text(), "python") if '"dice.notes.one"' in b]
    bundle = I18nBundle("dice", {"de": __import__("json").loads(strings), "en": {"notes.one": "{count} note", "notes.other": "{count} notes"}})
    table = Strings([bundle])
    assert table.translate("dice.notes", "de", count=1) == "dice.notes"  # no form is picked by the number
    choose, say = python.strip().splitlines()  # the key by the count, then the text
    for count, expected in ((1, "1 Notiz"), (3, "3 Notizen")):
        namespace = {"count": count, "host": type("Host", (), {"translate": staticmethod(table.translate)})(),
                     "current_caller": lambda: type("Caller", (), {"locale": "de"})()}
        exec(choose, namespace)
        assert eval(say, namespace) == expected
    kit = (EXAMPLE.parents[1] / "web" / "lib" / "plugin-kit.js").read_text(encoding="utf-8")
    assert "PluralRules" not in kit  # the kit's text() fills placeholders only


def test_the_system_agent_meta_shown_is_one_the_loader_takes(tmp_path):
    """``register_agent_dirs`` said "copy one from the host's agents/ folder", which holds
    no ``kind: system`` agent, and the guide showed no ``meta.yaml`` for one."""
    import yaml

    from skald_host.core.agent.definitions import HOST_AGENTS
    from skald_host.core.agent.subagents.catalog import load_generation

    [meta] = re.findall(r"<!-- system-agent-meta: (\S+) -->\n```yaml\n(.*?)```", doc_text(), flags=re.S)
    agent_id, shown = meta
    folder = tmp_path / "agents" / agent_id
    folder.mkdir(parents=True)
    (folder / "meta.yaml").write_text(shown, encoding="utf-8")
    (folder / "AGENT.md").write_text("Write a digest of the events, or answer NOTHING_TO_REPORT.", encoding="utf-8")
    host_tools = {t for m in HOST_AGENTS.glob("*/meta.yaml") for t in (yaml.safe_load(m.read_text(encoding="utf-8")) or {}).get("tools", [])}

    generation = load_generation([(HOST_AGENTS, None), (tmp_path / "agents", "digest-plugin")], host_tools)

    definition = generation.definitions[agent_id]
    assert (definition.kind, definition.allow_tools, definition.tools) == ("system", False, ())
    shipped = (EXAMPLE.parents[1] / "plugins/system_agents/skald_system_agents/agents/event-triage/meta.yaml").read_text(encoding="utf-8")
    assert set(yaml.safe_load(shown)) == set(yaml.safe_load(shipped))  # the shape the shipped system agents have
    assert "kind: system" not in "".join(m.read_text(encoding="utf-8") for m in HOST_AGENTS.glob("*/meta.yaml"))
    assert "copy one from the host's ``agents/`` folder to start." not in doc_text()


def _wheel(folder, version: str):
    """A wheel of ``skald-hello`` at ``version``, built by hand (no build backend needed)."""
    import base64
    import hashlib
    import zipfile

    info = f"skald_hello-{version}.dist-info"
    files = {
        "skald_hello/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: skald-hello\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[skald.plugins]\nhello = skald_hello\n",
    }
    record = []
    path = folder / f"skald_hello-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, body in files.items():
            wheel.writestr(name, body)
            digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(body.encode())}")
        wheel.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def test_reinstalling_into_a_target_folder_as_the_guide_says_leaves_only_the_new_version(tmp_path):
    """``pip install --target DIR --no-deps --upgrade .`` after a version change left both
    ``dist-info`` folders, and the catalog showed the old version (the first distribution
    found wins). The commands the guide shows, run for 1.0.0 then 2.0.0, leave one."""
    import subprocess
    import sys

    [commands] = [b for b in code_blocks(doc_text(), "sh") if "pip install --target DIR" in b]
    target = tmp_path / "DIR"
    for version in ("1.0.0", "2.0.0"):
        wheel = _wheel(tmp_path, version)
        for line in commands.splitlines():
            line = line.split("#")[0].strip()
            if not line:
                continue
            words = line.split()
            if words[:2] == ["pip", "install"]:
                words = [sys.executable, "-m", "pip", "install", "--quiet", *[str(wheel) if w == "." else w for w in words[2:]]]
            line = " ".join(words).replace("DIR", str(target))
            subprocess.run(line, shell=True, check=True, cwd=tmp_path)
    assert sorted(p.name for p in target.glob("*.dist-info")) == ["skald_hello-2.0.0.dist-info"]
    found = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('skald-hello'))"],
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True,
    )
    assert found.stdout.strip() == "2.0.0"


def test_the_plural_page_example_defines_its_strings_and_says_where_they_come_from():
    """The page example used ``strings`` it never defined, and the guide did not say how
    a page gets its bundle (the shell hands it none): it fetches the table ``text``
    reads from a route of its own, which the guide shows serving the bundle."""
    text = doc_text()
    [page] = [b for b in code_blocks(text, "js") if "PluralRules" in b]
    kit = (EXAMPLE.parents[1] / "web" / "lib" / "plugin-kit.js").read_text(encoding="utf-8")
    [imported] = re.findall(r"import \{ (.*?) \} from \"/ui/lib/plugin-kit.js\";", page)
    for name in imported.split(", "):
        assert re.search(rf"export (async function|function|const) {name}\b", kit), name
    assert re.search(r"const \{ strings \} = await call\(\"GET\", `/api/plugin/.*/strings`\)", page)
    [route] = [b for b in code_blocks(text, "python") if '@blueprint.get("/strings")' in b]
    assert '{"strings": BUNDLE.strings}' in route
    assert "A page gets no bundle from the shell" in prose()


def test_the_known_gaps_state_the_tool_result_limit_the_host_applies():
    """A plugin author could not find how long a tool's result may be: the guide says it
    as a number, and that number is the one the host cuts at."""
    from skald_host.core.agent.kernel import TOOL_RESULT_LIMIT

    text = prose()
    gaps = text[text.index("## Known gaps in the contract") :]
    gaps = gaps[: gaps.index(" ## ", 1)]
    [stated] = re.findall(r"A tool's result is cut at (\d+) characters", gaps)
    assert int(stated) == TOOL_RESULT_LIMIT
    for gap in ("cannot hand the member a file", "`ctx.turn.notify` adds a note", "no `member_created` hook"):
        assert gap in gaps, gap


def test_the_guides_page_example_shows_its_own_errors():
    """The walk-through's page awaited ``call`` in ``connectedCallback`` with nothing
    around it: a route that failed left a blank page. It catches ``KitError`` and shows
    its message, and the prose says a page shows its own errors."""
    text = doc_text()
    [page] = [b for b in code_blocks(walk_through(), "js") if "class HelloPage" in b]
    assert "KitError" in page.split("\n", 1)[0]  # imported from the kit
    before_call = page.split("await call(", 1)[0].rsplit("\n", 1)[0]
    assert before_call.rstrip().endswith("try {"), page
    assert "catch (error)" in page and "error instanceof KitError" in page and "error.message" in page
    assert "A page shows its own errors" in text
    # Said where a reader meets them: the one synchronous per-member call, and the UI's name for "loaded".
    assert "`unlocked_members()`, which, unlike these, is synchronous" in text
    assert "`loaded` is what the catalog page calls \"Running\"" in text
