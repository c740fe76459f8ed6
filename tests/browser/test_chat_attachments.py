"""Attachments in the chat: an image shows as a thumbnail (in the composer before it is
sent, and in the message after), any other file as its name; both under the page's
Content-Security-Policy (a blocked image would fail the test in conftest)."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from tests.chat.support import eventually

from .kit import screenshot, sign_in
from .test_chat import MODEL, configure_model, send

LOADED = "(image) => image.complete && image.naturalWidth > 0"


def png(width: int, height: int, rgb: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A real PNG (the server sniffs the bytes, not the name)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


async def expect_thumbnail(scope: Any, name: str) -> Any:
    image = scope.get_by_role("img", name=name, exact=True)
    await expect(image).to_have_class("attachment-thumb")
    await expect(image).to_have_attribute("loading", "lazy")
    assert await image.evaluate(LOADED) or await image.evaluate(
        "(image) => new Promise((done) => { image.addEventListener('load', () => done(image.naturalWidth > 0)); image.addEventListener('error', () => done(false)); })"
    ), f"the thumbnail of {name} did not load"
    box = await image.bounding_box()
    assert box and box["width"] <= 200 and box["height"] <= 160, f"the thumbnail is not size-capped: {box}"
    return image


async def test_an_image_attachment_shows_as_a_thumbnail_before_and_after_sending_and_a_text_file_as_a_chip(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("gina", display_name="Gina")
        server.script(MODEL, [Reply(text="Nice picture.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "gina", MEMBER_PASSWORD)

        await page.locator("input.attach-input").set_input_files([
            {"name": "red-square.png", "mimeType": "image/png", "buffer": png(400, 300)},
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"just some text\n"},
        ])
        chosen = page.get_by_role("list", name="Files to send")
        await expect_thumbnail(chosen, "red-square.png")
        await expect(chosen.get_by_role("button", name="Remove red-square.png")).to_be_visible()
        text_chip = chosen.locator(".attachment-chip")
        await expect(text_chip).to_have_count(1)
        await expect(text_chip).to_contain_text("notes.txt")
        await expect(chosen.get_by_role("img")).to_have_count(1)
        await screenshot(page, "chat-attachments-composer", full_page=False)

        await send(page, "Here are my files")
        await page.wait_for_url("**/#chat/*")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Nice picture.")

        async def sent_files() -> None:
            files = page.locator(".msg.user .msg-files")
            # The thumbnail is the link that opens the image; the text file stays a named link.
            opens = files.get_by_role("link", name="red-square.png", exact=True)
            href = await opens.get_attribute("href")
            assert href and href.startswith("/api/file?path=") and href.endswith("red-square.png")
            await expect(opens).to_have_attribute("target", "_blank")
            image = await expect_thumbnail(opens, "red-square.png")
            assert await image.get_attribute("src") == href
            text_link = files.get_by_role("link", name="notes.txt", exact=True)
            await expect(text_link).to_have_text("notes.txt")
            await expect(text_link.locator("img")).to_have_count(0)
            await expect(files.get_by_role("img")).to_have_count(1)

        await sent_files()
        await expect(page.get_by_role("list", name="Files to send")).to_be_hidden()
        await screenshot(page, "chat-attachments-sent", full_page=False)

        # Stored, the message names the type the server sniffed: the same after a reload.
        await page.reload()
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Nice picture.")
        await sent_files()


async def test_a_first_message_whose_upload_is_refused_leaves_no_empty_conversation(skald, browser_pages):
    """The conversation a fresh composer's first message makes goes again when its file
    is refused: nothing was sent, and the list kept an empty "New conversation" (crash-
    kill probe). The retry with a file the server takes makes one conversation."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(settings=skald.settings(files={"upload_max_bytes": 1000}))
        await configure_model(await host.admin(), server)
        await host.create_member("gina", display_name="Gina")
        server.script(MODEL, [Reply(text="Got it.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "gina", MEMBER_PASSWORD)

        await page.locator("input.attach-input").set_input_files([{"name": "big.txt", "mimeType": "text/plain", "buffer": b"x" * 5000}])
        await send(page, "Here is the big one")
        await expect(page.get_by_text("big.txt:", exact=False).first).to_be_visible()
        gina = await host.member("gina")
        # Made before the upload was tried, gone once it was refused.
        await eventually(lambda: _no_conversation(gina), what="the unsent message's conversation to go")

        await page.get_by_role("button", name="Remove big.txt").click()
        await page.locator("input.attach-input").set_input_files([{"name": "small.txt", "mimeType": "text/plain", "buffer": b"small\n"}])
        await send(page, "Here is a small one")
        await page.wait_for_url("**/#chat/*")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Got it.")
        assert await _conversation_count(gina) == 1


async def _conversation_count(member) -> int:
    return len((await member.get("/api/conversations")).json()["conversations"])


async def _no_conversation(member) -> bool:
    return await _conversation_count(member) == 0
