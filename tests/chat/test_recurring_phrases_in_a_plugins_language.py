"""The model's schedule tool reads phrases with the same grammar as the schedules page:
the words of every loaded language, a plugin's added language too (here French, added
by a file alone; see tests/schedules/test_phrases_in_a_plugins_language.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from skald_host.core import schedules
from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from tests.schedules.test_phrases_in_a_plugins_language import FRENCH, language

from .support import ALL_MODELS, API_KEY, PROBE, ChatProbe, ChatSocket, configure_models, new_conversation, write_probe_agents

UTC = dt.timezone.utc


@pytest.fixture(autouse=True)
def reset_clock():
    schedules.clock.set(dt.datetime(2026, 7, 1, 12, tzinfo=UTC))  # a Wednesday in summer
    yield
    schedules.clock.set(None)


async def test_the_schedule_tool_reads_a_plugins_language(skald, tmp_path):
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        try:
            probe = ChatProbe(write_probe_agents(tmp_path / "agents"))
            # A language plugin's words count while it is enabled (contract 1.17).
            host = await skald.start(plugins=[probe, language(tmp_path, "francais", "fr", FRENCH)], enable=[PROBE, "francais"])
            admin = await host.admin()
            await configure_models(admin, server)
            alice = await host.member("alice")

            def respond(request):
                if any(m["role"] == "tool" for m in request.messages):
                    return Reply("C'est noté.")
                return Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": "Météo.", "every": "chaque lundi à 9h30", "timezone": "Europe/Paris"})])

            server.responder = respond
            async with ChatSocket(alice) as sock:
                cid = await new_conversation(alice)
                await sock.send(cid, "Rappelle-moi la météo chaque lundi à 9h30.")
                card = await sock.wait_event(cid, "approval_required")
                await sock.approve(card["approval_id"])
                await sock.turn(cid)
            [job] = (await alice.get("/api/schedules")).json()["jobs"]
            assert (job["cron"], job["phrase"], job["timezone"]) == ("30 9 * * 1", "chaque lundi à 9h30", "Europe/Paris")
        finally:
            await skald.close()
