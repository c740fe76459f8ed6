"""The contract documents itself and is tested (STYLE.md "Hooks"): each hookspec says when
it is called and since which spec version; each hook is exercised by some test."""

from __future__ import annotations

import inspect
import re
import warnings
from pathlib import Path

from packaging.version import Version

import skald_hookspecs
from skald_hookspecs import PROJECT_NAME, SPEC_VERSION, hookspecs

TESTS = Path(__file__).resolve().parents[1]

#: Hooks the host calls today: each must be exercised by a test, no exceptions.
CALLED_BY_THE_HOST = {"plugin_info", "startup", "shutdown", "register_i18n"}

#: Hooks no feature exercises yet. Keep this list honest: a hook leaves it when a test
#: starts exercising it (the test below fails until it is removed from here).
NOT_YET_EXERCISED: set[str] = set()

#: Words that say *when* a hook runs ("Called once per plugin at load", "The plugin was
#: enabled", "A member saved ...", "the host is stopping").
WHEN = re.compile(r"\b(called|calls|when|whenever|at load|at boot|at start|was enabled|was disabled|is stopping|saved)\b", re.IGNORECASE)
SINCE = re.compile(r"\bSince (\d+\.\d+)\b")


def hookspec_functions() -> dict[str, object]:
    return {
        name: fn
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, f"{PROJECT_NAME}_spec")
    }


HOOKS = sorted(hookspec_functions())


def test_the_contract_defines_the_hooks_the_host_calls():
    assert len(HOOKS) >= 10
    assert CALLED_BY_THE_HOST <= set(HOOKS)


def test_every_hookspec_docstring_says_since_which_spec_version():
    offenders = []
    for hook, fn in sorted(hookspec_functions().items()):
        since = SINCE.search(inspect.getdoc(fn) or "")
        if not since or Version(since.group(1)) > Version(SPEC_VERSION):
            offenders.append(hook)
    assert offenders == [], f"no 'Since <spec version>' (or a later one than SPEC_VERSION) in: {', '.join(offenders)}"


def test_every_hookspec_docstring_says_when_it_is_called():
    undocumented = [hook for hook, fn in sorted(hookspec_functions().items()) if len(inspect.getdoc(fn) or "") < 40]
    assert undocumented == [], f"undocumented hooks: {', '.join(undocumented)}"
    no_timing = [hook for hook, fn in sorted(hookspec_functions().items()) if not WHEN.search(inspect.getdoc(fn) or "")]
    assert no_timing == [], (
        f"these hookspec docstrings do not say when the hook is called: {', '.join(no_timing)} "
        "(e.g. 'Called once per plugin at load, enabled or not.')"
    )


def test_docstring_checks_tell_documented_from_undocumented():
    """The control for the two tests above."""
    assert not WHEN.search("Contribute LLM tools: call register(Tool(...)) for each. Since 1.0.")
    assert WHEN.search("Called once per plugin at load. Since 1.0.")
    assert SINCE.search("Called once per plugin at load. Since 1.0.").group(1) == "1.0"
    assert not SINCE.search("Called once per plugin at load, since the host started.")


def exercising_sources() -> str:
    """Every test source except this file, which names every hook by construction."""
    return "\n".join(
        path.read_text(encoding="utf-8") for path in sorted(TESTS.rglob("*.py")) if path.resolve() != Path(__file__).resolve()
    )


def exercised(hook: str, sources: str) -> bool:
    """A hook is exercised where a test implements it (``def hook(``) or asks the host
    to call it by name (``"hook"``)."""
    return re.search(rf"\bdef\s+{hook}\s*\(|[\"']{hook}[\"']", sources) is not None


def test_hooks_the_host_calls_are_exercised_by_tests():
    sources = exercising_sources()
    untested = sorted(h for h in CALLED_BY_THE_HOST if not exercised(h, sources))
    assert untested == [], f"the host calls these hooks but no test exercises them: {', '.join(untested)}"


def test_every_other_hook_is_exercised_or_listed_as_not_yet():
    """A new hook comes with a test, or is listed in NOT_YET_EXERCISED for all to see."""
    assert NOT_YET_EXERCISED <= set(HOOKS), "NOT_YET_EXERCISED names a hook the contract does not define"
    sources = exercising_sources()
    missing = {h for h in HOOKS if not exercised(h, sources)}
    if missing:
        warnings.warn(f"hooks no test exercises yet: {', '.join(sorted(missing))}", stacklevel=1)
    if NOT_YET_EXERCISED - missing:
        warnings.warn(f"now exercised, prune from NOT_YET_EXERCISED: {', '.join(sorted(NOT_YET_EXERCISED - missing))}", stacklevel=1)
    unlisted = sorted(missing - NOT_YET_EXERCISED)
    assert unlisted == [], f"no test exercises these hooks and they are not listed as pending: {', '.join(unlisted)}"


def test_exercise_scan_recognises_impls_and_calls():
    assert exercised("startup", "    @hookimpl\n    async def startup(self, host):\n")
    assert exercised("register_tools", 'await manager.collect("register_tools", validate)')
    assert not exercised("startup", "the startup of the host")
    assert not exercised("register_tool", "def register_tools(register):")


def test_spec_version_parses_as_a_version():
    version = Version(SPEC_VERSION)
    assert version.release[0] >= 1
    assert str(version) == SPEC_VERSION
    assert skald_hookspecs.SPEC_VERSION is SPEC_VERSION
