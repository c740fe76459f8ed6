"""Check G1, scaled to CI: clients send messages with idempotency keys and retry
until acknowledged, while the server is SIGKILLed at random moments and restarted.
Every acknowledged message exists exactly once, an unacknowledged one at most once,
and the member's file passes its integrity checks."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import uuid

import httpx

from skald_host.core.storage import Database
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.testing import ScriptedModelServer, echo_last_user_message

from durability.helpers import Servers, create_member, member_dek, owner_file, registry_ids, setup_admin
from .support import API_KEY, MODEL_A, configure_models

CLIENTS, MESSAGES, KILLS = 3, 20, 3
MAX_MESSAGES = 300  # per client, however slow the kills are
PASSWORD = "alice's durable password"


async def test_every_acknowledged_message_exists_exactly_once_across_kills(tmp_path):
    servers = Servers(tmp_path)
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY, responder=echo_last_user_message) as model:
        try:
            server = await servers.start()
            admin = await setup_admin(server)
            await configure_models(admin, model)
            await create_member(admin, "alice", PASSWORD)
            alice = await server.login("alice", PASSWORD)
            conversation = (await alice.post("/api/conversations", json={})).json()["id"]
            current = {"server": server}
            acked: set[str] = set()
            sent: set[str] = set()
            retries = [0]
            rng = random.Random(20261130)

            kills_done = asyncio.Event()

            async def client(index: int) -> None:
                # At least MESSAGES each, and on until the last kill, so a fast host cannot
                # finish before the first kill and leave the test exercising nothing.
                session = None
                n = -1
                while (n := n + 1) < MESSAGES or (not kills_done.is_set() and n < MAX_MESSAGES):
                    key = f"g1-{index}-{n}-{uuid.uuid4().hex[:8]}"
                    sent.add(key)
                    while True:
                        try:
                            if session is None:
                                session = await current["server"].login("alice", PASSWORD)
                            response = await session.post(
                                f"/api/conversations/{conversation}/messages", json={"text": key, "idempotency_key": key}
                            )
                        except (httpx.TransportError, AssertionError, RuntimeError):
                            retries[0] += 1
                            session = None
                            await asyncio.sleep(0.2)
                            continue
                        if response.status_code == 202:
                            acked.add(key)
                            break
                        retries[0] += 1
                        session = None  # 401 after a restart: log in again and retry
                        await asyncio.sleep(0.1)
                    await asyncio.sleep(rng.uniform(0, 0.05))

            async def killer() -> None:
                for _ in range(KILLS):
                    await asyncio.sleep(rng.uniform(0.3, 1.0))
                    current["server"].kill()
                    current["server"] = await servers.start()
                kills_done.set()

            await asyncio.gather(killer(), *(client(i) for i in range(CLIENTS)))
            assert acked == sent  # every client got through in the end
            assert retries[0] > 0, "no send was interrupted by a kill: the test exercised nothing"

            alice = await current["server"].login("alice", PASSWORD)
            for _ in range(200):  # let the last turns and queued messages settle
                state = (await alice.get(f"/api/conversations/{conversation}?all=1")).json()  # every message, not the newest part
                if not state["running"] and not state["queued"]:
                    break
                await asyncio.sleep(0.1)
            contents = [m["content"] for m in state["messages"] if m["role"] == "user"]
            duplicates = sorted(k for k in sent if contents.count(k) > 1)
            missing = sorted(k for k in acked if contents.count(k) == 0)
            assert duplicates == [] and missing == [], (duplicates, missing)
            current["server"].kill()

            data_dir = current["server"].data_dir
            member_id = registry_ids(data_dir)["alice"]
            dek = await member_dek(data_dir, member_id, PASSWORD)
            db = await Database.open(owner_file(data_dir, member_id), key=dek, migrations=OWNER_MIGRATIONS, verify_pages=True)
            try:
                assert await db.integrity_check() == "ok"
                pragmas = await db.pragmas()
                assert pragmas["journal_mode"] == "wal" and pragmas["synchronous"] == 2
            finally:
                await db.close()
            registry = sqlite3.connect(data_dir / "database" / "system.db")
            assert registry.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            registry.close()
        finally:
            await servers.close()
