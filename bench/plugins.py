"""What installed plugins cost the host (issue 18's targets): cold start and idle memory of
``skald serve`` with 50 small installed plugins against none (start <= 1.15x, memory
<= 1.1x), and the import time of each in-tree plugin.

"Installed" is what the host sees of an installed distribution: a ``*.dist-info`` with a
``skald.plugins`` entry point and its module, on a path of its own (``PYTHONPATH``), so
both runs share this venv and differ only in those 50. Each generated plugin is what a
small real one is: ``plugin_info`` with a config field, a tool, a string bundle and a
page. Cold start is from ``exec`` to the first ``200`` of ``/health`` on a fresh data dir;
idle memory is the server's RSS a second later. The runs alternate, and the medians are
compared, so a machine busy with other work slows both alike.
"""

from __future__ import annotations

import compileall
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

PLUGINS = int(os.environ.get("SKALD_BENCH_PLUGINS", "50"))
ROUNDS = int(os.environ.get("SKALD_BENCH_PLUGIN_ROUNDS", "5"))
TARGET_START = 1.15
TARGET_MEMORY = 1.10
ROOT = Path(__file__).resolve().parents[1]

PLUGIN_SOURCE = '''"""A generated benchmark plugin."""
from skald_hookspecs import ConfigField, I18nBundle, PluginInfo, Tool, ToolError, WebPage, hookimpl

ID = "bench{n}"


@hookimpl
def plugin_info():
    return PluginInfo(id=ID, title="Bench {n}", description="A generated plugin.", spec=">=1.2,<2",
                      config_schema=(ConfigField("level", "integer", default={n}),))


async def run(args, ctx):
    if "x" not in args:
        raise ToolError("'x' is required")
    return str(args["x"])


@hookimpl
def register_tools(register):
    register(Tool(name=f"bench_{n}_echo", description="Echo x.", parameters={{"type": "object"}}, run=run))


@hookimpl
def register_i18n(register):
    register(I18nBundle(ID, {{"en": {{"title": "Bench"}}, "de": {{"title": "Bank"}}}}))


@hookimpl
def register_web_pages(register):
    register(WebPage("main", "Bench {n}", "page.js"))
'''


def install_fake_plugins(site: Path, count: int) -> None:
    site.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (site / f"skald_bench_{n}.py").write_text(PLUGIN_SOURCE.format(n=n))
        info = site / f"skald_bench_{n}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: skald-bench-{n}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[skald.plugins]\nbench{n} = skald_bench_{n}\n")
    compileall.compile_dir(site, quiet=1)  # as pip does at install: no plugin is compiled at boot


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cold_start(site: Path, data: Path) -> tuple[float, int, int]:
    """Seconds from exec to a healthy server, its idle RSS in bytes, and plugins loaded."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    env.update({"PYTHONPATH": str(site), "SKALD_DATA_DIR": str(data), "SKALD_PORT": str(port), "SKALD_HOST": "127.0.0.1"})
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "skald_host", "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None:
                raise RuntimeError(f"the server exited: {server.stderr.read().decode()[-2000:]}")
            if time.perf_counter() - started > 120:
                raise RuntimeError("the server did not answer within 120 s")
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        time.sleep(1.0)
        rss = psutil.Process(server.pid).memory_info().rss
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    counted = re.search(r"(\d+) plugin\(s\)", err.decode(errors="replace"))
    return elapsed, rss, int(counted.group(1)) if counted else -1


LOAD_PROBE = """
import asyncio, json, sys, tempfile, time
from pathlib import Path
import skald_host.web.app  # what `skald serve` has imported before it loads plugins
from skald_host.core.host import Skald, build_plugin_manager
from skald_host.testing.host import test_settings

async def main():
    settings = test_settings(Path(tempfile.mkdtemp()))
    started = time.perf_counter()
    manager = build_plugin_manager(settings)
    core = await Skald.start(settings, manager, start_plugins=False)  # load, then every register_* hook
    elapsed = time.perf_counter() - started
    await core.stop()
    print(json.dumps([elapsed, len(manager.statuses())]))

asyncio.run(main())
"""


def load_path_seconds(site: Path) -> tuple[float, int]:
    """In one process, without the server: discovering, importing and registering every
    plugin and starting the core (the part of a cold start that plugins add to)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    env["PYTHONPATH"] = str(site)
    done = subprocess.run([sys.executable, "-c", LOAD_PROBE], env=env, capture_output=True, text=True, check=True)
    elapsed, count = json.loads(done.stdout.strip().splitlines()[-1])
    return elapsed, count


def plugin_import_ms(module: str) -> float:
    """The import of ``module`` in a fresh interpreter that has imported the contract
    already (as the host has when it loads plugins): the plugin's own cost."""
    probe = (
        "import time, skald_hookspecs; t = time.perf_counter(); "
        f"import {module}; print((time.perf_counter() - t) * 1000)"
    )
    samples = []
    for _ in range(5):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        samples.append(float(done.stdout.strip()))
    return statistics.median(samples)


def in_tree_plugins() -> dict[str, str]:
    """Distribution folder → its entry-point module, for plugins/* and examples/*."""
    import tomllib

    found = {}
    for pyproject in sorted([*ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")]):
        project = tomllib.loads(pyproject.read_text())["project"]
        for value in project.get("entry-points", {}).get("skald.plugins", {}).values():
            found[str(pyproject.parent.relative_to(ROOT))] = value.split(":")[0]
    return found


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        empty, full = base / "none", base / "fifty"
        empty.mkdir()
        install_fake_plugins(full, PLUGINS)
        runs: dict[str, list[tuple[float, int]]] = {"none": [], "fifty": []}
        counts: dict[str, int] = {}
        cold_start(empty, base / "warm")  # the first exec warms the OS file cache for both
        for round_ in range(ROUNDS):
            for name, site in (("none", empty), ("fifty", full)) if round_ % 2 == 0 else (("fifty", full), ("none", empty)):
                elapsed, rss, loaded = cold_start(site, base / f"data-{name}-{round_}")
                runs[name].append((elapsed, rss))
                counts[name] = loaded
        loads: dict[str, list[float]] = {"none": [], "fifty": []}
        for round_ in range(max(ROUNDS, 5)):
            for name, site in (("none", empty), ("fifty", full)) if round_ % 2 == 0 else (("fifty", full), ("none", empty)):
                elapsed, counts[f"load-{name}"] = load_path_seconds(site)
                loads[name].append(elapsed)
    start = {k: statistics.median(e for e, _ in v) for k, v in runs.items()}
    memory = {k: statistics.median(r for _, r in v) for k, v in runs.items()}
    start_ratio, memory_ratio = start["fifty"] / start["none"], memory["fifty"] / memory["none"]
    print(f"skald serve, cold start to a healthy /health and idle RSS, median of {ROUNDS} runs each"
          f" (plugins the host loaded: {counts.get('none')} vs {counts.get('fifty')}):")
    print(f"  no extra plugins:   start {start['none']:.2f} s, memory {memory['none'] / 2**20:.1f} MiB")
    print(f"  {PLUGINS} small plugins:   start {start['fifty']:.2f} s, memory {memory['fifty'] / 2**20:.1f} MiB")
    print(f"  start  {start_ratio:.3f}x — target <= {TARGET_START}x: {'ok' if start_ratio <= TARGET_START else 'OVER'}")
    print(f"  memory {memory_ratio:.3f}x — target <= {TARGET_MEMORY}x: {'ok' if memory_ratio <= TARGET_MEMORY else 'OVER'}")
    load = {k: statistics.median(v) for k, v in loads.items()}
    added = load["fifty"] - load["none"]
    print(f"  the load path alone (discover, import, register, start the core; in process, median of {len(loads['none'])}):"
          f" {load['none'] * 1000:.0f} ms vs {load['fifty'] * 1000:.0f} ms,"
          f" +{added * 1000:.0f} ms for {PLUGINS} plugins ({added * 1000 / PLUGINS:.1f} ms each)")
    print("import time of each in-tree plugin (after the contract; median of 5 fresh interpreters):")
    for folder, module in in_tree_plugins().items():
        print(f"  {folder} ({module}): {plugin_import_ms(module):.1f} ms")
    print(json.dumps({"start_ratio": round(start_ratio, 3), "memory_ratio": round(memory_ratio, 3), "load_added_ms": round(added * 1000)}))
