"""A plugin built into a wheel without its ``locales/`` folder or its ``page.js`` (left
out of the package data) failed with a bare FileNotFoundError, where a missing
``agents/`` folder is told "must be package data". Both now get that advice: the
contract's ``I18nBundle.from_folder`` names the folder, and the host adds it to any
FileNotFoundError of a file missing from a Python package's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from quart import Blueprint, Response

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo

SPEC = ">=1.0,<2"


def a_package(root: Path) -> Path:
    """A Python package's folder, as a wheel installs it: code, but no data."""
    package = root / "skald_notekeep"
    package.mkdir()
    (package / "__init__.py").write_text("")
    return package


class WithoutLocales:
    def __init__(self, package: Path) -> None:
        self.package = package

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="nolocales", title="No locales", spec=SPEC)

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        register(I18nBundle.from_folder("nolocales", self.package / "locales"))


class WithoutPage:
    def __init__(self, package: Path) -> None:
        self.package = package

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="nopage", title="No page", spec=SPEC)

    @hookimpl
    def register_routes(self, register: Callable[..., None]) -> None:
        page_js = (self.package / "page.js").read_text(encoding="utf-8")  # as the tutorial's routes read it
        blueprint = Blueprint("nopage", __name__)

        @blueprint.get("/page.js")
        async def page() -> Any:
            return Response(page_js, mimetype="text/javascript")

        register(blueprint)


def error_of(host: Any, plugin_id: str) -> str:
    status = host.core.plugins.status(plugin_id)
    assert status is not None and status.state == "failed", [s.as_dict() for s in host.core.plugins.statuses()]
    return status.error or ""


async def test_a_missing_locales_folder_is_said_to_be_package_data(skald, tmp_path):
    package = a_package(tmp_path)
    host = await skald.start(plugins=[WithoutLocales(package)])

    error = error_of(host, "nolocales")
    assert error.startswith(f"register_i18n: FileNotFoundError: the folder '{package / 'locales'}' does not exist"), error
    assert 'a locales/ folder must be package data: [tool.setuptools.package-data] <package> = ["locales/*.json"] in pyproject.toml' in error
    assert error.count("must be package data") == 1, error  # the host adds no second advice


async def test_a_missing_page_file_is_said_to_be_package_data(skald, tmp_path):
    package = a_package(tmp_path)
    host = await skald.start(plugins=[WithoutPage(package)])

    error = error_of(host, "nopage")
    assert error.startswith("register_routes: FileNotFoundError: [Errno 2] No such file or directory"), error
    assert error.endswith(
        ' (a file the plugin reads from its package must be package data:'
        ' [tool.setuptools.package-data] skald_notekeep = ["page.js"] in pyproject.toml)'
    ), error


def test_from_folder_names_a_folder_that_is_not_there(tmp_path):
    try:
        I18nBundle.from_folder("x", tmp_path / "locales")
    except FileNotFoundError as exc:  # still a FileNotFoundError: code catching it keeps working
        assert "must be package data" in str(exc)
    else:
        raise AssertionError("no FileNotFoundError")
