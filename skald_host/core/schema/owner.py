"""Owner migrations: one member's content, the same schema in every member's file.

Applied at unlock, not at boot — an owner file is unreadable until its member logs in.
"""

import json

from skald_host.core.schema.memory import MEMORY_NOTES_STATEMENTS
from skald_host.core.storage import Migration, MigrationSet


def _reasons_shown_before(conn) -> None:
    """Migration 23: a card pending across the upgrade goes on saying what it said
    before (an operator probe saw the line vanish): the frame's outside-text mark as
    version 22 read it for every pending card, the frame's own or a sub-agent's below
    it, else the first attachment of a member's message in the frame. Frozen here as it
    was, not the store's code, which may change after this step."""
    pending = conn.execute(
        "SELECT a.id, t.frame_id FROM approvals a JOIN tool_calls t ON t.id = a.tool_call_id"
        " WHERE a.status = 'pending' AND t.frame_id IS NOT NULL"
    ).fetchall()
    for approval_id, frame_id in pending:
        row = conn.execute(
            "WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT f.id FROM frames f JOIN tree t ON f.caller_frame_id = t.id)"
            " SELECT f.untrusted FROM frames f JOIN tree USING (id) WHERE f.untrusted IS NOT NULL ORDER BY f.depth LIMIT 1",
            (frame_id,),
        ).fetchone()
        reason = row[0] if row is not None else None
        if reason is None:
            row = conn.execute(
                "SELECT attachments FROM messages WHERE frame_id = ? AND role = 'user' AND attachments NOT IN ('', '[]') ORDER BY id LIMIT 1",
                (frame_id,),
            ).fetchone()
            if row is not None:
                try:
                    first = json.loads(row[0])[0]
                    name = str(first.get("name") or first.get("path") or "") if isinstance(first, dict) else str(first)
                except (ValueError, IndexError, TypeError, AttributeError):
                    name = ""
                reason = json.dumps({"kind": "upload", "values": {"name": name.rsplit("/", 1)[-1]}})
        if reason is not None:
            conn.execute("UPDATE approvals SET untrusted = ? WHERE id = ?", (reason, approval_id))


OWNER_MIGRATIONS = MigrationSet(
    bucket="owner",
    steps=(
        Migration(
            1,
            "the member's private settings",
            statements=(
                """CREATE TABLE member_settings (
                    key TEXT PRIMARY KEY,
                    value TEXT NOT NULL,
                    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
            ),
        ),
        Migration(
            2,
            "conversations: frames, messages, tool calls, approvals, scheduled prompts, request payloads",
            statements=(
                """CREATE TABLE conversations (
                    id TEXT PRIMARY KEY,
                    source TEXT NOT NULL DEFAULT 'web',
                    agent_id TEXT NOT NULL,
                    title TEXT NOT NULL DEFAULT '',
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                "CREATE INDEX conversations_recent ON conversations(updated_at)",
                # The call stack: the root frame, and one more frame per sub-agent run.
                """CREATE TABLE frames (
                    id TEXT PRIMARY KEY,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    caller_frame_id TEXT REFERENCES frames(id) ON DELETE CASCADE,
                    spawned_by_call_id TEXT,
                    agent_id TEXT NOT NULL,
                    depth INTEGER NOT NULL DEFAULT 0,
                    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done', 'failed', 'cancelled')),
                    result TEXT,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    closed_at TEXT
                )""",
                "CREATE INDEX frames_conversation ON frames(conversation_id, depth)",
                """CREATE TABLE messages (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    frame_id TEXT NOT NULL REFERENCES frames(id) ON DELETE CASCADE,
                    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'summary', 'note')),
                    content TEXT NOT NULL DEFAULT '',
                    reasoning TEXT NOT NULL DEFAULT '',
                    status TEXT NOT NULL DEFAULT 'complete'
                        CHECK (status IN ('complete', 'streaming', 'interrupted', 'cancelled', 'error')),
                    model TEXT,
                    idempotency_key TEXT UNIQUE,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                "CREATE INDEX messages_frame ON messages(frame_id, id)",
                """CREATE TABLE tool_calls (
                    id TEXT PRIMARY KEY,
                    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    frame_id TEXT NOT NULL REFERENCES frames(id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL,
                    name TEXT NOT NULL,
                    arguments TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('requested', 'awaiting_approval', 'running', 'done',
                        'error', 'denied', 'cancelled', 'interrupted')),
                    result TEXT,
                    restart TEXT NOT NULL DEFAULT 'mark_interrupted',
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    finished_at TEXT
                )""",
                "CREATE INDEX tool_calls_message ON tool_calls(message_id, seq)",
                """CREATE TABLE approvals (
                    id TEXT PRIMARY KEY,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    tool_call_id TEXT NOT NULL REFERENCES tool_calls(id) ON DELETE CASCADE,
                    tool TEXT NOT NULL,
                    args_hash TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'used')),
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    expires_at TEXT NOT NULL,
                    resolved_at TEXT
                )""",
                "CREATE INDEX approvals_pending ON approvals(status, conversation_id)",
                """CREATE TABLE scheduled_jobs (
                    id TEXT PRIMARY KEY,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    prompt TEXT NOT NULL,
                    due_at TEXT NOT NULL,
                    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    finished_at TEXT
                )""",
                "CREATE INDEX scheduled_jobs_due ON scheduled_jobs(status, due_at)",
                # Messages that arrived while a turn ran: durable (an ack means stored), moved
                # into messages when the turn ends so they start the next one, in order.
                """CREATE TABLE inbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    content TEXT NOT NULL,
                    idempotency_key TEXT UNIQUE,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                """CREATE TABLE llm_request_payloads (
                    request_id TEXT PRIMARY KEY,
                    conversation_id TEXT,
                    request TEXT NOT NULL,
                    response TEXT,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
            ),
        ),
        Migration(3, "private memory notes: user-memory/…, searchable", statements=MEMORY_NOTES_STATEMENTS),
        Migration(
            4,
            "the member's inbox key pair",
            statements=(
                # The private half opens what was sealed for this member while they were
                # locked; it is only as private as this file.
                """CREATE TABLE inbox_key (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    private_key BLOB NOT NULL,
                    public_key BLOB NOT NULL,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
            ),
        ),
        Migration(
            5,
            "attachments of a message",
            statements=(
                # A JSON list of {path, name, mime, size}: agent paths of files the member
                # attached (uploads), kept with the message and with a queued one.
                "ALTER TABLE messages ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]'",
                "ALTER TABLE inbox ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]'",
            ),
        ),
        Migration(
            6,
            "how often this file was opened",
            statements=(
                # Raised at every unlock and mirrored in the registry's users row: the
                # registry ahead of this file means the file is an older copy (check G6).
                """CREATE TABLE generation (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    value INTEGER NOT NULL
                )""",
                "INSERT INTO generation (id, value) VALUES (1, 0)",
            ),
        ),
        Migration(
            7,
            "plugins' per-member secrets and events (contract 1.2)",
            statements=(
                # A plugin's secrets for this member (a connector's token): in this
                # encrypted file only, never in the registry.
                """CREATE TABLE plugin_secrets (
                    plugin_id TEXT NOT NULL,
                    name TEXT NOT NULL,
                    value TEXT NOT NULL,
                    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    PRIMARY KEY (plugin_id, name)
                )""",
                # What happened to this member in a plugin (an MCP server's notification),
                # for the member's own agents to read later.
                """CREATE TABLE plugin_events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    plugin_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    data TEXT NOT NULL,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                "CREATE INDEX plugin_events_by_plugin ON plugin_events (plugin_id, id)",
            ),
        ),
        Migration(
            8,
            "earlier versions (regenerate, edit); the model a conversation uses; full-text search",
            statements=(
                # 0: the version shown and sent to the model; n > 0: an earlier answer to
                # the same message, kept for the member to flip back to (never in history).
                "ALTER TABLE messages ADD COLUMN variant INTEGER NOT NULL DEFAULT 0",
                # For an earlier version: the row it follows (its branch point: the
                # member's message for a regenerated answer, the row before an edited
                # message, 0 for the start), where the versions are flipped between.
                "ALTER TABLE messages ADD COLUMN branch_point INTEGER",
                # The model the member picked for this conversation (a model id of the
                # registry), tried first; NULL: the agent's choice.
                "ALTER TABLE conversations ADD COLUMN model TEXT",
                # Full-text search over the member's and the assistant's words, inside
                # this (encrypted) file: its own copy of the text, by message id. Rows
                # are indexed when a search asks (``indexed`` 0 until then), not by a
                # trigger on every write: a message's commit, which its first token and
                # its answer's announcement wait for, costs no indexing (~0.3 ms for a
                # 1 kB answer). A finished row's text no longer changes.
                "ALTER TABLE messages ADD COLUMN indexed INTEGER NOT NULL DEFAULT 0",
                "CREATE INDEX messages_unindexed ON messages(id) WHERE indexed = 0",
                """CREATE VIRTUAL TABLE messages_fts USING fts5(
                    content, conversation_id UNINDEXED, tokenize='unicode61 remove_diacritics 2'
                )""",
                """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN old.indexed = 1 BEGIN
                    DELETE FROM messages_fts WHERE rowid = old.id;
                END""",
            ),
        ),
        Migration(
            9,
            "spoken audio cache",
            statements=(
                # One sentence's audio (a WAV) per key: a hash of engine, engine version,
                # voice, language and text. Kept here, in the member's own file, so what
                # was read aloud is as private as the conversation it came from.
                """CREATE TABLE tts_cache (
                    key TEXT PRIMARY KEY,
                    audio BLOB NOT NULL,
                    bytes INTEGER NOT NULL,
                    used_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                "CREATE INDEX tts_cache_used ON tts_cache(used_at)",
            ),
        ),
        Migration(
            10,
            "recurring scheduled prompts: cron, time zone, pause and last result",
            statements=(
                # A row without cron is a one-shot prompt, as every row before this step:
                # those keep working unchanged. A recurring row stays 'pending' and its
                # due_at moves to the next occurrence after each run (core/schedules).
                "ALTER TABLE scheduled_jobs ADD COLUMN cron TEXT",
                "ALTER TABLE scheduled_jobs ADD COLUMN timezone TEXT",
                # What the member wrote ("every weekday at 8"), shown beside the cron.
                "ALTER TABLE scheduled_jobs ADD COLUMN phrase TEXT",
                "ALTER TABLE scheduled_jobs ADD COLUMN paused INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE scheduled_jobs ADD COLUMN last_run_at TEXT",
                "ALTER TABLE scheduled_jobs ADD COLUMN last_status TEXT",
                "ALTER TABLE scheduled_jobs ADD COLUMN runs INTEGER NOT NULL DEFAULT 0",
            ),
        ),
        Migration(
            11,
            "system agents: attempt state, run log and own reports; ephemeral conversations",
            statements=(
                # When each agent last tried for this member (every pass, idle or not):
                # what due-ness is measured from, so it survives a restart (seed 000).
                # ``memo``: the agent's own small state (a cursor), JSON.
                """CREATE TABLE system_agent_state (
                    agent_id TEXT PRIMARY KEY,
                    last_attempt_at TEXT NOT NULL,
                    memo TEXT NOT NULL DEFAULT '{}'
                )""",
                # The run log, a history for the member (idle passes write nothing). A row
                # left ``running`` by a crash is swept to ``failed`` by the next pass of the
                # agent. ``stats``: the agent's counters, never contents.
                """CREATE TABLE system_agent_runs (
                    id TEXT PRIMARY KEY,
                    agent_id TEXT NOT NULL,
                    subject_user_id TEXT,
                    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
                    started_at TEXT NOT NULL,
                    finished_at TEXT,
                    stats TEXT NOT NULL DEFAULT '{}',
                    error TEXT
                )""",
                "CREATE INDEX system_agent_runs_agent ON system_agent_runs(agent_id, started_at)",
                # Reports (seed 001 "Reports"): the same table in the registry holds
                # reports for a member's supervisors; here, the member's own.
                """CREATE TABLE reports (
                    id TEXT PRIMARY KEY,
                    kind TEXT NOT NULL,
                    audience TEXT NOT NULL,
                    subject_user_id TEXT,
                    producer_user_id TEXT,
                    run_id TEXT,
                    agent_id TEXT NOT NULL,
                    title TEXT NOT NULL,
                    summary TEXT NOT NULL,
                    body TEXT NOT NULL,
                    period_start TEXT,
                    period_end TEXT,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    read_at TEXT
                )""",
                "CREATE INDEX reports_created ON reports(created_at)",
                # A system agent's pass talks with its model in a conversation of its own,
                # deleted afterwards; never listed, never reviewed.
                "ALTER TABLE conversations ADD COLUMN ephemeral INTEGER NOT NULL DEFAULT 0",
            ),
        ),
        Migration(
            12,
            "named sub-agent runs, their durable inbox and per-conversation inbox capacity",
            statements=(
                # One row per delegation (seed 004 §5): written before it runs, its terminal
                # state guarded by execution_id (a late, stale attempt writes nothing).
                """CREATE TABLE agent_runs (
                    id TEXT PRIMARY KEY,
                    execution_id TEXT NOT NULL UNIQUE,
                    runtime_generation TEXT NOT NULL,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    tree_id TEXT NOT NULL,
                    caller_run_id TEXT REFERENCES agent_runs(id) ON DELETE CASCADE,
                    ancestry TEXT NOT NULL DEFAULT '[]',
                    caller_agent_id TEXT NOT NULL,
                    caller_scope_id TEXT NOT NULL,
                    agent_id TEXT NOT NULL,
                    definition_hash TEXT NOT NULL,
                    model TEXT,
                    mode TEXT NOT NULL CHECK (mode IN ('foreground', 'background')),
                    depth INTEGER NOT NULL,
                    task TEXT NOT NULL,
                    budget TEXT NOT NULL DEFAULT '{}',
                    signal_contract TEXT,
                    status TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'waiting_delegates',
                        'completed', 'failed', 'timed_out', 'cancelled', 'interrupted')),
                    result TEXT,
                    error TEXT,
                    frame_id TEXT,
                    idempotency_key TEXT,
                    completion_slot_reserved INTEGER NOT NULL DEFAULT 0,
                    emitted_signals TEXT NOT NULL DEFAULT '[]',
                    revision INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
                    started_at TEXT,
                    finished_at TEXT
                )""",
                "CREATE INDEX agent_runs_conversation ON agent_runs(conversation_id, created_at)",
                "CREATE INDEX agent_runs_live ON agent_runs(status) WHERE status IN ('queued', 'running', 'waiting_delegates')",
                "CREATE INDEX agent_runs_tree ON agent_runs(tree_id)",
                # NULL keys take no part (seed 004 §8.14): in SQLite every NULL is distinct,
                # but a plain UNIQUE over a nullable column reads as a promise it is not.
                """CREATE UNIQUE INDEX agent_runs_idempotency ON agent_runs(conversation_id, caller_scope_id, idempotency_key)
                    WHERE idempotency_key IS NOT NULL""",
                """CREATE TABLE agent_inbox_events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    run_id TEXT NOT NULL REFERENCES agent_runs(id) ON DELETE CASCADE,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    event_type TEXT NOT NULL CHECK (event_type IN ('signal', 'completion')),
                    event_key TEXT NOT NULL,
                    delivery TEXT NOT NULL DEFAULT 'queue' CHECK (delivery IN ('queue', 'steer')),
                    requires_continuation INTEGER NOT NULL DEFAULT 1,
                    severity TEXT,
                    payload TEXT NOT NULL,
                    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'leased', 'admitted', 'consumed',
                        'superseded', 'dead_letter')),
                    attempt_count INTEGER NOT NULL DEFAULT 0,
                    lease_token TEXT,
                    lease_until REAL,
                    next_attempt_at REAL NOT NULL DEFAULT 0,
                    consumed_message_id INTEGER,
                    created_at REAL NOT NULL,
                    UNIQUE (run_id, event_type, event_key)
                )""",
                "CREATE INDEX agent_inbox_due ON agent_inbox_events(conversation_id, status, next_attempt_at)",
                # The authoritative capacity count per conversation: every change is a
                # conditional UPDATE (seed 004 §4.1), never an inferred COUNT(*).
                """CREATE TABLE agent_session_state (
                    conversation_id TEXT PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
                    pending_event_count INTEGER NOT NULL DEFAULT 0,
                    reserved_completion_slots INTEGER NOT NULL DEFAULT 0,
                    revision INTEGER NOT NULL DEFAULT 0,
                    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                )""",
                # A continuation turn's trigger: in the model's history, never on the member's screen.
                "ALTER TABLE messages ADD COLUMN origin TEXT",
            ),
        ),
        Migration(
            13,
            "the turn a steer event was admitted into",
            statements=(
                # Seed 004 §4.3: admit binds the event to its turn, in the admitting
                # transaction, so a turn's close and startup recovery give back what that
                # turn held from the file, not only from the process's memory.
                "ALTER TABLE agent_inbox_events ADD COLUMN admitted_turn_id TEXT",
                "CREATE INDEX agent_inbox_admitted ON agent_inbox_events(admitted_turn_id) WHERE admitted_turn_id IS NOT NULL",
            ),
        ),
        Migration(
            14,
            "why a message failed, as a code the reader's language words",
            statements=(
                # JSON {"code", "values"} (``store.reason_json``): a failed answer or an
                # error note is shown after a reload in the reader's language, as the
                # live event is; NULL for rows written before and for text without one.
                "ALTER TABLE messages ADD COLUMN reason TEXT",
            ),
        ),
        Migration(
            15,
            "the request log's rows on their way to the registry",
            statements=(
                # ``store.RequestOutbox``: a row of the registry's request log (metadata
                # only, as JSON) rides in the round's commit until the registry has it;
                # recovery gives the registry those a crash kept from it.
                """CREATE TABLE request_log_outbox (
                    request_id TEXT PRIMARY KEY,
                    entry TEXT NOT NULL
                )""",
            ),
        ),
        Migration(
            16,
            "one-shot prompts that ran before step 10 counted as run",
            statements=(
                # Step 10 added the run count and last result with their defaults only,
                # so a prompt that had already fired read "Finished, not run yet". A
                # one-shot row that ended done or failed ran once, when it finished.
                """UPDATE scheduled_jobs SET runs = 1, last_status = status, last_run_at = COALESCE(finished_at, due_at)
                   WHERE cron IS NULL AND runs = 0 AND status IN ('done', 'failed')""",
            ),
        ),
        Migration(
            17,
            "the catalog entry that wrote an answer",
            statements=(
                # Two providers may serve the same model name: ``model`` alone cannot say
                # which entry (label, provider) answered. The registry's ``llm_models.id``;
                # NULL for rows written before (they are named by ``model``).
                "ALTER TABLE messages ADD COLUMN model_id TEXT",
            ),
        ),
        Migration(
            18,
            "why a sub-agent run failed, as a code the reader's language words",
            statements=(
                # JSON {"code", "values"} (``store.reason_json``) beside the run's English
                # ``error``: the task strip and the helper's box word it as a turn's
                # failure is worded; NULL for runs written before and errors without one.
                "ALTER TABLE agent_runs ADD COLUMN reason TEXT",
            ),
        ),
        Migration(
            19,
            "system agents: a failed or idle pass looks again sooner than the interval",
            statements=(
                # When the last pass that did not start the interval looked (one that
                # failed: the next is due a backoff after it, doubling with ``failures``;
                # one that found no work: a cheap re-check after it), measured with the
                # interval as it is then. NULL: ``last_attempt_at`` plus the interval
                # applies, as for rows written before.
                "ALTER TABLE system_agent_state ADD COLUMN looked_at TEXT",
                "ALTER TABLE system_agent_state ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
            ),
        ),
        Migration(
            20,
            "why a tool call failed, as a code the reader's language words",
            statements=(
                # JSON {"code", "values"} (``store.reason_json``) beside the call's English
                # ``result`` (which the model reads as it is): a host-made tool error with a
                # code (a file that does not exist), which the tool card and the export word
                # in the reader's language. NULL for calls written before and results without one.
                "ALTER TABLE tool_calls ADD COLUMN reason TEXT",
            ),
        ),
        Migration(
            21,
            "a frame whose context holds text from outside (check E2)",
            statements=(
                # JSON {"kind", "values"}: the first source of untrusted text that entered
                # the frame (a connector's result, another member's shared file). Set once,
                # never cleared: while it is set, a side-effecting call the rules allow asks
                # the member first, also after a restart. NULL: nothing marked (rows
                # written before; attachments are read from the messages themselves).
                "ALTER TABLE frames ADD COLUMN untrusted TEXT",
            ),
        ),
        Migration(
            22,
            "whose file this is (checks B2/B4)",
            statements=(
                # The member id of the file's owner, written when the file is made and
                # compared at every open (``identity.file_owner``): an unencrypted file is
                # plain SQLite and would otherwise open at any member's path, so two files
                # swapped on disk showed each member the other's history. Empty in a file
                # from before: its member's next open writes it (trust on first use).
                """CREATE TABLE file_owner (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    member_id TEXT NOT NULL
                )""",
            ),
        ),
        Migration(
            23,
            "why an approval asks when the rules allowed the call (check E2)",
            statements=(
                # JSON {"kind", "values"}, the frame's outside text that turned an allowed
                # call into a question, as the live card said it; NULL when a rule asked
                # (the card has no "asked because"). A card pending across the upgrade
                # keeps the line it showed before (``_reasons_shown_before``).
                "ALTER TABLE approvals ADD COLUMN untrusted TEXT",
            ),
            apply=_reasons_shown_before,
        ),
    ),
)
