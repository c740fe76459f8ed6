"""Seeded role labels and approval-rule notes are string keys (``core.seed.*``), read in
each reader's language. A registry written before that step keeps every label and note
an admin changed, and the untouched English seeds become the keys."""

from __future__ import annotations

from skald_host.builtins.strings import LOCALES
from skald_host.core.schema import REGISTRY_MIGRATIONS
from skald_host.core.schema.registry import _seed_texts_to_keys
from skald_host.core.storage import Database, MigrationSet
from skald_hookspecs import I18nBundle

STEP = next(step for step in REGISTRY_MIGRATIONS.steps if step.apply is _seed_texts_to_keys)


def before_the_step() -> MigrationSet:
    return REGISTRY_MIGRATIONS.before(STEP.version)


def through_the_step() -> MigrationSet:
    """Up to and including the step: later steps may seed rules of their own."""
    return REGISTRY_MIGRATIONS.before(STEP.version + 1)


async def labels_and_notes(registry: Database) -> tuple[dict[str, str], list[tuple[str, str, int]]]:
    roles = await registry.run(lambda c: dict(c.execute("SELECT id, label FROM roles").fetchall()))
    rules = await registry.run(
        lambda c: [tuple(r) for r in c.execute("SELECT tool_pattern, coalesce(path_class, ''), note, builtin FROM approval_rules ORDER BY id")]
    )
    return roles, rules


async def test_an_older_registry_gets_keys_where_the_seed_was_untouched(tmp_path):
    path = tmp_path / "system.db"
    registry = await Database.open(path, key=None, migrations=before_the_step(), create=True)

    def edit(conn) -> None:
        conn.execute("UPDATE roles SET label = 'Teens' WHERE id = 'restricted'")
        conn.execute("UPDATE approval_rules SET note = 'our own words' WHERE tool_pattern = 'notify'")
        conn.execute(
            "INSERT INTO approval_rules (tool_pattern, action, priority, note) VALUES ('my_tool', 'allow', 5, 'reading shared notes')"
        )

    await registry.transaction(edit)
    old_roles, old_rules = await labels_and_notes(registry)
    await registry.close()
    assert old_roles["admin"] == "Admin"

    registry = await Database.open(path, key=None, migrations=through_the_step())
    try:
        roles, rules = await labels_and_notes(registry)
    finally:
        await registry.close()
    assert roles == {"admin": "core.seed.role.admin", "member": "core.seed.role.member", "restricted": "Teens"}
    assert len(rules) == len(old_rules)
    by_tool = {(tool, path_class): (note, builtin) for tool, path_class, note, builtin in rules}
    assert by_tool[("notify", "")] == ("our own words", 1)  # an admin's note stays
    assert by_tool[("my_tool", "")] == ("reading shared notes", 0)  # an admin's own rule is never rewritten
    assert by_tool[("*", "")] == ("core.seed.rule.catch_all", 1)
    assert by_tool[("read_file", "shared-memory")] == ("core.seed.rule.shared_memory_read", 1)
    builtin_notes = {note for _, _, note, builtin in rules if builtin and note != "our own words"}
    assert all(note.startswith("core.seed.") for note in builtin_notes), builtin_notes


async def test_every_seeded_key_reads_in_english_and_german(tmp_path):
    registry = await Database.open(tmp_path / "system.db", key=None, migrations=REGISTRY_MIGRATIONS, create=True)
    try:
        roles, rules = await labels_and_notes(registry)
    finally:
        await registry.close()
    keys = {*roles.values(), *(note for _, _, note, _ in rules)}
    assert all(key.startswith("core.seed.") for key in keys), keys
    strings = I18nBundle.from_folder("core", LOCALES).strings
    for locale in ("en", "de"):
        missing = sorted(key for key in keys if key.removeprefix("core.") not in strings[locale])
        assert missing == [], f"{locale}.json lacks {missing}"
    assert strings["de"]["seed.role.restricted"] == "Kinder"
    assert strings["de"]["seed.rule.catch_all"] != strings["en"]["seed.rule.catch_all"]
