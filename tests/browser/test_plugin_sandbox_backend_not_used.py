"""A sandbox backend plugin that is loaded but does not run the commands says so on its
card: the Docker card read "Running" on a machine with no Docker engine, while Settings
said commands run in the Bubblewrap sandbox."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.async_api import expect

import skald_host

from skald_host.builtins.sandbox_bwrap import BubblewrapBackend
from skald_host.builtins.sandbox_docker import DockerBackend
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import PHONE, sign_in

NO_ENGINE = "no Docker engine here"
INSTEAD = f"Not available: {NO_ENGINE}. Bubblewrap sandbox runs the commands instead."


async def test_a_backend_without_its_engine_and_one_standing_by_say_so(skald, browser_pages, monkeypatch):
    monkeypatch.setattr(DockerBackend, "available", lambda self: NO_ENGINE)
    monkeypatch.setattr(BubblewrapBackend, "available", lambda self: None)
    host = await skald.start()
    api = await host.admin()
    assert (await api.get("/api/admin/status")).json()["sandbox"] == "Bubblewrap sandbox"

    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    docker = page.locator("article.plugin-card[data-plugin='sandbox-docker']")
    await expect(docker.locator(".health")).to_have_text(INSTEAD)
    await expect(docker.locator(".health-dot")).to_have_class("health-dot grey")
    await expect(page.locator("article.plugin-card[data-plugin='sandbox-bubblewrap'] .health")).to_have_text("Running")
    # The reason is the engine's own, long words: they wrap, the page does not scroll sideways.
    phone = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(phone, "admin", ADMIN_PASSWORD)
    await phone.goto("/#plugins")
    await expect(phone.locator("article.plugin-card[data-plugin='sandbox-docker'] .health")).to_have_text(INSTEAD)
    assert await phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    await page.goto("/#plugin-detail?id=sandbox-docker")
    await expect(page.locator("article.plugin-card")).to_have_count(0)
    await expect(page.get_by_text(INSTEAD)).to_be_visible()


async def test_a_working_backend_the_choice_passed_over_is_installed_and_not_used(skald, browser_pages, monkeypatch):
    monkeypatch.setattr(DockerBackend, "available", lambda self: None)
    monkeypatch.setattr(BubblewrapBackend, "available", lambda self: None)
    host = await skald.start(settings=skald.settings(sandbox={"backend": "bubblewrap"}))
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    docker = page.locator("article.plugin-card[data-plugin='sandbox-docker']")
    await expect(docker.locator(".health")).to_have_text("Installed · not used: commands run in Bubblewrap sandbox")
    await docker.locator(".health-dot").click()
    await expect(docker.locator(".health-detail")).to_contain_text("it does not run the members' commands here")


async def test_the_docker_card_words_a_missing_engine_for_a_person_and_stands_by(skald, browser_pages, monkeypatch, tmp_path, caplog):
    """The card read "Not available: no Docker engine answers (Error while fetching server
    API version: ('Connection aborted.', ConnectionRefusedError(111, ...)))" and "Always
    on": the client's words go to the log, the card says what is true, in German too."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # nobody serves it
    monkeypatch.setattr(BubblewrapBackend, "available", lambda self: None)
    caplog.set_level("INFO", logger="skald_host.builtins.sandbox_docker")
    host = await skald.start()
    api = await host.admin()
    assert (await api.get("/api/admin/status")).json()["sandbox"] == "Bubblewrap sandbox"
    cards = {p["id"]: p for p in (await api.get("/api/admin/plugins")).json()["plugins"]}
    assert cards["sandbox-docker"]["standby"] == (
        "Not available: no Docker engine is running on this machine. Bubblewrap sandbox runs the commands instead.")
    assert "no Docker engine answers" in caplog.text  # the raw detail: in the log
    german = json.loads((Path(skald_host.__file__).parent / "builtins/locales/de.json").read_text(encoding="utf-8"))
    assert german["plugin.reason.docker_not_running"] and "{backend}" in german["plugin.state.unavailable_instead"]
    assert german["plugin.standing_by"]
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    docker = page.locator("article.plugin-card[data-plugin='sandbox-docker']")
    await expect(docker.locator(".health")).to_have_text(
        "Not available: no Docker engine is running on this machine. Bubblewrap sandbox runs the commands instead.")
    await expect(docker.locator(".plugin-foot")).to_contain_text("Built in · standing by")
    await expect(docker.locator(".plugin-foot")).not_to_contain_text("Always on")
    for word in ("Error while fetching", "ConnectionRefusedError", "Connection aborted"):
        await expect(docker).not_to_contain_text(word)
    await expect(page.locator("article.plugin-card[data-plugin='sandbox-bubblewrap'] .plugin-foot")).to_contain_text("Always on")
