"""What the member reads of a call's result is in their language (issue 19: a German
member read "Error: … does not exist" in her tool card and her export). The model still
reads the host's English; a host-made error with a code keeps it beside the result, and
the card and the export word it, as a failed answer's reason is worded."""

from __future__ import annotations

import datetime as dt
import json

from skald_hookspecs import I18nBundle, PluginInfo, hookimpl
from skald_host.testing import Reply, ToolCall
from skald_host.web.routes.chat import _markdown_export

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation, write_agent


async def test_a_host_error_with_a_code_reads_in_german_in_the_card_data_and_the_export(chat):
    await configure_models(chat.admin, chat.server)
    bert = await chat.host.member("bert", locale="de")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("read_file", {"path": "gibtsnicht.txt"}), ToolCall("gibts_nicht", {})]),
        Reply("Nichts da."),
    ])
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert, title="Lesen")
        await sock.send(cid, "Lies die Datei")
        events = await sock.turn(cid)

    # The model reads the English, as before.
    sent = [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"]
    assert sent == ["Error: gibtsnicht.txt does not exist", "Error: there is no tool named 'gibts_nicht' here."]
    # The card's data: the code and values beside the English, live and after a reload.
    reasons = [{"code": "no_such_entry", "values": {"path": "gibtsnicht.txt"}}, {"code": "no_such_tool", "values": {"name": "gibts_nicht"}}]
    assert [e.get("reason") for e in events if e["type"] == "tool_error"] == reasons
    calls = [c for m in await messages(bert, cid) for c in m["tool_calls"]]
    assert [c["reason"] for c in calls] == reasons
    assert calls[0]["result"] == "Error: gibtsnicht.txt does not exist"

    markdown = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "md"})).text
    assert "Diese Datei oder diesen Ordner gibt es nicht: gibtsnicht.txt" in markdown
    assert "Hier gibt es kein Werkzeug namens gibts_nicht." in markdown
    assert "does not exist" not in markdown and "no tool named" not in markdown
    # The JSON export keeps what was stored: the English the model read.
    exported = json.loads((await bert.get(f"/api/conversations/{cid}/export", params={"format": "json"})).text)
    assert "Error: gibtsnicht.txt does not exist" in [c["result"] for m in exported["messages"] for c in m["tool_calls"]]


def test_the_export_says_a_commands_exit_code_in_the_readers_language_and_its_output_as_it_is(chat):
    strings = chat.host.core.strings
    call = {"id": "c1", "name": "execute_cmd", "arguments": '{"command": "ls /x"}', "status": "done",
            "result": "Exit code: 2\nls: cannot access '/x': No such file or directory"}
    message = {"id": 1, "role": "assistant", "content": "", "status": "complete", "tool_calls": [call]}
    markdown = _markdown_export({"title": "Befehl"}, [message], strings, "de")
    assert "Exit-Code: 2\nls: cannot access '/x': No such file or directory" in markdown
    assert "Exit code" not in markdown
    # Another tool's result that happens to start so is its own, as it is.
    other = _markdown_export({"title": "T"}, [{**message, "tool_calls": [{**call, "name": "read_file"}]}], strings, "de")
    assert "Exit code: 2" in other


def test_the_export_date_is_in_the_readers_format_and_the_members_zone_named(chat):
    strings, when = chat.host.core.strings, dt.datetime(2026, 12, 6, 12, 36, 33, tzinfo=dt.UTC)
    german = _markdown_export({"title": "T"}, [], strings, "de", zone="Europe/Berlin", now=when)
    assert "Aus Skald exportiert · 06.12.2026, 13:36:33 (Europe/Berlin)" in german
    english = _markdown_export({"title": "T"}, [], strings, "en", now=when)
    assert "Exported from Skald · Dec 6, 2026" in english and english.splitlines()[2].endswith("(UTC)")
    assert "2026-12-06T12:36:33Z" not in german + english


async def test_the_export_is_dated_in_the_members_own_time_zone(chat):
    bert = await chat.host.member("bert", locale="de")
    assert (await bert.put("/api/me/settings", json={"timezone": "Asia/Tokyo"})).status_code == 200
    cid = await new_conversation(bert, title="Zone")
    markdown = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "md"})).text
    header = markdown.splitlines()[2]
    assert header.startswith("Aus Skald exportiert · ") and header.endswith(" (Asia/Tokyo)"), header


class LocalisedAgents:
    """A plugin shipping a definition with its title and description in its own bundle."""

    def __init__(self, root) -> None:
        write_agent(root, "sichter", "You sort events.", title="Event triage", description="Reads your events.", kind="task",
                    allow_tools=False)
        self.root = root

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="localised-agents", title="Localised agents", spec=">=1.0,<2")

    @hookimpl
    def register_agent_dirs(self, register) -> None:
        register(self.root)

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("localised-agents", {
            "en": {"agent.sichter.title": "Event triage", "agent.sichter.description": "Reads your events."},
            "de": {"agent.sichter.title": "Ereignis-Sichtung", "agent.sichter.description": "Liest deine Ereignisse."},
        }))


async def test_a_plugins_agent_definition_reads_in_its_own_bundles_language(skald, tmp_path):
    host = await skald.start(plugins=[LocalisedAgents(tmp_path / "agents")], enable=["localised-agents"])
    await host.setup_admin(locale="de")
    admin = await host.admin()
    listed = (await admin.get("/api/agent-definitions")).json()["definitions"]
    mine = next(d for d in listed if d["id"] == "sichter")
    assert (mine["title"], mine["description"], mine["plugin"]) == ("Ereignis-Sichtung", "Liest deine Ereignisse.", "localised-agents")


async def test_a_members_file_from_before_the_reason_column_opens_and_its_calls_read_as_stored(tmp_path):
    """Owner migration 20 is additive: a file the previous version wrote (schema 19, a
    tool call with its English result) opens, and the call reads as it was, no reason."""
    from durability.helpers import upgraded_from
    from skald_host.core.agent.store import ConversationStore
    from skald_host.core.schema import OWNER_MIGRATIONS

    def older_rows(c):
        c.execute("INSERT INTO conversations (id, agent_id) VALUES ('c1', 'assistant')")
        c.execute("INSERT INTO frames (id, conversation_id, agent_id) VALUES ('f1', 'c1', 'assistant')")
        c.execute("INSERT INTO messages (conversation_id, frame_id, role, content) VALUES ('c1', 'f1', 'user', 'Read it.')")
        message = c.execute("INSERT INTO messages (conversation_id, frame_id, role) VALUES ('c1', 'f1', 'assistant')").lastrowid
        c.execute(
            "INSERT INTO tool_calls (id, message_id, conversation_id, frame_id, seq, name, arguments, status, result)"
            " VALUES ('call-1', ?, 'c1', 'f1', 0, 'read_file', '{}', 'error', 'Error: /x does not exist')",
            (message,),
        )

    async with upgraded_from(tmp_path / "owner.db", OWNER_MIGRATIONS, 20, older_rows) as db:
        rows = await ConversationStore(db).transcript("c1")
    calls = [call for row in rows for call in row.get("tool_calls") or ()]
    assert [(c["id"], c["result"], c.get("reason")) for c in calls] == [("call-1", "Error: /x does not exist", None)]
