"""Every refusal the API sends carries a code, so the shell says it in the reader's
language: an ``ApiError`` without ``code=`` answered ``http_400`` and a German member
read the server's English ("path leaves its folder") in a German page."""

from __future__ import annotations

import ast
from pathlib import Path

from skald_host.builtins.strings import LOCALES
from skald_hookspecs import I18nBundle

ROOT = Path(__file__).resolve().parents[2]

#: ``ApiError(...)`` calls that may go without ``code=``, as "path:function": none yet.
#: An entry needs a reason here (say, an answer no member or admin can reach).
WITHOUT_CODE: dict[str, str] = {}


def _without_code(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, innermost enclosing function) of each ``ApiError(...)`` or
    ``error_response(...)`` call in ``tree`` that gives no ``code=`` (a ``**kwargs``
    passes one through, and is checked where it is made)."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            callee = node.func
            name = callee.id if isinstance(callee, ast.Name) else callee.attr if isinstance(callee, ast.Attribute) else None
            if name in ("ApiError", "error_response") and not any(k.arg in ("code", None) for k in node.keywords):
                found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def _calls_without_code() -> list[str]:
    found = set()
    for path in sorted([*(ROOT / "skald_host").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]):
        relative = path.relative_to(ROOT)
        if "tests" in relative.parts:
            continue
        for line, function in _without_code(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if f"{relative}:{function}" not in WITHOUT_CODE:
                found.add(f"{relative}:{line} (in {function})")
    return sorted(found)


def test_every_api_error_in_the_source_names_its_code():
    assert _calls_without_code() == [], "ApiError(...) without code=: the shell shows its English text in every language"


def test_the_walk_finds_a_call_without_a_code():
    tree = ast.parse(
        "def f(exc):\n"
        "    raise ApiError(400, str(exc), field='to')\n"
        "def g():\n"
        "    raise ApiError(404, 'no such run', code='run_not_found')\n"
    )
    assert _without_code(tree) == [(2, "f")]


async def test_a_german_member_renaming_out_of_the_project_gets_a_code_with_german_words(skald):
    host = await skald.start()
    await host.admin()
    owner = await host.member("grete", locale="de")
    made = await owner.post("/api/projects", json={"slug": "notizen", "title": "Notizen"})
    assert made.status_code == 201, made.text
    base = f"/api/projects/{made.json()['id']}/files"
    assert (await owner.post(f"{base}/folder", json={"path": "a"})).status_code in (200, 201)

    out = await owner.post(f"{base}/rename", json={"from": "a", "to": "../b.txt"})
    assert out.status_code == 400
    assert (out.json()["code"], out.json()["field"]) == ("path_leaves_folder", "to")
    long_name = await owner.post(f"{base}/rename", json={"from": "a", "to": "ä" * 128})
    assert long_name.status_code == 400
    assert (long_name.json()["code"], long_name.json()["values"], long_name.json()["field"]) == ("path_component_too_long", {"limit": 255}, "to")

    german = (await owner.get("/api/i18n?locale=de")).json()["strings"]
    assert german["core.error.path_leaves_folder"] == "Dieser Pfad führt aus seinem Ordner hinaus; wähle einen Ort darin."
    assert german["core.error.path_component_too_long"].format(**long_name.json()["values"]).startswith(
        "Ein Datei- oder Ordnername ist zu lang: höchstens 255 Bytes")
    strings = I18nBundle.from_folder("core", LOCALES).strings
    assert strings["en"]["error.path_leaves_folder"] != strings["de"]["error.path_leaves_folder"]
