"""Barriers a low-vision and keyboard probe found (WCAG 2.1/2.2 AA): in forced colours
(Windows High Contrast) switches, icons and the message box's focus vanished; at 320x256
(400% zoom) an open conversation's transcript was a 25 px slot, and a control focused
by keyboard landed under the sticky top bar."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import DESKTOP, PagePlugin, sign_in
from .test_chat import MODEL, configure_model, send

SHORT = {"width": 320, "height": 256}
LONG_ANSWER = "\n\n".join(f"Paragraph {n}: the quick brown fox jumps over the lazy dog." for n in range(1, 31))


async def drawn(page: Any, node: Any) -> bytes:
    """The pixels of ``node``'s box, after checking that it draws something there: the
    box with ``node`` hidden must look different."""
    shown = await node.screenshot(animations="disabled")
    await node.evaluate("(n) => { n.style.visibility = 'hidden'; }")
    hidden = await page.screenshot(clip=await node.bounding_box(), animations="disabled")
    await node.evaluate("(n) => { n.style.visibility = ''; }")
    assert shown != hidden, f"{await node.evaluate('(n) => n.outerHTML.slice(0, 120)')} draws nothing"
    return shown


async def topbar_bottom(page: Any) -> float:
    return await page.locator(".topbar").evaluate("(bar) => bar.getBoundingClientRect().bottom")


async def test_in_forced_colours_switches_show_their_state_and_icons_are_drawn(skald, browser_pages):
    plugin = PagePlugin("hello")
    host = await skald.start(plugins=[plugin, PagePlugin("other", title="Other", page_title="Other")], enable=["hello"])
    await host.admin()
    page = await browser_pages.new(host.url, viewport=DESKTOP)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.emulate_media(forced_colors="active")
    await page.goto("/#plugins")
    on = page.locator("input.switch:checked:not(:disabled)").first
    off = page.locator("input.switch:not(:checked):not(:disabled)").first
    await expect(on).to_be_visible()
    await expect(off).to_be_visible()
    assert await drawn(page, on) != await drawn(page, off), "a checked and an unchecked switch look the same"

    # An icon-only button at 320 px (Attach's text is visually hidden), and Menu's hamburger.
    await page.set_viewport_size({"width": 320, "height": 640})
    await page.goto("/#chat")
    await drawn(page, page.locator(".composer .btn.attach .icon"))
    await drawn(page, page.locator(".menu-button .menu-icon"))


async def test_in_forced_colours_the_focused_message_box_shows_an_outline(skald, browser_pages):
    host = await skald.start()
    await host.create_member("wren")
    page = await browser_pages.new(host.url)
    await sign_in(page, "wren", MEMBER_PASSWORD)
    await page.emulate_media(forced_colors="active")
    box = page.get_by_role("textbox", name="Message")
    await box.focus()
    await expect(box).to_be_focused()
    outlines = await page.evaluate("""() => ['.composer-input', '.composer-row'].map((s) => {
        const style = getComputedStyle(document.querySelector(s));
        return style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 1;
    })""")
    assert any(outlines), "the focused message box has no outline in forced colours"


async def test_at_320x256_an_open_conversation_shows_its_transcript_and_send_stays_reachable(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("wren")
        server.script(MODEL, [Reply(text=LONG_ANSWER)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "wren", MEMBER_PASSWORD)
        await send(page, "Tell me a long story")
        await expect(page.locator(".msg.assistant .msg-body")).to_contain_text("Paragraph 30")
        await page.set_viewport_size(SHORT)
        await page.reload()
        transcript = page.locator(".transcript")
        await expect(page.locator(".msg.assistant .msg-body")).to_contain_text("Paragraph 30")
        await transcript.evaluate("(node) => node.scrollIntoView({block: 'end'})")
        bar = await topbar_bottom(page)
        box = await transcript.bounding_box()
        seen = min(box["y"] + box["height"], SHORT["height"]) - max(box["y"], bar)
        assert seen >= SHORT["height"] / 2, f"the transcript shows {seen} px of {SHORT['height']}"

        message = page.get_by_role("textbox", name="Message")
        await message.focus()
        for line in ("one", "two", "three"):
            await message.press_sequentially(line)
            await message.press("Shift+Enter")
        send_button = page.get_by_role("button", name="Send")
        await send_button.scroll_into_view_if_needed()
        button = await send_button.bounding_box()
        assert button["y"] >= bar and button["y"] + button["height"] <= SHORT["height"], (button, bar)
        box = await transcript.bounding_box()
        assert box["height"] >= SHORT["height"] / 2, f"with three lines typed the transcript is {box['height']} px high"


async def test_at_320x256_a_control_focused_by_keyboard_is_not_under_the_top_bar(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    member = await host.create_member("wren")
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.set_viewport_size(SHORT)
    await page.goto(f"/#members/{member['id']}")
    await expect(page.get_by_role("button", name="Reset password")).to_be_attached()
    for _ in range(40):
        await page.keyboard.press("Tab")
    hidden = []
    for _ in range(40):
        await page.keyboard.press("Shift+Tab")
        focused = await page.evaluate("""() => {
            const node = document.activeElement;
            // The skip link is drawn over the bar on purpose.
            if (!node || node.closest('.topbar, #sidebar, .skip-link') || node === document.body) return null;
            const box = node.getBoundingClientRect();
            return {name: (node.textContent || node.name || node.tagName).trim().slice(0, 40), top: box.top};
        }""")
        if focused and focused["top"] < await topbar_bottom(page):
            hidden.append(focused)
    assert hidden == [], f"focused under the top bar ({await topbar_bottom(page)} px): {hidden}"
