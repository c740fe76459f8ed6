"""German all the way (issue 19): every plugin the project ships, built in or in-tree,
has German for what the shell shows of it — its title and description, each field of its
settings and per-member settings, each page's title — through the bundle keys of
docs/plugins.md "Languages". A field added without its German fails here, not in a
German admin's eyes."""

from __future__ import annotations

import ast
import tomllib
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from skald_host.builtins.strings import LOCALES
from skald_host.core.host import BUILTIN_PLUGINS
from skald_hookspecs import I18nBundle

ROOT = Path(__file__).resolve().parents[2]
IN_TREE = {tomllib.loads(p.read_text())["project"]["name"] for p in ROOT.glob("plugins/*/pyproject.toml")}


def shipped() -> list[tuple[str, Any]]:
    found = [(str(obj), import_module(obj) if isinstance(obj, str) else obj) for obj in BUILTIN_PLUGINS]
    found += [(ep.dist.name, ep.load()) for ep in entry_points(group="skald.plugins") if ep.dist and ep.dist.name in IN_TREE]
    return found


def test_every_in_tree_distribution_is_installed_and_checked():
    assert IN_TREE and IN_TREE <= {name for name, _ in shipped()}


@pytest.mark.parametrize("name, plugin", shipped(), ids=lambda v: v if isinstance(v, str) else "")
def test_what_the_shell_shows_of_a_shipped_plugin_has_german(name, plugin):
    info = plugin.plugin_info()
    bundles: list[Any] = []
    if hasattr(plugin, "register_i18n"):
        plugin.register_i18n(bundles.append)
    german = {k: v for b in bundles if b.domain == info.id for k, v in b.strings.get("de", {}).items()}
    if name in BUILTIN_PLUGINS:  # the host's own: in its locale files, as builtin.<id>.<key>
        core = I18nBundle.from_folder("core", LOCALES).strings["de"]
        german |= {k.removeprefix(f"builtin.{info.id}."): v for k, v in core.items() if k.startswith(f"builtin.{info.id}.")}
    wanted = ["plugin.title", "plugin.description"] if info.description else ["plugin.title"]
    for kind, schema in (("config", info.config_schema), ("user_config", info.user_config_schema)):
        for field in schema or ():
            wanted += [f"{kind}.{field.name}.label"] + ([f"{kind}.{field.name}.description"] if field.description else [])
    pages: list[Any] = []
    if hasattr(plugin, "register_web_pages"):
        plugin.register_web_pages(pages.append)
    wanted += [f"page.{page.page_id}.title" for page in pages]
    missing = [key for key in wanted if not german.get(key)]
    assert missing == [], f"{name} ({info.id}) has no German for {missing}"


PLUGIN_PACKAGES = sorted(p.parent for p in ROOT.glob("plugins/*/*/__init__.py") if p.parent.name != "tests")


@pytest.mark.parametrize("package", PLUGIN_PACKAGES, ids=lambda p: p.name)
def test_a_plugin_the_project_ships_keeps_its_words_in_locale_files_a_translator_can_add_to(package):
    """Adding a language is adding files (issue 19), for the built-in plugins as for the
    shell: each keeps its strings in ``locales/<code>.json`` (package data, so a wheel
    has them), English and German with the same keys, any further language a subset of
    English's; no Python module holds a table of texts per language, which a translator
    could only change by editing code (the five plugins did before)."""
    folder = package / "locales"
    bundle = I18nBundle.from_folder("probe", folder)
    english, german = bundle.strings["en"], bundle.strings["de"]
    assert set(english) == set(german), sorted(set(english) ^ set(german))
    for locale, table in bundle.strings.items():
        assert set(table) <= set(english), f"{locale}.json has keys en.json lacks: {sorted(set(table) - set(english))}"
    pyproject = tomllib.loads((package.parent / "pyproject.toml").read_text())
    assert "locales/*.json" in pyproject["tool"]["setuptools"]["package-data"][package.name]
    for module in package.rglob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                assert not {"en", "de"} <= keys, f"{module.relative_to(ROOT)}:{node.lineno} holds texts per language in Python"
