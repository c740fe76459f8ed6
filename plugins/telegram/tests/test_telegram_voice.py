"""Voice replies: ``/voice on`` makes each answer arrive a second time as an OGG/Opus
voice note, made by the host's speech engines through ``HostApi.synthesize_speech``
(the member's language picks the engine: English, and with Kokoro not enabled here, espeak-ng)."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
import soundfile

from skald_host.testing import Reply
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (apt-get install espeak-ng)")


async def test_voice_on_sends_answers_as_voice_notes_and_off_stops_it(setup: Setup):
    await running(setup)
    await paired_member(setup)
    setup.api.send(ALICE_CHAT, "/voice")
    await setup.api.wait_for(lambda: "Voice notes are off. /voice on or /voice off." in setup.api.texts(ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "/voice on")
    await setup.api.wait_for(lambda: any(t.startswith("Answers now also come as voice notes.") for t in setup.api.texts(ALICE_CHAT)))

    setup.model.script(MODEL, [Reply("The answer is **forty-two**. Nothing more to say.")])
    setup.api.send(ALICE_CHAT, "What is the answer?")
    notes = await setup.api.wait_for(lambda: setup.api.of("sendVoice", ALICE_CHAT), what="a voice note")
    assert "The answer is" in "".join(setup.api.texts(ALICE_CHAT))  # the text still comes first
    samples, rate = soundfile.read(io.BytesIO(notes[0].params["voice"]), dtype="int16")
    assert 1.0 <= len(samples) / rate <= 10.0
    assert float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) > 300
    assert notes[0].result["voice"]["mime_type"] == "audio/ogg"

    setup.api.send(ALICE_CHAT, "/voice off")
    await setup.api.wait_for(lambda: "Answers come as text only." in setup.api.texts(ALICE_CHAT))
    setup.model.script(MODEL, [Reply("Only text now.")])
    setup.api.send(ALICE_CHAT, "Again?")
    await setup.api.wait_for(lambda: "Only text now." in setup.api.texts(ALICE_CHAT))
    assert len(setup.api.of("sendVoice", ALICE_CHAT)) == 1


async def test_a_voice_note_that_cannot_be_made_says_why(setup: Setup):
    await running(setup)
    await paired_member(setup)
    setup.api.send(ALICE_CHAT, "/voice on")
    await setup.api.wait_for(lambda: any(t.startswith("Answers now also come as voice notes.") for t in setup.api.texts(ALICE_CHAT)))
    setup.model.script(MODEL, [Reply("```\nonly code\n```")])
    setup.api.send(ALICE_CHAT, "Show code.")
    await setup.api.wait_for(
        lambda: any(t == "I could not read this answer aloud: There is nothing to read aloud in this text." for t in setup.api.texts(ALICE_CHAT)),
        what="the reason",
    )
    assert setup.api.of("sendVoice", ALICE_CHAT) == []
