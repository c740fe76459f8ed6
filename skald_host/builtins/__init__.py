"""The host's own features, written as plugins through the same hooks external
plugins use (STYLE.md "Built-ins are plugins"), like Datasette's default plugins."""

BUILTIN_PLUGINS: tuple[str, ...] = ("skald_host.builtins.strings", "skald_host.builtins.agent_tools", "skald_host.builtins.memory_tools", "skald_host.builtins.fs_tools", "skald_host.builtins.exec_tool", "skald_host.builtins.sandbox_docker", "skald_host.builtins.sandbox_bwrap", "skald_host.builtins.tts_espeak")
