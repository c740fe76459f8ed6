"""A run the model did not answer says why in plain words (security sweep): "no model
is configured" or "the model failed: it could not be reached", with the chat's code so
the page says it in the reader's language, and nothing the provider or the member said.
Only an unexpected failure is named by its type and error id (its traceback is on the
plugin's page)."""

from __future__ import annotations

import re

import pytest

from skald_hookspecs import I18nBundle
from skald_host.builtins.strings import LOCALES
from skald_host.testing import Reply, ScriptedError

SECRET = "the member's secret build name"


async def _triage_run(setup, alice) -> dict:
    alice_id = alice.member["id"]
    api = setup.core.host_api("capture")
    await api.append_member_event(alice_id, "mcp.notification", {"server": "ci", "text": SECRET})
    setup.clock.advance(minutes=6)
    outcomes = [o.result for o in await setup.tick() if o.agent_id == "event_triage" and o.member_id == alice_id]
    assert outcomes == ["failed"]
    response = await alice.get("/api/system-agents/runs?agent=event_triage")
    assert response.status_code == 200, response.text
    [run] = response.json()["runs"]
    assert run["status"] == "failed" and "error id" not in run["error"] and "Error" not in run["error"]
    assert SECRET not in str(run)
    return run


def _said(code: str, values: dict) -> None:
    strings = I18nBundle.from_folder("core", LOCALES).strings
    for locale in ("en", "de"):
        string = strings[locale][f"error.{code}"]
        assert set(re.findall(r"\{(\w+)\}", string)) <= set(values), (locale, string)


async def test_a_run_without_a_model_says_no_model_is_configured(setup):
    alice = await setup.host.member("alice")
    run = await _triage_run(setup, alice)
    assert (run["error"], run["error_code"], run["error_values"]) == ("no model is configured", "no_model", {})
    _said("no_model", run["error_values"])
    # Not the plugin's bug: nothing for its failures list.
    assert list(setup.core.plugins.status("system_agents").failures) == []


@pytest.mark.parametrize("failure, code, words, values", [
    # A 5xx is the provider failing, not refusing (a 4xx is a refusal).
    (ScriptedError(503, "overloaded: " + SECRET, should_retry=False), "model_provider_failed", "the model failed: its provider failed (HTTP 503)",
     {"status": 503}),
    (ScriptedError(400, SECRET), "model_refused", "the model failed: it refused the request (HTTP 400)", {"status": 400, "reason": ""}),
    (Reply(""), "model_no_answer", "the model gave no answer", {}),
])
async def test_a_run_the_model_failed_says_how_without_the_providers_words(setup, skald, failure, code, words, values):
    server = await skald.model_server(failure)
    await setup.host.use_model(server)
    alice = await setup.host.member("alice")
    run = await _triage_run(setup, alice)
    assert (run["error"], run["error_code"], run["error_values"]) == (words, code, values)
    _said(code, run["error_values"])


async def test_a_model_that_cannot_be_reached_is_said_so(setup):
    admin = await setup.host.admin()
    provider = await admin.post("/api/admin/models/providers", json={"name": "gone", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-x"})
    assert provider.status_code == 201, provider.text
    entry = await admin.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": "m", "priority": 1})
    assert entry.status_code == 201, entry.text
    alice = await setup.host.member("alice")
    run = await _triage_run(setup, alice)
    assert (run["error"], run["error_code"]) == ("the model failed: it could not be reached", "model_unreachable")


def test_a_5xx_stored_as_a_refusal_before_the_two_were_told_apart_reads_as_the_providers_failure():
    """Runs written by 64783b7 kept a provider's 500 as ``model_refused``: after the upgrade
    the page still said "refused" (upgrade probe). They read as written now; a 4xx stays."""
    from skald_host.core.system_agents.scheduler import _error_view, _stored_error

    old = {"error": _stored_error("model_refused", {"status": 500}, "the model failed: it refused the request (HTTP 500)")}
    _error_view(old)
    assert (old["error"], old["error_code"], old["error_values"]) == (
        "the model failed: its provider failed (HTTP 500)", "model_provider_failed", {"status": 500})
    refused = {"error": _stored_error("model_refused", {"status": 400, "reason": ""}, "the model failed: it refused the request (HTTP 400)")}
    _error_view(refused)
    assert refused["error_code"] == "model_refused"
