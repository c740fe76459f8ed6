"""What a newcomer probe of the phone app found: "New chat" made a conversation at once,
so one left without a word stayed in the member's web sidebar as an empty "New
conversation"; a member whose conversations were all on the web read only "No
conversations yet"; and in German the pairing form offered (and the page then listed)
the English "Phone"."""

from __future__ import annotations

import pytest

from skald_host.testing import Reply
from mobile_support import BASE, MODEL, PLUGIN, paired_device, pairing_code
from test_mobile_app_browser import PHONE
from test_mobile_app_messages_browser import _app, _conversation, _new_chat, _send


@pytest.fixture
def browser(plugin_browser):
    return plugin_browser.browser


async def _mobile_conversations(member) -> list[dict]:
    """The member's conversations of the app's source, as the web's sidebar lists them."""
    listed = (await member.get("/api/conversations")).json()["conversations"]
    return [c for c in listed if c.get("source") == PLUGIN]


async def test_a_new_chat_left_without_a_word_leaves_no_conversation_and_its_first_message_makes_one(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        await page.fill("textarea[name=text]", "typed, never sent")
        await page.tap("#back")
        await page.wait_for_selector("#conversations li")
        await _new_chat(page)
        await page.go_back()
        await page.wait_for_selector("#conversations li")
        assert await _mobile_conversations(alice) == []
        assert (await alice.get(f"{BASE}/conversations")).json()["conversations"] == []

        # The first message makes the conversation: one, holding it, and the chat's address names it.
        await _new_chat(page)
        setup.model.script(MODEL, [Reply("Hello from the server.")])
        await _send(page, "canary-e11 first words")
        await page.wait_for_selector(".message.assistant >> text=Hello from the server.")
        conversation = await _conversation(page)
        made = await _mobile_conversations(alice)
        assert [c["id"] for c in made] == [conversation]
        messages = (await alice.get(f"/api/conversations/{conversation}")).json()["messages"]
        assert [m["content"] for m in messages if m["role"] == "user"] == ["canary-e11 first words"]
        # The next message goes into the same conversation.
        setup.model.script(MODEL, [Reply("Still here.")])
        await _send(page, "canary-e11 more")
        await page.wait_for_selector(".message.assistant >> text=Still here.")
        assert [c["id"] for c in await _mobile_conversations(alice)] == [conversation]


async def test_a_draft_asked_for_twice_makes_one_conversation(setup):
    """A phone that never got the answer asks again with the same draft key: the same
    conversation, not a second, empty one."""
    alice = await setup.host.member("alice", display_name="Alice")
    phone = await paired_device(setup, alice)
    first = await phone.post(f"{BASE}/conversations", json={"draft": "d-7c1e2a90-draft"})
    again = await phone.post(f"{BASE}/conversations", json={"draft": "d-7c1e2a90-draft"})
    assert first.status_code == again.status_code == 201, (first.text, again.text)
    assert first.json()["id"] == again.json()["id"]
    other = await phone.post(f"{BASE}/conversations", json={"draft": "d-another-draft"})
    assert other.json()["id"] != first.json()["id"]
    plain = await phone.post(f"{BASE}/conversations")  # no draft key: a fresh one, as before
    assert plain.status_code == 201 and plain.json()["id"] not in (first.json()["id"], other.json()["id"])
    assert (await phone.post(f"{BASE}/conversations", json={"draft": "bad key!"})).status_code == 400
    # No key is no key, and a misspelt field is refused (second security sweep).
    assert (await phone.post(f"{BASE}/conversations", json={"draft": None})).status_code == 201
    refused = await phone.post(f"{BASE}/conversations", json={"draft": "d-7c1e2a90-draft", "member_id": "x"})
    assert refused.status_code == 400 and refused.json().get("field") == "member_id", refused.text


async def test_a_member_with_only_web_conversations_is_told_the_app_shows_those_started_in_it(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    for title in ("Garden plans", "Tax letter"):
        assert (await alice.post("/api/conversations", json={"title": title})).status_code == 201
    async with _app(setup, browser, alice) as (context, page):
        empty = page.locator("#conversations li.muted")
        await empty.wait_for()
        said = await empty.inner_text()
        assert "started in this app" in said and "on the web" in said, said
        assert "Garden plans" not in await page.locator("#conversations").inner_text()


async def test_the_pairing_form_offers_and_the_page_lists_the_phone_by_its_german_name(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    # A German member: paired, the app speaks the account's language (the phone's only before).
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    context = await browser.new_context(base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale="de-DE")
    page = await context.new_page()
    page.set_default_timeout(10_000)
    try:
        await page.goto(f"{BASE}/app/")
        await page.wait_for_selector("text=Name dieses Handys")
        offered = await page.input_value("input[name=name]")
        assert offered == "Handy", offered
        await page.fill("input[name=code]", await pairing_code(alice))
        await page.fill("input[name=name]", "")  # left empty: the same German default
        await page.tap("button[type=submit]")
        await page.wait_for_selector("text=Neuer Chat")
        devices = (await alice.get(f"{BASE}/devices")).json()["devices"]
        assert [d["name"] for d in devices] == ["Handy"]
    finally:
        await context.close()
