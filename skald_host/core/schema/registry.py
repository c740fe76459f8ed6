"""Registry migrations: instance-wide rows readable without any member's key.

Append new steps; never edit a released one (a file written at version N has exactly
the schema of steps 1..N, and the next open resumes from there).
"""

import json

from skald_host.core.storage import Migration, MigrationSet

# Seed data may speak the product's language; the ids and code stay neutral.
_ROLE_PRESETS = (
    ("admin", "Admin", {"ui_mode": "full", "chat_agent": "assistant", "auto_grant": False, "permission_groups": []}),
    ("member", "Member", {"ui_mode": "full", "chat_agent": "assistant", "auto_grant": True, "permission_groups": []}),
    ("restricted", "Children", {"ui_mode": "simple", "chat_agent": "companion", "auto_grant": False, "permission_groups": []}),
)

_MEMBER_CAPABILITIES = ("chat.use", "memory.shared.read", "projects.create")
_RESTRICTED_CAPABILITIES = ("chat.use",)


def _seed_roles(conn) -> None:
    for role_id, label, attrs in _ROLE_PRESETS:
        conn.execute(
            "INSERT OR IGNORE INTO roles (id, label, attrs, builtin) VALUES (?, ?, ?, 1)",
            (role_id, label, json.dumps(attrs)),
        )
    for cap in _MEMBER_CAPABILITIES:
        conn.execute("INSERT OR IGNORE INTO role_capabilities VALUES ('member', ?)", (cap,))
    for cap in _RESTRICTED_CAPABILITIES:
        conn.execute("INSERT OR IGNORE INTO role_capabilities VALUES ('restricted', ?)", (cap,))


REGISTRY_MIGRATIONS = MigrationSet(
    bucket="registry",
    steps=(
        Migration(
            1,
            "members, roles, capabilities, plugins, instance config",
            statements=(
                """CREATE TABLE roles (
                    id TEXT PRIMARY KEY,
                    label TEXT NOT NULL,
                    attrs TEXT NOT NULL DEFAULT '{}',
                    builtin INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                """CREATE TABLE role_capabilities (
                    role_id TEXT NOT NULL REFERENCES roles(id) ON DELETE CASCADE,
                    capability TEXT NOT NULL,
                    PRIMARY KEY (role_id, capability)
                )""",
                # credentials: a sealed DEK (encrypted members; its AEAD tag is the password
                # verifier) or an Argon2id verifier (members who chose no encryption).
                # Nothing here derives a key.
                """CREATE TABLE users (
                    id TEXT PRIMARY KEY,
                    username TEXT NOT NULL UNIQUE,
                    display_name TEXT NOT NULL DEFAULT '',
                    role_id TEXT NOT NULL REFERENCES roles(id),
                    active INTEGER NOT NULL DEFAULT 1,
                    encrypted INTEGER NOT NULL,
                    credential_kind TEXT NOT NULL CHECK (credential_kind IN ('sealed_dek', 'verifier')),
                    credentials TEXT NOT NULL,
                    locale TEXT,
                    birthdate TEXT,
                    sex TEXT,
                    notes TEXT NOT NULL DEFAULT '',
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    last_login_at TEXT,
                    CHECK ((encrypted = 1) = (credential_kind = 'sealed_dek'))
                )""",
                "CREATE INDEX users_role ON users(role_id)",
                # A plugin's row is born at its first toggle (seed 001 "Default access").
                """CREATE TABLE plugins (
                    id TEXT PRIMARY KEY,
                    enabled INTEGER NOT NULL DEFAULT 0,
                    config TEXT NOT NULL DEFAULT '{}',
                    grant_by_default INTEGER NOT NULL DEFAULT 1,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                # plugin_id is bare TEXT, never a key: a plugins row exists only after the
                # first toggle. A row is a grant; its absence is none.
                """CREATE TABLE plugin_access (
                    plugin_id TEXT NOT NULL,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    PRIMARY KEY (plugin_id, user_id)
                )""",
                """CREATE TABLE plugin_user_configs (
                    plugin_id TEXT NOT NULL,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    config TEXT NOT NULL DEFAULT '{}',
                    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    PRIMARY KEY (plugin_id, user_id)
                )""",
                """CREATE TABLE plugin_kv (
                    plugin_id TEXT NOT NULL,
                    key TEXT NOT NULL,
                    value TEXT NOT NULL,
                    PRIMARY KEY (plugin_id, key)
                )""",
                """CREATE TABLE config (
                    key TEXT PRIMARY KEY,
                    value TEXT NOT NULL
                )""",
            ),
            apply=_seed_roles,
        ),
        Migration(
            2,
            "model providers and models, request metadata, approval rules and security groups",
            statements=(
                # api_key is an instance secret: write-only through every API, never logged.
                """CREATE TABLE llm_providers (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    base_url TEXT NOT NULL,
                    api_key TEXT,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                """CREATE TABLE llm_models (
                    id TEXT PRIMARY KEY,
                    provider_id TEXT NOT NULL REFERENCES llm_providers(id) ON DELETE CASCADE,
                    model TEXT NOT NULL,
                    label TEXT NOT NULL DEFAULT '',
                    vision INTEGER NOT NULL DEFAULT 0,
                    strength INTEGER NOT NULL DEFAULT 50,
                    priority INTEGER NOT NULL DEFAULT 100,
                    enabled INTEGER NOT NULL DEFAULT 1,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    UNIQUE (provider_id, model)
                )""",
                # Metadata only; request and response bodies live in the member's own file.
                """CREATE TABLE llm_requests (
                    id TEXT PRIMARY KEY,
                    member_id TEXT,
                    model TEXT NOT NULL,
                    status TEXT NOT NULL,
                    http_status INTEGER,
                    tokens_in INTEGER,
                    tokens_out INTEGER,
                    latency_ms INTEGER,
                    first_token_ms INTEGER,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                "CREATE INDEX llm_requests_member ON llm_requests(member_id, created_at)",
                """CREATE TABLE security_groups (
                    id TEXT PRIMARY KEY,
                    label TEXT NOT NULL,
                    description TEXT NOT NULL DEFAULT ''
                )""",
                # group_id NULL: the rule applies to everyone; otherwise to members whose
                # role lists the group in attrs.permission_groups.
                """CREATE TABLE approval_rules (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    tool_pattern TEXT NOT NULL,
                    path_class TEXT,
                    action TEXT NOT NULL CHECK (action IN ('allow', 'deny', 'require')),
                    priority INTEGER NOT NULL,
                    group_id TEXT REFERENCES security_groups(id) ON DELETE CASCADE,
                    note TEXT NOT NULL DEFAULT '',
                    builtin INTEGER NOT NULL DEFAULT 0
                )""",
                "INSERT INTO approval_rules (tool_pattern, action, priority, note, builtin) VALUES"
                " ('list_agents', 'allow', 100, 'reading the agent list has no effect', 1),"
                " ('notify', 'allow', 100, 'a note to the member themself', 1),"
                " ('execute_task', 'allow', 200, 'a sub-agent: its own tool calls are gated', 1),"
                " ('*', 'require', 999999, 'anything not explicitly allowed asks first', 1)",
            ),
        ),
        Migration(
            3,
            "shared memory notes (placeholder: owned by the memory work, replace with the real step)",
            statements=("SELECT 1",),
        ),
        Migration(
            4,
            "shared folders and projects (placeholder: owned by the folders work, replace with the real step)",
            statements=("SELECT 1",),
        ),
        Migration(
            5,
            "member public keys and the sealed inbox (placeholder: owned by the sealed inbox work, replace with the real step)",
            statements=("SELECT 1",),
        ),
    ),
)
