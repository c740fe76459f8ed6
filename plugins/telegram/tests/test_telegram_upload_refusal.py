"""A file the member's home cannot hold is refused in the member's language, the room
left in their number format: the chat read "Ich konnte deine Datei nicht speichern: the
file does not fit: your home has 1032192 bytes left under its disk limit" (the host's
English and a raw byte count) while the web said it in German (contract 1.15: the
refusal keeps its code and values through the channel seam)."""

from __future__ import annotations

import re
from typing import AsyncIterator

import pytest_asyncio

from skald_host.testing import ScriptedModelServer, SkaldHarness
from telegram_standin import BotApiStandIn
from telegram_support import ALICE_CHAT, API_KEY, MODEL, PROBE, NoteProbe, Setup, configure_model, paired_member, running


@pytest_asyncio.fixture
async def full_home(skald: SkaldHarness) -> AsyncIterator[Setup]:
    """The conftest's setup with homes that hold 1 MiB (``sandbox.home_quota_mib``)."""
    async with ScriptedModelServer(models=(MODEL,), api_key=API_KEY) as model, BotApiStandIn() as api:
        try:
            host = await skald.start(plugins=[NoteProbe()], use_entry_points=True, enable=[PROBE], settings=skald.settings(sandbox={"home_quota_mib": 1}))
            admin = await host.admin()
            await configure_model(admin, model)
            yield Setup(host, admin, api, model, NoteProbe(), skald)
        finally:
            await skald.close()


async def test_a_file_the_home_cannot_hold_is_refused_in_the_members_words(full_home: Setup):
    setup = await running(full_home)
    anna = await paired_member(setup, "anna")
    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    setup.api.add_file("big-doc", b"x" * (2 * 1024 * 1024))
    before = len(setup.api.shown(ALICE_CHAT))
    setup.api.send(ALICE_CHAT, caption="Hier die Datei", document={"file_id": "big-doc", "file_name": "gross.bin"}, language_code="de")
    await setup.api.wait_for(lambda: any("Datei nicht speichern" in text for text in setup.api.shown(ALICE_CHAT)[before:]), what="the refusal")
    said = next(text for text in setup.api.shown(ALICE_CHAT)[before:] if "Datei nicht speichern" in text)
    assert re.fullmatch(
        r"Ich konnte deine Datei nicht speichern: Die Datei passt nicht mehr: In deinem Home-Ordner sind unter seiner "
        r"Speichergrenze nur noch [\d.]+(,\d)? (B|KiB|MiB) frei\.", said,
    ), said
    assert "bytes" not in said and "does not fit" not in said, said
