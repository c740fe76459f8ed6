"""What an accessibility probe heard and saw (axe found nothing): Regenerate and a
version flip read the whole conversation out again (the live log was redrawn), math
KaTeX filled in on opening a conversation was read out, an answered approval said its
outcome more than once, switches and checkboxes had next to no keyboard focus in the
dark theme, form hints were not the fields' descriptions, and an empty shared folder
name was not marked at its field."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model, send

#: Rows and other elements added inside the chat's log while it is live (its aria-live
#: not "off", itself not aria-busy): what a screen reader reads out as new.
LIVE_ADDITIONS = """(() => {
  window.__liveAdds = [];
  new MutationObserver((records) => {
    for (const record of records) {
      const target = record.target.nodeType === Node.ELEMENT_NODE ? record.target : record.target.parentElement;
      const log = target?.closest("[role=log]");
      if (!log || log.getAttribute("aria-live") === "off" || log.getAttribute("aria-busy") === "true") continue;
      for (const node of record.addedNodes) {
        node.__said = true;  // for said() below
        if (node.nodeType !== Node.ELEMENT_NODE) continue;
        window.__liveAdds.push({
          id: node.dataset.messageId || null,
          row: target.classList.contains("transcript-inner") && node.classList.contains("msg"),
          math: node.matches(".katex, .katex-display") || Boolean(node.querySelector(".katex")),
        });
      }
    }
  }).observe(document, { childList: true, subtree: true });
})();"""

LIVE = "() => document.querySelector('[role=log]')?.getAttribute('aria-live') === 'polite'"

#: Whether the live log read `node` out: it, or what it came in with inside its row
#: (the row itself not: a row added whole is said whole), was added while it was live.
SAID = """(node) => {
  for (let at = node; at && !at.matches?.(".msg"); at = at.parentNode) if (at.__said) return true;
  return node.matches(".msg") && Boolean(node.__said);
}"""


async def rows_said(page: Any) -> list[str]:
    return await page.evaluate("window.__liveAdds.filter((a) => a.row).map((a) => a.id)")


async def test_regenerate_and_a_version_flip_add_only_the_changed_answer_to_the_live_log(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("liv")
        server.script(MODEL, [Reply(text="Hello there."), Reply(text="Answer one."), Reply(text="Answer two.")])
        page = await browser_pages.new(host.url)
        await page.add_init_script(LIVE_ADDITIONS)
        await sign_in(page, "liv", MEMBER_PASSWORD)
        answers = page.locator(".msg.assistant")
        await send(page, "Hi")
        await expect(answers.first.locator(".msg-body")).to_have_text("Hello there.")
        await send(page, "Tell me more")
        await expect(answers.last.locator(".msg-body")).to_have_text("Answer one.")
        regenerate = page.get_by_role("button", name="Regenerate")
        await expect(regenerate).to_be_visible()
        first_take = await answers.last.get_attribute("data-message-id")
        await page.wait_for_function(LIVE)
        await page.evaluate("window.__liveAdds = []")

        await regenerate.click()
        await expect(answers.last.locator(".msg-body")).to_have_text("Answer two.")
        versions = answers.last.get_by_role("group", name="Versions from here on")
        await expect(versions).to_contain_text("2 / 2")  # read again once the new answer ended
        await page.wait_for_function(LIVE)
        second_take = await answers.last.get_attribute("data-message-id")
        assert second_take != first_take
        # The new answer, once; not "Hi", "Hello there." and "Tell me more" again.
        assert await rows_said(page) == [second_take]

        await page.evaluate("window.__liveAdds = []")
        await versions.get_by_role("button", name="Previous version").click()
        await expect(answers.last.locator(".msg-body")).to_have_text("Answer one.")
        await expect(versions).to_contain_text("1 / 2")
        await page.wait_for_function("window.__liveAdds.some((a) => a.row)")
        await page.wait_for_function(LIVE)
        assert await rows_said(page) == [first_take]
        await expect(versions.get_by_role("button", name="Next version")).to_be_focused()  # kept where the flip put it
        await expect(answers).to_have_count(2)


async def test_the_controls_an_answer_and_a_sent_message_get_are_not_read_out(skald, browser_pages):
    """After "The assistant is done" a screen reader heard "test-model Copy the answer
    Regenerate", and "Edit" after every message sent: controls added to rows the log had
    shown. They come while it is not live; the message and the answer's words are said."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("noa")
        server.script(MODEL, [Reply(text="Hello."), Reply(text="Hello there, this is the answer.", token_delay=0.02)])
        page = await browser_pages.new(host.url)
        await page.add_init_script(LIVE_ADDITIONS)
        await sign_in(page, "noa", MEMBER_PASSWORD)
        await send(page, "Hi")  # a new conversation's first turn is drawn as it opens: the second is live
        await expect(page.get_by_role("button", name="Regenerate")).to_be_visible()
        await send(page, "Tell me more")
        mine = page.locator(".msg.user").last
        answer = page.locator(".msg.assistant").last
        await expect(answer.locator(".msg-body")).to_have_text("Hello there, this is the answer.")
        await expect(answer.get_by_role("button", name="Regenerate")).to_be_visible()
        await expect(mine.get_by_role("button", name="Edit")).to_be_visible()
        await page.wait_for_function(LIVE)

        assert await mine.evaluate(SAID)
        assert await answer.locator(".msg-body > p").evaluate(SAID)  # its words as they settled
        for control in (answer.locator(".model"), answer.get_by_role("button", name="Copy the answer"),
                        answer.get_by_role("button", name="Regenerate"), mine.get_by_role("button", name="Edit")):
            assert not await control.evaluate(SAID), await control.evaluate("(node) => node.outerHTML")
        await expect(answer.locator(".model")).to_have_text(MODEL)


async def test_math_filled_in_on_opening_a_conversation_is_not_read_out(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("max")
        server.script(MODEL, [Reply(text="Euler: $e^{i\\pi} + 1 = 0$, and\n\n$$\\sum_{n=1}^{10} n = 55$$")])
        page = await browser_pages.new(host.url)
        await page.add_init_script(LIVE_ADDITIONS)
        await sign_in(page, "max", MEMBER_PASSWORD)
        await send(page, "Some math")
        body = page.locator(".msg.assistant .msg-body")
        await expect(body.locator(".katex-display")).to_be_visible()

        await page.reload()  # opening it again: KaTeX is loaded after the answer showed its TeX
        await expect(page.locator(".msg.assistant .msg-body .katex-display")).to_be_visible()
        await expect(page.locator(".msg.assistant .msg-body .md-math:not(.display) .katex")).to_have_count(1)
        await page.wait_for_function(LIVE)
        assert await page.evaluate("window.__liveAdds") == []


async def test_an_approved_call_says_its_outcome_once(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin_api = await host.admin()
        await configure_model(admin_api, server)
        rule = await admin_api.post("/api/admin/approval-rules", json={"tool_pattern": "write_file", "action": "require", "priority": 1})
        assert rule.status_code == 201, rule.text
        await host.create_member("abe")
        server.script(MODEL, [Reply(tool_calls=[ToolCall("write_file", {"path": "notes/a.txt", "content": "a"})]), Reply(text="Written.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "abe", MEMBER_PASSWORD)
        await send(page, "Write a file")
        approval = page.get_by_role("group", name="Approval for write_file")
        await expect(approval.get_by_role("button", name="Approve")).to_be_visible()
        # A new conversation's first turn is said once its page is attached (its rows put
        # back into the live log, then the status line): observe after that, not before.
        await expect(page.locator(".conv-main > p.turn-status")).to_have_text("The assistant waits for your approval.")
        await approval.locator(".approval-status").evaluate("""(status) => {
          window.__said = 0;
          new MutationObserver((records) => { for (const r of records) if (r.addedNodes.length) window.__said += 1; })
            .observe(status, { childList: true, characterData: true, subtree: true });
        }""")

        # The decision's reply held until its event has resolved the card: both resolve it.
        async def after_the_event(route: Any) -> None:
            response = await route.fetch()
            # A locator wait, not wait_for_function: that compiles its predicate in the page,
            # which the strict CSP (no unsafe-eval) refused once under load.
            await page.locator(".approval-status").filter(has_text=re.compile(r"\S")).wait_for()
            await route.fulfill(response=response)

        await page.route("**/api/approvals/*", after_the_event)
        await approval.get_by_role("button", name="Approve").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Written.")
        await expect(page.locator(".msg.assistant").last).to_have_attribute("data-status", "complete")
        await expect(approval.locator(".approval-status")).to_have_text("Approved.")
        await expect(approval.locator(".approval-status")).to_be_focused()
        assert await page.evaluate("window.__said") == 1


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(c: float) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _rgb(css: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in re.findall(r"[\d.]+", css))
    assert len(values) == 3 or (len(values) == 4 and values[3] == 1), f"not an opaque colour: {css}"
    return values[:3]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(_rgb(a)), _luminance(_rgb(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


#: The focused control's outline, and the colour behind it (its nearest opaque ancestor's).
RING = """(control) => {
  const style = getComputedStyle(control);
  let node = control.parentElement, behind = "";
  for (; node; node = node.parentElement) {
    const colour = getComputedStyle(node).backgroundColor;
    if (colour !== "rgba(0, 0, 0, 0)" && colour !== "transparent") { behind = colour; break; }
  }
  return { focusVisible: control.matches(":focus-visible"), style: style.outlineStyle, width: parseFloat(style.outlineWidth),
           colour: style.outlineColor, behind };
}"""


async def test_switches_and_checkboxes_show_a_keyboard_focus_ring_of_3_to_1_in_both_themes(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    member = await host.create_member("rae")
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto(f"/#members/{member['id']}")
    switch = page.get_by_role("switch", name="Can sign in")
    await expect(switch).to_be_visible()
    for theme in ("dark", "light"):
        await page.evaluate(f"document.documentElement.setAttribute('data-theme', '{theme}')")
        for control in (switch, page.get_by_role("combobox").first):
            await control.focus()
            await page.keyboard.press("Shift+Tab")
            await page.keyboard.press("Tab")  # by the keyboard: :focus-visible
            await expect(control).to_be_focused()
            ring = await control.evaluate(RING)
            assert ring["focusVisible"], ring
            assert ring["style"] == "solid" and ring["width"] >= 2, (theme, ring)
            assert contrast(ring["colour"], ring["behind"]) >= 3, (theme, ring)
            html = await page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
            assert contrast(ring["colour"], html) >= 3, (theme, ring, html)

    await page.goto("/#members")
    encrypt = page.get_by_role("checkbox", name="Encrypt their private data with their password")
    for theme in ("dark", "light"):
        await page.evaluate(f"document.documentElement.setAttribute('data-theme', '{theme}')")
        await encrypt.focus()
        await page.keyboard.press("Shift+Tab")
        await page.keyboard.press("Tab")
        await expect(encrypt).to_be_focused()
        ring = await encrypt.evaluate(RING)
        assert ring["focusVisible"] and ring["style"] == "solid" and ring["width"] >= 2, (theme, ring)
        assert contrast(ring["colour"], ring["behind"]) >= 3, (theme, ring)


async def test_form_hints_describe_their_fields(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#members")
    encrypt = page.get_by_role("checkbox", name="Encrypt their private data with their password")
    await expect(encrypt).to_have_accessible_description(re.compile(r"Nobody, not even an admin, can read the data without the password"))
    password = page.locator("input[name=password]")
    hint = await password.evaluate("(input) => document.getElementById(input.getAttribute('aria-describedby'))?.textContent || ''")
    assert hint, "the password's hint is not its description"
    await expect(password).to_have_accessible_description(hint)

    # An error is added to the description, the hint stays in it.
    await page.get_by_role("button", name="Add member").click()
    await expect(password).to_have_attribute("aria-invalid", "true")
    await expect(password).to_have_accessible_description(re.compile(re.escape(hint)))
    await expect(password).to_have_accessible_description(re.compile("Password is required"))


async def test_an_empty_shared_folder_name_is_marked_at_its_field(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#shared-folders")
    name = page.get_by_label("Folder name")
    await page.get_by_role("button", name="Create folder").click()
    await expect(name).to_have_attribute("aria-invalid", "true")
    await expect(name).to_be_focused()
    await expect(name).to_have_accessible_description(re.compile("Folder name is required"))
    await expect(page.locator(".form-status")).to_have_text(re.compile("Folder name"))

    await name.fill("recipes")
    await page.get_by_role("button", name="Create folder").click()
    await expect(page.get_by_text("recipes").first).to_be_visible()
    await expect(page.locator("[aria-invalid]")).to_have_count(0)
