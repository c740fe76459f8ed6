"""Shared pieces of the durability tests: a real ``skald serve`` subprocess, the HTTP
steps every scenario repeats, stdlib readers of system.db, and the on-disk secret scan.

The server runs exactly as in production (Hypercorn, file logging on, RLIMIT_CORE 0),
with the Argon2id floor and, when a test asks, ``SKALD_FAULT_CRASH_AT`` armed so the
process SIGKILLs itself at a named point.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable

import httpx

from skald_host.core.identity.crypto import KDF_FLOOR, KeyDerivation, SealedKey
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database, MigrationSet
from skald_host.testing import SkaldClient

ADMIN_PASSWORD = "admin passphrase for durability tests"

#: The Argon2id floor (the cheapest cost the host accepts); the KDF itself is real.
KDF_ENV = {"SKALD_KDF_MEMORY_KIB": "19456", "SKALD_KDF_TIME_COST": "2", "SKALD_KDF_PARALLELISM": "1"}

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


@asynccontextmanager
async def upgraded_from(path: Path, migrations: MigrationSet, version: int, older_rows: Callable[[Any], Any], *, key: bytes | None = None) -> AsyncIterator[Database]:
    """A file as the release before step ``version`` of ``migrations`` wrote it
    (``older_rows(conn)`` ran on it then), opened by this release: the upgrade under test.
    Open for the block, closed after it."""
    old = await Database.open(path, key=key, migrations=migrations.before(version), create=True)
    try:
        await old.transaction(older_rows)
    finally:
        await old.close()
    db = await Database.open(path, key=key, migrations=migrations)
    try:
        assert db.schema_version == migrations.latest >= version
        yield db
    finally:
        await db.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def refused_serve(data_dir: Path, port: int) -> tuple[str, str]:
    """``skald serve`` that must refuse to start: its one ``cannot start`` line, and its
    whole output (exit code 1, no traceback in it)."""
    env = {**os.environ, "SKALD_DATA_DIR": str(data_dir), "SKALD_HOST": "127.0.0.1", "SKALD_PORT": str(port)}
    done = subprocess.run([sys.executable, "-m", "skald_host", "serve"], env=env, capture_output=True, text=True, timeout=120)
    output = done.stderr + done.stdout
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    lines = [line for line in done.stderr.splitlines() if line.startswith("cannot start")]
    assert len(lines) == 1, output
    return lines[0], output


def server_env(tmp_dir: Path, crash_at: str | None = None) -> dict[str, str]:
    """The parent's environment without any SKALD_* setting, plus the KDF floor, a
    private TMPDIR (scanned by the B1 test) and the armed crash point."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    env.update(KDF_ENV)
    env["TMPDIR"] = env["SQLITE_TMPDIR"] = str(tmp_dir)
    env["PYTHONUNBUFFERED"] = "1"
    if crash_at:
        env["SKALD_FAULT_CRASH_AT"] = crash_at
    return env


class ServerProcess:
    """One ``python -m skald_host serve`` process on a free port of 127.0.0.1."""

    def __init__(
        self, data_dir: Path, work_dir: Path, name: str, crash_at: str | None = None, extra_env: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.work_dir = work_dir
        self.name = name
        self.crash_at = crash_at
        self.extra_env = extra_env or {}
        self.tmp_dir = work_dir / "tmp"
        self.output_path = work_dir / f"{name}.out"  # stdout+stderr, outside the data dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._clients: list[SkaldClient] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def output(self) -> str:
        try:
            return self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    async def start(self) -> "ServerProcess":
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):  # another process may grab the port between probe and bind
            self.port = free_port()
            with open(self.output_path, "ab") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "skald_host", "serve", "--data-dir", str(self.data_dir), "--port", str(self.port)],
                    cwd=self.work_dir,
                    env={**server_env(self.tmp_dir, self.crash_at), **self.extra_env},
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C of pytest does not reach it; we kill it ourselves
                )
            if await self._wait_healthy():
                return self
            if "address already in use" in self.output.lower() and attempt < 2:
                continue
            self.kill()
            raise RuntimeError(f"{self.name} did not become healthy on {self.url}:\n{self.output[-4000:]}")
        raise AssertionError("unreachable")

    async def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
            while time.monotonic() < deadline:
                if not self.running:
                    return False
                try:
                    response = await http.get(f"{self.url}/health")
                    if response.status_code == 200 and response.json().get("status") == "ok":
                        return True
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        return False

    def client(self) -> SkaldClient:
        client = SkaldClient(self.url)
        self._clients.append(client)
        return client

    async def login(self, username: str, password: str, *, bearer: bool = False) -> SkaldClient:
        client = self.client()
        response = await client.login(username, password, bearer=bearer)
        assert response.status_code == 200, response.text
        return client

    async def wait_exit(self, timeout: float = STOP_TIMEOUT) -> int:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} (pid {self.pid}) still runs after {timeout:g} s")
            await asyncio.sleep(0.02)
        return self.proc.returncode

    async def terminate(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, as a service manager stops it; the exit code."""
        assert self.proc is not None
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
        return await self.wait_exit(timeout)

    def kill(self) -> int | None:
        """SIGKILL if still running (idempotent); the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a zombie would be a kernel problem
                pass
        return self.proc.returncode

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients.clear()
        self.kill()


class Servers:
    """The ``servers`` fixture: starts server processes on one data dir and kills every
    one of them at teardown, whatever the test did."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.data_dir = tmp_path / "data"
        self._started: list[ServerProcess] = []

    async def start(self, crash_at: str | None = None, extra_env: dict[str, str] | None = None) -> ServerProcess:
        server = ServerProcess(self.data_dir, self.tmp_path, f"server-{len(self._started) + 1}", crash_at, extra_env)
        self._started.append(server)
        return await server.start()

    @property
    def outputs(self) -> list[Path]:
        return [s.output_path for s in self._started if s.output_path.exists()]

    async def close(self) -> None:
        for server in self._started:
            await server.aclose()


def cli_setup(data_dir: Path, work_dir: Path, username: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    """``skald setup --password-stdin``: the terminal path to the first admin."""
    work_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "skald_host", "setup", "--data-dir", str(data_dir), "--username", username, "--password-stdin"],
        input=f"{password}\n".encode(),
        cwd=work_dir,
        env=server_env(work_dir),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")


# -- HTTP steps -------------------------------------------------------------------------


async def setup_admin(server: ServerProcess, username: str = "admin", password: str = ADMIN_PASSWORD) -> SkaldClient:
    """First-run setup over HTTP; the returned client is the admin's logged-in session."""
    client = server.client()
    response = await client.post("/api/setup", json={"username": username, "password": password})
    assert response.status_code == 201, response.text
    client.csrf_token = response.json()["csrf_token"]
    client.member = response.json()["member"]
    return client


async def create_member(admin: SkaldClient, username: str, password: str, **fields: Any) -> str:
    response = await admin.post("/api/admin/members", json={"username": username, "password": password, **fields})
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def put_settings(client: SkaldClient, values: dict[str, Any]) -> dict[str, Any]:
    response = await client.put("/api/me/settings", json=values)
    assert response.status_code == 200, response.text
    return response.json()["settings"]


async def get_settings(client: SkaldClient) -> dict[str, Any]:
    response = await client.get("/api/me/settings")
    assert response.status_code == 200, response.text
    return response.json()["settings"]


async def crash_during(server: ServerProcess, request: Any) -> None:
    """Await ``request`` (a coroutine the armed server dies in) and the SIGKILL."""
    try:
        response = await request
    except httpx.TransportError:
        pass
    else:
        raise AssertionError(f"{server.name} answered {response.status_code} instead of crashing: {response.text}")
    assert await server.wait_exit() == -signal.SIGKILL, server.output[-4000:]


# -- reading the data dir from outside --------------------------------------------------


def database_dir(data_dir: Path) -> Path:
    return data_dir / "database"


def owner_file(data_dir: Path, member_id: str) -> Path:
    return database_dir(data_dir) / f"{member_id}.db"


def quarantined(data_dir: Path, member_id: str) -> list[Path]:
    """Main files (not sidecars) in database/quarantine/ that came from this member."""
    qdir = database_dir(data_dir) / "quarantine"
    if not qdir.is_dir():
        return []
    return sorted(p for p in qdir.iterdir() if p.name.startswith(f"{member_id}.") and p.name.endswith(".db"))


def owner_files(data_dir: Path) -> set[str]:
    """Member ids that have an owner file in database/."""
    return {p.stem for p in database_dir(data_dir).glob("*.db") if p.name != "system.db"}


def _registry(data_dir: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{(database_dir(data_dir) / 'system.db').absolute().as_uri()}?mode=ro", uri=True)


def registry_ids(data_dir: Path) -> dict[str, str]:
    """username -> member id, read with stdlib sqlite3 (system.db is plain by design)."""
    conn = _registry(data_dir)
    try:
        return dict(conn.execute("SELECT username, id FROM users"))
    finally:
        conn.close()


def sealed_record(data_dir: Path, member_id: str) -> str:
    conn = _registry(data_dir)
    try:
        row = conn.execute("SELECT credentials FROM users WHERE id = ?", (member_id,)).fetchone()
    finally:
        conn.close()
    assert row is not None, f"no registry row for {member_id}"
    return row[0]


def user_version(path: Path) -> int:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


async def member_dek(data_dir: Path, member_id: str, password: str) -> bytes:
    """The member's DEK, unsealed from system.db as the host does it at login."""
    return await KeyDerivation(KDF_FLOOR).unseal(password, member_id, SealedKey.from_json(sealed_record(data_dir, member_id)))


class WriteLock:
    """The write lock of a member's own file, held from the test process: the server's
    next commit to it waits (its busy timeout is 5 s) until ``release``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._taken = threading.Event()
        self._release = threading.Event()
        self._holding: asyncio.Future[None] | None = None

    async def take(self) -> None:
        def hold(conn: Any) -> None:  # inside BEGIN IMMEDIATE: the lock is ours
            self._taken.set()
            self._release.wait(30)

        self._holding = asyncio.ensure_future(self.db.transaction(hold))
        while not self._taken.is_set():
            await asyncio.sleep(0.005)

    async def release(self) -> None:
        self._release.set()
        if self._holding is not None:
            await self._holding


def install_distribution(site: Path, name: str, entry_point: str, source: str) -> None:
    """A throwaway plugin distribution ``skald-<name>`` (module ``skald_<name>``, its
    ``__init__.py`` being ``source``) under ``site``, found through the ``skald.plugins``
    entry point ``entry_point`` by a server whose path holds ``site``."""
    package, info = site / f"skald_{name}", site / f"skald_{name}-1.0.dist-info"
    for directory in (package, info):
        directory.mkdir(parents=True)
    (package / "__init__.py").write_text(source)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: skald-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[skald.plugins]\n{entry_point} = skald_{name}\n")
    (info / "RECORD").write_text("")


def request_log(data_dir: Path) -> list[tuple[str, str]]:
    """(model, status) of every row of the request log, oldest first, read beside the
    running server."""
    conn = _registry(data_dir)
    try:
        return conn.execute("SELECT model, status FROM llm_requests ORDER BY created_at").fetchall()
    finally:
        conn.close()


def request_entries(data_dir: Path) -> list[tuple[str, str | None]]:
    """(status, catalog entry id) of every row of the request log, oldest first."""
    conn = _registry(data_dir)
    try:
        return conn.execute("SELECT status, model_id FROM llm_requests ORDER BY created_at").fetchall()
    finally:
        conn.close()


async def read_owner_file(path: Path, dek: bytes | None) -> tuple[dict[str, str], str]:
    """(settings as stored, integrity result) of a closed owner file, opened in-process."""
    db = await Database.open(path, key=dek, migrations=OWNER_MIGRATIONS)
    try:
        rows = await db.run(lambda c: c.execute("SELECT key, value FROM member_settings").fetchall())
        return {r[0]: r[1] for r in rows}, await db.integrity_check()
    finally:
        await db.close()


# -- the secret scan (B1) ---------------------------------------------------------------


def _base64_fragments(data: bytes) -> set[bytes]:
    """The part of base64(data) that is the same whatever bytes precede or follow it, at
    each of the 3 alignments, in the standard and the URL-safe alphabet."""
    fragments: set[bytes] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data + b"\0\0\0")
        start = -(-8 * shift // 6)  # first character made of data bits only
        end = (8 * (shift + len(data))) // 6  # past the last one
        fragment = encoded[start:end]
        fragments.add(fragment)
        fragments.add(fragment.replace(b"+", b"-").replace(b"/", b"_"))
    return fragments


def text_forms(text: str) -> set[bytes]:
    """UTF-8, UTF-16-LE/BE, and base64 of the UTF-8 bytes at every alignment."""
    raw = text.encode("utf-8")
    return {raw, text.encode("utf-16-le"), text.encode("utf-16-be"), *_base64_fragments(raw)}


def key_forms(key: bytes) -> set[bytes]:
    """A raw key: its bytes, its hex (both cases, also as UTF-16) and its base64."""
    forms = {key, *_base64_fragments(key)}
    for hexed in (key.hex(), key.hex().upper()):
        forms |= text_forms(hexed)
    return forms


def files_under(*roots: Path) -> list[Path]:
    return sorted(p for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def scan(paths: Iterable[Path], secrets: dict[str, set[bytes]]) -> list[tuple[str, str]]:
    """Every (file, secret name) where some form of the secret occurs."""
    hits = []
    for path in paths:
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # a -shm or -wal removed while we listed
            continue
        for name, forms in secrets.items():
            if any(form in data for form in forms):
                hits.append((str(path), name))
    return hits
