"""A new user name may not pass for another (security sweep): no compatibility forms
(full-width "ａｄｍｉｎ"), no letters of scripts that do not belong together ("аdmin"
with a Cyrillic "а"), and none whose confusable skeleton is an existing member's
("асе" in Cyrillic beside "ace"). Names in one script are fine ("иван", "alicé",
"佐藤さくら"); an account created before the rule still signs in; first-run setup
(the page and ``skald setup``, through ``initialize_instance``) refuses the same."""

from __future__ import annotations

import re

import pytest

from skald_host.builtins.strings import LOCALES
from skald_host.core.identity import users as users_module
from skald_host.core.identity.setup import initialize_instance
from skald_host.core.identity.users import MemberError
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from skald_hookspecs import I18nBundle

CODES = ("username_compatibility_form", "username_mixed_scripts", "username_confusable")


async def _create(admin, username: str):
    return await admin.post("/api/admin/members", json={"username": username, "password": MEMBER_PASSWORD})


async def test_the_admin_cannot_create_a_name_that_passes_for_another(skald):
    host = await skald.start()
    admin = await host.admin()
    await host.create_member("ace")
    await host.create_member("bob")
    cases = [
        ("\u0430dmin", "username_mixed_scripts", {"scripts": "Cyrillic, Latin"}),  # Cyrillic а
        ("adm\u0456n", "username_mixed_scripts", {"scripts": "Latin, Cyrillic"}),  # Cyrillic і
        ("\u03bfscar", "username_mixed_scripts", {"scripts": "Greek, Latin"}),  # Greek ο
        ("ａｄｍｉｎ", "username_compatibility_form", {"char": "ａ"}),  # full-width
        ("ad\ufb01n", "username_compatibility_form", {"char": "\ufb01"}),  # the ligature "ﬁ"
        ("admin\u00b2", "username_compatibility_form", {"char": "\u00b2"}),  # superscript two
        ("\u0430\u0441\u0435", "username_confusable", {"name": "ace"}),  # all Cyrillic: one script, but reads "ace"
        ("adm\u0131n", "username_confusable", {"name": "admin"}),  # Latin dotless ı
        ("adrnin", "username_confusable", {"name": "admin"}),  # "rn" reads "m"
        # What a second sweep got past the first table: small capitals, letters with a
        # hook or of another shape, Cyrillic soft sign, Cherokee (all of one script).
        ("\u1d00dmin", "username_confusable", {"name": "admin"}),  # small capital ᴀ
        ("\u1d00\u1d04\u1d07", "username_confusable", {"name": "ace"}),  # ᴀᴄᴇ
        ("a\u0188e", "username_confusable", {"name": "ace"}),  # ƈ, c with a hook
        ("\u044c\u043e\u044c", "username_confusable", {"name": "bob"}),  # Cyrillic ьоь
        ("\u13aa\u13df\u13ac", "username_confusable", {"name": "ace"}),  # Cherokee ᎪᏟᎬ
        ("ACE", "username_taken", {"name": "ace"}),  # the same name, as before
    ]
    for name, code, values in cases:
        response = await _create(admin, name)
        assert response.status_code == 400, (name, response.text)
        body = response.json()
        assert (body["code"], body.get("values"), body.get("field")) == (code, values, "username"), (name, body)
    names = {m["username"] for m in (await admin.get("/api/admin/members")).json()["members"]}
    assert names == {"admin", "ace", "bob"}

    # Names in one script, or in scripts written together, with digits and . _ - @.
    for name in ("иван", "alicé", "佐藤さくら", "김민준", "μαρία", "mueller.2_x-y@home", "ольга-1"):
        response = await _create(admin, name)
        assert response.status_code == 201, (name, response.text)


async def test_every_code_is_said_in_both_languages_with_its_values():
    strings = I18nBundle.from_folder("core", LOCALES).strings
    # The scripts' names are Unicode's English ones (in the values, for the API): a
    # German sentence showed "(Cyrillic, Latin)" (rewalk probe), so the words leave them out.
    placeholders = {"username_compatibility_form": {"char"}, "username_mixed_scripts": set(), "username_confusable": {"name"}}
    for locale in ("en", "de"):
        for code in CODES:
            string = strings[locale][f"error.{code}"]
            assert set(re.findall(r"\{(\w+)\}", string)) == placeholders[code], (locale, string)


async def test_an_account_created_before_the_rule_still_signs_in(skald, monkeypatch):
    host = await skald.start()
    await host.admin()
    monkeypatch.setattr(users_module, "check_new_username", lambda name: None)  # as before the rule
    monkeypatch.setattr(users_module, "_refuse_look_alike", lambda conn, name: None)
    await host.create_member("\u0430dmin")
    monkeypatch.undo()
    client = host.client()
    response = await client.login("\u0430dmin", MEMBER_PASSWORD)
    assert response.status_code == 200, response.text
    assert (await host.client().login("admin", ADMIN_PASSWORD)).status_code == 200


@pytest.mark.parametrize("name, code", [("ａｄｍｉｎ", "username_compatibility_form"), ("\u0430dmin", "username_mixed_scripts")])
async def test_first_run_setup_refuses_the_same_names(skald, name, code):
    host = await skald.start()
    response = await host.client().post("/api/setup", json={"username": name, "password": ADMIN_PASSWORD})
    assert response.status_code == 400, response.text
    assert (response.json()["code"], response.json().get("field")) == (code, "username")
    assert await host.core.users.count() == 0
    # ``skald setup`` goes through the same seam.
    with pytest.raises(MemberError) as refused:
        await initialize_instance(host.core.users, username=name, password=ADMIN_PASSWORD, locales=host.core.strings.locales)
    assert refused.value.code == code
    assert await host.core.users.count() == 0
