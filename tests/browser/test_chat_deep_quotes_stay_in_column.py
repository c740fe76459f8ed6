"""300 nested Markdown quotes (``> > > …``), shown formatted on request, ran out of the
message column, each level 17 px further in (a newcomer's report). Past a few levels a
quote no longer indents, so however deep it goes, nothing leaves the column; the same for
a deep list."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PHONE, sign_in, stored_conversation

QUOTES = "> " * 300 + "the innermost words\n"
LIST = "".join("  " * depth + "- level\n" for depth in range(60))

OUTSIDE = """(message) => {
  const column = message.getBoundingClientRect();
  const out = [...message.querySelectorAll(".md *")].filter((node) => {
    const box = node.getBoundingClientRect();
    return box.width > 0 && (box.right > column.right + 0.5 || box.left < column.left - 0.5);
  });
  return { scroll: message.scrollWidth, client: message.clientWidth, out: out.length,
           transcript: [document.querySelector(".transcript").scrollWidth, document.querySelector(".transcript").clientWidth] };
}"""


async def test_deep_quotes_and_lists_shown_formatted_stay_in_the_message_column(skald, browser_pages):
    host = await skald.start()
    client = await host.member("lena")
    for viewport in (None, PHONE):
        page = await browser_pages.new(host.url, **({"viewport": viewport} if viewport else {}))
        await sign_in(page, "lena", MEMBER_PASSWORD)
        for title, answer, inner in (("quotes", QUOTES, "blockquote"), ("list", LIST, "li")):
            conversation_id = await stored_conversation(host, client.member["id"], title, [("user", "Say it"), ("assistant", answer)])
            await page.goto(f"{host.url}/#chat/{conversation_id}")
            message = page.locator(".msg.assistant").last
            await message.get_by_role("button", name="Show formatted").click()
            await expect(message.locator(".md-plain")).to_have_count(0)
            await expect(message.locator(inner).first).to_be_attached()
            if title == "quotes":
                await expect(message).to_contain_text("the innermost words")
            measured = await message.evaluate(OUTSIDE)
            assert measured["scroll"] <= measured["client"], (title, viewport, measured)
            assert measured["out"] == 0, (title, viewport, measured)
            assert measured["transcript"][0] <= measured["transcript"][1], (title, viewport, measured)
            await page.screenshot(path=f"/tmp/fix9-shots/deep-{title}-{'phone' if viewport else 'desktop'}.png")
