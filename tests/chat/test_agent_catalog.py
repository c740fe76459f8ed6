"""Agent definitions are files: an edit reaches the next turn within
``FRESH_SECONDS`` without a restart, and a removed agent is gone as soon."""

from __future__ import annotations

import shutil
import time

import pytest

from skald_host.core.agent import definitions
from skald_host.core.agent.definitions import AgentCatalog, AgentError

from .support import write_agent


def test_an_edited_or_removed_agent_is_seen_within_the_freshness_window(tmp_path, monkeypatch):
    monkeypatch.setattr(definitions, "FRESH_SECONDS", 0.05)
    write_agent(tmp_path, "helper", "First prompt.", title="Helper", kind="chat")
    catalog = AgentCatalog((tmp_path,))
    assert catalog.get("helper").prompt == "First prompt."

    write_agent(tmp_path, "helper", "Second prompt, a little longer.", title="Helper", kind="chat")
    time.sleep(0.1)
    assert catalog.get("helper").prompt == "Second prompt, a little longer."

    shutil.rmtree(tmp_path / "helper")
    time.sleep(0.1)
    with pytest.raises(AgentError):
        catalog.get("helper")


def test_the_listing_sees_an_added_or_removed_agent_within_the_freshness_window(tmp_path, monkeypatch):
    monkeypatch.setattr(definitions, "FRESH_SECONDS", 0.05)
    write_agent(tmp_path, "first", "One.", title="First", kind="task")
    catalog = AgentCatalog((tmp_path,))
    assert [a.id for a in catalog.task_agents()] == ["first"]

    write_agent(tmp_path, "second", "Two.", title="Second", kind="task")
    time.sleep(0.1)
    assert [a.id for a in catalog.task_agents()] == ["first", "second"]

    shutil.rmtree(tmp_path / "first")
    time.sleep(0.1)
    assert [a.id for a in catalog.all()] == ["second"]
