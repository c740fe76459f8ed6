"""A ``/command`` the bot does not have is answered with a pointer to /help, in the
member's language, and never reaches the model: "/foo" went to it as text and even
titled the conversation "/foo". Words that only start with a slash are words."""

from __future__ import annotations

from skald_host.testing import Reply
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running


async def test_an_unknown_command_points_to_help_and_is_not_sent_to_the_model(setup: Setup):
    await running(setup)
    alice = await paired_member(setup)
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    german = setup.host.core.strings.translate("telegram.unknown_command", "de", command="/foo")
    assert german.startswith("/foo ist hier kein Befehl.") and "/help" in german

    setup.api.send(ALICE_CHAT, "/foo", language_code="de")
    setup.api.send(ALICE_CHAT, "/settings@skald_bot dark mode", language_code="de")
    texts = await setup.api.wait_texts(ALICE_CHAT, 4)
    assert texts[2:] == [german, setup.host.core.strings.translate("telegram.unknown_command", "de", command="/settings")]

    setup.api.send(ALICE_CHAT, "/help", language_code="de")
    helped = (await setup.api.wait_texts(ALICE_CHAT, 5))[4]
    assert helped.startswith("Schreib, um mit deinem Assistenten") and "Andere /Befehle" in helped, helped

    # A path or a lone slash is the member's words: the model answers them.
    setup.model.script(MODEL, [Reply("Die Datei listet Rechnernamen."), Reply("Ja?")])
    setup.api.send(ALICE_CHAT, "/etc/hosts ist was?", language_code="de")
    await setup.api.wait_for(lambda: "Die Datei listet Rechnernamen." in setup.api.texts(ALICE_CHAT), what="the answer about /etc/hosts")
    setup.api.send(ALICE_CHAT, "/ hm", language_code="de")
    await setup.api.wait_for(lambda: "Ja?" in setup.api.texts(ALICE_CHAT), what="the answer to a lone slash")
    asked = [[m["content"] for m in r.messages if m["role"] == "user"][-1] for r in setup.model.requests_for(MODEL)]
    assert asked == ["/etc/hosts ist was?", "/ hm"]
    conversations = (await alice.get("/api/conversations")).json()["conversations"]
    assert not any(str(c.get("title") or "").startswith(("/foo", "/settings")) for c in conversations), conversations


async def test_help_in_english_says_other_commands_are_not_passed_on(setup: Setup):
    await running(setup)
    await paired_member(setup)
    setup.api.send(ALICE_CHAT, "/Nope")
    assert (await setup.api.wait_texts(ALICE_CHAT, 3))[2].startswith("/nope is not a command here. /help lists")
    setup.api.send(ALICE_CHAT, "/start")
    assert (await setup.api.wait_texts(ALICE_CHAT, 4))[3].endswith("Other /commands are not passed on to the assistant")
    assert setup.model.requests_for(MODEL) == []
