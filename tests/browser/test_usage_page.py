"""#usage: the admin reads the request log in the browser, in German: the totals per
member and per model and the latest requests as tables with headers and captions, a
status in words, "Show more" for the next page, at 390 px without sideways scrolling,
and axe finds nothing."""

from __future__ import annotations

import asyncio
import datetime as dt

from playwright.async_api import expect

from skald_host.core.agent.runtime import RequestLog
from skald_host.testing import Reply, ScriptedError, ScriptedModelServer
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import DESKTOP, PHONE, screenshot
from .test_accessibility import assert_no_violations, sign_in_german
from .test_web_strings import assert_german

MODEL = "usage-model"


async def test_the_admin_reads_the_usage_tables_in_german_and_pages_through_the_requests(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin_api = await host.admin()
        entry_id = await host.use_model(server, MODEL)
        bert = await host.member("bert", display_name="Bert")
        server.script(MODEL, [Reply("Ein Satz.", usage=(12, 4)), ScriptedError(500)])
        await bert.chat("Erste Frage")
        await bert.chat("Zweite Frage")  # the only model fails: a request the log says failed

        async def logged() -> int:
            return await host.core.registry.run(lambda c: c.execute("SELECT count(*) FROM llm_requests").fetchone()[0])

        for _ in range(200):  # the log is written in the background
            if await logged() == 2:
                break
            await asyncio.sleep(0.02)
        assert await logged() == 2
        # Older requests of the same period, as the host writes them, so the newest 50
        # leave some for "Show more".
        earlier = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        rows = [(f"older-{n:02d}", bert.member["id"], MODEL, "ok", 200, 10, 2, 300, 40, entry_id, earlier) for n in range(55)]
        await host.core.registry.transaction(lambda c: c.executemany(RequestLog.RESTORE, rows))
        assert (await admin_api.put("/api/me/locale", json={"locale": "de"})).status_code == 200

        for viewport in (DESKTOP, PHONE):
            page = await browser_pages.new(host.url, viewport=viewport, locale="de-DE")
            await sign_in_german(page, "admin", ADMIN_PASSWORD)
            if viewport is DESKTOP:
                await page.get_by_role("navigation", name="Hauptnavigation").get_by_role("link", name="Nutzung").click()
            else:
                await page.goto("/#usage")
            await expect(page.get_by_role("heading", name="Nutzung", level=1)).to_be_visible()
            await expect(page.get_by_text("kann der Anbieter trotzdem berechnet haben")).to_be_visible()

            members = page.get_by_role("table", name="Anfragen und Tokens je Mitglied", exact=False)
            await expect(members.get_by_role("columnheader")).to_have_text(["Mitglied", "Anfragen", "Nach Status", "Eingabe-Tokens", "Ausgabe-Tokens"])
            await expect(members.locator("tbody tr").get_by_role("cell")).to_have_text(["Bert @bert", "57", "56 abgeschlossen, 1 fehlgeschlagen", "562", "114"])
            await expect(members.locator("tfoot tr").get_by_role("cell")).to_have_text(["Gesamt", "57", "56 abgeschlossen, 1 fehlgeschlagen", "562", "114"])
            models = page.get_by_role("table", name="Anfragen und Tokens je Modell", exact=False)
            # The catalog entry: its model name (no label of its own) and its provider.
            await expect(models.locator("tbody tr").get_by_role("cell").first).to_have_text(f"{MODEL} bei test provider {MODEL}")

            latest = page.get_by_role("table", name="neueste zuerst", exact=False)
            await expect(latest.get_by_role("columnheader")).to_have_text(
                ["Zeit", "Mitglied", "Modell", "Status", "HTTP-Status", "Eingabe-Tokens", "Ausgabe-Tokens", "Dauer", "Erstes Token nach"]
            )
            body_rows = latest.locator("tbody tr")
            await expect(body_rows).to_have_count(50)
            await expect(body_rows.nth(0).locator("td").nth(3)).to_have_text("fehlgeschlagen")  # the newest first, in words
            await expect(body_rows.nth(1).locator("td").nth(3)).to_have_text("abgeschlossen")
            await expect(body_rows.nth(1).locator("td").nth(5)).to_have_text("12")

            # Nothing scrolls sideways: not the page, not a table inside its wrapper.
            widths = await page.evaluate("[document.documentElement.scrollWidth, ...[...document.querySelectorAll('.table-wrap')].map((w) => w.scrollWidth - w.clientWidth)]")
            assert widths[0] <= viewport["width"] and max(widths[1:]) <= 0, f"{viewport}: {widths}"
            await assert_german(page, f"#usage {viewport['width']} px", {"bert", "Bert", "@bert", MODEL})
            await assert_no_violations(page, f"#usage {viewport['width']} px")

            more = page.get_by_role("button", name="Mehr anzeigen")
            await more.click()
            await expect(body_rows).to_have_count(57)
            await expect(more).to_have_count(0)  # the last page came
            await expect(page.get_by_role("status").filter(has_text="7 weitere Anfragen angezeigt.")).to_be_visible()
            await expect(body_rows.nth(50).locator("td").first).to_be_focused()
            await screenshot(page, f"usage-de-{viewport['width']}")

        # A period the server cannot read is said beside its field, in German.
        await page.get_by_label("Von").fill("2030-01-02")
        await page.get_by_label("Bis (einschließlich)").fill("2030-01-01")
        await page.get_by_role("button", name="Anzeigen").click()
        await expect(page.get_by_label("Von")).to_have_attribute("aria-invalid", "true")
        await expect(page.get_by_label("Von")).to_have_accessible_description("Von darf nicht nach dem Ende des Zeitraums liegen.")
        # A period without requests: the tables give way to a sentence, and the address keeps the period.
        await page.get_by_label("Von").fill("2030-01-01")
        await page.get_by_role("button", name="Anzeigen").click()
        await expect(page.get_by_text("Keine Anfragen in diesem Zeitraum.")).to_have_count(2)
        assert page.url.endswith("#usage?since=2030-01-01&until=2030-01-01")
