"""Schema upgrades keep what is already stored: a registry written at version 1 and an
owner file written at version 1 are opened with today's migrations plus one more test
step; every row survives, ``user_version`` moves to the new latest, and the member's
key still opens their file."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from skald_host.core.buses import Buses
from skald_host.core.identity.crypto import KDF_FLOOR, KeyDerivation
from skald_host.core.identity.users import UserManager
from skald_host.core.schema import OWNER_MIGRATIONS, REGISTRY_MIGRATIONS
from skald_host.core.storage import Database, DatabaseUnreadable, Migration, MigrationSet

from .helpers import user_version

PASSWORD = "a passphrase from version one"


def with_extra_step(migrations: MigrationSet, statement: str) -> MigrationSet:
    extra = Migration(migrations.latest + 1, "test: one more column", (statement,))
    return MigrationSet(migrations.bucket, migrations.steps + (extra,))


def first_version(migrations: MigrationSet) -> MigrationSet:
    return migrations.before(2)


async def test_registry_upgrade_keeps_members_and_their_sealed_keys(tmp_path, caplog):
    database_dir = tmp_path / "database"
    path = database_dir / "system.db"
    kdf = KeyDerivation(KDF_FLOOR)
    member_id = "0123456789abcdef0123456789abcdef"
    dek, sealed = await kdf.seal_new(PASSWORD, member_id)

    registry = await Database.open(path, key=None, migrations=first_version(REGISTRY_MIGRATIONS), create=True)
    # Plain SQL against the version-1 schema, which is never edited once released.
    await registry.transaction(
        lambda c: c.execute(
            "INSERT INTO users (id, username, display_name, role_id, encrypted, credential_kind, credentials)"
            " VALUES (?, 'alice', 'Alice', 'member', 1, 'sealed_dek', ?)",
            (member_id, sealed.to_json()),
        )
    )
    # A member deactivated before the upgrade (no file: never signed in).
    await registry.transaction(lambda c: c.execute(
        "INSERT INTO users (id, username, display_name, role_id, active, encrypted, credential_kind, credentials)"
        " VALUES ('inactive-member', 'bob', 'Bob', 'member', 0, 0, 'verifier', '{}')"
    ))
    await registry.close()
    owner = await Database.open(
        database_dir / f"{member_id}.db", key=dek, migrations=first_version(OWNER_MIGRATIONS), create=True
    )
    await owner.close()
    assert user_version(path) == 1
    before = _user_row(path, member_id)

    upgraded = with_extra_step(REGISTRY_MIGRATIONS, "ALTER TABLE users ADD COLUMN test_nickname TEXT")
    caplog.set_level("INFO", logger="skald_host.core.storage.migrations")
    registry = await Database.open(path, key=None, migrations=upgraded)
    try:
        assert registry.schema_version == upgraded.latest == REGISTRY_MIGRATIONS.latest + 1
        # Said in the log: from this start on, an earlier version refuses the data dir (upgrade probe).
        assert f"database {path.name} moved from schema version 1 to {upgraded.latest}" in caplog.text
        users = UserManager(registry, database_dir, kdf, Buses())
        member, unsealed = await users.verify_password("alice", PASSWORD)
        assert (member.id, member.display_name, unsealed) == (member_id, "Alice", dek)
        assert await users.unlock(member_id, unsealed) is not None
        await users.lock_all()
    finally:
        await registry.close()
    assert user_version(path) == upgraded.latest  # 2 while REGISTRY_MIGRATIONS has one step
    after = _user_row(path, member_id)
    assert after.pop("test_nickname") is None
    # Columns later steps added: a default, the inbox key backfilled at the unlock, and
    # the unlock's count of openings.
    assert after.pop("home_source") == "web"
    assert len(after.pop("inbox_public_key")) == 32
    assert after.pop("owner_generation") == 1  # the file was opened once since
    assert after.pop("data_reset_at") is None  # no admin reset lost their data
    assert after.pop("supervision_seen_at") is None  # never told of a supervisor yet
    assert after.pop("password_set_by_admin") == 0  # who chose it then is not known
    assert after.pop("deactivated_at") is None  # active: no deactivation withdraws a card of before
    assert after == before
    # Inactive at the upgrade: deactivated then, as far as is known (migration 24), so a
    # reactivation withdraws their cards and cut turns of before, as on this version.
    assert _user_row(path, "inactive-member")["deactivated_at"] is not None


def _user_row(path, member_id: str) -> dict:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM users WHERE id = ?", (member_id,)).fetchone())
    finally:
        conn.close()


async def test_owner_upgrade_keeps_content_under_the_same_key(tmp_path):
    path = tmp_path / "database" / "0123456789abcdef0123456789abcdef.db"
    dek = os.urandom(32)
    canary = f"CANARY-{os.urandom(8).hex()}"
    owner = await Database.open(path, key=dek, migrations=first_version(OWNER_MIGRATIONS), create=True)
    await owner.run(
        lambda c: c.execute("INSERT INTO member_settings (key, value) VALUES ('note', ?)", (json.dumps(canary),))
    )
    await owner.close()
    upgraded = with_extra_step(OWNER_MIGRATIONS, "ALTER TABLE member_settings ADD COLUMN test_source TEXT")

    # The wrong key neither opens nor migrates the file.
    untouched = path.read_bytes()
    with pytest.raises(DatabaseUnreadable):
        await Database.open(path, key=os.urandom(32), migrations=upgraded)
    assert path.read_bytes() == untouched

    owner = await Database.open(path, key=dek, migrations=upgraded)
    try:
        assert owner.schema_version == upgraded.latest == OWNER_MIGRATIONS.latest + 1
        rows = await owner.run(lambda c: [tuple(r) for r in c.execute("SELECT key, value, test_source FROM member_settings")])
        assert rows == [("note", json.dumps(canary), None)]
        assert await owner.run(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) == upgraded.latest
        assert await owner.integrity_check() == "ok"
    finally:
        await owner.close()

    assert canary.encode() not in path.read_bytes()
    with pytest.raises(sqlite3.DatabaseError, match="file is not a database"):
        user_version(path)


async def test_roles_written_before_step_8_keep_their_agents_and_tools_and_the_restricted_preset_gets_neither(tmp_path):
    """Step 8 (agents and acting tools follow the role) on a registry of version 7: the
    presets and a custom role the admin made keep what they could do — every chat
    agent, shell, file writes, scheduling, delegation, project chat — except the
    restricted preset, which may start its own chat agent alone and holds none."""
    from skald_host.core.identity.role_store import RoleStore

    path = tmp_path / "database" / "system.db"
    before_step_8 = REGISTRY_MIGRATIONS.before(8)
    registry = await Database.open(path, key=None, migrations=before_step_8, create=True)
    await registry.transaction(
        lambda c: (
            c.execute("INSERT INTO roles (id, label, attrs) VALUES ('teen', 'Teen', ?)", (json.dumps({"ui_mode": "simple"}),)),
            c.execute("INSERT INTO role_capabilities VALUES ('teen', 'chat.use')"),
        )
    )
    await registry.close()
    assert user_version(path) == 7

    registry = await Database.open(path, key=None, migrations=REGISTRY_MIGRATIONS)
    try:
        roles = {r.id: r for r in await RoleStore(registry).list()}
    finally:
        await registry.close()
    acting = {"projects.chat", "tools.shell", "tools.files.write", "tools.schedule", "tools.delegate"}
    for role_id in ("member", "teen"):
        assert acting <= roles[role_id].capabilities and roles[role_id].attrs.chat_agents == ("*",)
    later = {"connectors.activate"}  # a later step's (tested below)
    assert roles["teen"].capabilities - acting - later == {"chat.use"}
    assert not acting & roles["restricted"].capabilities
    assert roles["restricted"].attrs.chat_agents == ("companion",)
    assert roles["admin"].capabilities == frozenset()  # admins hold everything implicitly


async def test_self_service_connectors_become_capabilities_and_upgrades_keep_what_the_switch_allowed(tmp_path):
    """The step that makes self-service connectors role capabilities: every role but the
    admin's keeps activating catalog templates (it was open to everyone granted the
    plugin), and registering one's own remote server goes to those roles only where the
    Connectors plugin's old switch allowed it. Nothing is written for the admin."""
    from skald_host.core.identity.role_store import RoleStore

    step = next(i for i, m in enumerate(REGISTRY_MIGRATIONS.steps) if "self-service connectors" in m.description)
    for switch in (False, True):
        path = tmp_path / str(switch) / "database" / "system.db"
        before = REGISTRY_MIGRATIONS.before(step + 1)
        registry = await Database.open(path, key=None, migrations=before, create=True)
        await registry.transaction(
            lambda c: (
                c.execute("INSERT INTO roles (id, label, attrs) VALUES ('teen', 'Teen', '{}')"),
                c.execute("INSERT INTO plugins (id, enabled, config) VALUES ('mcp', 1, ?)", (json.dumps({"members_add_remote": switch}),)),
                # With the switch on, a restricted member held the plugin (step 22 keeps
                # the role's capabilities for them); with it off, none did.
                switch and c.execute(
                    "INSERT INTO users (id, username, display_name, role_id, encrypted, credential_kind, credentials)"
                    " VALUES ('0123456789abcdef0123456789abcdef', 'kid', 'Kid', 'restricted', 0, 'verifier', '')"
                ),
                switch and c.execute("INSERT INTO plugin_access (plugin_id, user_id) VALUES ('mcp', '0123456789abcdef0123456789abcdef')"),
            )
        )
        await registry.close()
        registry = await Database.open(path, key=None, migrations=REGISTRY_MIGRATIONS)
        try:
            roles = {r.id: r for r in await RoleStore(registry).list()}
        finally:
            await registry.close()
        for role_id in ("member", "restricted", "teen"):
            if role_id == "restricted" and not switch:
                assert roles[role_id].capabilities == {"chat.use"}  # nobody of the role held the plugin (step 22)
                continue
            assert "connectors.activate" in roles[role_id].capabilities
            assert ("connectors.remote" in roles[role_id].capabilities) is switch
        assert roles["admin"].capabilities == frozenset()


async def test_a_registry_whose_restricted_preset_was_given_connectors_at_its_creation_is_repaired(tmp_path):
    """Registries made fresh between the connectors step and its fix gave 'Children' the
    right to activate catalog connectors (upgrade probe: upgraded instances differed from
    fresh ones). Step 22 takes it back: no member of the role holds the plugin."""
    from skald_host.core.identity.role_store import RoleStore

    step = next(i for i, m in enumerate(REGISTRY_MIGRATIONS.steps) if m.version == 22)
    path = tmp_path / "database" / "system.db"
    before = REGISTRY_MIGRATIONS.before(step + 1)
    registry = await Database.open(path, key=None, migrations=before, create=True)
    await registry.transaction(lambda c: c.execute("INSERT INTO role_capabilities VALUES ('restricted', 'connectors.activate')"))
    await registry.close()
    registry = await Database.open(path, key=None, migrations=REGISTRY_MIGRATIONS)
    try:
        roles = {r.id: r for r in await RoleStore(registry).list()}
    finally:
        await registry.close()
    assert roles["restricted"].capabilities == {"chat.use"}
    assert "connectors.activate" in roles["member"].capabilities


async def test_a_fresh_registry_gives_the_restricted_preset_chat_alone(tmp_path):
    """The connectors step keeps what an upgrade's members could do; on a new instance
    there is nothing to keep, and the restricted preset starts with chat only, while
    the member preset may activate the admin's catalog templates (newcomer walk 4)."""
    from skald_host.core.identity.role_store import RoleStore

    registry = await Database.open(tmp_path / "system.db", key=None, migrations=REGISTRY_MIGRATIONS, create=True)
    try:
        roles = {r.id: r for r in await RoleStore(registry).list()}
    finally:
        await registry.close()
    assert roles["restricted"].capabilities == {"chat.use"}
    assert "connectors.activate" in roles["member"].capabilities


async def test_a_member_supervised_before_the_upgrade_is_told_once_at_their_next_sign_in(tmp_path):
    """The step that keeps when a member last acknowledged who supervises them, on a
    registry the version before wrote (every step before it): the edges and their times
    are kept, nobody has acknowledged anything, so a member supervised then is told at
    their next sign-in (that version told only an open page or a home channel), and an
    acknowledgement keeps the edge's time, no text."""
    from skald_host.core.system_agents import store

    step = next(i for i, m in enumerate(REGISTRY_MIGRATIONS.steps) if "acknowledged who supervises them" in m.description)
    path = tmp_path / "database" / "system.db"
    before = REGISTRY_MIGRATIONS.before(step + 1)
    registry = await Database.open(path, key=None, migrations=before, create=True)
    subject, supervisor, other = "a" * 32, "b" * 32, "c" * 32
    await registry.transaction(
        lambda c: (
            c.executemany(
                "INSERT INTO users (id, username, display_name, role_id, encrypted, credential_kind, credentials)"
                " VALUES (?, ?, ?, 'member', 0, 'verifier', '{}')",
                [(subject, "kid", "Kid"), (supervisor, "pat", "Pat"), (other, "ann", "Ann")],
            ),
            c.execute(
                "INSERT INTO supervision (subject_user_id, supervisor_user_id, created_at) VALUES (?, ?, '2026-01-02T03:04:05.678Z')",
                (subject, supervisor),
            ),
        )
    )
    await registry.close()
    assert user_version(path) == step

    registry = await Database.open(path, key=None, migrations=REGISTRY_MIGRATIONS)
    try:
        assert registry.schema_version == REGISTRY_MIGRATIONS.latest
        news = await registry.run(lambda c: store.unacknowledged_supervisors(c, subject))
        assert news == [(supervisor, "2026-01-02T03:04:05.678Z")]
        assert await registry.run(lambda c: store.unacknowledged_supervisors(c, other)) == []
        await registry.transaction(lambda c: store.acknowledge_supervision(c, subject, "2026-01-02T03:04:05.678Z"))
        assert await registry.run(lambda c: store.unacknowledged_supervisors(c, subject)) == []
        seen = await registry.run(lambda c: c.execute("SELECT id, supervision_seen_at FROM users ORDER BY id").fetchall())
        assert [tuple(r) for r in seen] == [(subject, "2026-01-02T03:04:05.678Z"), (supervisor, None), (other, None)]
    finally:
        await registry.close()


async def test_request_log_and_answers_written_before_the_catalog_entry_was_recorded_still_read(tmp_path):
    """Registry step 20 and owner step 17 (which catalog entry answered: two providers may
    serve one model name) on files the versions before wrote: the old rows keep their
    model name, name no entry, and read back as before — in the usage answer, in a
    member's messages, and as a member's outbox row of the old shape restored."""
    from skald_host.core.agent.runtime import RequestLog
    from skald_host.core.llm.usage import Period, read_usage

    database_dir = tmp_path / "database"
    registry_path = database_dir / "system.db"
    before = REGISTRY_MIGRATIONS.before(20)
    registry = await Database.open(registry_path, key=None, migrations=before, create=True)
    await registry.transaction(lambda c: c.execute(
        "INSERT INTO llm_requests (id, member_id, model, status, http_status, tokens_in, tokens_out, created_at)"
        " VALUES ('old-1', NULL, 'test-model', 'ok', 200, 5, 2, '2026-05-01T10:00:00.000Z')"
    ))
    await registry.close()
    assert user_version(registry_path) == 19

    registry = await Database.open(registry_path, key=None, migrations=REGISTRY_MIGRATIONS)
    try:
        assert registry.schema_version == REGISTRY_MIGRATIONS.latest >= 20
        # A member's outbox row as the version before wrote it (nine columns, no entry).
        old_entry = {"row": ["old-2", None, "test-model", "interrupted", None, None, None, None, None], "at": "2026-05-01T11:00:00.000Z"}
        await RequestLog(registry).restore([old_entry])
        import datetime as dt

        usage = await registry.run(lambda c: read_usage(c, Period(dt.date(2026, 5, 1), dt.date(2026, 5, 1)), None, 10))
    finally:
        await registry.close()
    assert usage["models"] == [{"model": "test-model", "entry": None, "requests": {"ok": 1, "interrupted": 1}, "total": 2,
                                "tokens_in": 5, "tokens_out": 2}]
    assert [(r["id"], r["model"], r["entry"]) for r in usage["requests"]] == [("old-2", "test-model", None), ("old-1", "test-model", None)]

    owner_path = database_dir / "0123456789abcdef0123456789abcdef.db"
    dek = os.urandom(32)
    before = OWNER_MIGRATIONS.before(17)
    owner = await Database.open(owner_path, key=dek, migrations=before, create=True)
    await owner.transaction(lambda c: (
        c.execute("INSERT INTO conversations (id, source, agent_id) VALUES ('c1', 'web', 'assistant')"),
        c.execute("INSERT INTO frames (id, conversation_id, agent_id) VALUES ('f1', 'c1', 'assistant')"),
        c.execute("INSERT INTO messages (conversation_id, frame_id, role, content, model) VALUES ('c1', 'f1', 'assistant', 'hi', 'test-model')"),
    ))
    assert owner.schema_version == 16
    await owner.close()
    owner = await Database.open(owner_path, key=dek, migrations=OWNER_MIGRATIONS)
    try:
        assert owner.schema_version == OWNER_MIGRATIONS.latest >= 17
        rows = await owner.run(lambda c: [dict(r) for r in c.execute("SELECT content, model, model_id FROM messages")])
    finally:
        await owner.close()
    assert rows == [{"content": "hi", "model": "test-model", "model_id": None}]


async def test_members_of_a_registry_at_step_22_keep_their_passwords_and_nobody_is_asked_to_change_theirs(tmp_path):
    """Step 23 (whether the password is still the one an admin chose) on a registry the
    version before wrote: every member still signs in with their password, reads as not
    admin-chosen (who chose it then is not known), and an admin's reset after the
    upgrade marks it, which the member's own change clears."""
    from skald_host.core.schema.registry import REGISTRY_MIGRATIONS as current

    database_dir = tmp_path / "database"
    path = database_dir / "system.db"
    kdf = KeyDerivation(KDF_FLOOR)
    member_id = "0123456789abcdef0123456789abcdef"
    dek, sealed = await kdf.seal_new(PASSWORD, member_id)
    before = current.before(23)
    registry = await Database.open(path, key=None, migrations=before, create=True)
    await registry.transaction(
        lambda c: c.execute(
            "INSERT INTO users (id, username, display_name, role_id, encrypted, credential_kind, credentials)"
            " VALUES (?, 'alice', 'Alice', 'member', 1, 'sealed_dek', ?)",
            (member_id, sealed.to_json()),
        )
    )
    await registry.close()
    owner = await Database.open(database_dir / f"{member_id}.db", key=dek, migrations=OWNER_MIGRATIONS, create=True)
    await owner.close()
    assert user_version(path) == 22

    registry = await Database.open(path, key=None, migrations=current)
    try:
        assert registry.schema_version == current.latest >= 23
        users = UserManager(registry, database_dir, kdf, Buses())
        member, unsealed = await users.verify_password("alice", PASSWORD)
        assert unsealed == dek
        assert member.password_set_by_admin is False
        assert member.summary()["password_set_by_admin"] is False
        await users.reset_password(member_id, "the admin chose this one 7")
        assert (await users.get(member_id)).password_set_by_admin is True
        await users.change_password(member_id, "the admin chose this one 7", "alice chose this one 8")
        assert (await users.get(member_id)).password_set_by_admin is False
        await users.lock_all()
    finally:
        await registry.close()
