"""The admin pages behind chat: #models (providers, presets, models) and #approvals
(rules and security groups), driven through the browser."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import PHONE, admin_on_models_page, screenshot, sign_in


async def test_admin_sets_up_a_model_on_the_models_page_then_chats(skald, browser_pages, monkeypatch):
    async with ScriptedModelServer(models=("alpha-model", "beta-model"), api_key="sk-from-env") as server:
        # The preset comes from the server's environment; its key never reaches the browser.
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        host = await skald.start()
        await host.admin()
        page = await browser_pages.new(host.url)
        await sign_in(page, "admin", ADMIN_PASSWORD)

        await expect(page.get_by_text("No model is configured yet.")).to_be_visible()
        box = page.get_by_role("textbox", name="Message")
        await box.fill("Anyone there?")
        await box.press("Enter")
        # The turn fails at once; the failure is the message's answer, kept, with a Retry.
        failed = page.locator(".msg.assistant[data-status=error]")
        await expect(failed.locator(".msg-body")).to_have_text("No model is configured yet. An admin can add one on the Models page.")
        await expect(failed.get_by_role("button", name="Retry")).to_be_visible()
        await page.get_by_role("link", name="Set one up on the Models page").click()
        await expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
        await expect(page.get_by_text("No model is enabled")).to_be_visible()
        await page.get_by_role("button", name="Add provider: OpenAI-compatible (environment)").click()
        provider = page.locator("[data-provider='OpenAI-compatible (environment)']")
        await expect(provider).to_contain_text("Stored (hidden)")
        await expect(page.get_by_role("button", name="Add provider: OpenAI-compatible (environment)")).to_be_disabled()

        test = provider.get_by_role("button", name="Test connection")
        await test.focus()
        await test.press("Enter")  # by keyboard: the button is busy meanwhile, and keeps the focus after
        await expect(provider.locator(".test-result")).to_contain_text("Connected: 2 models offered.")
        await expect(test).to_be_focused()
        await expect(provider.locator(".model-names")).to_contain_text("alpha-model")

        # The names the test returned are offered in the model form.
        name = page.get_by_label("Model name")
        await expect(page.locator(f"datalist#{await name.get_attribute('list')} option")).to_have_count(2)
        await name.fill("alpha-model")
        await page.get_by_label("Label").first.fill("Alpha")
        await page.get_by_label("Strength").fill("70")
        await page.get_by_role("button", name="Add model").click()
        row = page.locator("tr[data-model='alpha-model']")
        await expect(row).to_contain_text("Alpha")
        await expect(row.locator(".tag")).to_have_text("On")
        await expect(row.locator("code")).to_have_text("alpha-model")  # its own name under the label
        await expect(page.get_by_text("No model is enabled")).to_have_count(0)
        # Without a label the model's name is said once, not "beta-model beta-model".
        await page.get_by_label("Model name").fill("beta-model")
        await page.get_by_role("button", name="Add model").click()
        beta = page.locator("tr[data-model='beta-model']")
        await expect(beta.locator(".model-label")).to_have_text("beta-model")
        await expect(beta.locator("code")).to_have_count(0)

        await row.get_by_role("button", name="Edit: Alpha").click()
        edit = page.locator(".edit-row form")
        await edit.get_by_label("Priority").fill("200000")
        await edit.get_by_role("button", name="Save").click()
        await expect(edit.locator(".form-status")).to_have_text("Please check “Priority”.")
        await expect(edit.get_by_label("Priority")).to_have_accessible_description("Lower numbers are tried first. Priority must be a whole number from 0 to 100000")
        await edit.get_by_label("Priority").fill("5")
        await edit.get_by_role("button", name="Save").click()
        await expect(page.locator("tr[data-model='alpha-model'] td.num").nth(1)).to_have_text("5")

        # A provider added by hand: the key field is a password field, and write-only.
        adding = page.locator("form").filter(has=page.get_by_role("button", name="Add provider", exact=True))
        await adding.get_by_label("Name").fill("Nowhere")
        await adding.get_by_label("Base URL").fill("http://127.0.0.1:9/v1")
        key = adding.get_by_label("API key")
        await expect(key).to_have_attribute("type", "password")
        await key.fill("sk-typed-secret")
        await page.get_by_role("button", name="Add provider", exact=True).click()
        nowhere = page.locator("[data-provider=Nowhere]")
        await expect(nowhere).to_contain_text("Stored (hidden)")
        assert "sk-typed-secret" not in await page.content()
        assert "sk-from-env" not in await page.content()
        await nowhere.get_by_role("button", name="Test connection").click()
        await expect(nowhere.locator(".test-result")).to_contain_text("The connection failed")
        await screenshot(page, "models-desktop")
        await nowhere.get_by_role("button", name="Delete: Nowhere").click()
        await page.get_by_role("dialog").get_by_role("button", name="Delete").click()
        await expect(nowhere).to_have_count(0)

        phone = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(phone, "admin", ADMIN_PASSWORD)
        await phone.goto("/#models")
        await expect(phone.locator("tr[data-model='alpha-model']")).to_be_visible()
        width = await phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the models page scrolls sideways on a phone ({width}px)"
        await screenshot(phone, "models-phone")

        # The model answers chat, called with the key from the environment.
        server.script("alpha-model", [Reply(text="Ready when you are.")])
        await page.get_by_role("navigation").get_by_role("link", name="Chat").click()
        await expect(page.get_by_text("No model is configured yet.")).to_have_count(0)
        box = page.get_by_role("textbox", name="Message")
        await box.fill("Hello")
        await box.press("Enter")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Ready when you are.")
        assert server.requests_for("alpha-model")[0].headers["authorization"] == "Bearer sk-from-env"


async def test_admin_edits_approval_rules_and_security_groups(skald, browser_pages):
    host = await skald.start()
    api = await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.get_by_role("navigation").get_by_role("link", name="Approvals").click()
    await expect(page.get_by_role("heading", name="Approvals", exact=True)).to_be_visible()
    catch_all = page.locator("tr[data-rule]").filter(has=page.locator("code", has_text="*")).last
    await expect(catch_all).to_contain_text("Ask first")
    await expect(catch_all.get_by_role("button", name="Delete: *")).to_have_count(0)
    await expect(page.get_by_role("button", name="Delete: notify")).to_be_visible()

    adding = page.locator("form").filter(has=page.get_by_role("button", name="Add group"))
    await adding.get_by_label("ID").fill("kids")
    await adding.get_by_label("Name").fill("Kids")
    await adding.get_by_label("Description").fill("Younger members")
    await page.get_by_role("button", name="Add group").click()
    group = page.locator("[data-group=kids]")
    await expect(group).to_contain_text("Younger members")
    await group.get_by_role("checkbox", name="Children").check()
    await expect(group.locator(".group-roles .form-status")).to_have_text("Saved.")
    roles = {r["id"]: r for r in (await api.get("/api/admin/roles")).json()["roles"]}
    assert roles["restricted"]["attrs"]["permission_groups"] == ["kids"]

    form = page.locator("form.rule-form").last
    await form.get_by_label("Tool pattern").fill("write_*")
    await form.get_by_label("Path class").fill("notes/*")
    await form.get_by_label("Action").select_option("allow")
    await form.get_by_label("Priority").fill("50")
    await form.get_by_label("Applies to").select_option("kids")
    await form.get_by_label("Note").fill("notes are harmless")
    await form.get_by_role("button", name="Add rule").click()
    row = page.locator("tr[data-rule]").filter(has=page.locator("code", has_text="write_*"))
    await expect(row).to_contain_text("Allow")
    await expect(row).to_contain_text("Kids")
    await row.get_by_role("button", name="Edit: write_*").click()
    edit = page.locator(".edit-row form")
    await edit.get_by_label("Action").select_option("deny")
    await edit.get_by_role("button", name="Save").click()
    row = page.locator("tr[data-rule]").filter(has=page.locator("code", has_text="write_*"))
    await expect(row.locator(".tag.action-deny")).to_have_text("Refuse")
    rules = (await api.get("/api/admin/approval-rules")).json()["rules"]
    mine = next(r for r in rules if r["tool_pattern"] == "write_*")
    assert (mine["path_class"], mine["action"], mine["priority"], mine["group_id"]) == ("notes/*", "deny", 50, "kids")
    await screenshot(page, "approvals-desktop")

    await row.get_by_role("button", name="Delete: write_*").click()
    await page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    await expect(page.locator("tr[data-rule]").filter(has=page.locator("code", has_text="write_*"))).to_have_count(0)
    await page.locator("[data-group=kids]").get_by_role("button", name="Delete: Kids").click()
    await page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    await expect(page.locator("[data-group=kids]")).to_have_count(0)
    assert (await api.get("/api/admin/approval-rules")).json()["groups"] == []


async def test_sidebar_shows_chat_to_members_with_chat_and_admin_pages_to_admins(skald, browser_pages):
    host = await skald.start()
    api = await host.admin()
    assert (await api.post("/api/admin/roles", json={"id": "readers", "label": "Readers", "capabilities": []})).status_code == 201
    await host.create_member("erin", role="readers")
    await host.create_member("frank")
    erin = await browser_pages.new(host.url)
    await sign_in(erin, "erin", MEMBER_PASSWORD)
    nav = erin.get_by_role("navigation", name="Main navigation")
    await expect(nav.get_by_role("link", name="My account")).to_be_visible()
    await expect(nav.get_by_role("link", name="Chat")).to_have_count(0)
    await expect(erin.get_by_text("Your role does not include chatting with the assistant.")).to_be_visible()
    frank = await browser_pages.new(host.url)
    await sign_in(frank, "frank", MEMBER_PASSWORD)
    nav = frank.get_by_role("navigation", name="Main navigation")
    await expect(nav.get_by_role("link", name="Chat")).to_be_visible()
    for admin_only in ("Models", "Approvals"):
        await expect(nav.get_by_role("link", name=admin_only)).to_have_count(0)
    await frank.goto("/#models")
    await expect(frank.get_by_role("heading", name="Administrators only")).to_be_visible()


async def test_admin_takes_a_backup_from_the_settings_page(skald, browser_pages, tmp_path):
    """The Settings page lists backups and takes one; the list shows it at once."""
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto(f"{host.url}/#settings")
    block = page.locator(".backups-block")
    await expect(block.get_by_role("heading", name="Backups")).to_be_visible()
    await expect(block.get_by_text("No backups yet.")).to_be_visible()
    await expect(block.get_by_text("No backups are taken on a schedule")).to_be_visible()
    await block.get_by_role("button", name="Back up now").click()
    await expect(block.locator(".form-status.ok")).to_contain_text("Backup skald-backup-")
    await expect(block.locator("table.backups tbody tr")).to_have_count(1)
    name = (await host.core.backups.list())[0].path.name
    await expect(block.locator("table.backups code")).to_have_text(name)
    await expect(block.locator("table.backups tbody tr td").nth(1)).to_have_text("1")
    await screenshot(page, "settings-backups")


async def test_admin_edits_a_roles_chat_agents_and_acting_tool_capabilities_on_the_roles_page(skald, browser_pages):
    """Roles are data (issue 17): the role editor shows the chat agents a role may start
    and the capabilities of the acting tools, and saves them."""
    host = await skald.start()
    api = await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto(f"{host.url}/#roles")
    member = page.locator("[data-role=member]")
    await expect(member.get_by_label("Chat agents")).to_have_value("*")
    await expect(member.get_by_role("checkbox", name="Let the assistant run commands")).to_be_checked()
    restricted = page.locator("[data-role=restricted]")
    await expect(restricted.get_by_label("Chat agents")).to_have_value("companion")
    await expect(restricted.get_by_role("checkbox", name="Let the assistant run commands")).not_to_be_checked()
    await restricted.get_by_label("Chat agents").fill("companion, researcher")
    await restricted.get_by_role("checkbox", name="Let the assistant write files").check()
    await restricted.get_by_role("button", name="Save").click()
    await expect(restricted.locator(".form-status")).to_have_text("Saved.")
    role = {r["id"]: r for r in (await api.get("/api/admin/roles")).json()["roles"]}["restricted"]
    assert role["attrs"]["chat_agents"] == ["companion", "researcher"]
    assert "tools.files.write" in role["capabilities"] and "tools.shell" not in role["capabilities"]
    await restricted.get_by_label("Chat agents").fill("researcher")
    await restricted.get_by_role("button", name="Save").click()
    await expect(restricted.locator(".form-status")).to_have_text("Please check “Chat agents”.")
    await expect(restricted.get_by_label("Chat agents")).to_have_accessible_description(
        "The chat agents members of this role may start, separated by commas (* for all). The role's default agent must be among them. "
        "The list must include companion: members of the role start there.")
    await expect(restricted.get_by_label("Chat agents")).to_be_focused()


async def test_a_german_admin_reads_real_plurals_after_the_connection_test(skald, browser_pages):
    from .test_admin_forms_keyboard_and_field_errors import german_admin

    async with ScriptedModelServer(models=("alpha-model", "beta-model")) as two, ScriptedModelServer(models=("solo-model",)) as one:
        host, client, page = await german_admin(skald, browser_pages)
        for name, server in (("Zwei", two), ("Eins", one)):
            response = await client.post("/api/admin/models/providers", json={"name": name, "base_url": server.base_url, "api_key": "sk-test"})
            assert response.status_code == 201, response.text
        await page.goto("/#models")
        pair, single = page.locator("[data-provider='Zwei']"), page.locator("[data-provider='Eins']")
        await pair.get_by_role("button", name="Verbindung testen").click()
        await expect(pair.locator(".test-result")).to_contain_text("Verbunden: 2 Modelle angeboten.")
        await single.get_by_role("button", name="Verbindung testen").click()
        await expect(single.locator(".test-result")).to_contain_text("Verbunden: 1 Modell angeboten.")
        await expect(page.locator("main")).not_to_contain_text("Modell(e)")
        await page.get_by_label("Anbieter").first.select_option(label="Zwei")
        await expect(page.get_by_text("2 Namen aus dem Verbindungstest werden beim Tippen vorgeschlagen.")).to_be_visible()


async def test_add_on_a_name_the_connection_test_offered_adds_that_model_and_says_so(skald, browser_pages):
    """"Add" beside a name the test offered only filled the model form below: nothing was
    added until "Add model" there was found and pressed. It adds the model (the provider
    tested, its name as its label), lists it, says so and goes on to the next name; Edit
    in its row sets what the form would have."""
    async with admin_on_models_page(skald, browser_pages) as (_, api, page):
        provider = page.locator("[data-provider='Scripted']")
        await provider.get_by_role("button", name="Test connection").click()
        await expect(provider.locator(".test-result")).to_contain_text("Connected: 2 models offered.")

        add_alpha = provider.get_by_role("button", name="Add alpha-model", exact=True)
        await expect(add_alpha).to_have_text("Add")
        await screenshot(page, "models-offered-names")
        await add_alpha.focus()
        await add_alpha.press("Enter")
        row = page.locator("tr[data-model='alpha-model']")
        await expect(row.locator(".model-label")).to_have_text("alpha-model")
        await expect(row.locator(".tag")).to_have_text("On")
        await expect(provider.locator(".form-status")).to_have_text(
            "alpha-model is now one of the chat models. With Edit in its row you can give it a label or say that it can see images.")
        # Added: its name stays listed without a button; the focus is on the next one.
        await expect(provider.locator(".model-names")).to_contain_text("alpha-model")
        await expect(provider.get_by_role("button", name="Add alpha-model", exact=True)).to_have_count(0)
        add_beta = provider.get_by_role("button", name="Add beta-model", exact=True)
        await expect(add_beta).to_be_focused()
        await expect(page.locator("form.model-form").get_by_label("Model name")).to_have_value("")  # the form is for other names
        models = (await api.get("/api/admin/models")).json()["models"]
        assert [(m["model"], m["label"], m["provider_name"], m["enabled"]) for m in models] == [("alpha-model", "alpha-model", "Scripted", True)]

        await page.keyboard.press("Enter")
        await expect(page.locator("tr[data-model='beta-model']")).to_have_count(1)
        await expect(provider.locator(".offered-add")).to_have_count(0)
        await expect(provider.get_by_role("button", name="Test connection")).to_be_focused()  # nothing left to add
        await page.locator("tr[data-model='alpha-model']").get_by_role("button", name="Edit: alpha-model").click()
        edit = page.locator(".edit-row form")
        await edit.get_by_label("Can see images").check()
        await edit.get_by_role("button", name="Save").click()
        await expect(page.locator("tr[data-model='alpha-model']")).to_contain_text("Yes")
        models = (await api.get("/api/admin/models")).json()["models"]
        assert sorted((m["model"], m["vision"]) for m in models) == [("alpha-model", True), ("beta-model", False)]


async def test_a_german_admin_adds_an_offered_model_by_its_german_button(skald, browser_pages):
    from .test_admin_forms_keyboard_and_field_errors import german_admin

    async with ScriptedModelServer(models=("alpha-model", "beta-model")) as server:
        host, client, page = await german_admin(skald, browser_pages)
        response = await client.post("/api/admin/models/providers", json={"name": "Zwei", "base_url": server.base_url, "api_key": "sk-test"})
        assert response.status_code == 201, response.text
        await page.goto("/#models")
        provider = page.locator("[data-provider='Zwei']")
        await provider.get_by_role("button", name="Verbindung testen").click()
        add = provider.get_by_role("button", name="beta-model hinzufügen", exact=True)
        await expect(add).to_have_text("Hinzufügen")
        await add.click()
        await expect(page.locator("tr[data-model='beta-model']")).to_contain_text("Nein")
        await expect(provider.locator(".form-status")).to_contain_text("beta-model ist jetzt eines der Modelle für den Chat.")
        await expect(provider.get_by_role("button", name="alpha-model hinzufügen", exact=True)).to_be_focused()


async def test_a_models_edit_and_delete_show_on_a_phone_without_sideways_scrolling(skald, browser_pages):
    """At 390 px the chat models table hid each row's Edit and Delete off to the right
    of a wrapper that scrolled sideways, with no scrollbar to say so."""
    host = await skald.start()
    api = await host.admin()
    provider = await api.post("/api/admin/models/providers", json={"name": "Lokal", "base_url": "http://127.0.0.1:9/v1"})
    assert provider.status_code == 201, provider.text
    entry = await api.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": "a-model-with-a-rather-long-name", "label": "Everyday"})
    assert entry.status_code == 201, entry.text
    phone = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(phone, "admin", ADMIN_PASSWORD)
    await phone.goto("/#models")
    row = phone.locator("tr[data-model='a-model-with-a-rather-long-name']")
    wrap = phone.locator(".table-wrap").filter(has=row)
    assert await wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "the models table scrolls sideways"
    for name in ("Edit: Everyday", "Delete: Everyday"):
        button = row.get_by_role("button", name=name)
        await button.scroll_into_view_if_needed()
        await expect(button).to_be_in_viewport(ratio=1)
        box, frame = await button.bounding_box(), await wrap.bounding_box()
        assert box["x"] >= frame["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"], (name, box, frame)
    await expect(row).to_contain_text("Lokal")  # the provider, under its column's name
    await row.get_by_role("button", name="Edit: Everyday").click()
    await expect(phone.locator(".edit-row form").get_by_label("Label")).to_be_focused()


async def test_a_german_admin_sees_the_presets_in_german_and_names_the_provider_so(skald, browser_pages, monkeypatch):
    """The presets' names were English words from the server ("OpenAI-compatible
    (environment)"), shown so on the German page and saved so as the provider's name.
    The server sends a key; the page says it in the admin's language, and the provider
    it makes is named in that language (the admin's own label, editable)."""
    from .test_admin_forms_keyboard_and_field_errors import german_admin

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    host, client, page = await german_admin(skald, browser_pages)
    presets = (await client.get("/api/admin/models/presets")).json()["presets"]
    assert [p["key"] for p in presets if p["base_url"] == "http://127.0.0.1:9/v1"] == ["openai_environment"]
    await page.goto("/#models")
    preset = page.locator(".preset").filter(has_text="http://127.0.0.1:9/v1")
    await expect(preset.locator("strong")).to_have_text("OpenAI-kompatibel (Umgebung)")
    await expect(page.locator("main")).not_to_contain_text("environment")
    await preset.get_by_role("button", name="Anbieter hinzufügen: OpenAI-kompatibel (Umgebung)").click()
    await expect(page.locator("[data-provider='OpenAI-kompatibel (Umgebung)']")).to_be_visible()
    providers = (await client.get("/api/admin/models")).json()["providers"]
    assert [p["name"] for p in providers] == ["OpenAI-kompatibel (Umgebung)"]


async def test_a_half_filled_add_model_form_survives_another_add_or_save(skald, browser_pages):
    """Adding a provider or saving a model row drew the whole page again and wiped what
    the admin had half typed in "Add model": it is carried over; once added, it clears."""
    async with admin_on_models_page(skald, browser_pages) as (_, api, page):
        providers = (await api.get("/api/admin/models")).json()["providers"]
        response = await api.post("/api/admin/models/entries", json={"provider_id": providers[0]["id"], "model": "alpha-model", "priority": 1})
        assert response.status_code == 201, response.text
        await page.reload()
        adding = page.locator("form.model-form").filter(has=page.get_by_role("button", name="Add model"))

        async def fill_draft():
            await adding.get_by_label("Model name").fill("gamma-model")
            await adding.get_by_label("Label").fill("Gamma")
            await adding.get_by_label("Strength").fill("80")
            await adding.get_by_label("Can see images").check()

        async def draft_kept():
            await expect(adding.get_by_label("Model name")).to_have_value("gamma-model")
            await expect(adding.get_by_label("Label")).to_have_value("Gamma")
            await expect(adding.get_by_label("Strength")).to_have_value("80")
            await expect(adding.get_by_label("Can see images")).to_be_checked()
            await expect(adding.get_by_label("Provider")).to_have_value(providers[0]["id"])

        await fill_draft()
        new_provider = page.locator(".providers-section form")
        await new_provider.get_by_label("Name").fill("Second")
        await new_provider.get_by_label("Base URL").fill("http://127.0.0.1:9/v1")
        await new_provider.get_by_role("button", name="Add provider").click()
        await expect(page.locator("[data-provider='Second']")).to_be_visible()
        await draft_kept()

        await page.locator("tr[data-model='alpha-model']").get_by_role("button", name="Edit: alpha-model").click()
        edit = page.locator(".edit-row form")
        await edit.get_by_label("Label").fill("Alpha")
        await edit.get_by_role("button", name="Save").click()
        await expect(page.locator("tr[data-model='alpha-model'] .model-label")).to_have_text("Alpha")
        await draft_kept()

        await adding.get_by_role("button", name="Add model").click()
        await expect(page.locator("tr[data-model='gamma-model'] .model-label")).to_have_text("Gamma")
        await expect(adding.get_by_label("Model name")).to_have_value("")  # added: no draft any more
        await expect(adding.get_by_label("Label")).to_have_value("")


async def test_an_over_long_key_or_address_and_a_hidden_character_are_said_at_their_field(skald, browser_pages):
    """The key and address inputs have no maxlength on purpose: a paste cut short would
    store a wrong key without a word. The server's refusal is said at the field, in the
    reader's words (it read "api_key must be text", for a key that was text)."""
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#models")
    form = page.locator("form", has=page.get_by_role("button", name="Add provider"))
    name, url, key = form.get_by_label("Name"), form.get_by_label("Base URL"), form.get_by_label("API key")
    await name.fill("Gateway")
    await url.fill("https://gw.example/v1")
    await key.fill("k" * 5000)
    await form.get_by_role("button", name="Add provider").click()
    await expect(key).to_have_attribute("aria-invalid", "true")
    await expect(form).to_contain_text("The API key may have at most 4096 characters.")
    await key.fill("sk-fine")
    await url.fill("https://gw.example/" + "a" * 3000)
    await form.get_by_role("button", name="Add provider").click()
    await expect(url).to_have_attribute("aria-invalid", "true")
    await expect(form).to_contain_text("The address may have at most 2048 characters.")
    await url.fill("https://gw.example/v1")
    await name.fill("Gate\u202eway")
    await form.get_by_role("button", name="Add provider").click()
    await expect(name).to_have_attribute("aria-invalid", "true")
    await expect(form).to_contain_text("Name may not contain invisible or control characters, such as U+202E.")
    assert (await host.core.chat.models.providers()) == []
