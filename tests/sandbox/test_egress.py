"""Checks E4 and F2 with ``sandbox.network`` on: a Docker sandbox reaches the public
internet and nothing else — not the host (its gateway, its own addresses), not the
metadata address, not private ranges, not another member's sandbox — and bubblewrap,
which has no egress filter, keeps its commands off every network.

The "internet" is simulated on this machine: a network namespace behind a veth pair
holds 203.0.113.7 (a documentation address, not blocked: the positive control that
proves the path works), 169.254.169.254 and 10.77.0.1, routed from the host, so a
packet to them is forwarded as it would be to a real remote host. The host's end of
the pair gets a public-looking address of the host's own (203.0.113.8): the host's
addresses are delivered through INPUT, never FORWARD, and must be refused as well."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from skald_hookspecs.sandbox import SandboxUnavailable
from skald_host.builtins.sandbox_docker import (
    GATEWAY,
    RULE_COMMENT,
    container_name,
    egress_rules,
)
from skald_host.testing import SkaldHarness

from .support import start_box

FAR = "skald-egress-far"
VETH_HOST, VETH_FAR = "sbxe-h", "sbxe-f"
PUBLIC, METADATA, PRIVATE, HOST_OWN = "203.0.113.7", "169.254.169.254", "10.77.0.1", "203.0.113.8"
FAR_SERVER = (
    "import socket, sys\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(16); print('ready', flush=True)\n"
    "while True:\n    c, _ = s.accept(); c.close()\n"
)
PROBE = (
    "import socket, sys\n"
    "port = int(sys.argv[1])\n"
    "for ip in sys.argv[2:]:\n"
    "    try:\n        socket.create_connection((ip, port), 2).close(); print(ip, 'connected')\n"
    "    except OSError as exc:\n        print(ip, 'refused', type(exc).__name__)\n"
)


def _probe(port: int, *ips: str) -> str:
    """A shell command that tries to connect to each ip and prints one line per ip."""
    code = base64.b64encode(PROBE.encode()).decode()
    return f"python3 -c \"import base64; exec(base64.b64decode('{code}'))\" {port} {' '.join(ips)}"


def _host_addresses() -> list[str]:
    listing = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True, check=True)
    return [line.split()[3].split("/")[0] for line in listing.stdout.splitlines()]


def _sh(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr.strip()}"


def _quiet(*argv: str) -> None:
    subprocess.run(argv, capture_output=True, timeout=15, check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


@pytest.fixture
def host_net_admin() -> None:
    if os.geteuid() != 0 or shutil.which("iptables") is None or shutil.which("ip") is None:
        reason = "the egress tests need root, iptables and ip (iproute2) on the host"
        print(f"\nSKIPPING: {reason}", file=sys.stderr)
        pytest.skip(reason)


@pytest.fixture
def controls(host_net_admin: None) -> Iterator[int]:
    """Listeners on one port at every control address; yields the port."""
    port = _free_port()
    far_server = None
    listener = socket.socket()
    stop = threading.Event()
    try:
        _sh("ip", "netns", "add", FAR)
        _sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_FAR)
        _sh("ip", "link", "set", VETH_FAR, "netns", FAR)
        _sh("ip", "addr", "add", "198.19.250.1/30", "dev", VETH_HOST)
        _sh("ip", "link", "set", VETH_HOST, "up")
        far = ("ip", "netns", "exec", FAR)
        _sh(*far, "ip", "addr", "add", "198.19.250.2/30", "dev", VETH_FAR)
        _sh(*far, "ip", "link", "set", VETH_FAR, "up")
        _sh(*far, "ip", "link", "set", "lo", "up")
        for ip in (PUBLIC, METADATA, PRIVATE):
            _sh(*far, "ip", "addr", "add", f"{ip}/32", "dev", "lo")
            _sh("ip", "route", "add", f"{ip}/32", "via", "198.19.250.2")
        _sh(*far, "ip", "route", "add", "default", "via", "198.19.250.1")
        _sh("ip", "addr", "add", f"{HOST_OWN}/32", "dev", VETH_HOST)  # the host's own, public-looking
        far_server = subprocess.Popen([*far, sys.executable, "-c", FAR_SERVER, str(port)], stdout=subprocess.PIPE, text=True)
        assert far_server.stdout is not None and far_server.stdout.readline().strip() == "ready"
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", port))  # the host itself: gateway, 127.0.0.1, 203.0.113.8, eth0
        listener.listen(16)
        listener.settimeout(0.2)

        def accept() -> None:
            while not stop.is_set():
                try:
                    listener.accept()[0].close()
                except OSError:
                    continue

        threading.Thread(target=accept, daemon=True).start()
        for ip in (PUBLIC, METADATA, PRIVATE, HOST_OWN, "127.0.0.1"):
            socket.create_connection((ip, port), 2).close()  # every control answers from the host
        yield port
    finally:
        stop.set()
        listener.close()
        if far_server is not None:
            far_server.kill()
            far_server.wait(5)
        for ip in (PUBLIC, METADATA, PRIVATE):
            _quiet("ip", "route", "del", f"{ip}/32", "via", "198.19.250.2")
        _quiet("ip", "link", "del", VETH_HOST)
        _quiet("ip", "netns", "del", FAR)


def _rules_installed() -> list[str]:
    listing = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    return [line for line in listing.splitlines() if f'--comment {RULE_COMMENT}' in line]


async def test_a_networked_docker_sandbox_reaches_only_the_public_internet(
    skald: SkaldHarness, docker_engine, controls: int,
):
    port = controls
    box = await start_box(skald, "docker", network=True)
    targets = list(dict.fromkeys([PUBLIC, METADATA, PRIVATE, HOST_OWN, GATEWAY, "127.0.0.1", *_host_addresses()]))
    result = await box.run(box.alice, _probe(port, *targets), timeout=30)
    assert result.exit_code is not None, result.output
    outcome = dict(line.split(" ", 1) for line in result.output.splitlines() if line.split(" ", 1)[0] in targets)
    assert outcome.pop(PUBLIC) == "connected", result.output  # positive control: the path works
    assert set(outcome) == set(targets) - {PUBLIC}, result.output
    assert all(v.startswith("refused") for v in outcome.values()), result.output
    attrs = docker_engine.containers.get(container_name(box.alice)).attrs
    assert list(attrs["NetworkSettings"]["Networks"]) == ["skald-sbx"]
    # Rules are installed once, however often a networked sandbox is ensured.
    await box.core.sandbox.remove(box.alice)
    await box.run(box.alice, "true")
    assert len(_rules_installed()) == len(egress_rules())


async def test_one_members_networked_sandbox_cannot_reach_anothers(skald: SkaldHarness, docker_engine, host_net_admin):
    box = await start_box(skald, "docker", network=True)
    port = _free_port()
    listen = (
        f"python3 -c \"import socket; s = socket.socket(); s.bind(('0.0.0.0', {port})); s.listen(1);"
        " s.settimeout(6); print('bob-listening', flush=True); s.accept(); print('accepted')\" 2>&1 | tail -1"
    )
    await box.run(box.bob, "true")
    bob_ip = docker_engine.containers.get(container_name(box.bob)).attrs["NetworkSettings"]["Networks"]["skald-sbx"]["IPAddress"]
    bob = asyncio.ensure_future(box.run(box.bob, listen, timeout=15))
    await asyncio.sleep(1.5)
    alice = await box.run(box.alice, _probe(port, bob_ip), timeout=15)
    assert f"{bob_ip} refused" in alice.output, alice.output
    assert "accepted" not in (await bob).output


async def test_without_iptables_a_networked_sandbox_refuses_to_start(
    skald: SkaldHarness, docker_engine, tmp_path, monkeypatch,
):
    monkeypatch.setenv("PATH", str(tmp_path))  # a real host without the iptables binary
    box = await start_box(skald, "docker", network=True)
    with pytest.raises(SandboxUnavailable, match="egress filter could not be installed"):
        await box.run(box.alice, "true")
    import docker.errors

    with pytest.raises(docker.errors.NotFound):  # refused before any container was made
        docker_engine.containers.get(container_name(box.alice))


async def test_bubblewrap_with_network_on_still_has_no_network(skald: SkaldHarness, bwrap_ready):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        box = await start_box(skald, "bubblewrap", network=True)
        port = listener.getsockname()[1]
        result = await box.run(
            box.alice,
            "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; " + _probe(port, "127.0.0.1", PUBLIC),
        )
    finally:
        listener.close()
    lines = result.output.splitlines()
    assert "network access needs the Docker backend" in lines[0], result.output
    assert [line for line in lines[1:] if " " not in line] == ["lo"], result.output  # the interfaces
    assert "127.0.0.1 refused" in result.output and f"{PUBLIC} refused" in result.output, result.output
