"""Registry migrations: instance-wide rows readable without any member's key.

Append new steps; never edit a released one (a file written at version N has exactly
the schema of steps 1..N, and the next open resumes from there).
"""

import json

from skald_host.core.schema.memory import MEMORY_NOTES_STATEMENTS
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


# The fs tools (skald_host/builtins/fs_tools.py), by whether they change anything.
_FS_READ_TOOLS = ("read_file", "list_files", "search_file", "grep_files", "show_file_to_user")
_FS_WRITE_TOOLS = ("write_file", "edit_file")
_FS_TOOLS = _FS_READ_TOOLS + _FS_WRITE_TOOLS

# The fs tools inside shared folders and projects run without asking: reading a folder
# the member belongs to has no effect beyond the conversation, and writing is refused in
# code (the namespace's write gate) wherever the membership is read-only, so a rule
# would only ask about what the member may already do by hand in the explorer.
_FOLDER_APPROVAL_RULES = "INSERT INTO approval_rules (tool_pattern, path_class, action, priority, note, builtin) VALUES " + ", ".join(
    f"('{tool}', '{root}/*', 'allow', 300, 'files in a {kind} the member belongs to; read-only memberships are refused in code', 1)"
    for root, kind in (("shared", "shared folder"), ("projects", "project"))
    for tool in _FS_TOOLS
) + ", " + ", ".join(
    f"('list_files', '{root}', 'allow', 300, 'the list of the member''s own {kind}s', 1)"
    for root, kind in (("shared", "shared folder"), ("projects", "project"))
)


# Own notes are private and frictionless; shared reads are free, but a shared write
# asks first, so the agent cannot silently move one member's words where everyone
# reads them (seed 001). Each class also names its root, so listing it is free too.
_MEMORY_APPROVAL_RULES = "INSERT INTO approval_rules (tool_pattern, path_class, action, priority, note, builtin) VALUES " + ", ".join(
    [
        f"('{tool}', '{path_class}', '{action}', 10, '{note}', 1)"
        for root, tools, action, note in (
            ("user-memory", _FS_READ_TOOLS + _FS_WRITE_TOOLS, "allow", "the member''s own private notes"),
            ("shared-memory", _FS_READ_TOOLS, "allow", "reading shared notes"),
            ("shared-memory", _FS_WRITE_TOOLS, "require", "a shared note is read by everyone: ask first"),
        )
        for tool in tools
        for path_class in (root, f"{root}/*")
    ]
    + ["('memory_search', NULL, 'allow', 100, 'searching memory notes only reads', 1)"]
)


# What a role's members may make act on the world (skald_host.core.identity.access):
# project chat and the host's tools that run commands, write files, schedule prompts
# or delegate to sub-agents.
_WORLD_CAPABILITIES = ("projects.chat", "tools.shell", "tools.files.write", "tools.schedule", "tools.delegate")


def _role_agents_and_tool_capabilities(conn) -> None:
    """Agents and tools follow the role as data. Every role of this file keeps what it
    could do (upgrades lose nothing): each may start any chat agent and holds the new
    capabilities — except the restricted preset, which may start its own chat agent
    alone and holds none of them. Admins hold everything implicitly (no rows)."""
    for role_id, raw in conn.execute("SELECT id, attrs FROM roles").fetchall():
        attrs = json.loads(raw or "{}")
        restricted = role_id == "restricted"
        if "chat_agents" not in attrs:
            attrs["chat_agents"] = [attrs.get("chat_agent") or "companion"] if restricted else ["*"]
            conn.execute("UPDATE roles SET attrs = ? WHERE id = ?", (json.dumps(attrs), role_id))
        if restricted or role_id == "admin":
            continue
        for cap in _WORLD_CAPABILITIES:
            conn.execute("INSERT OR IGNORE INTO role_capabilities VALUES (?, ?)", (role_id, cap))


def _connector_capabilities(conn) -> None:
    """Self-service connectors become role capabilities (seed 001 "MCP connectors"):
    ``connectors.activate`` (activate an admin-vetted catalog template) and
    ``connectors.remote`` (register one's own remote MCP server). Upgrades lose nothing:
    every role that is not the admin's gets ``connectors.activate`` (activating was open
    to every member granted the plugin), and ``connectors.remote`` goes to those roles
    only where the Connectors plugin's old instance switch (``members_add_remote``) was
    on. Admins hold everything implicitly (no rows). A registry the Connectors plugin
    never ran on (a fresh install, too) has nothing to keep: the restricted preset
    starts without it, as it starts with chat alone (newcomer walk 4: a new instance's
    "Children" could activate catalog connectors)."""
    row = conn.execute("SELECT config FROM plugins WHERE id = 'mcp'").fetchone()
    try:
        remote = bool(json.loads(row[0] or "{}").get("members_add_remote")) if row else False
    except ValueError:
        remote = False
    for (role_id,) in conn.execute("SELECT id FROM roles WHERE id != 'admin'").fetchall():
        if role_id == "restricted" and row is None:
            continue
        conn.execute("INSERT OR IGNORE INTO role_capabilities VALUES (?, 'connectors.activate')", (role_id,))
        if remote:
            conn.execute("INSERT OR IGNORE INTO role_capabilities VALUES (?, 'connectors.remote')", (role_id,))


def _restricted_without_connectors(conn) -> None:
    """Step 13 gave the restricted preset the connector capabilities on every registry
    it ran on while it had no member to keep them for: a registry made fresh by the
    versions between it and the fix that skipped it there, and one upgraded whose
    restricted members never held the Connectors plugin. Upgraded and fresh instances
    then differed, and a 'Children' member granted the plugin later could activate
    catalog connectors (upgrade probe). They are taken back where no member of the role
    holds the plugin (nobody loses what they used); where one does, they stay."""
    holder = conn.execute(
        "SELECT 1 FROM users u JOIN plugin_access a ON a.user_id = u.id"
        " WHERE u.role_id = 'restricted' AND a.plugin_id = 'mcp' LIMIT 1"
    ).fetchone()
    if holder is None:
        conn.execute(
            "DELETE FROM role_capabilities WHERE role_id = 'restricted'"
            " AND capability IN ('connectors.activate', 'connectors.remote')"
        )


# Seeded role labels and approval-rule notes become string keys (``core.seed.*``), shown
# in the reader's language; a label or note an admin has already changed stays as written.
SEED_KEY_PREFIX = "core.seed."
_SEEDED_ROLE_LABELS = (("admin", "Admin"), ("member", "Member"), ("restricted", "Children"))
_SEEDED_RULE_NOTES = (
    ("reading the agent list has no effect", "agent_list"),
    ("a note to the member themself", "notify_self"),
    ("a sub-agent: its own tool calls are gated", "sub_agent"),
    ("anything not explicitly allowed asks first", "catch_all"),
    ("the member's own private notes", "own_memory"),
    ("reading shared notes", "shared_memory_read"),
    ("a shared note is read by everyone: ask first", "shared_memory_write"),
    ("searching memory notes only reads", "memory_search"),
    ("files in a shared folder the member belongs to; read-only memberships are refused in code", "shared_folder_files"),
    ("files in a project the member belongs to; read-only memberships are refused in code", "project_files"),
    ("the list of the member's own shared folders", "shared_folder_list"),
    ("the list of the member's own projects", "project_list"),
    ("the member's own home folder", "home"),
    ("inside the member's own sandbox", "sandbox"),
    ("a listing without a path is of the home", "home_listing"),
    ("a search without a path is of the home", "home_search"),
)


def _seed_texts_to_keys(conn) -> None:
    for role_id, label in _SEEDED_ROLE_LABELS:
        conn.execute(
            "UPDATE roles SET label = ? WHERE id = ? AND builtin = 1 AND label = ?",
            (f"{SEED_KEY_PREFIX}role.{role_id}", role_id, label),
        )
    for note, key in _SEEDED_RULE_NOTES:
        conn.execute(
            "UPDATE approval_rules SET note = ? WHERE builtin = 1 AND note = ?",
            (f"{SEED_KEY_PREFIX}rule.{key}", note),
        )


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
                # api_key is an instance secret: write-only through every API, never logged,
                # stored sealed (core/storage/sealing.py).
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
            "shared memory notes, their approval rules and the shared-write capability",
            statements=(
                *MEMORY_NOTES_STATEMENTS,
                _MEMORY_APPROVAL_RULES,
                "INSERT OR IGNORE INTO role_capabilities VALUES ('member', 'memory.shared.write')",
            ),
        ),
        Migration(
            4,
            "shared folders and projects",
            statements=(
                # Folder content lives on disk under the data dir; these rows are only who
                # may reach it. Keys are registry→registry (same file), never owner→registry.
                """CREATE TABLE shared_folders (
                    id TEXT PRIMARY KEY,
                    slug TEXT NOT NULL UNIQUE,
                    title TEXT NOT NULL,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                """CREATE TABLE shared_folder_members (
                    folder_id TEXT NOT NULL REFERENCES shared_folders(id) ON DELETE CASCADE,
                    member_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    can_write INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (folder_id, member_id)
                )""",
                "CREATE INDEX shared_folder_members_member ON shared_folder_members(member_id)",
                # The slug is immutable: it names the folder on disk and the agent path.
                """CREATE TABLE projects (
                    id TEXT PRIMARY KEY,
                    owner_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    slug TEXT NOT NULL,
                    title TEXT NOT NULL,
                    description TEXT NOT NULL DEFAULT '',
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    UNIQUE (owner_id, slug)
                )""",
                # The owner is always a write-member, so a private project is one row here.
                """CREATE TABLE project_members (
                    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
                    member_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    can_write INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (project_id, member_id)
                )""",
                "CREATE INDEX project_members_member ON project_members(member_id)",
                _FOLDER_APPROVAL_RULES,
            ),
        ),
        Migration(
            5,
            "member public keys and the sealed inbox",
            statements=(
                # The public half of the member's inbox key pair (the private half is in
                # their own file), and where background notes reach them ('web' or a
                # channel's plugin id): a routing preference, not private content.
                "ALTER TABLE users ADD COLUMN inbox_public_key BLOB",
                "ALTER TABLE users ADD COLUMN home_source TEXT NOT NULL DEFAULT 'web'",
                # Messages for a locked member, sealed to their public key: ciphertext and
                # the minimum to route it — never plaintext, never a title. dedupe_hash
                # is a hash of the sender's idempotency key, so a replay seals nothing twice.
                """CREATE TABLE sealed_messages (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL UNIQUE,
                    member_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    source TEXT NOT NULL,
                    dedupe_hash TEXT UNIQUE,
                    version INTEGER NOT NULL,
                    ephemeral_public BLOB NOT NULL,
                    nonce BLOB NOT NULL,
                    ciphertext BLOB NOT NULL,
                    size INTEGER NOT NULL,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                "CREATE INDEX sealed_messages_member ON sealed_messages(member_id, seq)",
            ),
        ),
        Migration(
            6,
            "approval defaults for the member's own files: home and sandbox",
            statements=(
                # The home and the member's own sandbox are theirs alone, like private
                # memory: reading and writing there does not ask. Memory (priority 10) and
                # folder rules stay stricter where they say so; a path-less listing or grep
                # means the home. Anything else still falls to the catch-all.
                "INSERT INTO approval_rules (tool_pattern, path_class, action, priority, note, builtin) VALUES"
                + ",".join(
                    f" ('{tool}', '{path_class}', 'allow', 400, '{note}', 1)"
                    for tool in _FS_TOOLS
                    for path_class, note in (
                        ("[!/]*", "the member''s own home folder"),
                        ("/*", "inside the member''s own sandbox"),
                    )
                ),
                "INSERT INTO approval_rules (tool_pattern, path_class, action, priority, note, builtin) VALUES"
                " ('list_files', NULL, 'allow', 400, 'a listing without a path is of the home', 1),"
                " ('grep_files', NULL, 'allow', 400, 'a search without a path is of the home', 1)",
            ),
        ),
        Migration(
            7,
            "how often each member's file was opened, to notice an older copy put back",
            statements=(
                # Mirrors the counter in the member's own file (raised at each unlock,
                # there first): a file whose counter is behind this one is an older copy.
                "ALTER TABLE users ADD COLUMN owner_generation INTEGER NOT NULL DEFAULT 0",
            ),
        ),
        Migration(
            8,
            "chat agents each role may start, and capabilities for project chat and the acting host tools",
            apply=_role_agents_and_tool_capabilities,
        ),
        Migration(
            9,
            "seeded role labels and approval-rule notes as string keys, read in each reader's language",
            apply=_seed_texts_to_keys,
        ),
        Migration(
            10,
            "approval default for listing one's own scheduled prompts",
            statements=(
                # Listing reads the member's own schedule; creating, changing and deleting
                # a scheduled prompt fall to the catch-all and ask first.
                "INSERT INTO approval_rules (tool_pattern, action, priority, note, builtin) VALUES"
                " ('list_scheduled_prompts', 'allow', 100, 'core.seed.rule.schedule_list', 1)",
            ),
        ),
        Migration(
            11,
            "device tokens: credentials a binding-managed plugin issues to a member's paired device",
            statements=(
                # Only the SHA-256 of a token is kept (check A1): the registry is
                # admin-readable and a copy of it must not sign anyone in. A token is
                # valid for its plugin's routes alone; the host deletes a member's rows
                # on every revocation (password change, reset, deactivation, end all
                # sessions) and the cascade takes them with a deleted member.
                """CREATE TABLE device_tokens (
                    id TEXT PRIMARY KEY,
                    plugin_id TEXT NOT NULL,
                    member_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    token_hash TEXT NOT NULL UNIQUE,
                    label TEXT NOT NULL DEFAULT '{}',
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    last_seen_at TEXT
                )""",
                "CREATE INDEX device_tokens_member ON device_tokens(plugin_id, member_id)",
            ),
        ),
        Migration(
            12,
            "supervision edges, review coverage, per-member agent intervals, reports for supervisors",
            statements=(
                # A directed edge between two members (seed 001 "Supervision + coverage"):
                # whom a review looks at, and who may read what it produced.
                """CREATE TABLE supervision (
                    subject_user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    supervisor_user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    PRIMARY KEY (subject_user_id, supervisor_user_id),
                    CHECK (subject_user_id <> supervisor_user_id)
                )""",
                "CREATE INDEX supervision_supervisor ON supervision(supervisor_user_id)",
                # Per subject, how far a review has covered; advanced only by a completed
                # pass, so a crash re-covers rather than skips.
                """CREATE TABLE system_agent_coverage (
                    agent_id TEXT NOT NULL,
                    subject_user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    covered_through TEXT NOT NULL,
                    PRIMARY KEY (agent_id, subject_user_id)
                )""",
                # An admin's per-member interval for an agent: a row overrides, its
                # absence inherits the instance value.
                """CREATE TABLE system_agent_user_settings (
                    agent_id TEXT NOT NULL,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    interval_seconds INTEGER NOT NULL CHECK (interval_seconds >= 60),
                    PRIMARY KEY (agent_id, user_id)
                )""",
                # Reports written about a member for their supervisors (``audience``
                # 'supervisors') or about the instance for its admins ('admins'). This row
                # holds no words: snapshot columns (no foreign keys: a report outlives a
                # deleted producer) and the shared read mark, first reader wins.
                """CREATE TABLE reports (
                    id TEXT PRIMARY KEY,
                    kind TEXT NOT NULL,
                    audience TEXT NOT NULL CHECK (audience IN ('supervisors', 'admins')),
                    subject_user_id TEXT,
                    producer_user_id TEXT,
                    run_id TEXT,
                    agent_id TEXT NOT NULL,
                    period_start TEXT,
                    period_end TEXT,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    read_at TEXT
                )""",
                "CREATE INDEX reports_subject ON reports(subject_user_id, created_at)",
                # The words, once per reader, sealed to that reader's inbox key: what a
                # review narrates of somebody's conversations never sits in this file in
                # clear, and opens only in a session of its reader.
                """CREATE TABLE report_copies (
                    report_id TEXT NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
                    reader_user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    sealed BLOB NOT NULL,
                    PRIMARY KEY (report_id, reader_user_id)
                )""",
                "CREATE INDEX report_copies_reader ON report_copies(reader_user_id)",
            ),
        ),
        Migration(
            13,
            "self-service connectors as role capabilities: activating a catalog template, registering a remote server",
            apply=_connector_capabilities,
        ),
        Migration(
            14,
            "approval rules for the sub-agent run tools: agent_task and emit_signal",
            statements=(
                # agent_task reads the member's own runs and cancels them; emit_signal
                # writes into the member's own conversation's inbox, bounded by contract.
                "INSERT INTO approval_rules (tool_pattern, action, priority, note, builtin) VALUES"
                " ('agent_task', 'allow', 200, 'core.seed.rule.agent_task', 1),"
                " ('emit_signal', 'allow', 200, 'core.seed.rule.emit_signal', 1)",
            ),
        ),
        Migration(
            15,
            "approval rule for get_skill: reading one of the agent's own skills has no effect",
            statements=(
                "INSERT INTO approval_rules (tool_pattern, action, priority, note, builtin) VALUES"
                " ('get_skill', 'allow', 200, 'core.seed.rule.get_skill', 1)",
            ),
        ),
        Migration(
            16,
            "when an admin's password reset lost a member's data: the member is told at their next sign-in",
            statements=("ALTER TABLE users ADD COLUMN data_reset_at TEXT",),
        ),
        Migration(
            17,
            "when a member last acknowledged who supervises them: a supervisor named later is shown at their next sign-in",
            # A time only, compared with supervision.created_at; no text. Empty on an
            # upgrade: a member supervised before it is told once more (the version
            # before told only an open page or a home channel, so maybe never).
            statements=("ALTER TABLE users ADD COLUMN supervision_seen_at TEXT",),
        ),
        Migration(
            18,
            "project invitations: a member joins a project only by accepting",
            statements=(
                # A member asked to join a project (skald_host/core/folders/invitations.py).
                # ``invitee_name`` is the name as the inviter typed it, normalized; it is
                # stored even when no account has it (``invitee_id`` NULL), so the inviter's
                # answer and list look the same either way and do not tell which names
                # exist. Only ``invitee_id`` is ever matched: an account made later under
                # that name is not invited by it. A deleted invitee or inviter takes the
                # invitation with them; a deleted project does too.
                """CREATE TABLE project_invitations (
                    id TEXT PRIMARY KEY,
                    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
                    invitee_name TEXT NOT NULL,
                    invitee_id TEXT REFERENCES users(id) ON DELETE CASCADE,
                    invited_by TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    can_write INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    UNIQUE (project_id, invitee_name)
                )""",
                "CREATE INDEX project_invitations_invitee ON project_invitations(invitee_id)",
                "CREATE INDEX project_invitations_inviter ON project_invitations(invited_by)",
            ),
        ),
        Migration(
            19,
            "the request log by time: the admin's usage page reads a period of it, newest first",
            statements=(
                # ``llm_requests_member`` starts with the member, so a period across all
                # members scanned the whole log. The index ends in the rowid, which orders
                # the rows of one batch (they share a millisecond): a page's cursor
                # (time, rowid) is a point in it (skald_host/core/llm/usage.py).
                "CREATE INDEX llm_requests_created ON llm_requests(created_at)",
            ),
        ),
        Migration(
            20,
            "the request log names the catalog entry a request went to",
            statements=(
                # Two providers may serve the same model name (two bills): ``model`` alone
                # cannot say which was asked. ``llm_models.id`` of the entry, kept when the
                # entry is deleted (the usage page says so); NULL for rows written before.
                "ALTER TABLE llm_requests ADD COLUMN model_id TEXT",
            ),
        ),
        Migration(
            21,
            "system agents: a failed conversation review waits before the next attempt",
            statements=(
                # Per subject, like the coverage but not it: the coverage (the watermark)
                # advances only on a completed pass; this is when a pass that failed may
                # be tried again (``failures``: how many in a row, for the doubling). No
                # row: no failed pass waits. Registry, for the coverage's reason: which
                # supervisor lends the runtime changes from night to night.
                """CREATE TABLE system_agent_retry (
                    agent_id TEXT NOT NULL,
                    subject_user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    retry_at TEXT NOT NULL,
                    failures INTEGER NOT NULL,
                    PRIMARY KEY (agent_id, subject_user_id)
                )""",
            ),
        ),
        Migration(
            22,
            "the restricted preset without connector capabilities where none of its members holds the plugin",
            apply=_restricted_without_connectors,
        ),
        Migration(
            23,
            "whether a member's password is still the one an admin chose: the member is asked to choose their own",
            # 1 from an admin's creation of the member or an admin's reset, 0 once the
            # member changes it themself. No text. Members made before this step read 0:
            # nobody knows who chose their password then.
            statements=("ALTER TABLE users ADD COLUMN password_set_by_admin INTEGER NOT NULL DEFAULT 0",),
        ),
        Migration(
            24,
            "when an admin last deactivated a member: an approval card raised before it never runs the call",
            # Check C5: a card pending at the deactivation is withdrawn, even when the
            # member is reactivated before answering it and even when their file was
            # locked then (it is judged as it is next read: ``kernel._await_approval``).
            # A time only, as the owner files' ``approvals.created_at`` write it. A member
            # inactive at the upgrade was deactivated before it, when is not known: the
            # upgrade's time stands for it, so their cards and cut turns of before are
            # withdrawn at a reactivation as a deactivation on this version withdraws
            # them (upgrade probe: they ran). NULL for the others.
            statements=(
                "ALTER TABLE users ADD COLUMN deactivated_at TEXT",
                "UPDATE users SET deactivated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE active = 0",
            ),
        ),
    ),
)
