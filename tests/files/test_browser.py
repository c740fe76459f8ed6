"""In the browser: a member attaches an image and a text file in the chat composer,
the (scripted) agent lists and searches them with the fs tools, and the answer shows.
The vision model's request carries the image as a data URL (asserted on the wire)."""

from __future__ import annotations

import base64

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD
from tests.browser.conftest import browser_pages  # noqa: F401 - the watched-pages fixture
from tests.browser.kit import screenshot, sign_in
from tests.chat.support import API_KEY, allow_tool, configure_models

from .conftest import VISION
from .test_uploads import PNG


async def test_member_attaches_an_image_and_a_text_file_and_the_agent_reads_them(skald, browser_pages):  # noqa: F811
    async with ScriptedModelServer(models=(VISION,), api_key=API_KEY) as server:
        host = await skald.start()
        admin = await host.admin()
        ids = await configure_models(admin, server, (VISION,))
        assert (await admin.patch(f"/api/admin/models/entries/{ids[VISION]}", json={"vision": True})).status_code == 200
        for tool in ("list_files", "grep_files"):
            await allow_tool(admin, tool)
        await host.create_member("alice", display_name="Alice")
        server.script(
            VISION,
            [
                Reply("Looking.", tool_calls=[ToolCall("list_files", {"path": "uploads", "recursive": True}),
                                              ToolCall("grep_files", {"pattern": "kitten", "path": "uploads"})]),
                Reply("A cat photo, and your note says: feed the kitten at six."),
            ],
        )

        page = await browser_pages.new(host.url)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        await page.locator(".composer .attach-input").set_input_files([
            {"name": "cat.png", "mimeType": "image/png", "buffer": PNG},
            {"name": "todo.txt", "mimeType": "text/plain", "buffer": b"feed the kitten at six\n"},
        ])
        chips = page.locator(".composer .attachment-chip")
        await expect(chips).to_have_count(2)
        await expect(chips.nth(0)).to_contain_text("cat.png")
        await page.get_by_role("textbox", name="Message").fill("What did I send?")
        await screenshot(page, "files-attachments-chosen")
        await page.get_by_role("textbox", name="Message").press("Enter")
        await page.wait_for_url("**/#chat/*")
        await expect(page.locator(".msg.assistant").last).to_contain_text("feed the kitten at six", timeout=15000)
        await expect(chips).to_have_count(0)
        await screenshot(page, "files-attachments-answered")

        first, second = server.requests_for(VISION)
        content = first.messages[-1]["content"]
        assert content[0]["text"].startswith("What did I send?")
        assert "cat.png (image/png" in content[0]["text"] and "todo.txt (text/plain, 23 bytes)" in content[0]["text"]
        assert content[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
        listing, grep = (m["content"] for m in second.messages[-2:])
        assert "cat.png" in listing and "todo.txt" in listing
        assert grep.endswith("todo.txt:1: feed the kitten at six")
