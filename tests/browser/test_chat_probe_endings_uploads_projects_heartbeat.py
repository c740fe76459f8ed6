"""What a browser probe saw in the chat: a stopped answer announced as "done", an
upload error left behind by the file that caused it, a project's conversation that did
not say it belonged to the project, a connection that died silently and was never
noticed, and an export saved under a name that lost its umlauts."""

from __future__ import annotations

import asyncio

from playwright.async_api import expect

from skald_host.testing import Hang, Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD
from tests.folders.support import join_project

from .kit import sign_in, stored_conversation
from .test_accessibility import sign_in_german
from .test_chat import MODEL, configure_model, send

#: The transcript's status line (screen readers hear it; it is visually hidden).
ANNOUNCER = "main p.turn-status[role=status]"  # not the conversation search's (conv-search-status)


async def test_a_stopped_an_interrupted_and_a_failed_answer_are_announced_as_what_they_are(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("nora")
        server.script(MODEL, [Hang(text="I am thinking very slowly about this question", token_delay=0.1), Reply(text="Done now.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "nora", MEMBER_PASSWORD)
        announcer = page.locator(ANNOUNCER)
        await send(page, "Take your time")
        await expect(page.locator(".msg.assistant .msg-body")).to_contain_text("I am thinking")
        await expect(announcer).to_have_text("The assistant is working…")
        await page.get_by_role("button", name="Stop").click()
        await expect(page.locator(".msg.assistant .badge")).to_have_text("Stopped")
        await expect(announcer).to_have_text("The answer was stopped.")
        await page.reload()  # said from the state on screen: the same after a reload
        await expect(page.locator(".msg.assistant .badge")).to_have_text("Stopped")
        await expect(page.locator(ANNOUNCER)).to_have_text("The answer was stopped.")
        await send(page, "And now?")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Done now.")
        await expect(page.locator(ANNOUNCER)).to_have_text("The assistant is done.")

        cut = await stored_conversation(host, (await host.member("nora")).member["id"], "Cut by a restart", [("user", "Hello?", "complete"), ("assistant", "Half an ans", "interrupted")])
        await page.goto(f"{host.url}/#chat/{cut}")
        await expect(page.locator(".msg.assistant .badge")).to_have_text("Interrupted")
        await expect(page.locator(ANNOUNCER)).to_have_text("The answer was interrupted.")
        failed = await stored_conversation(host, (await host.member("nora")).member["id"], "Failed", [("user", "Hello?", "complete"), ("assistant", "No model.", "error")])
        await page.goto(f"{host.url}/#chat/{failed}")
        await expect(page.locator(".msg.assistant .badge")).to_have_text("Failed")
        await expect(page.locator(ANNOUNCER)).to_have_text("The answer failed.")

        # Written once the member's runtime runs (signed in): at its start, recovery
        # would take an interrupted answer up again.
        await host.member("nils", locale="de")
        german = await browser_pages.new(host.url, locale="de-DE")
        await sign_in_german(german, "nils", MEMBER_PASSWORD)
        cut = await stored_conversation(host, (await host.member("nils")).member["id"], "Unterbrochen", [("user", "Hallo?", "complete"), ("assistant", "Eine halbe Ant", "interrupted")])
        stopped = await stored_conversation(host, (await host.member("nils")).member["id"], "Gestoppt", [("user", "Hallo?", "complete"), ("assistant", "Ich denke", "cancelled")])
        await german.goto(f"{host.url}/#chat/{cut}")
        await expect(german.locator(".msg.assistant .badge")).to_have_text("Unterbrochen")
        await expect(german.locator(ANNOUNCER)).to_have_text("Die Antwort wurde unterbrochen.")
        await german.goto(f"{host.url}/#chat/{stopped}")
        await expect(german.locator(".msg.assistant .badge")).to_have_text("Gestoppt")
        await expect(german.locator(ANNOUNCER)).to_have_text("Die Antwort wurde gestoppt.")


async def test_an_upload_error_goes_when_the_file_that_caused_it_is_removed(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(settings=skald.settings(files={"upload_max_bytes": 64 * 1024}))
        await configure_model(await host.admin(), server)
        await host.create_member("olga")
        server.script(MODEL, [Reply(text="Got the notes.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "olga", MEMBER_PASSWORD)
        await page.locator("input.attach-input").set_input_files([
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"small\n"},
            {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": b"\x00" * (100 * 1024)},
        ])
        await send(page, "Here are my files")
        error = page.locator(".composer .form-status.error")
        await expect(error).to_contain_text("big.bin: The file is larger than")
        chosen = page.get_by_role("list", name="Files to send")
        await expect(chosen.locator("li")).to_have_count(2)  # kept for another try
        # Removing another file leaves the error: it is still true.
        await chosen.get_by_role("button", name="Remove notes.txt").click()
        await expect(error).to_contain_text("big.bin: The file is larger than")
        await chosen.get_by_role("button", name="Remove big.bin").click()
        await expect(page.locator(".composer .form-status")).to_have_text("")
        await expect(page.locator(".composer .form-status.error")).to_have_count(0)
        await send(page, "Without the big one")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Got the notes.")


async def test_a_project_chat_names_its_project_and_links_back_to_it(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        paul = await host.member("paul")
        created = await paul.post("/api/projects", json={"slug": "garden", "title": "Garden plans"})
        assert created.status_code == 201, created.text
        project = created.json()["id"]
        plain = await paul.post("/api/conversations", json={"title": "Just chatting"})
        page = await browser_pages.new(host.url)
        await sign_in(page, "paul", MEMBER_PASSWORD)
        await page.goto(f"{host.url}/#chat/{plain.json()['id']}")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Just chatting")
        await expect(page.locator(".conv-project")).to_have_count(0)  # any other conversation: no project line

        await page.goto(f"{host.url}/#projects/{project}")
        await page.get_by_role("button", name="Chat in this project").click()
        await page.wait_for_url("**/#chat/*")
        line = page.locator(".conv-header .conv-project")
        await expect(line).to_have_text("Project: Garden plans · with Project coordinator")
        # Renamed, the conversation still says which project it is in.
        await page.get_by_role("button", name="Rename").click()
        await page.get_by_role("textbox", name="Title").fill("Where the roses go")
        await page.get_by_role("button", name="Save").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("Where the roses go")
        await expect(line).to_contain_text("Project: Garden plans")
        await line.get_by_role("link", name="Garden plans").click()
        await page.wait_for_url(f"**/#projects/{project}")
        await expect(page.get_by_role("button", name="Chat in this project")).to_be_visible()

        petra = await host.member("petra", locale="de")
        await join_project(paul, petra, project, can_write=True)
        german = await browser_pages.new(host.url, locale="de-DE")
        await sign_in_german(german, "petra", MEMBER_PASSWORD)
        await german.goto(f"{host.url}/#projects/{project}")
        await german.get_by_role("button", name="In diesem Projekt chatten").click()
        await german.wait_for_url("**/#chat/*")
        await expect(german.locator(".conv-header .conv-project")).to_have_text("Projekt: Garden plans · mit Projektkoordination")


async def test_a_connection_that_dies_silently_is_noticed_and_the_answer_resumes(skald, browser_pages):
    """The network gone without a close: the socket stays OPEN and nothing arrives. The
    page's ping expects an answer; without one it says it reconnects, and does."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("quinn")
        words = " ".join(f"word{n}" for n in range(1, 31))
        server.script(MODEL, [Reply(text=f"Slowly: {words} end.", token_delay=0.15)])
        page = await browser_pages.new(host.url)
        await page.context.add_init_script("window.__skaldSocketTimings = { pingMs: 400, pongTimeoutMs: 800 };")
        await sign_in(page, "quinn", MEMBER_PASSWORD)
        await send(page, "Tell me slowly")
        answer = page.locator(".msg.assistant").last
        await expect(answer.locator(".msg-body")).to_contain_text("word2")
        await page.context.set_offline(True)
        notice = page.get_by_text("The connection to the server was lost. Reconnecting…")
        await expect(notice).to_be_visible(timeout=4000)
        await asyncio.sleep(1.0)
        await page.context.set_offline(False)
        await expect(notice).to_be_hidden(timeout=10_000)
        await expect(answer.locator(".msg-body")).to_have_text(f"Slowly: {words} end.", timeout=10_000)
        await expect(answer).to_have_attribute("data-status", "complete")
        await expect(page.locator(ANNOUNCER)).to_have_text("The assistant is done.")
        # A live connection answers its pings: no false alarm while idle.
        await page.wait_for_timeout(2500)
        await expect(notice).to_be_hidden()


async def test_an_export_is_saved_under_its_title_in_any_script(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        rosa = await host.member("rosa")
        created = await rosa.post("/api/conversations", json={"title": 'Rezept "Käsekuchen" & <Tipps>'})
        assert created.status_code == 201, created.text
        page = await browser_pages.new(host.url)
        await sign_in(page, "rosa", MEMBER_PASSWORD)
        await page.goto(f"{host.url}/#chat/{created.json()['id']}")
        await page.get_by_text("Export", exact=True).click()
        async with page.expect_download() as info:
            await page.get_by_role("link", name="Markdown (.md)").click()
        assert (await info.value).suggested_filename == "Rezept-Käsekuchen-Tipps.md"
