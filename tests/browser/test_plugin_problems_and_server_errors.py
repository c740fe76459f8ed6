"""What a stranger's three plugins showed wrong in the shell: a route's 500 said "Something
went wrong" without the error id the admin finds it by, a running plugin whose hooks
failed after startup stayed a plain green "Running" on its card, and the status block
said a key no language has "exists only in other languages". The guide's plural
snippet (a key per form) is run in the page too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.async_api import expect
from quart import Blueprint

from skald_hookspecs import hookimpl
from skald_hookspecs.types import NotReady, PluginInfo
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in


class Faulty:
    """Runs, but its route raises and its ``member_unlocked`` fails for every member."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="faulty", title="Faulty", spec=">=1.2,<2", grant_by_default=True)

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint("test_faulty", __name__)

        @blueprint.get("/boom")
        async def boom() -> dict:
            raise RuntimeError("the widget broke")

        register(blueprint)

    @hookimpl
    async def member_unlocked(self, member_id: str) -> None:
        raise RuntimeError("no runtime for this member")


class Untranslated:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="untranslated", title="Untranslated", spec=">=1.2,<2")

    @hookimpl
    async def startup(self, host: Any) -> None:
        raise NotReady("no token is set", key="error.bad_key")


CALL_THE_ROUTE = """async () => {
    const kit = await import("/ui/lib/plugin-kit.js");
    const { api } = await import("/ui/lib/api.js");
    const { errorText } = await import("/ui/lib/ui.js");
    let kitError = null;
    try { await kit.call("GET", "/api/plugin/faulty/boom"); } catch (error) { kitError = { message: error.message, values: error.values, code: error.code }; }
    const shell = errorText(await api("GET", "/api/plugin/faulty/boom"));
    return { kitError, shell };
}"""


async def test_a_routes_500_shows_the_error_id_through_the_kit_and_in_the_shell(skald, browser_pages):
    host = await skald.start(plugins=[Faulty()], enable=["faulty"])
    await host.admin()
    await host.create_member("bea", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "bea", MEMBER_PASSWORD)

    result = await page.evaluate(CALL_THE_ROUTE)

    error_id = result["kitError"]["values"]["error_id"]
    assert re.fullmatch(r"[0-9a-f]{12}", error_id) and result["kitError"]["code"] == "internal_error"
    assert result["kitError"]["message"] == (
        f"Auf dem Server ist etwas schiefgegangen (Fehlerkennung {error_id})."
        " Nenne einem Admin diese Kennung: Das Log des Servers hat die Einzelheiten darunter."
    )
    assert re.fullmatch(r"Auf dem Server ist etwas schiefgegangen \(Fehlerkennung [0-9a-f]{12}\)\. .*", result["shell"]), result["shell"]
    assert result["shell"] != result["kitError"]["message"]  # a second failure, a second id

    admin = await browser_pages.new(host.url)
    await sign_in(admin, "admin", ADMIN_PASSWORD)
    english = await admin.evaluate(CALL_THE_ROUTE)
    assert english["kitError"]["message"].startswith(f"Something went wrong on the server (error id {english['kitError']['values']['error_id']}).")
    detail = (await (await host.admin()).get("/api/admin/plugins/faulty")).json()
    assert error_id in [f["error_id"] for f in detail["failures"]]  # the id the admin looks up


async def test_a_running_plugins_card_says_it_has_recent_problems_without_turning_red(skald, browser_pages):
    host = await skald.start(plugins=[Faulty()], enable=["faulty"])
    admin = await host.admin()
    await host.create_member("bea")
    await (await host.member("bea")).get("/api/plugin/faulty/boom")  # a member_unlocked and a route

    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)

    listed = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}["faulty"]
    detail = (await admin.get("/api/admin/plugins/faulty")).json()
    count = listed["problems"]
    assert (listed["state"], listed["healthy"]) == ("loaded", True)
    # Every failure is counted; a hook's repeats within a minute are one entry with a count.
    assert count == detail["problems"] == len(detail["failures"]) + sum(f.get("repeats", 0) for f in detail["failures"]) and count >= 2
    hooks = [f["where"] for f in detail["failures"]]
    assert "hook member_unlocked" in hooks and any(w.startswith("route GET") for w in hooks), hooks

    await page.goto("/#plugins")
    card = page.locator("article.plugin-card[data-plugin='faulty']")
    await expect(card.locator(".health")).to_have_text(f"Running · {count} problems")
    await expect(card.locator(".health-dot")).to_have_class(re.compile(r"\bgreen\b"))  # it runs: not red
    problems = card.get_by_role("link", name=f"{count} problems of Faulty since the server started: see its details")
    await problems.click()
    await expect(page).to_have_url(re.compile(r"#plugin-detail\?id=faulty$"))
    await expect(page.locator(".tool-failures li")).to_have_count(len(detail["failures"]))
    [folded] = [f for f in detail["failures"] if f.get("repeats")]  # member_unlocked: the admin's login and Bea's
    summary = page.locator(f".tool-failures [data-error-id='{folded['error_id']}'] summary")
    await expect(summary).to_contain_text(re.compile(r"hook member_unlocked · .+ · and (once more|\d+ more times), last at .+"))
    # Its times in the reader's format and zone, as every other date of the shell (they
    # were the server's UTC ISO strings as they came), the exact moment in `datetime`.
    shown = "(iso) => import('/ui/lib/ui.js').then((ui) => ui.formatDate(iso))"
    times = summary.locator("time")
    await expect(times).to_have_count(2)
    await expect(times.nth(0)).to_have_attribute("datetime", folded["at"])
    await expect(times.nth(0)).to_have_text(await page.evaluate(shown, folded["at"]))
    await expect(times.nth(1)).to_have_attribute("datetime", folded["last_at"])
    await expect(times.nth(1)).to_have_text(await page.evaluate(shown, folded["last_at"]))
    assert folded["last_at"] not in await summary.inner_text()

    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    await page.goto("/#plugins")
    await page.reload()
    await expect(page.locator("article.plugin-card[data-plugin='faulty'] .health")).to_have_text(f"Läuft · {count} Probleme")
    await expect(page.locator("article.plugin-card:not([data-plugin='faulty']) .state-problems")).to_have_count(0)
    await page.goto("/#plugin-detail?id=faulty")
    german = page.locator(f".tool-failures [data-error-id='{folded['error_id']}'] summary")
    await expect(german).to_contain_text(", zuletzt ")
    await expect(german.locator("time").nth(1)).to_have_text(await page.evaluate(shown, folded["last_at"]))
    assert folded["last_at"] not in await german.inner_text()


async def test_the_status_tells_a_key_no_language_has_from_one_only_english_lacks(skald, browser_pages):
    host = await skald.start(plugins=[Untranslated()], enable=["untranslated"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#settings")
    block = page.locator(".status-block")

    await expect(block.locator("details summary").filter(has_text="in no language")).to_have_text(
        "1 interface text that plugins use exists in no language; every reader sees the text the plugin gave with it instead."
    )
    await expect(block.locator("details summary").filter(has_text="only in other languages")).to_have_count(0)
    await expect(block.locator("details code")).to_have_text(["untranslated.error.bad_key"])


class Jotter:
    """A plugin with the guide's plural strings, serving its bundle from the route the
    guide shows (its Python block, run here as it is written)."""

    def __init__(self, strings: dict, route: str) -> None:
        from skald_hookspecs.types import I18nBundle

        self.bundle = I18nBundle("jotter", strings)
        self.route = route

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="jotter", title="Jotter", spec=">=1.2,<2", grant_by_default=True)

    @hookimpl
    def register_i18n(self, register: Any) -> None:
        register(self.bundle)

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint("test_jotter", __name__)
        exec(self.route, {"blueprint": blueprint, "BUNDLE": self.bundle, "Any": Any})
        register(blueprint)


async def test_the_guides_plural_snippet_says_1_notiz_and_3_notizen(skald, browser_pages):
    """docs/plugins.md: a plugin's strings have no plural forms; a key per form, picked
    with Intl.PluralRules in a page. The snippet as the guide shows it, run as a German
    member's page element, with the strings it fetches from the route the guide shows
    (it used ``strings`` it never defined)."""
    import json

    guide = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text(encoding="utf-8")
    [snippet] = [b for b in re.findall(r"```js\n(.*?)```", guide, flags=re.S) if "Intl.PluralRules" in b]
    [strings] = [b for b in re.findall(r"```json\n(.*?)```", guide, flags=re.S) if '"notes.one"' in b]
    [route] = [b for b in re.findall(r"```python\n(.*?)```", guide, flags=re.S) if '@blueprint.get("/strings")' in b]
    [imports] = [line for line in snippet.splitlines() if line.startswith("import ")]
    names = re.fullmatch(r'import \{ (.*) \} from "/ui/lib/plugin-kit.js";', imports)[1]
    body = [line for line in snippet.strip().splitlines() if line.strip() and not line.startswith("import ")]
    script = (
        f"async (count) => {{\n  const {{ {names} }} = await import(\"/ui/lib/plugin-kit.js\");\n"
        "  const element = document.createElement(\"div\");\n  element.setAttribute(\"plugin-id\", \"jotter\");\n"
        "  await (async function () {\n" + "\n".join(body) + "\n  }).call(element);\n"
        "  return element.lastElementChild.textContent;\n}"
    )
    english = {"notes.one": "{count} note", "notes.other": "{count} notes"}
    host = await skald.start(plugins=[Jotter({"de": json.loads(strings), "en": english}, route)], enable=["jotter"])
    await host.admin()
    await host.create_member("bea", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "bea", MEMBER_PASSWORD)

    assert [await page.evaluate(script, count) for count in (1, 3)] == ["1 Notiz", "3 Notizen"]
