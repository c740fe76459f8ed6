"""What the admin is told about who may use the plugin (security sweep): it manages its
own access, so the host's access list names only the admins (who hold every plugin)
while every active member, in every role, may pair a phone. The admin's plugin page
and the README say so, in the plugin's own words, in English and German."""

from __future__ import annotations

from pathlib import Path

from skald_host.testing.host import ADMIN_PASSWORD
from skald_mobile_connector.strings import STRINGS
from mobile_support import BASE, PLUGIN, paired_device

README = Path(__file__).resolve().parent.parent / "README.md"


async def test_a_member_of_the_restricted_role_may_pair_a_phone_which_the_access_list_does_not_show(setup):
    """The fact the texts below must not hide (not changed by them)."""
    child = await setup.host.member("kim", role="restricted")
    phone = await paired_device(setup, child)
    assert (await phone.get(f"{BASE}/me")).status_code == 200
    access = (await setup.admin.get(f"/api/admin/plugins/{PLUGIN}/access")).json()
    assert [m["username"] for m in access["members"]] == ["admin"]  # the host's list: the admins only
    assert access["manages_own_access"] is True  # ... and it says why (security sweep)


def test_the_plugin_says_who_may_use_it_in_both_languages():
    english, german = STRINGS["en"]["plugin.access"], STRINGS["de"]["plugin.access"]
    assert "Every active member" in english and "every role" in english and "Children" in english
    assert "Jedes aktive Mitglied" in german and "jeder Rolle" in german and "Kinder" in german


def test_the_readme_says_every_active_member_may_pair():
    access = README.read_text(encoding="utf-8").split("- **Access.**", 1)[1].split("\n- **", 1)[0]
    assert "Every active member may" in access and "every role" in access and "restricted" in access
    assert f"/api/admin/plugins/{PLUGIN}/access" in access and "names only the admins" in access


async def test_the_admins_plugin_page_says_every_member_may_pair_not_only_the_admin(setup, plugin_browser):
    page = await plugin_browser.new_page()
    await plugin_browser.sign_in(page, setup.host, setup.host.admin_username, ADMIN_PASSWORD)
    await page.goto(f"{setup.host.url}/#plugin-detail?id={PLUGIN}")
    await page.reload()  # the shell loaded before the sign-in: start it again with the session
    roster = page.locator("section", has=page.get_by_role("heading", name="Who can use it"))
    await roster.get_by_test_id("plugin-access").wait_for()
    text = await roster.inner_text()
    assert "no role limits it: every active member can reach it" in text
    assert STRINGS["en"]["plugin.access"] in text
    assert await roster.get_by_role("listitem").count() == 0  # no list that names the admin alone
