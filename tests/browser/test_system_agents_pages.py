"""Issue 22 in a real browser: the admin links a supervisor and sets a member's triage
interval on the member's page; the system-agents page shows one tab per agent (settings
for admins only); a supervisor reads a report, which marks it read; the supervised member
is told, in German, who supervises them."""

from __future__ import annotations

from playwright.async_api import expect

import skald_system_agents
from skald_hookspecs import Report
from skald_host.core.system_agents import store
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from tests.system_agents.support import CountingAgents, NotReadyAgents

from .kit import screenshot, sign_in


async def test_supervision_reports_and_the_system_agents_page(skald, browser_pages):
    host = await skald.start(plugins=[skald_system_agents], enable=["system_agents"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    parent = await host.create_member("parent", display_name="Pat")
    kid = await host.create_member("kid", display_name="Kid", locale="de", encrypted=False)

    admin_page = await browser_pages.new(host.url)
    await sign_in(admin_page, "admin", ADMIN_PASSWORD)
    await admin_page.goto(f"/#members/{kid['id']}")
    supervision = admin_page.get_by_test_id("supervision")
    await supervision.get_by_label("Pat").check()
    await supervision.get_by_role("button", name="Save supervisors").click()
    await expect(supervision).to_contain_text("Saved.")
    assert await host.core.registry.run(lambda c: store.supervisors_of(c, kid["id"])) == [parent["id"]]
    interval = admin_page.get_by_label("Event triage (every … minutes; server: 5)")
    await interval.fill("30")
    await interval.locator("xpath=../following-sibling::div[@class='actions']").get_by_role("button", name="Save").click()
    await expect(interval.locator("xpath=ancestor::form[1]").get_by_text("Saved.")).to_be_visible()
    intervals = await host.core.registry.run(lambda c: store.member_intervals(c, "event_triage"))
    assert intervals == {kid["id"]: 30 * 60}

    await admin_page.goto("/#system-agents")
    tabs = admin_page.get_by_role("navigation", name="System agents").get_by_role("link")
    await expect(tabs).to_have_text(["All", "Event triage", "Memory check", "Shared memory check", "Conversation review"])
    await tabs.filter(has_text="Conversation review").click()
    await expect(admin_page.get_by_role("heading", name="Conversation review", exact=True)).to_be_visible()
    await expect(admin_page.get_by_label("Hour of the night it runs (instance time zone)")).to_have_value("4")
    await screenshot(admin_page, "system-agents")

    parent_page = await browser_pages.new(host.url)
    await sign_in(parent_page, "parent", MEMBER_PASSWORD)  # a first login gives them a key reports are sealed to
    await host.core.reports.file_shared(
        "supervisors", [parent["id"]],
        Report("A quiet day", "Homework and a game; nothing worrying.", "# A quiet day\n\nHomework and a game; nothing worrying."),
        kind="conversation_review", subject_user_id=kid["id"], agent_id="conversation_review",
    )
    nav = parent_page.get_by_role("navigation", name="Main navigation")
    for name in ("Reports", "System agents"):  # in the menu while a system agent is there
        await expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    await parent_page.goto("/#system-agents")
    await expect(parent_page.get_by_role("navigation", name="System agents").get_by_role("link")).to_have_count(5)
    await expect(parent_page.get_by_text("Hour of the night it runs")).to_have_count(0)  # settings: admins only
    await parent_page.goto("/#reports")
    report = parent_page.get_by_test_id("report")
    await expect(report).to_have_attribute("data-read", "false")
    await expect(report).to_contain_text("A quiet day")
    await report.locator("summary").click()
    await expect(report).to_have_attribute("data-read", "true")
    await expect(parent_page.get_by_text("about Kid")).to_be_visible()
    await screenshot(parent_page, "reports")

    kid_page = await browser_pages.new(host.url)  # kid reads German: their own locale
    await sign_in(kid_page, "kid", MEMBER_PASSWORD)
    await kid_page.goto("/#account")
    await expect(kid_page.get_by_test_id("supervised")).to_have_text("Deine Gespräche werden beaufsichtigt von: Pat.")
    await kid_page.goto("/#reports")
    await expect(kid_page.get_by_test_id("report")).to_have_count(0)


async def test_the_agents_of_a_plugin_that_is_off_say_so(skald, browser_pages):
    """An admin sees the agents of an installed plugin that is off, to set them up
    beforehand: each says that nothing of it runs until the plugin is on, and links to
    the plugin; once it is on, the notice goes."""
    host = await skald.start(plugins=[skald_system_agents], settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#system-agents/conversation_review")
    await expect(page.get_by_role("heading", name="Conversation review", exact=True)).to_be_visible()
    off = page.get_by_role("status").filter(has_text="Its plugin is off")
    await expect(off).to_have_count(1)
    await off.get_by_role("link", name="Open the plugin").click()
    await expect(page).to_have_url(f"{host.url}/#plugin-detail?id=system_agents")

    assert (await admin.put("/api/admin/plugins/system_agents/enabled", json={"enabled": True})).status_code == 200
    await page.goto("/#system-agents/conversation_review")
    await expect(page.get_by_label("Hour of the night it runs (instance time zone)")).to_be_visible()
    await expect(page.get_by_text("Its plugin is off")).to_have_count(0)


async def test_the_agents_of_a_plugin_that_is_on_but_not_running_say_why_in_the_readers_language(skald, browser_pages):
    """"Its plugin is off: nothing runs until an admin enables it" sent the admin to a
    switch that was already on."""
    host = await skald.start(plugins=[NotReadyAgents()], enable=["counting"], settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#system-agents/counted")

    notice = page.get_by_test_id("plugin-not-running")
    await expect(notice).to_have_text("Sein Plugin ist eingeschaltet, läuft aber nicht: Erst ein Token setzen. Plugin öffnen")
    await notice.get_by_role("link", name="Plugin öffnen").click()
    await expect(page).to_have_url(f"{host.url}/#plugin-detail?id=counting")


async def test_an_emptied_interval_is_refused_at_its_field_naming_the_default(skald, browser_pages):
    """An empty Interval read "Saved." while the server dropped it and put the agent back
    on its default: refused at the field, the interval the admin set kept."""
    host = await skald.start(plugins=[skald_system_agents], enable=["system_agents"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    await host.core.instance_settings.save("memory_lint_private", {"enabled": True, "interval": 3})
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#system-agents/memory_lint_private")
    interval = page.get_by_label("Interval (days)")
    await expect(interval).to_have_value("3")
    await interval.fill("")
    await page.get_by_role("button", name="Save").click()
    await expect(interval).to_have_attribute("aria-invalid", "true")
    await expect(interval).to_have_accessible_description("Between 1 and 100,000. Interval (days) is required; its default is 7.")
    await expect(page.get_by_text("Saved.")).to_have_count(0)
    assert (await host.core.instance_settings.values("memory_lint_private"))["interval"] == 3
    await interval.fill("14")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_text("Saved.")).to_be_visible()
    assert (await host.core.instance_settings.values("memory_lint_private"))["interval"] == 14
    # The bounds in the reader's digits.
    assert (await (await host.admin()).put("/api/me/locale", json={"locale": "de"})).status_code == 200
    await page.reload()
    await expect(page.locator("input[name=interval]")).to_have_accessible_description("Zwischen 1 und 100.000.")


async def test_an_emptied_hour_of_the_night_is_refused_at_its_field_naming_the_default(skald, browser_pages):
    """An empty hour of the night ("Stunde in der Nacht") saved silently while the
    Interval of the other agents was refused: the nightly agent's hour is refused alike."""
    host = await skald.start(plugins=[skald_system_agents], enable=["system_agents"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    await host.core.instance_settings.save("conversation_review", {"enabled": True, "run_at_hour": 2})
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#system-agents/conversation_review")
    hour = page.get_by_label("Hour of the night it runs (instance time zone)")
    await expect(hour).to_have_value("2")
    await hour.fill("")
    await page.get_by_role("button", name="Save").click()
    await expect(hour).to_have_attribute("aria-invalid", "true")
    await expect(hour).to_have_accessible_description(
        "Between 0 and 23. Hour of the night it runs (instance time zone) is required; its default is 4."
    )
    await expect(page.get_by_text("Saved.")).to_have_count(0)
    assert (await host.core.instance_settings.values("conversation_review"))["run_at_hour"] == 2
    await hour.fill("0")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_text("Saved.")).to_be_visible()
    assert (await host.core.instance_settings.values("conversation_review"))["run_at_hour"] == 0


async def test_a_run_the_model_failed_says_why_in_the_readers_language(skald, browser_pages):
    """"RuntimeError (error id fcbf71caab28)" told a member nothing: a run the host knows
    the reason of says it in their words (a member is told what they can do, not to check
    the provider's address); one that failed unexpectedly keeps its error id."""
    from skald_host.core.system_agents.scheduler import _stored_error
    from skald_host.core.system_agents.timing import iso
    import datetime as dt

    host = await skald.start(plugins=[CountingAgents(unit="minutes", interval=5)], enable=["counting"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    await host.member("gina", locale="de")
    db = host.core.users.owner_db((await host.core.users.find("gina")).id)
    now = dt.datetime.now(dt.timezone.utc)
    for minutes, error in ((2, _stored_error("model_unreachable", {}, "the model failed: it could not be reached")), (1, "RuntimeError (error id 0123456789ab)")):
        started = iso(now - dt.timedelta(minutes=minutes))
        run_id = await db.transaction(lambda c, started=started: store.open_run(c, "counted", None, started))
        await db.transaction(lambda c, run_id=run_id, error=error: store.finish_run(c, run_id, "failed", iso(now), {}, error))
    page = await browser_pages.new(host.url)
    await sign_in(page, "gina", MEMBER_PASSWORD)
    await page.goto("/#system-agents")
    rows = page.get_by_test_id("runs").locator("tbody tr")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(1)).to_contain_text(
        "fehlgeschlagen (Das Modell war nicht erreichbar. Versuch es bitte später noch einmal, oder sag einem Administrator Bescheid, wenn es so bleibt.)"
    )
    await expect(rows.nth(0)).to_contain_text("fehlgeschlagen (RuntimeError (error id 0123456789ab))")


async def test_a_member_interval_that_is_not_a_number_is_refused_at_its_field(skald, browser_pages):
    """"abc" went out as null (NaN in JSON), which clears the member's interval, and the
    page said "Saved.": refused at the field, the interval set before kept."""
    host = await skald.start(plugins=[skald_system_agents], enable=["system_agents"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    kid = await host.create_member("kid", display_name="Kid")
    await host.core.registry.transaction(lambda c: store.set_member_interval(c, "event_triage", kid["id"], 30 * 60))
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto(f"/#members/{kid['id']}")
    interval = page.get_by_label("Event triage (every … minutes; server: 5)")
    await expect(interval).to_have_value("30")
    save = interval.locator("xpath=../following-sibling::div[@class='actions']").get_by_role("button", name="Save")
    for wrong in ("abc", "0", "2.5"):
        await interval.fill(wrong)
        await save.click()
        await expect(interval).to_have_attribute("aria-invalid", "true")
        await expect(interval).to_have_accessible_description("A whole number from 1 to 100000, or empty for the server's setting.")
        await expect(page.get_by_text("Saved.")).to_have_count(0)
    assert await host.core.registry.run(lambda c: store.member_intervals(c, "event_triage")) == {kid["id"]: 30 * 60}
    await interval.fill("45")
    await save.click()
    await expect(page.get_by_text("Saved.")).to_be_visible()
    await expect(interval).not_to_have_attribute("aria-invalid", "true")
    assert await host.core.registry.run(lambda c: store.member_intervals(c, "event_triage")) == {kid["id"]: 45 * 60}


async def test_a_reviewed_members_privacy_list_says_the_reports_reach_their_supervisors(skald, browser_pages):
    """"What the admin cannot read" said "your conversations... no admin page shows them"
    while the nightly review filed reports about them for the member's supervisors, who
    may be the admin (admin probe). The list now says so where the reader looks."""
    host = await skald.start(plugins=[skald_system_agents], enable=["system_agents"], settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    await host.core.instance_settings.save("conversation_review", {"enabled": True, "run_at_hour": 2})
    pat = await host.create_member("pat", display_name="Pat")
    kid = await host.create_member("kid", display_name="Kid", locale="de")
    await host.create_member("solo", display_name="Solo")
    named = await admin.put(f"/api/admin/members/{kid['id']}/supervisors", json={"supervisors": [pat["id"]]})
    assert named.status_code == 200, named.text

    page = await browser_pages.new(host.url)
    await sign_in(page, "kid", MEMBER_PASSWORD)
    await page.goto("/#account")
    cannot = page.get_by_role("heading", name="Was der Admin nicht lesen kann").locator("xpath=following-sibling::ul[1]")
    await expect(cannot.locator("li")).to_have_count(2)
    await expect(cannot.locator("li").last).to_have_text(
        "Ausgenommen sind die Berichte der nächtlichen Durchsicht über deine Gespräche: Sie gehen an die oben Genannten,"
        " die sie auf ihrer Seite „Berichte“ lesen.")

    other = await browser_pages.new(host.url)
    await sign_in(other, "solo", MEMBER_PASSWORD)
    await other.goto("/#account")
    await expect(other.get_by_role("heading", name="What the admin cannot read").locator("xpath=following-sibling::ul[1]").locator("li")).to_have_count(1)
