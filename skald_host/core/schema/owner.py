"""Owner migrations: one member's content, the same schema in every member's file.

Applied at unlock, not at boot — an owner file is unreadable until its member logs in.
"""

from skald_host.core.storage import Migration, MigrationSet

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
    ),
)
