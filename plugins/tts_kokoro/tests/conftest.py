"""Fixtures of the Kokoro plugin's tests: a real host that finds the plugin through its
installed entry point, with espeak-ng built in beside it."""

from __future__ import annotations

import importlib.metadata

import pytest


@pytest.fixture(scope="session", autouse=True)
def installed() -> None:
    found = [ep for ep in importlib.metadata.entry_points(group="skald.plugins") if ep.name == "tts_kokoro"]
    if not found:
        pytest.skip("skald-tts-kokoro is not installed (pip install -e plugins/tts_kokoro)")
