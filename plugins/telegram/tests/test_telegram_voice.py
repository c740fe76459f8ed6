"""Voice replies: ``/voice on`` makes each answer arrive a second time as an OGG/Opus
voice note, made by the host's speech engines through ``HostApi.synthesize_speech``
(the member's language picks the engine: English, and with Kokoro not enabled here, espeak-ng)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import shutil
import time

import numpy as np
import pytest
import soundfile

import skald_telegram.bot as bot_module
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


BUSY = "I could not read this answer aloud: Speech is already being made for you; wait for it to finish."


async def voice_on(setup: Setup) -> str:
    """``/voice on`` for Alice; her member id."""
    await paired_member(setup)
    setup.api.send(ALICE_CHAT, "/voice on")
    await setup.api.wait_for(lambda: any(t.startswith("Answers now also come as voice notes.") for t in setup.api.texts(ALICE_CHAT)))
    return (await setup.host.core.users.find("alice")).id


def occupy_speech(setup: Setup, member_id: str) -> None:
    """Every read-aloud slot of the member taken, as the web reading two long texts
    aloud takes them: the host refuses her next synthesis as busy."""
    tts = setup.host.core.tts
    tts._running[member_id] = tts.settings.per_member


async def answered_while_speech_is_busy(setup: Setup) -> str:
    """alice, with voice notes on and her read-aloud slots taken, got an answer in
    Telegram (its voice note is what the test watches): her id."""
    await running(setup)
    member_id = await voice_on(setup)
    occupy_speech(setup, member_id)
    setup.model.script(MODEL, [Reply("Voice canary answer.")])
    setup.api.send(ALICE_CHAT, "hi")
    await setup.api.wait_for(lambda: "Voice canary answer." in setup.api.texts(ALICE_CHAT))
    return member_id


async def test_a_voice_note_waits_while_the_members_speech_is_busy_and_is_sent_once_it_is_free(setup: Setup):
    member_id = await answered_while_speech_is_busy(setup)
    await asyncio.sleep(2.5)  # the first try found it busy, and so did the second
    setup.api.send(ALICE_CHAT, "/help")  # the chat is not held up behind the waiting note
    await setup.api.wait_for(lambda: any(t.startswith("Write to talk to your assistant.") for t in setup.api.texts(ALICE_CHAT)))
    assert setup.api.of("sendVoice", ALICE_CHAT) == []
    setup.host.core.tts._running.pop(member_id)  # the web's reading ended
    await setup.api.wait_for(lambda: setup.api.of("sendVoice", ALICE_CHAT), timeout=20, what="the voice note")
    assert BUSY not in setup.api.texts(ALICE_CHAT)
    assert len(setup.api.of("sendVoice", ALICE_CHAT)) == 1


async def test_a_voice_note_still_busy_after_its_waits_says_why_once(setup: Setup, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(bot_module, "VOICE_BUSY_WAITS_SECONDS", (0.5, 1.0))  # about a minute, scaled down
    await answered_while_speech_is_busy(setup)
    answered = time.monotonic()
    await setup.api.wait_for(lambda: BUSY in setup.api.texts(ALICE_CHAT), what="the reason")
    assert time.monotonic() - answered >= 1.4  # after both waits, not at the first refusal
    await asyncio.sleep(1)
    assert setup.api.texts(ALICE_CHAT).count(BUSY) == 1 and setup.api.of("sendVoice", ALICE_CHAT) == []


LONG_ANSWER = (
    "Milk keeps for about a week in the fridge. Once opened, drink it within three days. "
    "Cheese keeps longer than milk does, often for several weeks when it is wrapped well.\n\n"
    "Butter can be frozen for months. Bread goes stale faster in the fridge than outside it. "
    "Eggs keep for weeks if they stay cold."
)


async def test_a_voice_note_of_an_answer_longer_than_the_limit_reads_its_first_part_and_says_so(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
):
    tts = setup.host.core.tts
    monkeypatch.setattr(tts, "settings", dataclasses.replace(tts.settings, max_chars=150))  # 4000 in production, scaled down
    spoken: list[str] = []
    render = tts.render

    async def recording_render(member_id, text, **kwargs):
        spoken.append(text)
        return await render(member_id, text, **kwargs)

    monkeypatch.setattr(tts, "render", recording_render)
    await running(setup)
    await voice_on(setup)
    setup.model.script(MODEL, [Reply(LONG_ANSWER)])
    setup.api.send(ALICE_CHAT, "How long does food keep?")
    await setup.api.wait_for(lambda: setup.api.of("sendVoice", ALICE_CHAT), what="a voice note of the first part")
    said = "The voice note reads only the beginning of the answer “Milk keeps for about a week in the…”: at most 150 characters are read aloud, so the rest was not."
    await setup.api.wait_for(lambda: said in setup.api.texts(ALICE_CHAT), what="the line saying the rest was not read")
    # The first part, cut after a whole sentence within the limit (the whole text went first).
    assert spoken[-1] == "Milk keeps for about a week in the fridge. Once opened, drink it within three days.", spoken
    assert not any(t.startswith("I could not read this answer aloud") for t in setup.api.texts(ALICE_CHAT))
    await asyncio.sleep(1)
    assert len(setup.api.of("sendVoice", ALICE_CHAT)) == 1 and setup.api.texts(ALICE_CHAT).count(said) == 1
