"""Every exception a route answers with ``ApiError.refusing`` carries a code where it is
raised, so the shell says it in the reader's language: one raised without ``code=``
answered ``http_400``, and a German member read the server's English ("a note needs a
name, e.g. 'index.md'") in a German page. The companion of
``test_refusals_all_have_codes.py``, which walks ``ApiError(...)`` itself."""

from __future__ import annotations

import ast
from pathlib import Path

from skald_host.builtins.strings import LOCALES
from skald_hookspecs import I18nBundle

ROOT = Path(__file__).resolve().parents[2]
ROUTES = ROOT / "skald_host" / "web" / "routes"

#: The exception types whose code may be left out where they are raised (it is
#: ``None`` then, and the answer ``http_<status>``): every ``raise X(...)`` of one of
#: them, or of a class derived from one, must say ``code=``.
CHECKED = {"Refusal", "ChatError", "QuestionError", "OwnerDatabaseUnavailable", "NoteAccessDenied", "PluginError"}

#: Types that name their code themselves (never ``None``), or are answered by a route
#: with a code of its own: a call without ``code=`` is fine. Each with why.
CODED_BY_CLASS = {
    "ChatForbidden": "its default code is agent_forbidden, the one thing it says",
    "UnknownVoice": "its __init__ gives tts_unknown_voice and the voice",
    "SpeechRefused": "code is a required keyword",
    "BackupError": "class code backup_failed, the operator's reason in its values",
    "UploadTooLarge": "the files route answers it by its limit: upload_too_large or home_full (routes/files.py _files_error)",
    "HookBlocked": "a PluginError about a plugin's hook, raised where the host calls a hook and recorded on the plugin's page",
    "ReturnedInsteadOfRegistering": "a PluginError of plugin loading (a register hook's return value), never raised in a request",
}

#: Types whose code is an argument by position: (index, keyword).
CODE_ARGUMENT = {"ConfigInvalid": (2, "why")}  # ConfigInvalid(field, reason, why): code config_<why>

#: Raise sites that may go without a code, as "path:function", each with the reason it
#: never reaches a route (so no member reads its text in the shell).
WITHOUT_CODE: dict[str, str] = {
    # The agent's file tools (builtins/fs_tools.py): their refusals go to the model, which
    # words them for the member; the web file routes use resolve, open_blob and uploads.
    "skald_host/core/files/ops.py:read_text": "read_file tool only",
    "skald_host/core/files/ops.py:write_text": "write_file tool only",
    "skald_host/core/files/ops.py:_write_host": "write_file tool only",
    "skald_host/core/files/ops.py:edit": "edit_file tool only",
    "skald_host/core/files/ops.py:search_file": "search tool only",
    "skald_host/core/files/ops.py:grep": "grep_files tool only",
    "skald_host/core/files/ops.py:_sandbox_write": "write_file tool only",
    "skald_host/core/files/ops.py:_read_host": "read_file / read_blob of the tools; the viewer (open_blob) streams without it",
    "skald_host/core/files/ops.py:_read_host_lines": "read_file tool only",
    "skald_host/core/files/ops.py:_list_host": "list_files tool only",
    "skald_host/core/files/ops.py:_grep_host": "grep_files tool only",
    # A question a tool asks (ask_user): refused to the tool, before any member sees it.
    "skald_host/core/agent/questions.py:check_fields": "ask_user tool only",
    "skald_host/core/agent/questions.py:ask": "ask_user tool only",
}

#: Functions whose ``PluginError`` is about a plugin's own code while it loads or
#: registers (its page and the log say it, in the operator's words): never a route.
PLUGIN_LOADING = {
    "skald_host/core/agent/tools.py", "skald_host/core/plugins/bundles.py", "skald_host/core/plugins/manager.py",
    "skald_host/core/sandbox/manager.py", "skald_host/core/system_agents/registry.py", "skald_host/core/system_agents/scheduler.py",
    "skald_host/core/tts/manager.py", "skald_host/core/channels/router.py", "skald_host/web/app.py",
    "skald_host/core/host.py:validate",  # _one(kind): a register hook's value
    "skald_host/core/plugins/catalog.py:validate_web_page", "skald_host/core/plugins/catalog.py:validate_config_set",
}


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _sources() -> dict[str, ast.AST]:
    trees = {}
    for path in sorted([*(ROOT / "skald_host").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]):
        relative = path.relative_to(ROOT)
        if "tests" not in relative.parts:
            trees[relative.as_posix()] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return trees


def _descendants(trees: dict[str, ast.AST], roots: set[str]) -> dict[str, str]:
    """Each class derived from one of ``roots`` (by name, through any depth) -> its root."""
    found = {name: name for name in roots}
    grown = True
    while grown:
        grown = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in found:
                    base = next((_name(b) for b in node.bases if _name(b) in found), None)
                    if base is not None:
                        found[node.name] = found[base]
                        grown = True
    return found


def _without_code(tree: ast.AST, types: set[str]) -> list[tuple[int, str, str]]:
    """(line, innermost function, type) of each ``raise T(...)`` in ``tree`` of a type in
    ``types`` that gives no code (a ``**values`` passes one through, and is checked
    where it is made; ``T.of(...)`` converts a coded one)."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc
            # ``raise _naming(FolderError(...))``: the exception made inside a helper call.
            while isinstance(call, ast.Call) and _name(call.func) not in types and len(call.args) == 1 and isinstance(call.args[0], ast.Call):
                call = call.args[0]
            if isinstance(call, ast.Call) and _name(call.func) in types:
                kind = _name(call.func)
                index, keyword = CODE_ARGUMENT.get(kind, (None, None))
                coded = any(k.arg in ("code", None, keyword) for k in call.keywords) or (index is not None and len(call.args) > index)
                if not coded:
                    found.append((node.lineno, function, kind))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def _raised_without_code(used: set[str] | None = None) -> list[str]:
    """Each raise site without a code that no allow-list entry covers; ``used`` gathers
    the entries that covered one."""
    trees = _sources()
    roots = _descendants(trees, CHECKED)
    types = set(roots) - set(CODED_BY_CLASS)
    used = set() if used is None else used
    found = set()
    for path, tree in trees.items():
        for line, function, kind in _without_code(tree, types):
            where = f"{path}:{function}"
            if where in WITHOUT_CODE:
                used.add(where)
                continue
            if roots[kind] == "PluginError" and (path in PLUGIN_LOADING or where in PLUGIN_LOADING):
                used.add(path if path in PLUGIN_LOADING else where)
                continue
            found.add(f"{path}:{line} {kind} (in {function})")
    return sorted(found)


def _refused_types() -> set[str]:
    """The exception types the routes pass to ``ApiError.refusing``: those of each
    ``except`` whose body calls it, and those ``_files_error`` tests with ``isinstance``."""
    names: set[str] = set()
    for path in ROUTES.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            refuses = any(isinstance(n, ast.Call) and _name(n.func) in ("refusing", "_files_error", "_refused", "chat_error") for n in ast.walk(node))
            if isinstance(node, ast.ExceptHandler) and node.type is not None and refuses:
                kinds = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
                names.update(_name(k) for k in kinds)
            if isinstance(node, ast.FunctionDef) and node.name == "_files_error":
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and _name(call.func) == "isinstance":
                        kinds = call.args[1].elts if isinstance(call.args[1], ast.Tuple) else [call.args[1]]
                        names.update(_name(k) for k in kinds)
    return names - {None}


#: Exceptions the routes catch more broadly than one of ours, and why that is covered.
BROAD = {
    "ValueError": "channels.py: set_home_source refuses with a coded Refusal (home_source_invalid)",
    "LookupError": "chat.py: answer_question's LookupError is QuestionGone, whose class names question_gone",
    "Exception": "files.py view_file: _files_error re-raises what is none of its coded types",
    "RequestEntityTooLarge": "answered as upload_too_large",
    "FileNotFoundError": "answered as file_not_found",
}


def test_every_type_a_route_refuses_is_one_this_walk_checks():
    trees = _sources()
    known = set(_descendants(trees, CHECKED)) | set(CODED_BY_CLASS) | set(BROAD) | {"BackupBusy", "TextTooLong", "TtsBusy", "NoVoice"}
    assert sorted(_refused_types() - known) == [], "a route refuses a new exception type: add it to CHECKED (or say why its code is never None)"


def test_every_refusal_a_route_answers_is_raised_with_its_code():
    assert _raised_without_code() == [], "raised without code=: the route answers http_<status> and the shell shows the English text"


def test_no_allowed_site_is_stale():
    used: set[str] = set()
    _raised_without_code(used)
    assert sorted(set(WITHOUT_CODE) - used) == [] and sorted(PLUGIN_LOADING - used) == []


def test_the_walk_finds_a_raise_without_a_code():
    tree = ast.parse(
        "def f(key):\n"
        "    raise NoteError('a note needs a name')\n"
        "def g():\n"
        "    raise NoteError('too long', code='note_key_too_long', limit=300)\n"
        "def h(name):\n"
        "    raise _naming(FolderError('x', field=name))\n"
        "def i(name):\n"
        "    raise ConfigInvalid(name, 'must be text', 'text')\n"
    )
    assert _without_code(tree, {"NoteError", "FolderError", "ConfigInvalid"}) == [(2, "f", "NoteError"), (6, "h", "FolderError")]


def test_the_codes_these_refusals_give_have_english_and_german_text():
    trees = _sources()
    types = set(_descendants(trees, CHECKED))
    strings = I18nBundle.from_folder("core", LOCALES).strings
    missing = set()
    for path, tree in trees.items():
        if not path.startswith("skald_host/"):
            continue  # a plugin's codes are its own bundle's
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and _name(node.exc.func) in types:
                for keyword in node.exc.keywords:
                    if keyword.arg == "code" and isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
                        missing.update(f"{locale}: error.{keyword.value.value}" for locale in ("en", "de")
                                       if f"error.{keyword.value.value}" not in strings[locale])
    assert sorted(missing) == []
