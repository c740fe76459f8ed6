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
        for tool in ("list_files", "grep_files", "show_file_to_user"):
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
        # The member's bubble lists what was sent, the image as its thumbnail (named by
        # its alt text); each opens in the viewer.
        files = page.locator(".msg.user .msg-files a")
        await expect(files).to_have_count(2)
        await expect(files.nth(0).get_by_role("img", name="cat.png")).to_be_visible()
        await expect(files.nth(1)).to_have_text("todo.txt")
        href = await files.nth(1).get_attribute("href")
        assert href.startswith("/api/file?path=uploads%2F") and href.endswith("todo.txt")
        viewed = await page.request.get(href)
        assert viewed.status == 200 and await viewed.text() == "feed the kitten at six\n"
        await screenshot(page, "files-attachments-answered")

        first, second = server.requests_for(VISION)
        content = first.messages[-1]["content"]
        assert content[0]["text"].startswith("What did I send?")
        assert "cat.png (image/png" in content[0]["text"] and "todo.txt (text/plain, 23 bytes)" in content[0]["text"]
        assert content[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
        listing, grep = (m["content"] for m in second.messages[-2:])
        assert "cat.png" in listing and "todo.txt" in listing
        assert grep.endswith("todo.txt:1: feed the kitten at six")


def tiny_png(width: int = 4, height: int = 3) -> bytes:
    """A real, decodable RGB PNG (the browser must be able to draw it)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x80\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


async def test_a_file_the_agent_shows_appears_as_a_link_and_a_preview(skald, browser_pages):  # noqa: F811
    async with ScriptedModelServer(models=(VISION,), api_key=API_KEY) as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_models(admin, server, (VISION,))
        await allow_tool(admin, "show_file_to_user")
        await host.create_member("alice", display_name="Alice")
        alice = await host.core.users.find("alice")
        home = host.core.files.home(alice.id)
        (home / "art").mkdir()
        (home / "art" / "sun.png").write_bytes(tiny_png())
        server.script(VISION, [Reply("", tool_calls=[ToolCall("show_file_to_user", {"path": "art/sun.png"})]), Reply("Here is your sun.")])

        page = await browser_pages.new(host.url)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        box = page.get_by_role("textbox", name="Message")
        await box.fill("Show me my drawing")
        await box.press("Enter")
        await expect(page.locator(".msg.assistant").last).to_contain_text("Here is your sun.", timeout=15000)
        note = page.locator(".msg.note").filter(has=page.locator("a.file-link"))
        await expect(note.locator("a.file-link")).to_have_text("sun.png")
        preview = note.locator("img.file-preview")
        await expect(preview).to_have_attribute("src", "/api/file?path=art%2Fsun.png")
        await page.wait_for_function("() => document.querySelector('img.file-preview')?.naturalWidth === 4")
        await screenshot(page, "files-shown-to-member")
        # After a reload the stored note renders the same way.
        await page.reload()
        await expect(page.locator("img.file-preview")).to_have_count(1)
