"""Behind a reverse proxy that rewrites Host, the browser's Origin is the public
address: ``server.public_url`` is the admin's statement of it, so it counts as same
origin; a refused Origin is logged once, with what it was compared with."""

from __future__ import annotations

import logging

from skald_host.testing.host import ADMIN_PASSWORD
from skald_host.web.auth import PLAIN_COOKIE, SECURE_COOKIE

PUBLIC = "https://skald.example.org"
LOGIN = {"username": "admin", "password": ADMIN_PASSWORD}


async def test_an_origin_matching_public_url_is_same_origin_behind_a_host_rewriting_proxy(skald):
    host = await skald.start(settings=skald.settings(server={"public_url": "HTTPS://Skald.Example.org/"}))
    await host.admin()
    client = host.client()
    # The proxy sent Host 127.0.0.1:<port> (the test server's own); the browser's Origin is the public one.
    response = await client.post("/api/auth/login", json=LOGIN, headers={"Origin": PUBLIC})
    assert response.status_code == 200, response.text
    client.csrf_token = response.json()["csrf_token"]
    assert (await client.put("/api/me/settings", json={"a": 1}, headers={"Origin": PUBLIC})).status_code == 200
    assert (await client.put("/api/me/settings", json={"a": 1}, headers={"Origin": "https://skald.example.org:8443"})).status_code == 403
    assert (await client.put("/api/me/settings", json={"a": 1}, headers={"Origin": "http://skald.example.org"})).status_code == 403


async def test_an_upper_case_https_public_url_still_gives_the_secure_cookie(skald):
    host = await skald.start(settings=skald.settings(server={"public_url": "HTTPS://skald.example.org"}))
    await host.admin()
    # Not a loopback Host (which counts as a secure context by itself): the proxy's name.
    response = await host.client().post("/api/auth/login", json=LOGIN, headers={"Host": "skald.lan"})
    assert response.status_code == 200, response.text
    names = [header.split("=", 1)[0] for header in response.headers.get_list("set-cookie")]
    assert SECURE_COOKIE in names and PLAIN_COOKIE not in names
    assert all("Secure" in header for header in response.headers.get_list("set-cookie") if header.startswith(SECURE_COOKIE))


async def test_a_refused_cross_origin_write_is_logged_once_per_origin_with_both_values(skald, caplog):
    host = await skald.start(settings=skald.settings(server={"public_url": PUBLIC}))
    await host.admin()
    client = host.client()
    caplog.set_level(logging.INFO, logger="skald_host.web.auth")
    for origin in ("https://evil.example", "https://evil.example", "https://other.example"):
        response = await client.post("/api/auth/login", json=LOGIN, headers={"Origin": origin})
        assert response.status_code == 403
    # The page says what the admin of a proxy that rewrites Host can do; it said only
    # "A request from another site was refused." (operator probe).
    assert response.json()["code"] == "cross_origin"
    for language in ("en", "de"):  # the page shows its code's text in the reader's language
        assert "server.public_url" in host.core.strings.translate("core.error.cross_origin", language)
    lines = [r.getMessage() for r in caplog.records if r.name == "skald_host.web.auth" and "cross-origin" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "'https://evil.example'" in lines[0] and host.url.split("//")[1] in lines[0] and PUBLIC in lines[0]
    assert ADMIN_PASSWORD not in " ".join(lines)
    assert all(r.levelno == logging.INFO for r in caplog.records if "cross-origin" in r.getMessage())
