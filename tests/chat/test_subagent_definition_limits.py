"""A definition's ``limits`` that cannot be used refuse the generation, saying which
field of which file holds what: "limits must be positive" left the author to guess
which of three fields was wrong, and a ``limits: 0`` read as no limits at all."""

from __future__ import annotations

import pytest

from skald_host.core.agent.subagents.catalog import load_generation

from .test_subagent_definitions import TOOLS, refusal, sources, write


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_iterations": 0}, "limits.max_iterations is 0"),
        ({"timeout_secs": -5}, "limits.timeout_secs is -5"),
        ({"timeout_secs": "x"}, "limits.timeout_secs is 'x'"),
        ({"max_result_chars": 0}, "limits.max_result_chars is 0"),
        ({"max_iterations": True}, "limits.max_iterations is True"),
        ({"max_iterations": 4, "max_result_chars": 1.5}, "limits.max_result_chars is 1.5"),
    ],
)
def test_an_unusable_limit_is_refused_by_field_and_file(tmp_path, limits, field):
    write(tmp_path, "good")
    write(tmp_path, "limited", limits=limits)
    reason = refusal(tmp_path)
    assert field in reason, reason
    assert str(tmp_path / "limited" / "meta.yaml") in reason, reason


def test_limits_that_are_not_a_mapping_are_refused(tmp_path):
    write(tmp_path, "good")
    write(tmp_path, "limited", limits=0)
    reason = refusal(tmp_path)
    assert "limits may hold only" in reason and str(tmp_path / "limited" / "meta.yaml") in reason, reason


def test_usable_limits_are_kept(tmp_path):
    write(tmp_path, "limited", limits={"max_iterations": 3, "timeout_secs": 60})
    generation = load_generation(sources(tmp_path), TOOLS | {"notify", "list_agents", "memory_search", "list_files", "search_file", "show_file_to_user"})
    assert generation.definitions["limited"].limits == {"max_iterations": 3, "timeout_secs": 60}
