"""Definition generations and the delegation graph (seed 004 §2): real files on disk,
loaded by the real loader; the graph asked exactly as the coordinator asks it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from skald_host.core.agent.definitions import HOST_AGENTS, AgentCatalog
from skald_host.core.agent.subagents.catalog import GenerationRefused, SubagentCatalog, load_generation
from skald_host.core.agent.subagents.graph import DelegationRefused, can_delegate, delegate_targets, resolve
from skald_host.core.agent.subagents.limits import OrchestrationLimits, run_limits

TOOLS = {"read_file", "execute_task", "emit_signal", "agent_task"}


def write(root: Path, agent_id: str, prompt: str = "You help.", **meta) -> Path:
    directory = root / agent_id
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "AGENT.md").write_text(prompt, encoding="utf-8")
    (directory / "meta.yaml").write_text(yaml.safe_dump({"kind": "task", **meta}), encoding="utf-8")
    return directory


def sources(root: Path):
    return [(HOST_AGENTS, None), (root, "probe")]


def refusal(root: Path) -> str:
    with pytest.raises(GenerationRefused) as caught:
        load_generation(sources(root), TOOLS)
    return "\n".join(caught.value.errors)


def test_the_shipped_definitions_load_with_the_built_in_general_purpose(tmp_path):
    generation = load_generation([(HOST_AGENTS, None)], TOOLS | {"notify", "list_agents", "memory_search", "list_files", "search_file", "show_file_to_user"})
    assert generation.active("general-purpose") is not None
    assert generation.definitions["general-purpose"].delegates == ()
    assert len(generation.definitions["researcher"].definition_hash) == 64


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda r: write(r, "odd", colour="blue"), "unknown key(s) colour"),
        (lambda r: write(r, "named", id="other"), "does not match its folder"),
        (lambda r: write(r, "root"), "'root' is reserved"),
        (lambda r: write(r, "9lives"), "starts with a lowercase letter"),
        (lambda r: write(r, "big", prompt="x" * (256 * 1024 + 1)), "more than the 262144"),
        (lambda r: write(r, "long", prompt="x" * (64 * 1024 + 1)), "more than 65536 characters"),
        (lambda r: write(r, "empty", prompt="  \n"), "the prompt is empty"),
        (lambda r: write(r, "tooled", tools=["read_file", "no_such_tool"]), "no tool named 'no_such_tool'"),
        (lambda r: write(r, "bossy", delegates=["nobody"]), "delegate target 'nobody'"),
        (lambda r: write(r, "selfish", delegates=["selfish"]), "cannot delegate to itself"),
        (lambda r: write(r, "half", provider="openai"), "provider and model come as a pair"),
        (lambda r: write(r, "loud", signal={"delivery": "shout"}), "signal.delivery must be queue or steer"),
        (lambda r: write(r, "limited", limits={"timeout_secs": 0}), "limits must be positive"),
        (lambda r: os.symlink(write(r, "real"), r / "alias"), "a symbolic link is not a definition folder"),
        (lambda r: (write(r, "linked"), (r / "linked" / "AGENT.md").unlink(), os.symlink(r / "target.md", r / "linked" / "AGENT.md"),
                    (r / "target.md").write_text("x")), "a symbolic link is not a definition"),
    ],
)
def test_one_bad_definition_refuses_the_whole_generation_saying_why(tmp_path, setup, reason):
    write(tmp_path, "good")
    setup(tmp_path)
    assert reason in refusal(tmp_path)


def test_hot_reload_keeps_the_last_good_generation_and_shows_the_refusal(tmp_path):
    write(tmp_path, "good", prompt="version 1")
    catalog = SubagentCatalog(AgentCatalog([HOST_AGENTS]), lambda: TOOLS | {"notify", "list_agents", "memory_search", "list_files", "search_file", "show_file_to_user"})
    catalog.agents.add_directory(tmp_path, "probe")
    first = catalog.current()
    assert first.active("good").prompt == "version 1"
    write(tmp_path, "bad", colour="blue")
    write(tmp_path, "good", prompt="version 2")  # an edit in the same generation as the bad file
    catalog.reload()
    assert catalog.current() is first and catalog.current().active("good").prompt == "version 1"
    assert catalog.refused is not None and "unknown key(s) colour" in "\n".join(catalog.refused.errors)
    (tmp_path / "bad" / "meta.yaml").write_text(yaml.safe_dump({"kind": "task"}))
    catalog.reload()
    assert catalog.refused is None and catalog.current().active("good").prompt == "version 2"
    assert catalog.current().active("good").definition_hash != first.active("good").definition_hash


def test_a_host_whose_first_generation_is_refused_delegates_to_nobody(tmp_path):
    write(tmp_path, "bad", tools=["no_such_tool"])
    catalog = SubagentCatalog(AgentCatalog([HOST_AGENTS]), lambda: TOOLS)
    catalog.agents.add_directory(tmp_path, "probe")
    with pytest.raises(GenerationRefused):
        catalog.current()


def test_a_disabled_definition_stays_listed_for_the_admin_but_is_never_a_target(tmp_path):
    write(tmp_path, "resting", enabled=False)
    generation = load_generation(sources(tmp_path), TOOLS | {"notify", "list_agents", "memory_search", "list_files", "search_file", "show_file_to_user"})
    assert "resting" in generation.definitions and generation.active("resting") is None
    with pytest.raises(DelegationRefused):
        resolve(generation, None, "resting")


def test_the_delegation_graph_is_the_seeds_table(tmp_path):
    """§2.2: root → any; absent → general-purpose only; [] → none; ["*"] → any but
    itself; a list → those; self and ancestors always refused."""
    write(tmp_path, "absent")
    write(tmp_path, "none", delegates=[])
    write(tmp_path, "star", delegates=["*"])
    write(tmp_path, "listed", delegates=["absent", "star"])
    generation = load_generation(sources(tmp_path), TOOLS | {"notify", "list_agents", "memory_search", "list_files", "search_file", "show_file_to_user"})
    d = generation.definitions
    everyone = {a.id for a in generation.task_agents()}
    assert {a.id for a in delegate_targets(generation, None)} == everyone
    assert {a.id for a in delegate_targets(generation, d["absent"])} == {"general-purpose"}
    assert delegate_targets(generation, d["none"]) == []
    assert {a.id for a in delegate_targets(generation, d["star"], ("star",))} == everyone - {"star"}
    assert {a.id for a in delegate_targets(generation, d["listed"], ("listed",))} == {"absent", "star"}
    # An ancestor is refused even where the definition would allow it.
    assert not can_delegate(generation, d["star"], "listed", ("listed", "star"))
    with pytest.raises(DelegationRefused, match="cycle"):
        resolve(generation, d["star"], "listed", ("listed", "star"))
    with pytest.raises(DelegationRefused, match="may not delegate"):
        resolve(generation, d["absent"], "star", ("absent",))


def test_the_model_can_only_narrow_a_runs_limits():
    definition = {"timeout_secs": 100, "max_iterations": 10, "max_result_chars": 500}
    assert run_limits(definition, {"timeout_secs": 5, "max_iterations": 50, "max_result_chars": -1}) == {
        "timeout_secs": 5, "max_iterations": 10, "max_result_chars": 500,
    }
    assert run_limits({}, None)["max_result_chars"] == 16_000
    assert OrchestrationLimits().max_runs_per_tree == 16


async def test_the_definitions_page_shows_the_admin_why_a_generation_was_refused_and_a_member_only_that(chat):
    alice = await chat.host.member("alice")
    ok = await chat.admin.get("/api/agent-definitions")
    assert ok.status_code == 200 and ok.json()["refused"] is None
    assert "general-purpose" in [d["id"] for d in ok.json()["definitions"]]
    write(chat.probe.agents_dir, "broken", colour="blue")
    chat.host.core.chat.subagent_catalog.reload()
    admin_view = (await chat.admin.get("/api/agent-definitions")).json()
    assert any("unknown key(s) colour" in e for e in admin_view["refused"]["errors"])
    assert "general-purpose" in [d["id"] for d in admin_view["definitions"]]  # the last good generation
    member_view = (await alice.get("/api/agent-definitions")).json()
    assert member_view["refused"]["errors"] == [] and member_view["refused"]["count"] >= 1


FULL_TOOLS = TOOLS | {"notify", "list_agents", "memory_search", "list_files", "search_file", "show_file_to_user", "get_skill"}


def skill(root: Path, name: str, text: str = "Do it well.\n") -> Path:
    (root / "skills").mkdir(parents=True, exist_ok=True)
    path = root / "skills" / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_inline_provider_and_model_must_be_in_the_model_catalog(tmp_path):
    """§2.2: the pair names a model of the instance; anything else refuses the whole
    generation, and so does a pair that cannot be checked (no catalog read)."""
    write(tmp_path, "bound", provider="local", model="small")
    known = {("local", "small"), ("cloud", "large")}
    generation = load_generation(sources(tmp_path), FULL_TOOLS, known_models=known)
    assert (generation.active("bound").provider, generation.active("bound").model) == ("local", "small")
    write(tmp_path, "crossed", provider="local", model="large")
    with pytest.raises(GenerationRefused, match="provider 'local' has no model 'large' in the model catalog"):
        load_generation(sources(tmp_path), FULL_TOOLS, known_models=known)
    with pytest.raises(GenerationRefused, match="the model catalog could not be read to check provider 'local'"):
        load_generation(sources(tmp_path), FULL_TOOLS)


def test_skills_load_from_the_skills_folder_and_a_plugin_overrides_the_hosts(tmp_path):
    host, plugin = tmp_path / "host", tmp_path / "plugin"
    write(host, "general-purpose", delegates=[])
    skill(host, "summarize", "---\ndescription: Three lines,\n  each a verb\n---\nHost text.\n")
    skill(host, "cite", "---\r\ndescription: \r\n---\r\nCite sources.\r\n")
    skill(plugin, "summarize", "Plugin text.\n")
    write(plugin, "writer", skills=["summarize", "cite"])
    generation = load_generation([(host, None), (plugin, "probe")], FULL_TOOLS)
    assert "skills" not in generation.definitions  # the folder is never a definition
    by_name = {s.name: s for s in generation.skills_of(generation.active("writer"))}
    assert (by_name["summarize"].text, by_name["cite"].text) == ("Plugin text.", "Cite sources.")
    assert generation.skills["cite"].description == "" and generation.skill_owners["summarize"] == "probe"
    # A member who may not use the plugin sees neither its definitions nor its skills
    # (an overridden skill is the plugin's, as an overridden definition is).
    hidden = generation.visible(lambda plugin_id: False)
    assert "writer" not in hidden.definitions and set(hidden.skills) == {"cite"}
    host_only = load_generation([(host, None)], FULL_TOOLS)
    assert host_only.skills["summarize"].description == "Three lines, each a verb"


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda r: write(r, "asker", skills=["nowhere"]), "no skill named 'nowhere'"),
        (lambda r: (skill(r, "terse"), write(r, "mute", allow_tools=False, skills=["terse"])), "a tool-less agent (allow_tools: false) cannot call"),
        (lambda r: skill(r, "odd", "---\ncolour: blue\n---\nText.\n"), "a skill's front matter may hold only description"),
        (lambda r: skill(r, "open", "---\ndescription: never closed\nText.\n"), "the front matter has no closing ---"),
        (lambda r: skill(r, "blank", "---\ndescription: nothing\n---\n  \n"), "the skill is empty"),
        (lambda r: skill(r, "Upper"), "a skill's name starts with a lowercase letter"),
        (lambda r: skill(r, "huge", "x" * (256 * 1024 + 1)), "more than the 262144"),
        (lambda r: (skill(r, "real"), os.symlink(r / "skills" / "real.md", r / "skills" / "alias.md")), "a symbolic link is not a definition"),
        (lambda r: ((r / "elsewhere").mkdir(), os.symlink(r / "elsewhere", r / "skills")), "a symbolic link is not a skills folder"),
    ],
)
def test_one_bad_skill_or_skill_reference_refuses_the_whole_generation_saying_why(tmp_path, setup, reason):
    write(tmp_path, "good")
    setup(tmp_path)
    with pytest.raises(GenerationRefused) as caught:
        load_generation(sources(tmp_path), FULL_TOOLS)
    assert reason in "\n".join(caught.value.errors)


def test_a_skill_edit_is_a_new_generation_on_hot_reload(tmp_path):
    skill(tmp_path, "summarize", "Version 1.\n")
    write(tmp_path, "writer", skills=["summarize"])
    catalog = SubagentCatalog(AgentCatalog([HOST_AGENTS]), lambda: FULL_TOOLS)
    catalog.agents.add_directory(tmp_path, "probe")
    assert catalog.current().skills["summarize"].text == "Version 1."
    path = skill(tmp_path, "summarize", "Version two.\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    catalog.reload()
    assert catalog.current().skills["summarize"].text == "Version two."


def test_the_shipped_agents_have_their_english_and_german_in_the_locale_files():
    """``core.agent.<id>.title`` / ``.description`` translate a shipped agent only while
    its file still says the English shipped: the locale files' English must be the
    files' own words, or no member would ever see the German."""
    from skald_host.builtins.strings import LOCALES
    from skald_hookspecs import I18nBundle

    strings = I18nBundle.from_folder("core", LOCALES).strings
    shipped = sorted(HOST_AGENTS.glob("*/meta.yaml"))
    assert len(shipped) >= 5
    for meta in shipped:
        data = yaml.safe_load(meta.read_text(encoding="utf-8"))
        for field in ("title", "description"):
            key = f"agent.{data.get('id', meta.parent.name)}.{field}"
            assert strings["en"].get(key) == data[field], f"{key}: en.json must say {data[field]!r}"
            assert strings["de"].get(key) and strings["de"][key] != data[field], f"{key}: de.json lacks it"


async def test_a_german_member_reads_the_shipped_agents_in_german_and_an_admins_wording_as_written(chat):
    bert = await chat.host.member("bert", locale="de")
    definitions = {d["id"]: d for d in (await bert.get("/api/agent-definitions")).json()["definitions"]}
    assert definitions["general-purpose"]["title"] == "Allzweck"
    assert definitions["researcher"]["description"].startswith("Bearbeitet eine gezielte Frage")
    english = {d["id"]: d for d in (await chat.admin.get("/api/agent-definitions")).json()["definitions"]}
    assert english["general-purpose"]["title"] == "General purpose"
    agents = {a["id"]: a for a in (await bert.get("/api/chat/status")).json()["agents"]}
    assert agents["assistant"]["title"] == "Assistent"
    # A definition whose title the admin changed keeps their words in every language.
    from skald_host.core.i18n import Strings
    from skald_hookspecs import I18nBundle

    strings = Strings([I18nBundle("core", {"en": {"agent.x.title": "Researcher"}, "de": {"agent.x.title": "Rechercheur"}})])
    assert strings.shipped("core.agent.x.title", "Researcher", "de") == "Rechercheur"
    assert strings.shipped("core.agent.x.title", "Our researcher", "de") == "Our researcher"
    assert strings.shipped("core.agent.y.title", "Helper", "de") == "Helper"  # nothing shipped under that key
