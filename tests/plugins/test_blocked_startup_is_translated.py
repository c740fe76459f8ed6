"""A ``startup`` that blocked the server past the hook timeout is said on the Plugins
page in the reader's language, as one that timed out is (``core.plugin.startup_blocked``
beside ``core.plugin.startup_timed_out``): a German admin read "startup: blocked the
server for 8.0 s (a hook must not block: ...)" in English. The status and the log keep
the English message."""

from __future__ import annotations

import re

from skald_host.builtins.strings import LOCALES
from skald_hookspecs import I18nBundle

from .test_misbehaving_hooks_are_reported import BLOCKED, SyncStartup


async def test_a_blocking_startup_is_said_in_the_readers_language(skald):
    host = await skald.start(plugins=[SyncStartup()], settings=skald.settings(plugins={"hook_timeout_seconds": 0.5}))
    admin = await host.admin()
    await host.core.set_plugin_enabled("sync-sleeper", True)

    status = host.core.plugins.status("sync-sleeper")
    assert re.fullmatch(r"startup: blocked the server for 0\.[89] s" + BLOCKED, status.error), status.error  # the log's, in English
    seconds = status.error_values["seconds"]
    assert re.fullmatch(r"0\.[89]", seconds) and status.error_values["timeout"] == "0.5"

    english = (await admin.get("/api/admin/plugins/sync-sleeper")).json()["error"]
    assert english.startswith(f"Its startup blocked the server for {seconds} s, longer than the 0.5 s a hook may take"), english
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    german = (await admin.get("/api/admin/plugins/sync-sleeper")).json()["error"]
    assert german.startswith(f"Sein Start hat den Server {seconds} s lang blockiert, länger als die 0.5 s"), german
    listed = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}
    assert listed["sync-sleeper"]["error"] == german  # the card says it too

    # A later startup that succeeds clears it, as it clears a timeout.
    host.core.plugins.hook_timeout = 5.0
    await host.core.set_plugin_enabled("sync-sleeper", False)
    await host.core.set_plugin_enabled("sync-sleeper", True)
    assert (status.healthy, status.error, status.error_key) == (True, None, None)


def test_the_blocked_startup_has_english_and_german_text_with_the_same_placeholders():
    strings = I18nBundle.from_folder("core", LOCALES).strings
    english, german = strings["en"]["plugin.startup_blocked"], strings["de"]["plugin.startup_blocked"]
    assert set(re.findall(r"\{(\w+)\}", english)) == set(re.findall(r"\{(\w+)\}", german)) == {"seconds", "timeout"}
