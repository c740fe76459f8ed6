"""A clean stop: SIGTERM ends a serving process promptly with exit code 0, every member
is locked and every session dies with the process (sessions live in RAM only)."""

from __future__ import annotations

import time

from skald_host.core.host import Skald, build_plugin_manager
from skald_host.core.schema import REGISTRY_MIGRATIONS
from skald_host.testing import test_settings as settings_in

from .helpers import (
    refused_serve,
    STOP_TIMEOUT,
    create_member,
    database_dir,
    get_settings,
    put_settings,
    setup_admin,
    user_version,
)

ALICE_PASSWORD = "alice logs in by cookie 4"
BOB_PASSWORD = "bob logs in by bearer 6"


async def test_sigterm_stops_within_10_s_and_a_restart_ends_every_session(servers):
    data_dir = servers.data_dir
    server = await servers.start()
    admin = await setup_admin(server)
    await create_member(admin, "alice", ALICE_PASSWORD)
    await create_member(admin, "bob", BOB_PASSWORD)
    alice = await server.login("alice", ALICE_PASSWORD)
    bob = await server.login("bob", BOB_PASSWORD, bearer=True)
    await put_settings(alice, {"who": "alice"})
    await put_settings(bob, {"who": "bob"})
    status = await admin.get("/api/admin/status")
    assert status.json()["members_unlocked"] == 3

    began = time.monotonic()
    assert await server.terminate(timeout=STOP_TIMEOUT) == 0, server.output[-4000:]
    assert time.monotonic() - began < 10
    log = (data_dir / "logs" / "skald.log").read_text()
    lines = log.splitlines()
    assert any(line.endswith("skald core stopped") for line in lines)
    assert any(line.endswith("skald_host.server: skald stopped") for line in lines)
    for member in (alice, bob):
        assert f"member {member.member['id']} locked" in log
    assert user_version(database_dir(data_dir) / "system.db") == REGISTRY_MIGRATIONS.latest
    # No socket left in the stopped data dir (shutil.copytree of it failed on one).
    assert not (data_dir / "control.sock").exists(), sorted(p.name for p in data_dir.iterdir())

    restarted = await servers.start()
    for old in (admin, alice, bob):
        client = restarted.client()  # the same credentials, sent to the new process
        client.cookies, client.bearer, client.csrf_token = dict(old.cookies), old.bearer, old.csrf_token
        assert client.session_token == old.session_token
        assert (await client.get("/api/auth/session")).status_code == 401
    alice = await restarted.login("alice", ALICE_PASSWORD)
    assert await get_settings(alice) == {"who": "alice"}
    assert await restarted.terminate() == 0


async def test_core_stop_locks_every_member_and_revokes_every_session(tmp_path):
    settings = settings_in(tmp_path / "data")
    core = await Skald.start(settings, build_plugin_manager(settings, use_entry_points=False))
    try:
        for name in ("alice", "bob"):
            await core.users.register(name, f"{name} has a long passphrase")
        logins = [await core.auth.login(n, f"{n} has a long passphrase", "127.0.0.1") for n in ("alice", "bob")]
        ids = [result.member.id for result in logins]
        assert sorted(core.users.unlocked_ids) == sorted(ids)
        owners = [core.users.owner_db(member_id) for member_id in ids]
    finally:
        await core.stop()
    assert core.users.unlocked_ids == []
    assert all(owner is not None and owner.closed for owner in owners)
    assert all(core.auth.sessions.resolve(result.token) is None for result in logins)
    assert core.registry.closed


async def test_a_stop_closes_open_sockets_at_once_with_going_away_and_no_traceback(servers):
    """An open browser tab must not hold the stop for Hypercorn's graceful timeout and
    then be cut (1006) with a CancelledError traceback in the log: the socket is told
    the server is going away (1001), and the browser reconnects to the next process."""
    from websockets.exceptions import ConnectionClosed

    server = await servers.start()
    admin = await setup_admin(server)
    async with admin.ws() as socket:
        assert await server.terminate(timeout=STOP_TIMEOUT) == 0, server.output[-4000:]
        try:
            while True:
                await socket.recv()
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 1001, closed
    assert "Traceback" not in server.output and " ERROR " not in server.output, server.output[-4000:]


def test_only_a_cancelled_connection_at_shutdown_is_kept_out_of_the_error_log(caplog):
    """Python 3.11's start_server logs a connection task cancelled at shutdown as an
    error; that one case is quiet, any other loop error still reaches the log."""
    import asyncio
    import logging

    from skald_host.server import _quiet_cancelled_connections

    loop = asyncio.new_event_loop()
    try:
        class Handle:
            def __repr__(self) -> str:
                return "<Handle StreamReaderProtocol.connection_made.<locals>.callback(<Task cancelled>)>"

        with caplog.at_level(logging.DEBUG):
            _quiet_cancelled_connections(loop, {"message": "Exception in callback", "exception": asyncio.CancelledError(), "handle": Handle()})
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
            _quiet_cancelled_connections(loop, {"message": "Exception in callback", "exception": RuntimeError("real"), "handle": Handle()})
            assert [r for r in caplog.records if r.levelno >= logging.ERROR and "Exception in callback" in r.getMessage()]
    finally:
        loop.close()


def test_a_port_in_use_is_one_line_and_starts_nothing(tmp_path):
    """Found by a crash-kill probe: ``skald serve`` on a taken port printed a whole
    traceback after starting the core and its plugins."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line, output = refused_serve(tmp_path / "data", port)
    assert line == (f"cannot start: cannot listen on 127.0.0.1:{port}: Address already in use"
                    " (is another server there? choose another port with --port or SKALD_PORT)")
    assert "skald core started" not in output
