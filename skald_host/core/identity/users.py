"""The member directory and the unlock map (seed 001 "users", §11).

The registry row holds the directory profile and the credentials; the member's content
lives in ``database/{id}.db``. An open owner ``Database`` *is* the unlock token: it is
opened with the DEK at login and closing it is what locks the member again (the key is
not kept anywhere else). Knows nothing about cookies or HTTP.

Cross-file ordering (check G5) — SQLite cannot commit two files atomically, so each
operation orders its writes so that a crash leaves something the boot reconciler can
recognise: registration creates the owner file *before* the registry row (a crash
leaves an unregistered file, quarantined at boot); deletion removes the row *before*
the file (same outcome).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import re
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, Protocol

from skald_hookspecs.events import SystemEvent
from skald_host.core.buses import Buses
from skald_host.core.faults import crash_point
from skald_host.core.identity.crypto import CredentialError, KeyDerivation, PasswordVerifier, SealedKey
from skald_host.core.identity.file_owner import DatabaseOfAnotherMember, check_file_owner
from skald_host.core.identity.passwords import check_password_policy
from skald_host.core.identity.sealing import ensure_inbox_key
from skald_host.core.identity.roles import ADMIN_ROLE, Role, RoleAttrs
from skald_host.core.refusal import Refusal
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.schema.registry import SEED_KEY_PREFIX
from skald_host.core.storage.permissions import fsync_dir
from skald_host.core.storage import (
    Database,
    DatabaseMissing,
    DatabaseUnreadable,
    DiskFailure,
    StorageError,
    copy_closed_database,
    quarantine,
    remove_database_files,
    secure_dir,
)
from skald_host.core.storage.quarantine import (
    QUARANTINE_DIR,
    mark_deletion,
    marked_deletions,
    read_deletion_note,
    remove_entries_of,
    unmark_deletion,
    write_deletion_note,
    write_private_file,
)
from skald_host.core.text import check_shown_name, letter_scripts, mixes_scripts, skeleton

log = logging.getLogger(__name__)

_USERNAME = re.compile(r"^[\w.@-]{1,64}$")
_MEMBER_ID = re.compile(r"^[0-9a-f]{32}$")
PROFILE_FIELDS = ("display_name", "locale", "birthdate", "sex", "notes")
_LIMITS = {"display_name": 100, "locale": 16, "sex": 40, "notes": 4000}


class MemberError(Refusal):
    """A request about a member that cannot be done; the message says why."""


class MemberNotFound(MemberError):
    pass


class ResetIncomplete(MemberError):
    """A data-losing admin reset that committed (the new password is set) but could not
    yet take away what the old password's holder reached on disk. The account stays
    closed (its sign-in completes the reset) until it can: never half a reset that
    shows the old files to the new password."""


#: Beside a database a reset quarantined: the wrapped key that opens it with the old password.
KEY_SUFFIX = ".key.json"


@dataclass(frozen=True)
class RecoveredReset:
    """What ``recover_reset`` did: the quarantined database that is the account's again,
    and where the one it replaced went (None if an earlier, interrupted run moved it)."""

    restored: Path
    set_aside: Path | None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return value if isinstance(value, dict) else None


def _key_file(member_id: str, credentials: str) -> bytes:
    """The key file beside a quarantined database: the registry's record of the
    replaced password, as it was (an Argon2id-derived key wrapping the database key,
    AES-GCM): it opens with that password only, as it did in the registry."""
    return json.dumps({"member_id": member_id, "credential_kind": "sealed_dek", "credentials": credentials}, indent=1).encode()


class ResetParticipant(Protocol):
    """Something besides the member's database that an account reaches and a
    data-losing admin reset takes away (their home, their folders). The new password
    may be the admin's choice: nothing the old password's holder kept or was given may
    be shown to it (SECURITY.md, "Password reset")."""

    async def check_set_aside(self, member_id: str, quarantine_dir: Path) -> None:
        """Before anything changes: raise ``MemberError`` when ``set_aside`` could not
        move what it holds into ``quarantine_dir`` (another disk, say), so the reset is
        refused whole instead of stopping half done."""

    def withdraw(self, conn: Any, member_id: str) -> None:
        """In the registry transaction that commits the reset: end what the account
        was given in the registry (memberships)."""

    async def set_aside(self, member_id: str, stem: Path) -> None:
        """After the commit, before the reset counts as done: move what the account
        holds on disk to ``stem`` plus a suffix of the participant's own, kept for the
        operator. Idempotent: run again at the member's next sign-in after a stop or a
        failure midway, so what was already moved is not looked for again."""

    async def restore(self, member_id: str, stem: Path) -> None:
        """After ``skald recover-reset`` gave the account its database from before a
        reset back: move what ``set_aside`` put at ``stem`` back where the account
        reaches it, if nothing has taken its place. Idempotent, as ``set_aside`` is.
        What the reset ended in the registry (memberships) is not given back."""


class DeletionParticipant(Protocol):
    """Something of a member's besides their database and quarantine entries that goes
    with their deletion (their own projects), finished under the same deletion mark: a
    stop between the registry commit and the removal leaves the mark, and the next
    start's ``reconcile`` finishes the same removal (README, "Deleting a member")."""

    #: The key of this participant's note in the mark.
    deletion_name: str

    def note_deletion(self, conn: Any, member_id: str) -> Any:
        """In the registry transaction that deletes the member, before their row goes:
        what ``finish_deletion`` needs that the commit takes away, as JSON. Kept in the
        deletion mark, written before the commit."""

    def finish_deletion(self, member_id: str, note: Any) -> None:
        """In a thread, after the commit, while the mark is still there: remove what
        was the member's. ``note`` is what ``note_deletion`` returned, None for a mark
        without one (left by a version before notes). Idempotent: run again at the next
        start after a stop or a failure (OSError) midway."""


class OwnerDatabaseUnavailable(Exception):
    """The password was right but the member's file is missing or unreadable. Said
    explicitly (it is not an enumeration leak: the password was verified first) so the
    admin knows to reset; the file has been quarantined, never replaced. ``code`` lets
    the web shell say which in the member's language."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values: dict[str, Any] = {}


@dataclass(frozen=True)
class Member:
    """A directory entry. Deliberately carries no credentials: it is safe to log, send
    to a plugin or serialise with ``summary()``."""

    id: str
    username: str
    display_name: str
    role: Role
    active: bool
    encrypted: bool
    locale: str | None
    birthdate: str | None
    sex: str | None
    notes: str
    created_at: str
    last_login_at: str | None
    plugin_grants: frozenset[str] = frozenset()
    #: When an admin's password reset lost their data (their old file set aside): they
    #: are told, instead of finding an empty account with no reason given.
    data_reset_at: str | None = None
    #: Their password is still the one an admin chose (at the member's creation or a
    #: reset): the admin knows what opens their data until they choose their own.
    password_set_by_admin: bool = False
    #: When an admin last deactivated them (UTC, milliseconds, as ``approvals.created_at``
    #: is written), or None: an approval card raised by then is withdrawn, never run,
    #: whether or not they were reactivated since (check C5).
    deactivated_at: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role.is_admin

    @property
    def capabilities(self) -> frozenset[str]:
        return self.role.capabilities

    @property
    def ui_mode(self) -> str:
        """The interface the member's role asks for (seed 001, "Role-driven interface"):
        ``simple`` trims the shell's pages; an admin always has the full one, or a role
        edit could hide the admin's own way back to the Roles page. Hiding pages is no
        access control: the capabilities still decide on the server."""
        return "full" if self.is_admin else self.role.attrs.ui_mode

    def summary(self, strings: Any = None, locale: str | None = None) -> dict[str, Any]:
        """With ``strings``: a preset role's label, stored as a ``core.seed.`` key, in
        ``locale``, as the shell's ``seeded()`` shows it: a client of the API reads the
        words, not the key; an admin's own wording stays as written. The roles API keeps
        the key, as that label is edited and sent back."""
        role_label = self.role.label
        if strings is not None and role_label.startswith(SEED_KEY_PREFIX):
            role_label = strings.lookup(role_label, locale) or role_label
        return {
            "id": self.id,
            "username": self.username,
            "display_name": self.display_name,
            "role": self.role.id,
            "role_label": role_label,
            "is_admin": self.is_admin,
            "active": self.active,
            "encrypted": self.encrypted,
            "locale": self.locale,
            "birthdate": self.birthdate,
            "sex": self.sex,
            "notes": self.notes,
            "created_at": self.created_at,
            "last_login_at": self.last_login_at,
            "data_reset_at": self.data_reset_at,
            "password_set_by_admin": self.password_set_by_admin,
        }


def username_key(username: str) -> str:
    """The account a typed name reaches (NFC, outer whitespace gone, lower case), valid
    or not: the login limit counts per this key, so " Gina" is not a fresh account."""
    return unicodedata.normalize("NFC", username).strip().lower()


def normalize_username(username: str) -> str:
    if not isinstance(username, str):
        raise MemberError("user name must be text", code="field_type", field="username")
    name = username_key(username)
    if not name.strip():  # missing, not malformed: "must be 1-64 letters…" did not say it was left empty
        raise MemberError("a user name is required", code="field_required", field="username")
    if not _USERNAME.match(name):
        raise MemberError("user name must be 1-64 letters, digits or . _ - @", code="username_invalid")
    if not name.strip("."):
        # "." and ".." name folders in paths built from user names (projects/<owner>/…).
        raise MemberError("user name must contain something besides dots", code="username_invalid")
    return name


def check_new_username(name: str) -> None:
    """A name a new account may take (``name`` as ``normalize_username`` returned it),
    beyond its form: none that passes for another. Refused are compatibility characters
    (full-width "ａｄｍｉｎ", ligatures, superscripts: the NFKC form differs) and letters
    of scripts that do not belong together ("аdmin" with a Cyrillic "а"); digits and
    ``. _ - @`` belong to no script. Only for new names: an existing account signs in
    under whatever it was created with."""
    compatible = unicodedata.normalize("NFKC", name)
    if compatible != name:
        odd = next((ch for ch in name if unicodedata.normalize("NFKC", ch) != ch), name[0])
        raise MemberError(
            f"user name contains {odd!r}, a compatibility form of {unicodedata.normalize('NFKC', odd)!r} (full-width,"
            " a ligature, a superscript…); type it as an ordinary character",
            code="username_compatibility_form", char=odd,
        )
    if mixes_scripts(name):
        scripts = ", ".join(script.title() for script in letter_scripts(name))
        raise MemberError(
            f"user name mixes letters of different scripts ({scripts}), so it could pass for another name;"
            " use letters of one script",
            code="username_mixed_scripts", scripts=scripts,
        )


def _look_alike(conn: Any, name: str) -> str | None:
    """An existing member's user name that reads as ``name`` (one confusable
    ``skeleton``: "асе" in Cyrillic beside "ace", "admın" or "adrnin" beside "admin"), other
    than ``name``."""
    wanted = skeleton(name)
    for (existing,) in conn.execute("SELECT username FROM users"):
        if existing != name and skeleton(existing) == wanted:
            return existing
    return None


def _refuse_look_alike(conn: Any, name: str) -> None:
    existing = _look_alike(conn, name)
    if existing is not None:
        raise MemberError(
            f"the user name {name!r} looks the same as the member {existing!r}'s; choose one that cannot be mistaken for it",
            code="username_confusable", name=existing,
        )


def validate_profile(fields: dict[str, Any]) -> dict[str, Any]:
    """Directory fields as the admin may set them; raises with the field and reason."""
    clean: dict[str, Any] = {}
    for key, value in fields.items():
        if key not in PROFILE_FIELDS:
            raise MemberError(f"unknown profile field {key!r}", code="fields_unknown", fields=str(key))
        if value is None:
            if key in ("display_name", "notes"):
                value = ""
            clean[key] = value
            continue
        if not isinstance(value, str):
            raise MemberError(f"{key} must be text", code="field_type", field=key)
        value = unicodedata.normalize("NFC", value).strip()
        if key == "birthdate" and value:
            try:
                day = dt.date.fromisoformat(value)
            except ValueError:
                raise MemberError("birthdate must be a date as YYYY-MM-DD", code="birthdate_invalid") from None
            if day > dt.date.today() or day.year < 1900:
                raise MemberError("birthdate must be a real date in the past", code="birthdate_invalid")
        elif key == "locale" and value and not re.match(r"^[a-z]{2,3}(-[A-Za-z]{2,4})?$", value):
            raise MemberError("locale must look like 'en' or 'de-CH'", code="locale_invalid")
        elif key in _LIMITS and len(value) > _LIMITS[key]:
            raise MemberError(f"{key} is longer than {_LIMITS[key]} characters", code="too_long", limit=_LIMITS[key])
        if key == "display_name":  # shown to other members: nothing in it may hide or reorder text
            check_shown_name(value, key, MemberError)
        clean[key] = value or (None if key in ("locale", "birthdate", "sex") else "")
    return clean


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def registry_time(seconds_ago: float = 0.0) -> str:
    """Now (or ``seconds_ago`` before) as SQLite's ``strftime('%Y-%m-%dT%H:%M:%fZ','now')``
    writes it (UTC, milliseconds: the files' ``created_at`` defaults): compared with those
    as text, so in the same spelling."""
    moment = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class UserManager:
    def __init__(self, registry: Database, database_dir: Path, kdf: KeyDerivation, buses: Buses) -> None:
        self.registry = registry
        self.database_dir = database_dir
        self.kdf = kdf
        self.buses = buses
        self._open: dict[str, Database] = {}
        self._unlock_locks: dict[str, asyncio.Lock] = {}
        # Per member: a password change commits under it, and an admin reset holds it from
        # its last look at the credentials through its commit, so the member's own change
        # lands either before that look (the reset is refused and signs no one out) or
        # after the reset's commit (the change is refused: the reset signed them out).
        self._credential_commits: dict[str, asyncio.Lock] = {}
        # Held by a backup while it copies system.db and then each member's file, and by
        # what would make the two disagree (a delete, an admin reset's new file and key).
        self.membership_changes = asyncio.Lock()
        # Members whose file turned out to be an older copy at a login since the start
        # (member id -> when): the admin status page lists them (check G6).
        self.older_copies: dict[str, str] = {}
        # Members locked again since the start (their last session ended: logout, idle
        # expiry, revocation), as opposed to never unlocked since: a channel tells a
        # member which of the two happened (``lock_reason``).
        self._locked_after_use: set[str] = set()
        # Called with a member id before their file closes, so whatever runs on it
        # (their chat turns) stops first. A direct call, never a bus: locking is part
        # of revocation.
        self.before_lock: list[Callable[[str], Awaitable[None]]] = []
        # Called with a member id after ``before_lock``, only when their file is open and
        # about to close, and once per close (a deletion or reset locks a member the
        # caller already locked; two locks may overlap): plugins' ``member_locking``.
        # What must run even when the file is not open (a runtime or sandbox built on
        # the way to the lock) belongs in ``before_lock``.
        self.before_close: list[Callable[[str], Awaitable[None]]] = []
        self._closing_told: set[str] = set()
        #: Members whose lock has begun: their file is still open for the callbacks
        #: above, but nothing new may start on it (``is_locking``).
        self._locking: set[str] = set()
        #: Members whose deletion has begun (``deleting``): what their lock cuts is
        #: accounted for at the lock, their file going before any recovery reads it.
        self._deleting: set[str] = set()
        # Called with a member id right after their file opened (not on a repeat
        # unlock): the sealed inbox delivers what arrived while they were locked.
        self.after_unlock: list[Callable[[str], Awaitable[None]]] = []
        # Called with a member id after their row and file are gone: what else holds
        # their private data (their home folder) goes too. A direct call, not the lossy
        # bus, so a busy moment cannot leave a deleted member's files behind.
        self.after_delete: list[Callable[[str], Awaitable[None]]] = []
        #: What goes with a member's deletion under its mark (``DeletionParticipant``).
        #: Registered before ``reconcile``, which finishes a deletion a stop cut short.
        self.deletion_participants: list[DeletionParticipant] = []
        # Called with a member id after their row (role, active flag, profile) or plugin
        # grants changed, before the change's request answers: what decides access from
        # the member as last read (their running turns) reads them again. A direct
        # call, never a bus: authorization is pushed.
        self.after_access_change: list[Callable[[str], Awaitable[None]]] = []
        #: ``get``'s last read of each member, with the registry's ``changes`` before it.
        self._read: dict[str, tuple[int, Member]] = {}
        # What a data-losing admin reset takes away besides the database (the home, the
        # folders, per-member plugin settings), in this order (the composition root
        # lists them).
        self.reset_participants: list[ResetParticipant] = []
        # Called with a member id once a data-losing reset is complete: what binds the
        # account to outside identities (a plugin's linked chat) is dropped before the
        # reset's request answers. A direct call, never a bus: it ends access.
        self.after_reset: list[Callable[[str], Awaitable[None]]] = []
        # Password changes and resets, counted as they start and as they commit: a
        # sign-in that checked a password while the member's changed is refused
        # (``credentials_changed_since``) rather than keep a session the change meant to end.
        self._credential_changes = 0
        self._credentials_changed: dict[str, int] = {}

    def credentials_mark(self) -> int:
        """Where the count of password changes stands; a sign-in takes it before it
        checks the password."""
        return self._credential_changes

    def credentials_changed_since(self, member_id: str, mark: int) -> bool:
        """Whether the member's password was changed or reset (begun or committed) since
        ``mark``: what was checked against it may be the old one."""
        return self._credentials_changed.get(member_id, 0) > mark

    def _credentials_changing(self, member_id: str) -> None:
        self._credential_changes += 1
        self._credentials_changed[member_id] = self._credential_changes

    def owner_path(self, member_id: str) -> Path:
        if not _MEMBER_ID.match(member_id):  # the id names a file: never let it be a path
            raise MemberNotFound("no such member", code="member_not_found")
        return self.database_dir / f"{member_id}.db"

    def reset_path(self, member_id: str) -> Path:
        """Where an admin reset builds the member's new, empty file: it takes the place
        of the old one only after the registry holds the new password."""
        return self.owner_path(member_id).with_name(f"{member_id}.db.reset")

    def reset_record_path(self, member_id: str) -> Path:
        """The wrapped key of the file a reset (or a recovery) is replacing, written
        before the registry's commit overwrites it and moved beside that file when it
        goes to the quarantine (``<stem>.key.json``): without it, the old database could
        not be opened even with the old password. Removed last, once the reset is
        complete on disk."""
        return self.owner_path(member_id).with_name(f"{member_id}.db.reset.key.json")

    def _discard_uncommitted_reset(self, member_id: str) -> None:
        """The record goes before the new file: a record without one means "swapped in,
        finish the rest" (``_complete_reset``), which an uncommitted reset must never read as."""
        self.reset_record_path(member_id).unlink(missing_ok=True)
        remove_database_files(self.reset_path(member_id))

    # -- reading ---------------------------------------------------------------

    def _role(self, conn: Any, role_id: str) -> Role:
        row = conn.execute("SELECT id, label, attrs, builtin FROM roles WHERE id = ?", (role_id,)).fetchone()
        caps = frozenset(r[0] for r in conn.execute("SELECT capability FROM role_capabilities WHERE role_id = ?", (role_id,)))
        return Role(row["id"], row["label"], RoleAttrs.parse(row["attrs"]), bool(row["builtin"]), caps)

    def _member(self, conn: Any, row: Any) -> Member:
        return Member(
            id=row["id"],
            username=row["username"],
            display_name=row["display_name"],
            role=self._role(conn, row["role_id"]),
            active=bool(row["active"]),
            encrypted=bool(row["encrypted"]),
            locale=row["locale"],
            birthdate=row["birthdate"],
            sex=row["sex"],
            notes=row["notes"],
            created_at=row["created_at"],
            last_login_at=row["last_login_at"],
            data_reset_at=row["data_reset_at"],
            password_set_by_admin=bool(row["password_set_by_admin"]),
            deactivated_at=row["deactivated_at"],
            plugin_grants=frozenset(
                r[0] for r in conn.execute("SELECT plugin_id FROM plugin_access WHERE user_id = ?", (row["id"],))
            ),
        )

    async def get(self, member_id: str) -> Member:
        """The member as the registry holds them now. Asked at every socket command and
        channel call (a role changed since the socket opened must hold), so the entry
        read last is kept while the registry has not been written since
        (``Database.changes``), instead of four queries and a thread hop each time."""
        seen = self.registry.changes
        kept = self._read.get(member_id)
        if kept is not None and kept[0] == seen:
            return kept[1]

        def read(conn: Any) -> Member | None:
            row = conn.execute("SELECT * FROM users WHERE id = ?", (member_id,)).fetchone()
            return self._member(conn, row) if row else None

        member = await self.registry.run(read)
        if member is None:
            self._read.pop(member_id, None)
            raise MemberNotFound("no such member", code="member_not_found")
        self._read[member_id] = (seen, member)
        return member

    async def find(self, username: str) -> Member | None:
        try:
            name = normalize_username(username)
        except MemberError:
            return None

        def read(conn: Any) -> Member | None:
            row = conn.execute("SELECT * FROM users WHERE username = ?", (name,)).fetchone()
            return self._member(conn, row) if row else None

        return await self.registry.run(read)

    async def list(self) -> list[Member]:
        def read(conn: Any) -> list[Member]:
            rows = conn.execute("SELECT * FROM users ORDER BY username").fetchall()
            return [self._member(conn, r) for r in rows]

        return await self.registry.run(read)

    async def count(self) -> int:
        return await self.registry.run(lambda c: c.execute("SELECT count(*) FROM users").fetchone()[0])

    # -- registration ------------------------------------------------------------

    async def register(
        self,
        username: str,
        password: str,
        *,
        role_id: str = "member",
        encrypted: bool = True,
        only_if_empty: bool = False,
        also: Callable[[Any], None] | None = None,
        set_by_admin: bool = False,
        **profile: Any,
    ) -> Member:
        """Create a member and their owner file. ``set_by_admin``: an admin chose the
        password (not the member: setup's first admin chose their own), so the member
        is asked to choose their own. ``only_if_empty`` makes the registry
        insert conditional on there being no member at all, atomically, which is what
        keeps twenty concurrent first-run setups down to one admin. ``also(conn)`` writes
        in the member's own transaction (setup's instance defaults: never one without
        the other)."""
        name = normalize_username(username)
        check_new_username(name)
        password = check_password_policy(password, user_name=name)
        profile = validate_profile(profile)

        def precheck(conn: Any) -> None:
            if conn.execute("SELECT 1 FROM roles WHERE id = ?", (role_id,)).fetchone() is None:
                raise MemberError(f"no such role {role_id!r}", code="role_not_found", name=role_id, field="role")
            if conn.execute("SELECT 1 FROM users WHERE username = ?", (name,)).fetchone():
                raise MemberError(f"the user name {name!r} is taken", code="username_taken", name=name)
            _refuse_look_alike(conn, name)

        await self.registry.run(precheck)
        member_id = uuid.uuid4().hex
        if encrypted:
            dek, sealed = await self.kdf.seal_new(password, member_id)
            kind, credentials = "sealed_dek", sealed.to_json()
        else:
            dek, kind = None, "verifier"
            credentials = (await self.kdf.make_verifier(password, member_id)).to_json()

        path = self.owner_path(member_id)
        secure_dir(self.database_dir)
        owner = await self._open_member_file(member_id, path, dek, create=True)
        try:
            inbox_public_key = (await ensure_inbox_key(owner)).public
        except BaseException:
            await owner.close()
            remove_database_files(path)  # no member row names it: a file nobody could open
            raise
        await owner.close()
        crash_point("register.after_owner_file")

        def insert(conn: Any) -> bool:
            if only_if_empty and conn.execute("SELECT 1 FROM users LIMIT 1").fetchone():
                return False
            if conn.execute("SELECT 1 FROM users WHERE username = ?", (name,)).fetchone():
                raise MemberError(f"the user name {name!r} is taken", code="username_taken", name=name)
            _refuse_look_alike(conn, name)  # again in the insert's transaction: two look-alikes racing
            conn.execute(
                "INSERT INTO users (id, username, display_name, role_id, encrypted, credential_kind, credentials,"
                " locale, birthdate, sex, notes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    member_id, name, profile.get("display_name") or name, role_id, int(encrypted), kind, credentials,
                    profile.get("locale"), profile.get("birthdate"), profile.get("sex"), profile.get("notes", ""),
                ),
            )
            conn.execute(
                "UPDATE users SET inbox_public_key = ?, password_set_by_admin = ? WHERE id = ?",
                (inbox_public_key, int(set_by_admin), member_id),
            )
            _seed_new_member_grants(conn, member_id, role_id)
            if also is not None:
                also(conn)
            return True

        try:
            inserted = await self.registry.transaction(insert)
        except BaseException:
            remove_database_files(path)
            raise
        if not inserted:
            remove_database_files(path)
            raise MemberError("the instance is already set up", code="already_set_up")
        member = await self.get(member_id)
        self.buses.system.publish(SystemEvent("member_created", member_id))
        log.info("member %s created (role %s, %s)", member_id, role_id, "encrypted" if encrypted else "not encrypted")
        return member

    # -- credentials -------------------------------------------------------------

    async def _credentials(self, member_id: str) -> tuple[str, str]:
        row = await self.registry.run(
            lambda c: c.execute("SELECT credential_kind, credentials FROM users WHERE id = ?", (member_id,)).fetchone()
        )
        if row is None:
            raise MemberNotFound("no such member", code="member_not_found")
        return row[0], row[1]

    async def verify_password(self, username: str, password: Any) -> tuple[Member, bytes | None]:
        """The member and their DEK (None for members without encryption), or the one
        generic ``CredentialError``. Unknown names and inactive members pay the same
        Argon2id cost as a wrong password, so timing does not tell them apart (A3)."""
        member = await self.find(username) if isinstance(username, str) else None
        if member is None or not isinstance(password, str):
            await self.kdf.dummy()
            raise CredentialError()
        kind, credentials = await self._credentials(member.id)
        dek = await self._open_credentials(member.id, kind, credentials, password)
        if not member.active:
            raise CredentialError()
        await self._upgrade_if_weaker(member.id, kind, credentials, password, dek)
        return member, dek

    async def _open_credentials(self, member_id: str, kind: str, credentials: str, password: str) -> bytes | None:
        if kind == "sealed_dek":
            return await self.kdf.unseal(password, member_id, SealedKey.from_json(credentials))
        await self.kdf.check_verifier(password, member_id, PasswordVerifier.from_json(credentials))
        return None

    async def _upgrade_if_weaker(self, member_id: str, kind: str, credentials: str, password: str, dek: bytes | None) -> None:
        """Raised KDF parameters re-wrap on the next successful login (B3)."""
        if kind == "sealed_dek" and dek is not None and self.kdf.needs_rewrap(SealedKey.from_json(credentials)):
            fresh = (await self.kdf.rewrap(dek, password, member_id)).to_json()
        elif kind == "verifier" and self.kdf.needs_new_verifier(PasswordVerifier.from_json(credentials)):
            fresh = (await self.kdf.make_verifier(password, member_id)).to_json()
        else:
            return
        await self.registry.transaction(
            lambda c: c.execute(
                "UPDATE users SET credentials = ?, updated_at = ? WHERE id = ? AND credentials = ?",
                (fresh, _now(), member_id, credentials),
            )
        )
        log.info("member %s: key re-wrapped with the configured KDF parameters", member_id)

    async def change_password(self, member_id: str, current: Any, new: Any) -> None:
        """Re-wrap the same DEK under the new password: one UPDATE of one row, so after a
        crash at any point exactly one of the two passwords opens the file (B5)."""
        member = await self.get(member_id)
        if not isinstance(current, str) or not isinstance(new, str):
            raise CredentialError()
        new = check_password_policy(new, user_name=member.username)
        kind, credentials = await self._credentials(member_id)
        self._credentials_changing(member_id)
        crash_point("password_change.before_kdf")
        dek = await self._open_credentials(member_id, kind, credentials, current)
        if kind == "sealed_dek":
            assert dek is not None
            fresh = (await self.kdf.rewrap(dek, new, member_id)).to_json()
        else:
            fresh = (await self.kdf.make_verifier(new, member_id)).to_json()
        crash_point("password_change.after_kdf")

        def update(conn: Any) -> int:
            count = conn.execute(
                "UPDATE users SET credentials = ?, updated_at = ?, password_set_by_admin = 0 WHERE id = ? AND credentials = ?",
                (fresh, _now(), member_id, credentials),
            ).rowcount
            crash_point("password_change.in_transaction")
            return count

        async with self._credential_commits.setdefault(member_id, asyncio.Lock()):
            committed = await self.registry.transaction(update)
        self._credentials_changing(member_id)
        if committed != 1:
            raise MemberError("the password was changed concurrently; try again", code="try_again")
        crash_point("password_change.after_commit")
        log.info("member %s changed their password", member_id)

    async def reset_password(
        self, member_id: str, new_password: str, *, set_by_admin: bool = True,
        before_commit: Callable[[], Awaitable[Any]] | None = None,
    ) -> Path | None:
        """Admin reset (``set_by_admin``: the new password is the admin's choice, so the
        member is asked to choose their own; ``skald reset-password`` of an admin's own
        account says False). For an encrypted member the old key went with the old password,
        so they get a new empty database and the old file is kept, unreadable, in
        quarantine; returns its new path. What else the old password's holder reached
        goes with it (``reset_participants``): their home is moved beside the old file,
        their shared folders and projects end, their plugin settings are deleted.

        ``before_commit`` (the admin's route: revoke the member's sessions, which locks
        them and removes their sandbox, with it the old home's mount) is awaited once
        the new file is made and before anything of the member's changes: a reset that
        fails while preparing (a full disk, a home on another disk) leaves the member
        signed in, with their unchanged password, instead of signing them out for a
        reset that never happened."""
        async with self.membership_changes:
            return await self._reset_password(member_id, new_password, set_by_admin, before_commit)

    def quarantine_dir(self) -> Path:
        return self.database_dir / QUARANTINE_DIR

    async def _reset_password(
        self, member_id: str, new_password: str, set_by_admin: bool = True,
        before_commit: Callable[[], Awaitable[Any]] | None = None,
    ) -> Path | None:
        member = await self.get(member_id)
        new_password = check_password_policy(new_password, user_name=member.username)
        self._credentials_changing(member_id)
        path = self.owner_path(member_id)
        old = None
        if member.encrypted:
            # Refused whole, before anything changes, when what goes with the data
            # could not follow it into the quarantine.
            try:
                quarantine_dir = await asyncio.to_thread(secure_dir, self.quarantine_dir())
            except OSError as exc:  # a plain file where the folder goes, a read-only disk
                raise MemberError(
                    f"the quarantine folder database/{QUARANTINE_DIR} cannot be made or used ({exc.strerror or type(exc).__name__}):"
                    " nothing was changed; the operator must fix it first",
                    code="quarantine_unavailable",
                ) from None
            for participant in self.reset_participants:
                await participant.check_set_aside(member_id, quarantine_dir)
            # The new file is made beside the old one, which stays in place (and opens
            # with the old password) until the registry holds the new one: a crash on
            # the way loses neither. After the commit it is swapped in here, or, after a
            # crash, at the member's next login (``_finish_reset``).
            fresh = self.reset_path(member_id)
            await asyncio.to_thread(self._discard_uncommitted_reset, member_id)  # a reset cut short before the commit
            _, replaced = await self._credentials(member_id)
            dek, sealed = await self.kdf.seal_new(new_password, member_id)
            credentials = sealed.to_json()
            owner = await self._open_member_file(member_id, fresh, dek, create=True)
            try:
                inbox_public_key = (await ensure_inbox_key(owner)).public
            finally:
                await owner.close()
            # The old wrapped key, the only way into the old file, before the commit
            # overwrites the registry's copy of it (``reset_record_path``).
            await asyncio.to_thread(self._write_reset_record, member_id, replaced, "admin-reset", None)
            crash_point("admin_reset.before_commit")
        else:
            # Not keyed by the password: the member keeps their data, home and folders.
            credentials = (await self.kdf.make_verifier(new_password, member_id)).to_json()
            inbox_public_key = None
            if not path.exists():
                owner = await self._open_member_file(member_id, path, None, create=True)
                await owner.close()

        def update(conn: Any) -> int:
            if member.encrypted:
                # Only over the key the record kept: a password change that slipped in
                # would otherwise leave the old file beside a key that does not open it.
                changed = conn.execute(
                    "UPDATE users SET credentials = ?, updated_at = ?, password_set_by_admin = ? WHERE id = ? AND credentials = ?",
                    (credentials, _now(), int(set_by_admin), member_id, replaced),
                ).rowcount
                if changed != 1:
                    return 0
            else:
                conn.execute(
                    "UPDATE users SET credentials = ?, updated_at = ?, password_set_by_admin = ? WHERE id = ?",
                    (credentials, _now(), int(set_by_admin), member_id),
                )
            if member.encrypted:  # a new file, opened never
                conn.execute("UPDATE users SET owner_generation = 0, data_reset_at = ? WHERE id = ?", (_now(), member_id))
                # With the new password: whoever holds it starts with nothing (the
                # memberships end with the data, in the same commit).
                for participant in self.reset_participants:
                    participant.withdraw(conn, member_id)
            if inbox_public_key is not None:
                # The new file has a new inbox key: what was sealed to the old one can
                # never be opened, so it goes with the old file.
                conn.execute("UPDATE users SET inbox_public_key = ? WHERE id = ?", (inbox_public_key, member_id))
                conn.execute("DELETE FROM sealed_messages WHERE member_id = ?", (member_id,))
            return 1

        # Prepared: only now is the member signed out and locked (their file closes, so
        # nothing writes to the one the commit replaces), and only if their password is
        # still the one the reset started from: a reset the commit's guard (the
        # credentials the record kept) would refuse must not sign out the member whose
        # own change beat it (a crash probe found her new session answering 401 after the
        # reset failed). Under ``_credential_commits`` from that look to the commit: a
        # change of theirs cannot slip in between.
        async with self._credential_commits.setdefault(member_id, asyncio.Lock()):
            try:
                if member.encrypted and (await self._credentials(member_id))[1] != replaced:
                    self._credentials_changing(member_id)
                    raise MemberError("the password was changed concurrently; try again", code="try_again")
                if before_commit is not None:
                    await before_commit()
                await self.lock(member_id)
            except BaseException:
                if member.encrypted:
                    await asyncio.to_thread(self._discard_uncommitted_reset, member_id)
                raise
            await self._commit_swap(member_id, update, "admin_reset.after_commit")
        if member.encrypted:
            # Under the unlock lock: a sign-in with the new password racing this waits,
            # and then finds the reset complete (or completes it itself). A connection a
            # sign-in with the old password opened meanwhile (it is refused: the
            # credentials changed under it) is to the old file: closed before the swap,
            # so that nobody is handed it as the member's file.
            async with self._unlock_locks.setdefault(member_id, asyncio.Lock()):
                stale = self._open.pop(member_id, None)
                if stale is not None:
                    await stale.close()
                old = await self._complete_reset(member_id)
            log.warning("member %s: password reset by an admin; previous database and home quarantined", member_id)
            for callback in self.after_reset:
                try:
                    await callback(member_id)
                except Exception:
                    log.exception("after-reset callback failed for member %s", member_id)
        else:
            log.warning("member %s: password reset by an admin; data kept (not encrypted)", member_id)
        return old

    async def _commit_swap(self, member_id: str, update: Callable[[Any], int], crash_name: str) -> None:
        """The registry's half of a reset or its recovery: ``update`` commits the new
        credentials only over those the swap was prepared against (1, else 0: changed
        meanwhile, and the prepared file goes, nothing changed)."""
        committed = await self.registry.transaction(update)
        self._credentials_changing(member_id)
        if not committed:
            await asyncio.to_thread(self._discard_uncommitted_reset, member_id)
            raise MemberError("the password was changed concurrently; try again", code="try_again")
        crash_point(crash_name)

    async def _complete_reset(self, member_id: str) -> Path | None:
        """The committed reset (or recovery, ``recover_reset``) made real on disk: the
        replaced file quarantined with its wrapped key beside it (``<stem>.key.json``),
        what else the account reached set aside beside it, then the new file in the old
        one's place, then (a recovery) what the account gets back. The new file
        (``reset_path``) and then the record (``reset_record_path``) are the marks of a
        reset not yet complete and go last: after a stop or a failure at any step, the
        member's next sign-in runs this again (``_finish_reset``) before anything of
        theirs opens. Returns where the old file went (None when an earlier run moved it
        already)."""
        path, fresh, pending = self.owner_path(member_id), self.reset_path(member_id), self.reset_record_path(member_id)
        record = await asyncio.to_thread(_read_json, pending)
        old = None
        if fresh.exists():
            old = await self._set_aside_replaced(member_id, record)

            def swap_in() -> None:
                fresh.rename(path)
                fsync_dir(self.database_dir)

            await asyncio.to_thread(swap_in)
        if record is not None and record.get("restores"):
            await self._bring_back(member_id, self.quarantine_dir() / record["restores"])
        if record is not None:

            def done() -> None:
                pending.unlink(missing_ok=True)
                fsync_dir(self.database_dir)

            await asyncio.to_thread(done)
        return old

    async def _set_aside_replaced(self, member_id: str, record: dict[str, Any] | None) -> Path | None:
        path = self.owner_path(member_id)
        reason = (record or {}).get("set_aside_as", "admin-reset")
        if path.exists():
            if record is None:  # a reset begun by a Skald that kept no record
                log.warning("member %s: no wrapped key was kept for the replaced database; it cannot be opened again", member_id)
            companions = {KEY_SUFFIX: _key_file(member_id, record["credentials"])} if record is not None else None
            old = await asyncio.to_thread(quarantine, path, reason, companions)
        else:
            old = None
        crash_point("admin_reset.after_quarantine")
        if old is not None:
            stem = old.with_name(old.name.removesuffix(".db"))
        else:  # moved before a stop: what is still to move gets a name of its own time
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            stem = self.quarantine_dir() / f"{member_id}.{stamp}.{reason}"
        for participant in self.reset_participants:
            try:
                await participant.set_aside(member_id, stem)
            except Exception as exc:  # the detail (paths) is the operator's, in the log
                log.exception("member %s: an admin reset could not set aside what the account reached", member_id)
                reason = getattr(exc, "strerror", None) or type(exc).__name__
                raise ResetIncomplete(
                    "the new password is set and the previous data is set aside, but the member's home folder or "
                    f"projects could not be moved to the quarantine ({reason}). The member cannot sign in until they "
                    "are: fix the disk (see the server log); their next sign-in then completes the reset",
                    code="reset_incomplete",
                ) from None
        crash_point("admin_reset.after_set_aside")
        return old

    async def _bring_back(self, member_id: str, stem: Path) -> None:
        """A recovery's last step: what the reset set aside at ``stem`` goes back to the
        account, and the quarantined database (copied into place before the commit) and
        its key file, now the account's again, leave the quarantine."""
        for participant in self.reset_participants:
            await participant.restore(member_id, stem)

        def remove_copy() -> None:
            remove_database_files(stem.with_name(stem.name + ".db"))
            stem.with_name(stem.name + KEY_SUFFIX).unlink(missing_ok=True)
            fsync_dir(stem.parent)

        await asyncio.to_thread(remove_copy)

    def _write_reset_record(self, member_id: str, credentials: str, set_aside_as: str, restores: str | None) -> None:
        record = {"member_id": member_id, "credentials": credentials, "set_aside_as": set_aside_as, "restores": restores}
        write_private_file(self.reset_record_path(member_id), json.dumps(record).encode())

    # -- bringing back a database a reset quarantined ---------------------------------

    def quarantined_resets(self, member_id: str) -> list[Path]:
        """The member's quarantined databases that have their wrapped key beside them
        (``<stem>.db`` with ``<stem>.key.json``), oldest first."""
        self.owner_path(member_id)  # checks the id
        found = []
        for key in sorted(self.quarantine_dir().glob(f"{member_id}.*{KEY_SUFFIX}")):
            database = key.with_name(key.name.removesuffix(KEY_SUFFIX) + ".db")
            if database.is_file():
                found.append(database)
        return found

    async def recover_reset(self, member_id: str, old_password: str, source: str | None = None) -> RecoveredReset:
        """``skald recover-reset``: the member remembered the password a reset replaced.
        The quarantined database (``source``: its file name; default the newest an
        admin reset set aside) opens with the wrapped key beside it and that password
        (``CredentialError`` if not, nothing changed); then it becomes the account's
        again with that password, its home comes back, and what the account holds now
        is set aside as a reset would (with its own key file): the same steps as a
        reset, so the same crash points and the same completion at the next sign-in.
        Memberships the reset ended stay ended. The caller has revoked the member's
        sessions."""
        async with self.membership_changes:
            return await self._recover_reset(member_id, old_password, source)

    async def _recover_reset(self, member_id: str, old_password: str, source: str | None) -> RecoveredReset:
        member = await self.get(member_id)
        if not member.encrypted:
            raise MemberError("this account's data is not encrypted: a reset kept it, there is nothing to recover",
                              code="recover_not_encrypted")
        fresh = self.reset_path(member_id)
        if fresh.exists() or self.reset_record_path(member_id).exists():
            raise MemberError("a reset of this account is not complete yet: its next sign-in completes it; try again after that",
                              code="recover_reset_pending")
        candidates = await asyncio.to_thread(self.quarantined_resets, member_id)
        if source is not None:
            name = source if source.endswith(".db") else f"{source}.db"
            chosen = [p for p in candidates if p.name == name]
        else:
            chosen = [p for p in candidates if ".admin-reset" in p.name][-1:]
        if not chosen:
            raise MemberError("no quarantined database of this account with its key file"
                              + (f" is named {source!r}" if source else " was found"), code="recover_nothing_found")
        database = chosen[0]
        stem = database.with_name(database.name.removesuffix(".db"))
        record = await asyncio.to_thread(_read_json, stem.with_name(stem.name + KEY_SUFFIX))
        if not record or record.get("member_id") != member_id or not isinstance(record.get("credentials"), str):
            raise MemberError(f"the key file beside {database.name} is not one of this account's", code="recover_nothing_found")
        restored = record["credentials"]
        dek = await self.kdf.unseal(old_password, member_id, SealedKey.from_json(restored))  # CredentialError: nothing changed
        self._credentials_changing(member_id)
        await self.lock(member_id)
        _, current = await self._credentials(member_id)
        # A copy: until the commit the quarantined file stays where it was, and a copy an
        # uncommitted recovery leaves is removed as an uncommitted reset's new file is.
        await asyncio.to_thread(self._discard_uncommitted_reset, member_id)
        await asyncio.to_thread(copy_closed_database, database, fresh)
        try:
            owner = await self._open_member_file(member_id, fresh, dek, verify_pages=True)
        except (DatabaseMissing, DatabaseUnreadable, StorageError):
            await asyncio.to_thread(self._discard_uncommitted_reset, member_id)
            raise MemberError(f"{database.name} does not open with the key beside it; nothing was changed",
                              code="recover_unreadable") from None
        try:
            inbox_public_key = (await ensure_inbox_key(owner)).public
            generation = await owner.run(lambda c: c.execute("SELECT value FROM generation WHERE id = 1").fetchone()[0])
        finally:
            await owner.close()
        await asyncio.to_thread(self._write_reset_record, member_id, current, "replaced-by-recovery", stem.name)
        crash_point("recover_reset.before_commit")

        def update(conn: Any) -> int:
            changed = conn.execute(
                "UPDATE users SET credentials = ?, updated_at = ?, password_set_by_admin = 0, owner_generation = ?,"
                " data_reset_at = NULL, inbox_public_key = ? WHERE id = ? AND credentials = ?",
                (restored, _now(), generation, inbox_public_key, member_id, current),
            ).rowcount
            if changed != 1:
                return 0
            # What the account was given since the reset was given to the new password's
            # holder: it ends, as the reset ended what the old one had.
            for participant in self.reset_participants:
                participant.withdraw(conn, member_id)
            conn.execute("DELETE FROM sealed_messages WHERE member_id = ?", (member_id,))
            return 1

        await self._commit_swap(member_id, update, "recover_reset.after_commit")
        async with self._unlock_locks.setdefault(member_id, asyncio.Lock()):
            stale = self._open.pop(member_id, None)
            if stale is not None:
                await stale.close()
            set_aside = await self._complete_reset(member_id)
        log.warning("member %s: the database a reset replaced (%s) is theirs again; the one it replaced is quarantined",
                    member_id, database.name)
        for callback in self.after_reset:
            try:
                await callback(member_id)
            except Exception:
                log.exception("after-reset callback failed for member %s", member_id)
        return RecoveredReset(restored=database, set_aside=set_aside)

    async def _finish_reset(self, member_id: str, dek: bytes | None) -> None:
        """At login: an admin reset a crash (or a failure) cut short. Its new file
        opens with the key the registry's password gives only if the reset was
        committed: then it is completed. Otherwise it is the leftover of a reset that
        never happened, and goes. Runs under the member's unlock lock."""
        fresh = self.reset_path(member_id)
        if fresh.exists():  # else swapped in already: only the record's last steps are left
            try:
                probe = await self._open_member_file(member_id, fresh, dek, verify_pages=True)
            except (DatabaseMissing, DatabaseUnreadable, StorageError):
                log.warning("member %s: removed the new file of an admin reset that was not committed", member_id)
                await asyncio.to_thread(self._discard_uncommitted_reset, member_id)
                return
            await probe.close()
        try:
            moved = await self._complete_reset(member_id)
        except ResetIncomplete:
            raise OwnerDatabaseUnavailable(
                "an admin reset of your password is not complete yet; an admin must look at the server log",
                code="owner_db_reset_incomplete",
            ) from None
        log.warning("member %s: an admin reset cut short is complete%s", member_id,
                    f"; previous database quarantined as {moved.name}" if moved else "")

    # -- unlock / lock -------------------------------------------------------------

    async def unlock(self, member_id: str, dek: bytes | None) -> Database:
        """Open the member's file (idempotent). A missing or unreadable file is never
        replaced: it is quarantined and the error says so."""
        lock = self._unlock_locks.setdefault(member_id, asyncio.Lock())
        async with lock:
            existing = self._open.get(member_id)
            if existing is not None and not existing.closed:
                return existing
            path = self.owner_path(member_id)
            if dek is not None and (self.reset_path(member_id).exists() or self.reset_record_path(member_id).exists()):
                await self._finish_reset(member_id, dek)
            try:
                # ``reader``: a member's searches read beside their writes (``ConversationStore.conversations``).
                db = await self._open_member_file(member_id, path, dek, verify_pages=True, reader=True)
            except DatabaseMissing:
                log.error("member %s: private database file is missing", member_id)
                raise OwnerDatabaseUnavailable(
                    "your private database is missing on the server (a damaged one is set aside in its quarantine"
                    " folder, not deleted); ask the server's operator: a password reset gives you a new, empty account",
                    code="owner_db_missing",
                ) from None
            except DatabaseUnreadable as exc:
                raise self._set_aside_unreadable(member_id, path, exc) from None
            except StorageError as exc:  # e.g. a migration that failed: the file is left as it is
                log.error("member %s: private database could not be opened: %s", member_id, exc)
                raise OwnerDatabaseUnavailable(
                    "your private database could not be opened; an admin must look at the server log",
                    code="owner_db_unopenable",
                ) from None
            self._open[member_id] = db
            self._locked_after_use.discard(member_id)
            await self._count_opening(member_id, db)
            await self._publish_inbox_key(member_id, db)
        for callback in self.after_unlock:
            try:
                await callback(member_id)
            except Exception:
                log.exception("after-unlock callback failed for member %s", member_id)
        return db

    async def _count_opening(self, member_id: str, db: Database) -> None:
        """Raise the file's open counter, then the registry's mirror of it. A file
        behind the registry is an older copy put back (one member's file restored from
        an old backup, or swapped by hand), which SQLCipher itself cannot tell (check
        G6). The admin reads it in the log; the member goes on with what the file holds.
        Never blocks the login."""

        def count(conn: Any, at_least: int = 0) -> int:
            conn.execute("UPDATE generation SET value = max(value + 1, ?) WHERE id = 1", (at_least,))
            return conn.execute("SELECT value FROM generation WHERE id = 1").fetchone()[0]

        def registry_count(conn: Any) -> int:
            row = conn.execute("SELECT owner_generation FROM users WHERE id = ?", (member_id,)).fetchone()
            return row[0] if row else 0

        try:
            opened = await db.transaction(count)
            expected = await self.registry.run(registry_count)
            if opened <= expected:
                log.error(
                    "member %s: private database is an older copy (opened %d times, the registry counted %d): "
                    "what changed after that copy was made is not in it",
                    member_id, opened - 1, expected,
                )
                self.older_copies[member_id] = _now()
                opened = await db.transaction(lambda c: count(c, expected + 1))
            await self.registry.transaction(
                lambda c: c.execute("UPDATE users SET owner_generation = ? WHERE id = ?", (opened, member_id))
            )
        except DiskFailure as exc:  # the disk is full: said at start and by every write, once here
            log.warning("member %s: the file's open counter could not be kept: %s", member_id, exc)
        except Exception:
            log.exception("member %s: the file's open counter could not be kept", member_id)

    async def _publish_inbox_key(self, member_id: str, db: Database) -> None:
        """The registry's public key follows the private key in the member's file: made
        here for members created before the inbox existed, and replaced after an admin
        reset gave them a new file. Never blocks the login."""
        try:
            public = (await ensure_inbox_key(db)).public
            await self.registry.transaction(
                lambda c: c.execute(
                    "UPDATE users SET inbox_public_key = ? WHERE id = ? AND inbox_public_key IS NOT ?",
                    (public, member_id, public),
                )
            )
        except Exception:
            log.exception("member %s: the inbox key could not be published", member_id)

    async def open_unencrypted(self, member_id: str) -> Database:
        """A member's file opened without their login, for work over it that runs
        unattended (a supervisor's review, seed 000): only a member who chose no
        encryption, whose password guards the session and not the data. An encrypted
        member is refused (``MemberError``): there is no key to be had. The handle is
        the caller's to close and is not "unlocked" to anything else."""
        member = await self.get(member_id)
        if member.encrypted:
            raise MemberError("the member's file is encrypted; it opens only with their login", code="member_file_encrypted")
        path = self.owner_path(member_id)
        try:
            return await self._open_member_file(member_id, path, None)
        except DatabaseOfAnotherMember as exc:  # as at their login: never read as theirs
            async with self._unlock_locks.setdefault(member_id, asyncio.Lock()):
                if path.exists():
                    raise self._set_aside_unreadable(member_id, path, exc) from None
            raise

    async def _open_member_file(self, member_id: str, path: Path, dek: bytes | None, *, create: bool = False,
                                **options: Any) -> Database:
        """The one way a member's file is opened (made, unlocked, probed, recovered or
        read unattended): with the owner migrations, and refused
        (``DatabaseOfAnotherMember``, a ``DatabaseUnreadable``) when the file names
        another member as its owner. A new file, or one from before the record, is
        recorded as ``member_id``'s here (``file_owner``: trust on first use)."""
        db = await Database.open(path, key=dek, migrations=OWNER_MIGRATIONS, create=create, **options)
        try:
            await check_file_owner(db, member_id, new=create)
        except BaseException:
            await db.close()
            raise
        return db

    def _set_aside_unreadable(self, member_id: str, path: Path, error: DatabaseUnreadable) -> OwnerDatabaseUnavailable:
        """Quarantine a member's file that does not open as theirs (a wrong key, a
        corrupt file, another member's file) and word the refusal: the file is never
        replaced, and the member is told an admin must reset their password."""
        if isinstance(error, DatabaseOfAnotherMember):
            moved = quarantine(path, "another-members-file")
            log.error("member %s: private database is member %s's file; quarantined as %s",
                      member_id, error.owner_id, moved.name)
        else:
            moved = quarantine(path, "unreadable")
            log.error("member %s: private database unreadable; quarantined as %s", member_id, moved.name)
        return OwnerDatabaseUnavailable(
            "your private database could not be read and was set aside; an admin must reset your password",
            code="owner_db_unreadable",
        )

    def owner_db(self, member_id: str) -> Database | None:
        db = self._open.get(member_id)
        return db if db is not None and not db.closed else None

    def is_unlocked(self, member_id: str) -> bool:
        return self.owner_db(member_id) is not None

    def lock_reason(self, member_id: str) -> str:
        """Why a locked member is locked: ``logged_out`` (unlocked since the start, then
        their last session ended) or ``restarted`` (not logged in since the start)."""
        return "logged_out" if member_id in self._locked_after_use else "restarted"

    @property
    def unlocked_ids(self) -> list[str]:
        return [m for m in self._open if self.is_unlocked(m)]

    async def lock(self, member_id: str) -> None:
        self._locking.add(member_id)
        told = False
        try:
            for callback in self.before_lock:
                try:
                    await callback(member_id)
                except Exception:
                    log.exception("before-lock callback failed for member %s", member_id)
            if self.owner_db(member_id) is not None and member_id not in self._closing_told:
                # The file is open and this lock closes it: told once (an overlapping or
                # repeated lock of the same member, a closed file, tell nothing).
                self._closing_told.add(member_id)
                told = True
                for callback in self.before_close:
                    try:
                        await callback(member_id)
                    except Exception:
                        log.exception("before-close callback failed for member %s", member_id)
            # Under the unlock lock: a backup copying the file as closed, or an unlock
            # opening it, never overlaps the close.
            async with self._unlock_locks.setdefault(member_id, asyncio.Lock()):
                db = self._open.pop(member_id, None)
                if db is not None:
                    await db.close()
                    self._locked_after_use.add(member_id)
                    log.info("member %s locked", member_id)
        finally:
            if told:
                self._closing_told.discard(member_id)
            self._locking.discard(member_id)

    def is_locking(self, member_id: str) -> bool:
        """The member's lock has begun and their file is about to close: a chat runtime
        built now on it would outlive it (a phone asking meanwhile made one whose file
        then closed, and the member's next login found it dead)."""
        return member_id in self._locking

    def is_deleting(self, member_id: str) -> bool:
        return member_id in self._deleting

    @contextlib.contextmanager
    def deleting(self, member_id: str) -> Iterator[None]:
        """Around a deletion's revocation and delete: the locks it makes know it."""
        self._deleting.add(member_id)
        try:
            yield
        finally:
            self._deleting.discard(member_id)

    async def snapshot_owner(self, member_id: str, destination: Path) -> None:
        """Copy the member's file for a backup, as it is: open or closed, encrypted
        or not, no key needed. Holds the unlock lock, so it does not change state
        from closed to open (or back) midway."""
        async with self._unlock_locks.setdefault(member_id, asyncio.Lock()):
            db = self.owner_db(member_id)
            if db is not None:
                await db.snapshot(destination)
            else:
                await asyncio.to_thread(copy_closed_database, self.owner_path(member_id), destination)

    async def lock_all(self) -> None:
        for member_id in list(self._open):
            await self.lock(member_id)

    async def record_login(self, member_id: str) -> None:
        await self.registry.run(lambda c: c.execute("UPDATE users SET last_login_at = ? WHERE id = ?", (_now(), member_id)))

    # -- administration ---------------------------------------------------------------

    def _would_leave_no_admin(self, conn: Any, member_id: str) -> bool:
        others = conn.execute(
            "SELECT count(*) FROM users WHERE role_id = ? AND active = 1 AND id != ?", (ADMIN_ROLE, member_id)
        ).fetchone()[0]
        return others == 0

    async def update(self, member_id: str, *, role_id: str | None = None, active: bool | None = None, **profile: Any) -> Member:
        """Change directory fields, role or the active flag. Refuses to leave the
        instance without an active admin."""
        fields = validate_profile(profile)

        def write(conn: Any) -> None:
            row = conn.execute("SELECT role_id, active FROM users WHERE id = ?", (member_id,)).fetchone()
            if row is None:
                raise MemberNotFound("no such member", code="member_not_found")
            if role_id is not None and conn.execute("SELECT 1 FROM roles WHERE id = ?", (role_id,)).fetchone() is None:
                raise MemberError(f"no such role {role_id!r}", code="role_not_found", name=role_id, field="role")
            losing_admin = row["role_id"] == ADMIN_ROLE and row["active"] and (
                (role_id is not None and role_id != ADMIN_ROLE) or active is False
            )
            if losing_admin and self._would_leave_no_admin(conn, member_id):
                raise MemberError("this would leave the instance without an active admin", code="last_admin")
            changes = dict(fields)
            if role_id is not None:
                changes["role_id"] = role_id
            if active is not None:
                changes["active"] = int(bool(active))
                if row["active"] and not active:
                    changes["deactivated_at"] = registry_time()
            if changes:
                changes["updated_at"] = _now()
                cols = ", ".join(f"{k} = ?" for k in changes)
                conn.execute(f"UPDATE users SET {cols} WHERE id = ?", (*changes.values(), member_id))

        await self.registry.transaction(write)
        member = await self.get(member_id)
        await self.access_changed(member_id)  # the role, the active flag, the profile a prompt shows
        if active is not None:
            self.buses.system.publish(SystemEvent("member_active_changed", member_id, {"active": member.active}))
        return member

    async def access_changed(self, member_id: str) -> None:
        """Tell what holds the member as read that their access changed (pushed)."""
        for callback in self.after_access_change:
            try:
                await callback(member_id)
            except Exception:
                log.exception("access-change callback failed for member %s", member_id)

    async def delete(self, member_id: str) -> None:
        """Remove the registry row first, then the file and everything of the member's
        in the quarantine (an admin reset's old database, home and projects, in clear).
        A mark written before the commit makes the boot reconciler finish what a crash
        cut short (``_finish_deletion``). The caller has already revoked the member's
        sessions and locked them."""
        async with self.membership_changes:
            with self.deleting(member_id):
                await self._delete(member_id)

    async def _delete(self, member_id: str) -> None:
        def remove(conn: Any) -> None:
            row = conn.execute("SELECT role_id, active FROM users WHERE id = ?", (member_id,)).fetchone()
            if row is None:
                raise MemberNotFound("no such member", code="member_not_found")
            if row["role_id"] == ADMIN_ROLE and row["active"] and self._would_leave_no_admin(conn, member_id):
                raise MemberError("this would leave the instance without an active admin", code="last_admin")
            # In this transaction, so nobody joins or leaves a project between the note
            # and the commit; in the mark, so a start after a stop finishes the same way.
            notes = {p.deletion_name: p.note_deletion(conn, member_id) for p in self.deletion_participants}
            write_deletion_note(self.quarantine_dir(), member_id, json.dumps(notes).encode())
            conn.execute("DELETE FROM users WHERE id = ?", (member_id,))

        await asyncio.to_thread(mark_deletion, self.quarantine_dir(), member_id)
        try:
            await self.registry.transaction(remove)
        except Exception:
            await asyncio.to_thread(unmark_deletion, self.quarantine_dir(), member_id)  # nothing was deleted
            raise
        await self.lock(member_id)
        crash_point("delete.after_registry")
        try:
            await asyncio.to_thread(self._finish_deletion, member_id)
        except OSError:  # the mark stays: the next start tries again
            log.exception("member %s: their files in the quarantine could not all be removed", member_id)
        for callback in self.after_delete:
            try:
                await callback(member_id)
            except Exception:
                log.exception("after-delete callback failed for member %s", member_id)
        self.buses.system.publish(SystemEvent("member_deleted", member_id))
        log.info("member %s deleted", member_id)

    def _finish_deletion(self, member_id: str) -> None:
        """A committed deletion's files: the member's database (and a reset's new file),
        what the participants remove (their own projects), then their entries in the
        quarantine, the deletion mark last."""
        remove_database_files(self.owner_path(member_id))
        remove_database_files(self.reset_path(member_id))
        try:
            notes = json.loads(read_deletion_note(self.quarantine_dir(), member_id) or b"null")
        except ValueError:
            notes = None
        failed: OSError | None = None
        for participant in self.deletion_participants:
            try:
                participant.finish_deletion(member_id, notes.get(participant.deletion_name) if isinstance(notes, dict) else None)
            except OSError as exc:  # the quarantine's clear copies still go; the mark stays for the next start
                log.error("member %s: what %s removes with them could not all be removed: %s", member_id,
                          participant.deletion_name, exc.strerror or type(exc).__name__)
                failed = failed or exc
        crash_point("delete.before_quarantine")
        removed = remove_entries_of(self.quarantine_dir(), member_id, keep_mark=failed is not None)
        if removed:
            log.info("member %s: %d entries in the quarantine removed with them", member_id, len(removed))
        if failed is not None:
            raise failed

    async def reconcile(self) -> dict[str, list[str]]:
        """Boot-time check of registry vs files (G5): an owner file with no member row
        is quarantined (never deleted: it may be someone's data); a member without a
        file is reported — their login says so and an admin reset repairs it."""
        secure_dir(self.database_dir)
        ids = set(await self.registry.run(lambda c: [r[0] for r in c.execute("SELECT id FROM users")]))
        orphans, missing = [], []
        for member_id in marked_deletions(self.quarantine_dir()):
            if member_id in ids:  # stopped before the commit: the member was never deleted
                unmark_deletion(self.quarantine_dir(), member_id)
            else:
                log.warning("member %s: a deletion cut short by a stop; removing their files", member_id)
                try:
                    await asyncio.to_thread(self._finish_deletion, member_id)
                except OSError:  # said (by path kind, not content) in the log; the mark stays: the next start tries again
                    log.error("member %s: their files could not all be removed; the server starts, and tries again at its next start", member_id)
        for path in sorted(self.database_dir.glob("*.db")):
            if _MEMBER_ID.match(path.stem) and path.stem not in ids:
                quarantine(path, "unregistered")
                orphans.append(path.stem)
                log.warning("owner file %s has no member; quarantined", path.name)
        for member_id in sorted(ids):
            if self.reset_path(member_id).exists():
                await self._report_cut_reset(member_id)
            elif not self.owner_path(member_id).exists():
                missing.append(member_id)
                log.error("member %s has no private database file; an admin reset will create an empty one", member_id)
        return {"quarantined": orphans, "missing": missing}

    async def _report_cut_reset(self, member_id: str) -> None:
        """A reset's (or a recovery's) new file a stop left beside the member's file. The
        record keeps the credentials the reset replaces: while the registry still holds
        them, the reset was never committed, and its new file goes now (nothing of the
        member's is open at boot); else it was, and the member's next login completes it.
        Without a record the stop came before the record was written (so before the
        commit) or the reset was begun by a Skald that kept none: the login tells them
        apart, by whether the new file opens with the registry's password."""
        try:
            record = await asyncio.to_thread(_read_json, self.reset_record_path(member_id))
        except ValueError:  # not JSON: left for the login, which says what is wrong
            record = None
        _, current = await self._credentials(member_id)
        what = "a recovery of a reset" if record and record.get("set_aside_as") == "replaced-by-recovery" else "an admin reset"
        if record is not None and record.get("credentials") == current:
            await asyncio.to_thread(self._discard_uncommitted_reset, member_id)
            log.warning("member %s: %s cut short by a stop was not committed; the member's data and password are as"
                        " before; its unused new file is removed", member_id, what)
        elif record is not None:
            log.warning("member %s: %s was cut short by a stop after its commit; it completes at their next login",
                        member_id, what)
        else:
            log.warning("member %s: an admin reset was cut short by a stop; their next login completes it if it was"
                        " committed, and otherwise removes its unused new file", member_id)


def _seed_new_member_grants(conn: Any, member_id: str, role_id: str) -> None:
    """Default access, the second of its two moments (seed 001): a new member of a role
    with ``auto_grant`` receives every existing plugin whose ``grant_by_default`` is set.
    Admins are skipped: they hold everything implicitly."""
    row = conn.execute("SELECT attrs FROM roles WHERE id = ?", (role_id,)).fetchone()
    if role_id == ADMIN_ROLE or row is None or not RoleAttrs.parse(row[0]).auto_grant:
        return
    conn.execute(
        "INSERT OR IGNORE INTO plugin_access (plugin_id, user_id) SELECT id, ? FROM plugins WHERE grant_by_default = 1",
        (member_id,),
    )


def seed_new_plugin_grants(conn: Any, plugin_id: str) -> list[str]:
    """Default access, the first of its two moments: a plugin's row is born, and every
    member of a role with ``auto_grant`` receives it. Returns who did: once committed,
    their access changed (``UserManager.access_changed``)."""
    granted = []
    for member_id, attrs in conn.execute(
        "SELECT users.id, roles.attrs FROM users JOIN roles ON roles.id = users.role_id WHERE users.role_id != ?",
        (ADMIN_ROLE,),
    ).fetchall():
        if RoleAttrs.parse(attrs).auto_grant:
            if conn.execute("INSERT OR IGNORE INTO plugin_access (plugin_id, user_id) VALUES (?, ?)", (plugin_id, member_id)).rowcount:
                granted.append(member_id)
    return granted

