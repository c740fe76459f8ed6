"""The load-bearing boundaries of DESIGN.md "The shape", enforced rather than hoped for:

1. ``skald_hookspecs`` imports nothing from ``skald_host``; no plugin under ``plugins/``
   imports ``skald_host`` outside its tests. A plugin author depends on the contract only.
2. The headless core never imports Quart/Hypercorn (or any other HTTP framework).

Plus two house rules from STYLE.md: nothing loads plugins at import time, and code
stays domain-neutral (``supervision``, ``role``, never family words in identifiers).

Each checker is also run on a synthetic violation, so a scan that silently finds
nothing (wrong directory, wrong parser) fails too.
"""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "skald_host"
CONTRACT = ROOT / "skald_hookspecs" / "skald_hookspecs"  # the package inside its distribution folder
PLUGINS = ROOT / "plugins"

HTTP_FRAMEWORKS = ("quart", "hypercorn", "werkzeug", "flask")


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


# -- import scanning ----------------------------------------------------------------------


def imported_modules(source: str) -> list[tuple[int, str]]:
    """Every module an ``import``, ``from … import`` or ``import_module("…")`` names,
    wherever it sits (functions and ``TYPE_CHECKING`` blocks included)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def imports_of(package: str, files: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(path.anchor)}:{line}: {module}"
        for path in files
        for line, module in imported_modules(path.read_text(encoding="utf-8"))
        if module == package or module.startswith(package + ".")
    ]


def is_test_file(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return "tests" in parts or "test" in parts or path.name.startswith("test_") or path.name.endswith("_test.py") or path.name == "conftest.py"


def host_imports_in_plugins(plugins_root: Path) -> list[str]:
    """``skald_host`` imports in plugin code; a plugin's tests may use the test kit."""
    if not plugins_root.exists():
        return []
    files = [p for p in sorted(plugins_root.rglob("*.py")) if not is_test_file(p, plugins_root)]
    return imports_of("skald_host", files)


def test_import_scanner_finds_every_form_of_import(tmp_path):
    source = textwrap.dedent(
        """\
        import os, skald_host.core
        from skald_host.settings import Settings
        from . import sibling
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from skald_host import cli
        def later():
            import importlib
            return importlib.import_module("skald_host.web")
        """
    )
    modules = sorted(m for _, m in imported_modules(source))
    assert modules == sorted(["os", "skald_host.core", "skald_host.settings", "typing", "skald_host", "importlib", "skald_host.web"])
    path = tmp_path / "mod.py"
    path.write_text(source)
    assert len(imports_of("skald_host", [path])) == 4
    assert imports_of("skald_hostile", [path]) == []


def test_contract_files_import_nothing_from_the_host():
    files = sorted(CONTRACT.rglob("*.py"))
    assert CONTRACT / "hookspecs.py" in files and CONTRACT / "types.py" in files
    assert imports_of("skald_host", files) == []


def test_importing_the_contract_loads_no_host_module():
    output = run_python(
        """
        import json, pkgutil, importlib, sys
        import skald_hookspecs
        for module in pkgutil.walk_packages(skald_hookspecs.__path__, "skald_hookspecs."):
            importlib.import_module(module.name)
        print(json.dumps(sorted(m for m in sys.modules if m == "skald_host" or m.startswith("skald_host."))))
        """
    )
    assert json.loads(output) == []


def test_plugins_import_the_host_only_from_their_tests():
    assert host_imports_in_plugins(PLUGINS) == []


def test_plugin_checker_flags_host_imports_outside_tests(tmp_path):
    plugin = tmp_path / "plugins" / "widget"
    (plugin / "skald_widget").mkdir(parents=True)
    (plugin / "tests").mkdir()
    (plugin / "skald_widget" / "__init__.py").write_text("from skald_hookspecs import hookimpl\n")
    (plugin / "skald_widget" / "engine.py").write_text("from skald_host.core.host import Skald\n")
    (plugin / "skald_widget" / "late.py").write_text("def f():\n    import skald_host.settings\n")
    (plugin / "tests" / "test_widget.py").write_text("from skald_host.testing import SkaldHarness\n")
    (plugin / "tests" / "conftest.py").write_text("import skald_host\n")
    (plugin / "test_top.py").write_text("import skald_host\n")

    violations = host_imports_in_plugins(tmp_path / "plugins")

    assert len(violations) == 2
    assert any("engine.py:1: skald_host.core.host" in v for v in violations)
    assert any("late.py:2: skald_host.settings" in v for v in violations)


# -- the headless core ----------------------------------------------------------------------------

_TRACE_IMPORTS = """
import importlib, json, pkgutil, sys, traceback

FORBIDDEN = {forbidden!r}
culprits = {{}}


class Tracer:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in FORBIDDEN and top not in culprits:
            culprits[top] = [
                f"{{f.filename}}:{{f.lineno}}" for f in traceback.extract_stack() if "skald_host" in f.filename
            ]
        return None


sys.meta_path.insert(0, Tracer())
"""


def test_headless_core_imports_no_http_framework():
    output = run_python(
        _TRACE_IMPORTS.format(forbidden=HTTP_FRAMEWORKS)
        + textwrap.dedent(
            """
            import skald_host.core
            names = [m.name for m in pkgutil.walk_packages(skald_host.core.__path__, "skald_host.core.")]
            for name in names:
                importlib.import_module(name)
            loaded = sorted(m for m in sys.modules if m.partition(".")[0] in FORBIDDEN)
            print(json.dumps({"modules": names, "loaded": loaded, "culprits": culprits}))
            """
        )
    )
    report = json.loads(output)
    assert "skald_host.core.host" in report["modules"]
    assert "skald_host.core.plugins.manager" in report["modules"]
    assert report["loaded"] == [], report["culprits"]


def test_import_tracer_sees_an_http_framework_import():
    """The control: the same tracer does see the web layer pulling in Quart."""
    output = run_python(
        _TRACE_IMPORTS.format(forbidden=HTTP_FRAMEWORKS)
        + "import skald_host.web.app\nprint(json.dumps(sorted(culprits)))\n"
    )
    assert "quart" in json.loads(output)


# -- nothing loads plugins at import -------------------------------------------------------------


def test_importing_the_host_and_the_web_app_loads_no_plugin():
    output = run_python(
        """
        import importlib.metadata, json, sys
        import importlib_metadata

        asked = []
        for module in (importlib.metadata, importlib_metadata):
            original = module.entry_points

            def spy(*args, _original=original, **kwargs):
                asked.append(kwargs.get("group") or (args[0] if args else None))
                return _original(*args, **kwargs)

            module.entry_points = spy

        import pluggy
        import skald_host, skald_host.cli, skald_host.web.app, skald_host.core.host
        from skald_host.core.plugins import manager

        managers = [
            f"{name}.{attr}"
            for name, module in list(sys.modules.items())
            if name == "skald_host" or name.startswith("skald_host.")
            for attr, value in vars(module).items()
            if isinstance(value, (manager.PluginManager, pluggy.PluginManager))
        ]
        print(json.dumps({
            "asked": asked,
            "builtin_imported": "skald_host.builtins.strings" in sys.modules,
            "managers": managers,
            "web_app_imported": "skald_host.web.app" in sys.modules,
        }))
        """
    )
    report = json.loads(output)
    assert report["web_app_imported"] is True
    assert "skald.plugins" not in report["asked"]
    assert report["builtin_imported"] is False
    assert report["managers"] == []


# -- domain-neutral code ----------------------------------------------------------------------------

FAMILY_WORDS = re.compile(r"family|household|parent|child|minor", re.IGNORECASE)
#: Attributes of other people's APIs (``path.parent``, ``version_info.minor``) and pathlib's
#: ``mkdir(parents=True)`` keyword: not our vocabulary.
FOREIGN_ATTRIBUTES = {"parent", "parents", "minor"}
FOREIGN_KEYWORDS = {"parents"}
SQL_START = re.compile(r"^\s*(CREATE|INSERT|SELECT|UPDATE|DELETE|ALTER|DROP|WITH|REPLACE|PRAGMA)\s")  # our SQL is upper-case
SQL_TEXT_LITERAL = re.compile(r"'(?:[^']|'')*'")
SQL_COMMENT = re.compile(r"--[^\n]*")


def family_words_in_names(source: str) -> list[tuple[int, str]]:
    """NAME tokens only: strings (seed data, UI copy, docstrings) and comments may speak
    the product's language; identifiers may not."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in (tokenize.NL, tokenize.COMMENT)]
    found = []
    depth = 0
    for i, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        if token.type != tokenize.NAME or not FAMILY_WORDS.search(token.string):
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if before == "." and token.string in FOREIGN_ATTRIBUTES:
            continue
        if depth and after == "=" and token.string in FOREIGN_KEYWORDS:
            continue
        found.append((token.start[0], token.string))
    return found


def sql_statements(source: str) -> list[tuple[int, str]]:
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_START.match(node.value)
    ]


def family_words_in_sql(sql: str) -> list[str]:
    """Identifiers in a statement: text literals (``'Children'`` as a label) and comments
    are stripped first."""
    code = SQL_COMMENT.sub(" ", SQL_TEXT_LITERAL.sub("''", sql))
    return [word for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code) if FAMILY_WORDS.search(word)]


def python_files() -> list[Path]:
    return sorted(HOST.rglob("*.py")) + sorted(CONTRACT.rglob("*.py"))


def test_name_checker_flags_identifiers_but_not_strings_or_foreign_apis():
    source = textwrap.dedent(
        '''\
        """A family server."""  # docstrings may say it
        class ChildProfile:
            household_id = "Children"  # seed label
        def link(parent_member, path):
            path.mkdir(parents=True)
            return path.parent, sys.version_info.minor
        parent = 1
        '''
    )
    assert family_words_in_names(source) == [(2, "ChildProfile"), (3, "household_id"), (4, "parent_member"), (7, "parent")]


def test_sql_checker_flags_identifiers_but_not_labels():
    assert family_words_in_sql("CREATE TABLE guardians (id TEXT, child_id TEXT) -- minor note") == ["child_id"]
    assert family_words_in_sql("CREATE TABLE households (id TEXT)") == ["households"]
    assert family_words_in_sql("INSERT INTO roles (id, label) VALUES ('restricted', 'Children')") == []
    assert family_words_in_sql("INSERT INTO roles VALUES ('it''s a family', 'x')") == []
    assert sql_statements("Q = '''SELECT 1'''\nD = 'select your parent'\nX = 'Children'\n") == [(1, "SELECT 1")]


def test_identifiers_in_host_and_contract_are_domain_neutral():
    files = python_files()
    assert HOST / "core" / "host.py" in files and CONTRACT / "hookspecs.py" in files
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        for line, name in family_words_in_names(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_sql_identifiers_are_domain_neutral():
    schema_files = sorted((HOST / "core" / "schema").rglob("*.py"))
    schema_statements = [s for path in schema_files for s in sql_statements(path.read_text(encoding="utf-8"))]
    assert any("CREATE TABLE plugins" in sql for _, sql in schema_statements)  # the scan sees the schema
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {words}"
        for path in python_files()
        for line, sql in sql_statements(path.read_text(encoding="utf-8"))
        if (words := family_words_in_sql(sql))
    ]
    assert offenders == []
