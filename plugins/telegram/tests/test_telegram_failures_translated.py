"""Why a turn failed reaches a Telegram chat in the member's language, as the web says
it (``core.error.<code>`` with its values), not the host's fixed English text — also
when the failure is read back after the plugin was off while the answer ended."""

from __future__ import annotations

import asyncio
import socket

from skald_host.testing import BrokenStream, Reply
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running
from test_telegram_answer_after_restart import streaming_message, turn_ended


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_every_model_unreachable_is_said_in_the_members_language(setup: Setup):
    await running(setup)
    anna = await paired_member(setup, "anna")
    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    provider = (await setup.admin.get("/api/admin/models")).json()["providers"][0]
    moved = await setup.admin.patch(f"/api/admin/models/providers/{provider['id']}", json={"base_url": f"http://127.0.0.1:{closed_port()}/v1"})
    assert moved.status_code == 200, moved.text

    setup.api.send(ALICE_CHAT, "Hallo?", language_code="de")
    strings = setup.host.core.strings
    expected = strings.translate("telegram.error", "de", reason=strings.translate("core.error.model_unreachable.member", "de"))
    assert expected.startswith("Etwas ist schiefgegangen: Das Modell war nicht erreichbar.")
    await setup.api.wait_for(lambda: expected in setup.api.shown(ALICE_CHAT), timeout=60, what="the failure in German")
    shown = "\n".join(setup.api.shown(ALICE_CHAT))
    assert "could not" not in shown and "ClientConnectorError" not in shown, shown


async def test_a_failure_while_the_plugin_was_off_is_said_after_it_is_back(setup: Setup):
    await running(setup)
    anna = await paired_member(setup, "anna")
    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    text = " ".join(f"Wort{i}" for i in range(24))
    setup.model.script(MODEL, [BrokenStream(after_chunks=16, text=text, token_delay=0.25)] * 4)
    setup.api.send(ALICE_CHAT, "Lange Antwort bitte", language_code="de")
    message_id = await streaming_message(setup)

    await setup.enable(False)
    stored = await turn_ended(setup, anna)
    assert stored["status"] == "error" and stored["reason"]["code"], stored
    cut = setup.api.messages[message_id]["text"]
    await setup.enable(True)

    strings = setup.host.core.strings
    code = stored["reason"]["code"]
    key = f"core.error.{code}.member" if strings.lookup(f"core.error.{code}.member", "de") else f"core.error.{code}"
    expected = strings.translate("telegram.error", "de", reason=strings.translate(key, "de", **stored["reason"].get("values", {})))
    assert expected.startswith("Etwas ist schiefgegangen: ") and "The model" not in expected
    await setup.api.wait_for(lambda: expected in setup.api.shown(ALICE_CHAT), timeout=20, what="the failure, after the restart")
    await asyncio.sleep(2.0)
    assert setup.api.shown(ALICE_CHAT).count(expected) == 1
    assert setup.api.messages[message_id]["text"] == cut  # what was streamed stays as it was shown
    assert [t for t in setup.api.shown(ALICE_CHAT) if t.startswith("Wort0")] == [cut]


async def test_a_failure_without_a_code_keeps_the_hosts_words(setup: Setup):
    """No stored reason to word it by: the English text, as before (here through the
    plugin's own reading of a failure, with no conversation to read)."""
    await running(setup)
    from skald_telegram import running as plugin

    bot = plugin.bot
    assert await bot._host_words("nobody", None, "the turn stopped: the disk is full", "de") == "the turn stopped: the disk is full"
    assert bot._reason_words({"code": "no_such_code_anywhere"}, "de") is None
    assert bot._reason_words({"code": "model_refused", "values": {"status": 500, "reason": ""}}, "de") == (
        setup.host.core.strings.translate("core.error.model_refused", "de", status=500, reason="")
    )


async def test_a_file_telegram_cannot_hand_over_is_said_in_the_members_words(setup: Setup):
    """A failed download passed the Bot API's English ("Bad Request: invalid file_id")
    to the member; they read what happened in their language, the log keeps the API's."""
    await running(setup)
    anna = await paired_member(setup, "anna")
    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    setup.api.send(ALICE_CHAT, caption="Hier das Foto", photo=[{"file_id": "gone-photo", "width": 90, "height": 90}], language_code="de")
    expected = setup.host.core.strings.translate("telegram.download_failed", "de")
    assert expected.startswith("Ich konnte deine Datei nicht von Telegram abholen")
    await setup.api.wait_for(lambda: expected in setup.api.shown(ALICE_CHAT), what="the failed download in German")
    shown = "\n".join(setup.api.shown(ALICE_CHAT))
    assert "file_id" not in shown and "Bad Request" not in shown, shown
