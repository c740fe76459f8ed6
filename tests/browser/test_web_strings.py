"""Every UI string the web shell asks for exists in English and German."""

from __future__ import annotations

import re
from pathlib import Path

from skald_host.builtins.strings import DE, EN

WEB = Path(__file__).resolve().parents[2] / "web"
# Keys built at run time (t(`plugin.state.${state}`), route tables) are listed here.
DYNAMIC = {
    *(f"plugin.state.{s}" for s in ("loaded", "disabled", "failed", "blocked", "unhealthy")),
    *(f"plugin.state_help.{c}" for c in ("green", "grey", "red")),
    *(f"capability.{c}" for c in ("chat.use", "memory.shared.read", "memory.shared.write", "projects.create", "sandbox.network")),
    *(f"nav.{n}" for n in ("chat", "account", "plugins", "members", "roles", "settings")),
    *(f"locale.{code}" for code in ("en", "de")),
    *(f"theme.{choice}" for choice in ("system", "light", "dark")),
}
VENDOR = WEB / "vendor"  # third-party libraries, kept as published (web/vendor/README.md)


def own_code() -> list[Path]:
    return [path for path in WEB.rglob("*.js") if VENDOR not in path.parents]


def used_keys() -> set[str]:
    keys = set()
    for path in own_code():
        text = path.read_text(encoding="utf-8")
        keys.update(re.findall(r"\bt\(\s*\"([a-z0-9_.]+)\"", text))
        keys.update(re.findall(r"label: \"([a-z_]+\.[a-z0-9_.]+)\"", text))
    return keys | DYNAMIC


def test_every_ui_string_has_english_and_german():
    keys = used_keys()
    assert len(keys) > 100
    assert sorted(k for k in keys if k not in EN) == []
    assert sorted(k for k in keys if k not in DE) == []


def code_of(path: Path) -> str:
    """The file without its comment lines (which may name what they forbid)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(encoding="utf-8"), flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def test_web_code_never_parses_data_as_html():
    pattern = r"innerHTML|outerHTML|insertAdjacentHTML|createContextualFragment|DOMParser|document\.write|\bon[a-z]+="
    offenders = [f"{path.name}: {match}" for path in own_code() for match in re.findall(pattern, code_of(path))]
    assert offenders == []
