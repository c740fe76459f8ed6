"""Skald's host: the Quart server, the core services and the built-in plugins."""

try:
    import skald_hookspecs  # noqa: F401  the contract every part of the host imports
except ModuleNotFoundError as exc:
    if exc.name != "skald_hookspecs":
        raise
    # A checkout an earlier version installed (one 'skald' distribution, before the
    # contract was its own) and then updated: its `skald` command ran the new code
    # without the contract, and ended in a bare traceback (an upgrade probe).
    raise ModuleNotFoundError(
        "skald_hookspecs (the plugin contract, distribution skald-hookspecs) is not installed in this"
        " Python environment. In a checkout an earlier version installed, run `make install` (or"
        " `make run`) once after updating: it installs the contract and removes the old 'skald'"
        " distribution.",
        name="skald_hookspecs",
    ) from None
