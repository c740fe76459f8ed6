"""Keyboard and screen-reader paths a German keyboard walk found broken (issue 19 point 5):
focus fell to <body> after an admin page re-rendered itself, and after Escape closed
the phone menu; the working dots were read out after every answer; a code block that
scrolls sideways could not be reached by keyboard; sizes ignored the reader's locale."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import DESKTOP, PHONE, screenshot, sign_in
from .test_accessibility import assert_no_violations, sign_in_german
from .test_chat import MODEL, add_model, configure_model

FOCUSED_IN_PAGE = "() => { const a = document.activeElement; return !!a && a !== document.body && document.querySelector('#content').contains(a); }"


async def test_adding_on_an_admin_page_keeps_focus_in_the_page(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#models")
    form = page.locator("form", has=page.get_by_role("button", name="Add provider"))
    await form.locator("input[name=name]").fill("Local")
    await form.locator("input[name=base_url]").fill("http://127.0.0.1:9/v1")
    key = form.locator("input[name=api_key]")
    await key.fill("sk-x")
    await key.press("Enter")
    await expect(page.locator("#content")).to_contain_text("Local")
    assert await page.evaluate(FOCUSED_IN_PAGE), await page.evaluate("document.activeElement.outerHTML.slice(0, 200)")


async def test_a_turn_is_announced_once_and_a_wide_code_block_is_reachable_by_keyboard(skald, browser_pages):
    wide = "x = [" + ", ".join(str(n) for n in range(400)) + "]"
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("erin", locale="de")
        server.script(MODEL, [Reply(text=f"Hier:\n\n```python\n{wide}\n```\n")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        box = page.get_by_role("textbox", name="Nachricht")
        await box.fill("Zeig mir Code")
        await box.press("Enter")
        await expect(page.locator(".msg.assistant pre.md-code")).to_be_visible()
        announcer = page.locator(".transcript + [role=status]")
        await expect(announcer).to_have_text("Der Assistent ist fertig.")
        # The dots are for the eye only; nothing inside the live log says "working" any more.
        assert await page.locator(".transcript .activity[role=status]").count() == 0
        code = page.locator(".msg.assistant pre.md-code")
        await expect(code).to_have_attribute("tabindex", "0")
        await expect(code).to_have_attribute("aria-label", "Code (python)")
        assert await code.evaluate("(pre) => pre.scrollWidth > pre.clientWidth")  # it does scroll sideways
        await assert_no_violations(page, "a conversation with a wide code block")
        size = await page.evaluate("async () => (await import('/ui/lib/ui.js')).formatSize(922726)")
        assert size == "901,1 KiB"


async def test_a_long_model_label_does_not_push_a_phone_page_sideways(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL, "second-model"), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        await add_model(admin, "second-model", "Model B, with a long label to see how the picker wraps on a small screen")
        member = await host.member("erin")
        cid = (await member.post("/api/conversations", json={})).json()["id"]
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        await page.goto(f"/#chat/{cid}")
        await expect(page.locator("select.model-select")).to_be_visible()
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390


async def test_a_tool_card_waiting_for_approval_reads_on_one_line_per_part_on_a_phone_in_german(skald, browser_pages):
    """"Braucht deine Zustimmung" is a long badge: the card's header wraps around it,
    never squeezing "Werkzeug" and the tool's name into a letter per line."""
    from skald_host.testing import ToolCall

    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        server.script(MODEL, [Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": "Plan.", "every": "every weekday at 8"})])])
        await host.create_member("berta", locale="de")
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "berta", MEMBER_PASSWORD)
        await page.get_by_role("textbox", name="Nachricht").fill("Plane meinen Tag.")
        await page.keyboard.press("Enter")
        await expect(page.locator(".badge.tool-awaiting_approval")).to_be_visible()
        for part in (".tool-details > summary .tool-label", ".tool-details > summary .tool-name"):
            lines = await page.locator(part).first.evaluate(
                "(n) => Math.round(n.getBoundingClientRect().height / parseFloat(getComputedStyle(n).lineHeight || '20'))"
            )
            assert lines <= 1, (part, lines)
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390
        await screenshot(page, "tool-card-awaiting-approval-phone-de", full_page=False)


async def focus_by_keyboard(page, target, key: str = "Tab", presses: int = 40) -> None:
    """Press ``key`` until ``target`` has the focus, as a keyboard user would get there."""
    for _ in range(presses):
        if await target.evaluate("(node) => node === document.activeElement"):
            return
        await page.keyboard.press(key)
    focused = await page.evaluate("document.activeElement.outerHTML.slice(0, 200)")
    raise AssertionError(f"{presses} × {key} never reached {target}; the focus is on {focused}")


FRESH_COMPOSER_WORDS = {
    "en": {"new": "New conversation", "message": "Message", "model": "Model", "chosen": "The next answer comes from this model"},
    "de": {"new": "Neues Gespräch", "message": "Nachricht", "model": "Modell", "chosen": "Die nächste Antwort kommt von diesem Modell"},
}


async def test_the_fresh_composer_and_its_model_picker_pass_axe_and_work_by_keyboard_in_english_and_german(skald, browser_pages):
    """From the chat page a keyboard reaches "New conversation"; Enter puts the focus in
    the message box; the model picker beside it has a visible label that is its name and
    the focus ring every control has; a model chosen with the arrow keys is confirmed in
    the status line, as in the conversation's header. axe finds nothing at each step."""
    async with ScriptedModelServer(models=(MODEL, "second-model"), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        await add_model(admin, "second-model", "Second")  # two models: the fresh composer offers the picker
        for locale, username in (("en", "erin"), ("de", "jonas")):
            words = FRESH_COMPOSER_WORDS[locale]
            member = await host.member(username, locale=locale)
            conversation = (await member.post("/api/conversations", json={})).json()["id"]
            for viewport_name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
                where = f"fresh composer {locale} {viewport_name}"
                page = await browser_pages.new(host.url, viewport=viewport, locale="de-DE" if locale == "de" else "en-US")
                await (sign_in_german(page, username) if locale == "de" else sign_in(page, username, MEMBER_PASSWORD))
                fresh = page.get_by_role("button", name=words["new"])
                message = page.get_by_role("textbox", name=words["message"])
                if viewport is DESKTOP:  # from an open conversation (a phone shows no list beside it)
                    await page.goto(f"/#chat/{conversation}")
                    await expect(message).to_be_focused()
                    await focus_by_keyboard(page, fresh, "Shift+Tab")
                else:
                    await page.goto("/#chat")
                    await page.locator("#content h1").first.wait_for()
                    await focus_by_keyboard(page, fresh)
                await page.keyboard.press("Enter")
                await page.wait_for_url("**/#chat")
                await expect(message).to_be_focused()
                await assert_no_violations(page, where)

                picker = page.get_by_role("combobox", name=words["model"], exact=True)
                await expect(page.locator(".chat-welcome label", has_text=words["model"])).to_be_visible()
                await focus_by_keyboard(page, picker, "Shift+Tab", presses=4)
                ring = await picker.evaluate("(n) => { const s = getComputedStyle(n); return [s.outlineStyle, s.outlineWidth, s.boxShadow]; }")
                assert (ring[0] != "none" and ring[1] != "0px") or ring[2] != "none", (where, ring)  # an outline or the inputs' ring
                await page.keyboard.press("ArrowDown")
                await expect(picker).not_to_have_value("")  # from "Automatic" to the first model
                await expect(page.get_by_role("status").filter(has_text=words["chosen"])).to_be_visible()
                await expect(picker).to_be_focused()
                await assert_no_violations(page, f"{where}, a model chosen")
                await page.emulate_media(color_scheme="dark")  # the theme "like the system" follows
                await assert_no_violations(page, f"{where}, a model chosen, dark")
                await page.emulate_media(color_scheme="light")
                await screenshot(page, f"fresh-composer-{locale}-{viewport_name}", full_page=False)
                await focus_by_keyboard(page, message, presses=4)  # and on, forward, to the message box
