"""A German reader's counts, dates, sizes and note order (German-member probe): counted
texts took "(er)", "(en)", "(n)" plurals ("1 Mitglied(er)"); a note's size read
"{size} Bytes" for 1; the list of notes came in code-point order (capitals, then small
letters, umlauts last); and the shell wrote dates two ways ("6.12.2026, 16:19:14" beside
"07.11.2026")."""

from __future__ import annotations

import re

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

NOTES = ["Birne.md", "apfel.md", "Öl.md", "Äpfel.md", "ärger.md", "Bad:name.md", "obst/kirsche.md", "obst.md", "note 10.md", "note 2.md"]
GERMAN_ORDER = ["apfel.md", "Äpfel.md", "ärger.md", "Bad:name.md", "Birne.md", "note 2.md", "note 10.md", "obst/kirsche.md", "obst.md", "Öl.md"]


async def test_a_german_reader_sees_notes_in_her_alphabet_sizes_and_dates_in_one_format(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    berta = await host.member("berta", locale="de")
    for key in NOTES:
        content = "x" if key == "Birne.md" else "Grüße " * 400
        response = await berta.put(f"/api/memory/user-memory/notes/{key}", json={"content": content})
        assert response.status_code == 200, response.text

    page = await browser_pages.new(host.url)
    await sign_in(page, "berta", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#memory")
    listed = page.get_by_test_id("memory-list").locator("li")
    await expect(listed).to_have_count(len(NOTES))
    assert [await item.get_attribute("data-key") for item in await listed.all()] == GERMAN_ORDER
    # Sizes as the shell says every size: "1 B", "3,1 KiB"; no "Bytes" after a count of one.
    birne = await page.locator('[data-key="Birne.md"]').inner_text()
    assert birne.endswith(" · 1 B") and "Bytes" not in birne, birne
    apfel = await page.locator('[data-key="apfel.md"]').inner_text()
    assert apfel.endswith(" · 3,1 KiB"), apfel

    # One date format: a moment and a day say the day alike (CLDR "medium").
    said = await page.evaluate("""async () => {
        const ui = await import("/ui/lib/ui.js");
        const moment = new Date(2026, 11, 6, 16, 19, 14);
        return [ui.formatDate(moment), ui.formatDay(moment), ui.formatDay("2026-11-07T00:00:00Z", { timeZone: "UTC" })];
    }""")
    assert said == ["06.12.2026, 16:19:14", "06.12.2026", "07.11.2026"], said
    assert re.search(r"· \d{2}\.\d{2}\.\d{4}, \d{2}:\d{2}:\d{2} ·", apfel), apfel

    # Counted texts in their German forms.
    counted = await page.evaluate("""async () => {
        const { t } = await import("/ui/lib/i18n.js");
        return [1, 2].flatMap((count) => [
            t("projects.member_count", { count }), t("members.sessions_count", { count }), t("members.sessions_ended", { count }),
            t("approvals.group_rule_count", { count }), t("approvals.group_delete_rules", { count }),
            t("backups.schedule", { count, keep: 7 }), t("status.missing_translations", { count, language: "Deutsch" }),
        ]);
    }""")
    assert counted[:6] == [
        "1 Mitglied", "Auf 1 Gerät oder Browser angemeldet.", "1 Sitzung beendet.", "1 Regel", "Ihre 1 Regel wird mitgelöscht.",
        "Jede Stunde wird eine Sicherung erstellt; die neuesten 7 davon bleiben erhalten. Eine von Hand erstellte Sicherung wird nie automatisch gelöscht.",
    ], counted
    assert counted[7:13] == [
        "2 Mitglieder", "Auf 2 Geräten oder Browsern angemeldet.", "2 Sitzungen beendet.", "2 Regeln", "Ihre 2 Regeln werden mitgelöscht.",
        "Alle 2 Stunden wird eine Sicherung erstellt; die neuesten 7 davon bleiben erhalten. Eine von Hand erstellte Sicherung wird nie automatisch gelöscht.",
    ], counted
    assert not [text for text in counted if re.search(r"\w\((?:e|n|en|er|s)\)", text)], counted
