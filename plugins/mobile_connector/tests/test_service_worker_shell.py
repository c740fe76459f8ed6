"""The offline shell holds every module the app imports, all the way down: a module the
host's shared libraries started importing (web/lib/live.js) was missing from the service
worker's list, and the app no longer opened offline (the browser test found it late)."""

from __future__ import annotations

import re
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "skald_mobile_connector" / "app"
WEB = Path(__file__).resolve().parents[3] / "web"
IMPORT = re.compile(r"""^\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|^\s*import\s+["']([^"']+)["']""", re.MULTILINE)


def imported_urls(url: str, text: str) -> set[str]:
    """The URLs a module at ``url`` imports or re-exports statically (dynamic imports load on demand)."""
    found = set()
    for match in IMPORT.finditer(text):
        target = match.group(1) or match.group(2)
        if target.startswith("/"):
            found.add(target)
        else:  # relative to the importing module
            base = url.rsplit("/", 1)[0]
            parts = f"{base}/{target}".split("/")
            resolved: list[str] = []
            for part in parts:
                if part == "..":
                    resolved.pop()
                elif part != ".":
                    resolved.append(part)
            found.add("/".join(resolved))
    return found


def test_the_service_worker_caches_every_module_the_app_imports():
    shell = set(re.findall(r'"([^"]+)"', re.search(r"const SHELL = \[(.*?)\];", (APP / "sw.js").read_text(), re.S).group(1)))
    seen, todo = set(), list(imported_urls("/app/app.js", (APP / "app.js").read_text()))
    while todo:
        url = todo.pop()
        if url in seen or not url.startswith("/ui/"):
            continue
        seen.add(url)
        todo += imported_urls(url, (WEB / url.removeprefix("/ui/")).read_text())
    assert seen, "the app imports the host's libraries"
    assert seen - shell == set(), "modules the offline shell would lack"
