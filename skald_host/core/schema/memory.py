"""One definition of the memory note store, used by both buckets (seed 001 "Memory
namespace"): private notes in each member's own file, the shared pool in the registry.
Where a row lands is its audience, so nothing anywhere filters notes by reader.

``id`` is an explicit INTEGER PRIMARY KEY because the FTS index refers to rows by
rowid, and VACUUM may renumber an implicit rowid; ``key`` is the note's path inside
its store. The index is external-content (the text is stored once) and the triggers
keep it in step with every insert, update and delete.
"""

MEMORY_NOTES_STATEMENTS = (
    """CREATE TABLE memory_docs (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        content TEXT NOT NULL,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
    )""",
    """CREATE VIRTUAL TABLE memory_docs_fts USING fts5(
        key, content, content='memory_docs', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
    )""",
    """CREATE TRIGGER memory_docs_ai AFTER INSERT ON memory_docs BEGIN
        INSERT INTO memory_docs_fts (rowid, key, content) VALUES (new.id, new.key, new.content);
    END""",
    """CREATE TRIGGER memory_docs_ad AFTER DELETE ON memory_docs BEGIN
        INSERT INTO memory_docs_fts (memory_docs_fts, rowid, key, content) VALUES ('delete', old.id, old.key, old.content);
    END""",
    """CREATE TRIGGER memory_docs_au AFTER UPDATE ON memory_docs BEGIN
        INSERT INTO memory_docs_fts (memory_docs_fts, rowid, key, content) VALUES ('delete', old.id, old.key, old.content);
        INSERT INTO memory_docs_fts (rowid, key, content) VALUES (new.id, new.key, new.content);
    END""",
)
