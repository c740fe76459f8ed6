"""The two schema buckets of seed 001 ("DB tables"): the registry (system.db, readable
by the box owner) and the owner bucket (each member's own file). No foreign key may
point from an owner table to a registry table: SQLite cannot enforce a key across
files, and with foreign keys on every INSERT would fail."""

from skald_host.core.schema.owner import OWNER_MIGRATIONS
from skald_host.core.schema.registry import REGISTRY_MIGRATIONS

__all__ = ["OWNER_MIGRATIONS", "REGISTRY_MIGRATIONS"]
