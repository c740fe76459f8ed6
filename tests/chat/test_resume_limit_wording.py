"""Recovery's give-up message counts the attempts begun, and must not claim they all
reached the model: an attempt's streaming row is committed before its request is sent
(so a sent request is never missing from the log), and a kill between the two is counted
as a cut request too (crash-kill probe: two kills in a row during recovery)."""

from __future__ import annotations

import json
from pathlib import Path

import skald_host
from skald_host.core.agent.runtime import RESUME_GIVEN_UP

LOCALES = Path(skald_host.__file__).parent / "builtins" / "locales"


def test_the_give_up_message_counts_attempts_not_requests_the_model_got():
    english = json.loads((LOCALES / "en.json").read_text())["error.resume_limit"]
    assert english == RESUME_GIVEN_UP
    for text in (english, RESUME_GIVEN_UP):
        assert "asked for {times} times" not in text
        assert "{times} attempts" in text and "before it reached the model" in text
    german = json.loads((LOCALES / "de.json").read_text())["error.resume_limit"]
    assert "-mal angefordert" not in german and "{times} Versuche" in german
