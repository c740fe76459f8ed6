"""Chat probe fixes: a search result's part offers no "last turn" action (Regenerate
would act on the newest answer, not read), opening a result keeps the search and its
results, a result in an earlier version opens at that version, a pasted file is attached
as a dropped one, a file over the upload limit is said on its chip as it is chosen and a
retry after a refused upload does not upload the others again, and Escape in the message
box stops a running answer."""

from __future__ import annotations

import re

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in, stored_conversation
from .test_chat import MODEL, carol_waiting_on_a_slow_answer, configure_model, send

TURNS = 150  # 300 rows: more than a part (about 100 rows)


async def test_a_search_results_part_offers_no_regenerate_and_the_search_stays(skald, browser_pages):
    host = await skald.start()
    member = await host.member("dora")
    rows: list[tuple[str, str]] = []
    for n in range(TURNS):
        rows += [("user", "How do penguins sleep in winter?" if n == 10 else f"Question {n}"), ("assistant", f"Answer {n}.")]
    await stored_conversation(host, member.member["id"], "Very long", rows)
    await stored_conversation(host, member.member["id"], "Something else", [("user", "Hello"), ("assistant", "Hi.")])
    page = await browser_pages.new(host.url)
    await sign_in(page, "dora", MEMBER_PASSWORD)
    conversations = page.locator(".conv-list li")
    await expect(conversations).to_have_count(2)

    search = page.get_by_role("searchbox", name="Search conversations")
    await search.fill("penguins")
    await expect(conversations).to_have_count(1)
    await page.locator(".conv-list a").first.click()
    hit = page.locator(".msg.user", has_text="How do penguins sleep in winter?")
    await expect(hit).to_be_focused()
    later = page.locator(".later-messages button")
    await expect(later).to_be_visible()
    # The part read ends before the newest answer: no Regenerate (nor Retry) under its last.
    await expect(page.locator(".transcript .regenerate")).to_have_count(0)
    await expect(page.locator(".transcript .retry")).to_have_count(0)
    # The search and its results stay beside the opened conversation.
    await expect(search).to_have_value("penguins")
    await expect(conversations).to_have_count(1)
    await expect(page.locator(".conv-list .conv-snippet")).to_be_visible()

    # Read on to the newest: Regenerate is under the conversation's last answer.
    for _ in range(10):
        if not await later.is_visible():
            break
        drawn = await page.locator(".transcript .msg").count()
        await later.click()
        await page.wait_for_function(
            "(n) => document.querySelectorAll('.transcript .msg').length > n || document.querySelector('.later-messages').hidden", arg=drawn)
    last = page.locator(".msg.assistant", has_text=f"Answer {TURNS - 1}.")
    await expect(last.locator(".regenerate")).to_be_visible()
    await expect(page.locator(".transcript .regenerate")).to_have_count(1)

    # Cleared, the whole list again.
    await search.fill("")
    await expect(conversations).to_have_count(2)


async def test_a_result_in_an_earlier_version_opens_at_that_version(skald, browser_pages):
    host = await skald.start()
    member = await host.member("dora")
    conversation_id = await stored_conversation(host, member.member["id"], "Animals", [
        ("user", "Tell me about stripes"),
        ("assistant", "Zebras sleep standing up.", "complete", {"variant": 1, "branch_point": "Tell me about stripes"}),
        ("assistant", "Tigers have stripes too."),
    ])
    page = await browser_pages.new(host.url)
    await sign_in(page, "dora", MEMBER_PASSWORD)
    await page.get_by_role("searchbox", name="Search conversations").fill("zebras")
    snippet = page.locator(".conv-list .conv-snippet")
    await expect(snippet).to_contain_text("In an earlier version")
    await page.locator(".conv-list a").first.click()
    hit = page.locator(".msg.assistant", has_text="Zebras sleep standing up.")
    await expect(hit).to_be_focused()
    await expect(hit).to_have_class(re.compile(r"\bsearch-hit\b"))
    await expect(hit.locator(".versions")).to_contain_text("1 / 2")
    await expect(page.locator(".msg.assistant", has_text="Tigers")).to_have_count(0)
    shown = (await member.get(f"/api/conversations/{conversation_id}")).json()["messages"]
    assert [m["content"] for m in shown if not m["variant"]][-1] == "Zebras sleep standing up."


async def test_a_pasted_file_is_attached_and_pasted_text_stays_text(skald, browser_pages):
    host = await skald.start()
    await host.create_member("gina", display_name="Gina")
    page = await browser_pages.new(host.url)
    await sign_in(page, "gina", MEMBER_PASSWORD)
    box = page.get_by_role("textbox", name="Message")
    await box.focus()
    await box.evaluate("""(box) => {
        const files = new DataTransfer();
        files.items.add(new File(["just some text\\n"], "pasted.txt", { type: "text/plain" }));
        box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: files, bubbles: true, cancelable: true }));
        const words = new DataTransfer();
        words.setData("text/plain", "plain words");
        const kept = box.dispatchEvent(new ClipboardEvent("paste", { clipboardData: words, bubbles: true, cancelable: true }));
        box.dataset.textPasteKept = String(kept);
    }""")
    chosen = page.get_by_role("list", name="Files to send")
    await expect(chosen.locator(".attachment-chip")).to_contain_text("pasted.txt")
    await expect(chosen.get_by_role("button", name="Remove pasted.txt")).to_be_visible()
    # Text on the clipboard is left to the browser (pasted as text), not taken.
    assert await box.get_attribute("data-text-paste-kept") == "true"
    await expect(chosen.locator("li")).to_have_count(1)


async def test_a_file_over_the_limit_is_said_at_once_and_a_retry_uploads_only_what_did_not_go(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(settings=skald.settings(files={"upload_max_bytes": 2 * 1024 * 1024}))
        await configure_model(await host.admin(), server)
        await host.create_member("gina", display_name="Gina")
        server.script(MODEL, [Reply(text="Hello."), Reply(text="Got the notes.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "gina", MEMBER_PASSWORD)
        await send(page, "Hi")
        await page.wait_for_url("**/#chat/*")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Hello.")

        await page.locator("input.attach-input").set_input_files([
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"my notes\n"},
            {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": b"\0" * (3 * 1024 * 1024)},
        ])
        chosen = page.get_by_role("list", name="Files to send")
        big = chosen.locator("li", has_text="big.bin")
        # Said on its chip as it is chosen, with the limit, before any Send.
        await expect(big.locator(".attachment-refusal")).to_have_text("The file is larger than the upload limit of 2.0 MiB.")
        await expect(chosen.locator("li", has_text="notes.txt").locator(".attachment-refusal")).to_have_count(0)

        await send(page, "Here are my notes")
        await expect(page.locator(".composer").get_by_text("big.bin:", exact=False)).to_be_visible()
        await chosen.get_by_role("button", name="Remove big.bin").click()
        await page.locator(".composer").get_by_role("button", name="Send").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Got the notes.")
        sent = page.locator(".msg.user .msg-files").get_by_role("link", name=re.compile("notes"))
        await expect(sent).to_have_count(1)
        href = await sent.get_attribute("href")
        assert href and href.endswith("notes.txt"), href  # the first upload's, not "notes (2).txt"
        gina = await host.member("gina")
        conversation_id = page.url.rsplit("/", 1)[-1]
        listing = (await gina.get(f"/api/conversations/{conversation_id}")).json()["messages"]
        attached = [a for m in listing for a in (m.get("attachments") or [])]
        assert len(attached) == 1, attached


async def test_escape_in_the_message_box_stops_a_running_answer(skald, browser_pages):
    async with carol_waiting_on_a_slow_answer(skald, browser_pages) as (_, _, page, answer):
        stop = page.get_by_role("button", name="Stop")
        await expect(stop).to_be_visible()
        box = page.get_by_role("textbox", name="Message")
        await box.focus()
        await box.press("Escape")
        await expect(answer).to_have_attribute("data-status", "cancelled")
        await expect(stop).to_be_hidden()
        await expect(box).to_be_focused()
