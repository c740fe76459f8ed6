"""The model is told the language each member reads the shell in: their own choice,
else the instance's, chosen at setup. A member on "the instance's default" was
described as having no preferred language, and a real model answered a German
member in English."""

from __future__ import annotations

from skald_host.testing import ScriptedModelServer, SkaldHarness

from .support import ChatSocket, new_conversation


async def test_the_profile_names_the_members_own_language_else_the_instances(skald: SkaldHarness):
    async with ScriptedModelServer(models=("m",)) as server:
        host = await skald.start()
        await host.setup_admin(locale="de")
        await host.use_model(server)
        for name, locale in (("alice", None), ("bob", "en")):
            member = await host.member(name, **({"locale": locale} if locale else {}))
            server.script("m", ["Hallo."])
            async with ChatSocket(member) as sock:
                cid = await new_conversation(member)
                await sock.send(cid, "Hi")
                await sock.turn(cid)
        alice, bob = (r.messages[0]["content"] for r in server.requests_for("m"))
    assert "Preferred language: de" in alice and "Preferred language: not specified" not in alice
    assert "Preferred language: en" in bob
