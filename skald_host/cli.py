"""``skald``: serve, first-run setup, a forgotten password, and the plugin status table."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable

from skald_host.settings import Settings, SettingsError, load_settings


def _settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    return load_settings(Path(args.config) if args.config else None, data_dir=Path(args.data_dir) if args.data_dir else None, overrides=overrides)


def _cmd_serve(args: argparse.Namespace) -> int:
    from skald_host.server import run

    server: dict[str, Any] = {}
    # ``is not None``: ``--port 0`` or ``--host ''`` given on purpose reach the settings'
    # checks (and are refused there), never quietly become the configured value.
    if args.host is not None:
        server["host"] = args.host
    if args.port is not None:
        server["port"] = args.port
    overrides: dict[str, Any] = {"server": server}
    if args.safe_mode:
        overrides["plugins"] = {"safe_mode": True}
    settings = _settings(args, **overrides)
    run(settings)
    return 0


async def _with_core(settings: Settings, fn: Any) -> Any:
    """Run ``fn(core)`` with the core started here, holding the data dir: a running
    server owns it (its reconciler and ours would each take the other's new member
    file for an orphan), so this raises DataDirBusy instead."""
    from skald_host.core.host import Skald
    from skald_host.core.storage import secure_dir
    from skald_host.core.storage.data_dir_lock import DataDirLock

    secure_dir(settings.data_dir)
    with DataDirLock(settings.data_dir):
        core = await Skald.start(settings, start_plugins=False)
        try:
            return await fn(core)
        finally:
            await core.stop()


def _holds_no_data(settings: Settings) -> bool:
    """True, and said, when the data dir has no Skald in it: a command pointed at a
    mistyped dir must neither start a new, empty instance there nor answer as if it were
    the server's."""
    if (settings.database_dir / "system.db").exists():
        return False
    print(f"error: {settings.data_dir} holds no Skald data (no database/system.db); name the server's data dir "
          "with --data-dir or SKALD_DATA_DIR", file=sys.stderr)
    return True


def _registry_state(settings: Settings) -> tuple[bool, int]:
    """Whether the registry holds nobody yet, and its schema version (0: no file)."""
    import sqlite3

    path = settings.database_dir / "system.db"
    if not path.exists():
        return True, 0
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        try:
            return conn.execute("SELECT 1 FROM users LIMIT 1").fetchone() is None, version
        except sqlite3.OperationalError:  # no users table yet: created, never set up
            return True, version
    finally:
        conn.close()


def _cmd_setup(args: argparse.Namespace) -> int:
    from skald_host.core.identity.passwords import PasswordRejected
    from skald_host.core.identity.setup import AlreadySetUp, initialize_instance, needs_setup
    from skald_host.core.identity.users import MemberError

    settings = _settings(args)
    if args.check:  # a read, answered beside a running server too
        where = settings.data_dir.resolve()
        if not where.exists():
            print(f"Skald is not set up: the data dir {where} does not exist yet. Run 'skald setup --data-dir {where}' to create the first admin.")
            return 1
        from skald_host.core.schema.registry import REGISTRY_MIGRATIONS

        empty, version = _registry_state(settings)
        if version > REGISTRY_MIGRATIONS.latest:
            # Said here as 'serve' would refuse it, not "its admin can sign in" (upgrade probe).
            print(f"Skald is set up in {where}, but by a newer Skald: its registry is at schema version {version}, and this"
                  f" Skald knows versions up to {REGISTRY_MIGRATIONS.latest}. Upgrade Skald to open it, or restore the backup taken before the upgrade to go back"
                  " (skald restore): databases are never downgraded.")
            return 1
        if empty:
            print(f"Skald is not set up in {where}: nobody has an account yet. Run 'skald setup --data-dir {where}' to create the first admin.")
            return 1
        print(f"Skald is set up in {where}: its admin can sign in.")
        return 0

    if settings.data_dir.exists() and not _registry_state(settings)[0]:
        # Said before the data dir's lock is asked for: beside a running server the
        # lock's refusal said to stop it, and once stopped this answer came (operator probe).
        print(f"Skald is already set up in {settings.data_dir.resolve()}; nothing was changed.")
        return 0

    async def go(core: Any) -> int:
        if not await needs_setup(core.users):
            print(f"Skald is already set up in {settings.data_dir.resolve()}; nothing was changed.")
            return 0
        username = args.username or input("Admin user name: ").strip()
        if args.password_stdin:
            password = sys.stdin.readline().rstrip("\n")
        else:
            if not sys.stdin.isatty():
                print("no terminal: pass --password-stdin and the password on standard input", file=sys.stderr)
                return 2
            password = getpass.getpass("Password: ")
            if getpass.getpass("Repeat password: ") != password:
                print("the passwords do not match", file=sys.stderr)
                return 2
        try:
            member = await initialize_instance(
                core.users, username=username, password=password, display_name=args.display_name or "",
                locale=args.locale, encrypted=not args.no_encryption, locales=core.strings.locales,
            )
        except AlreadySetUp:
            print(f"Skald is already set up in {settings.data_dir.resolve()}; nothing was changed.")
            return 0
        except (PasswordRejected, MemberError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"created admin {member.username!r} in {settings.data_dir.resolve()}. Start the server on it with {_serve_hint(args, settings)} and sign in.")
        return 0

    return asyncio.run(_with_core(settings, go))


#: What a reset takes from an encrypted member: the admin's reset screen says the same
#: (members.reset_loss in skald_host/builtins/locales/en.json).
RESET_LOSS = (
    "{name}'s private data is encrypted with their password, and nobody else holds the key. A reset gives them a new,"
    " empty database and home folder, and ends their memberships in shared folders and projects. Their old data is set"
    " aside on the server, still encrypted with the old password: if they remember it later, 'skald recover-reset' gives"
    " it back; otherwise it stays out of everyone's reach. Reset only if the password is truly forgotten."
)


def _read_new_password(args: argparse.Namespace) -> str | None:
    """The new password from standard input (``--password-stdin``) or typed twice; None
    (said why) when there is no terminal to ask on or the two differ."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    if not sys.stdin.isatty():
        print("no terminal: pass --password-stdin and the password on standard input", file=sys.stderr)
        return None
    password = getpass.getpass("New password: ")
    if getpass.getpass("Repeat new password: ") != password:
        print("the passwords do not match", file=sys.stderr)
        return None
    return password


def _cmd_reset_password(args: argparse.Namespace) -> int:
    """A forgotten password, the server stopped: the way back for a lone admin (any
    member's account, as the admin's reset screen does it, with the same code path and
    the same data loss for an encrypted account)."""
    from skald_host.core.identity.passwords import PasswordRejected
    from skald_host.core.identity.users import MemberError

    async def go(core: Any, member: Any, settings: Settings) -> int:
        if member.encrypted and not args.confirm_data_loss:
            print(f"{RESET_LOSS.format(name=member.username)}\n"
                  "Nothing was changed. To reset anyway, run the command again with --confirm-data-loss.", file=sys.stderr)
            return 2
        password = _read_new_password(args)
        if password is None:
            return 2
        removed = await core.folders.memberships(member.id) if member.encrypted else []
        try:
            # The admin's own account: they typed the new password here themself. Anyone
            # else's: the operator chose it, and the member is asked to choose their own.
            quarantined = await core.administration.reset_password(member.id, password, set_by_admin=not member.is_admin)
        except (PasswordRejected, MemberError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"The password of {member.username!r} is reset; every session and paired device of theirs has ended.")
        if member.encrypted:
            print("They start over with an empty database and home folder"
                  + (f", and were removed from: {', '.join(a.title for a in removed)}" if removed else "")
                  + ". The old files were set aside in"
                  f" {core.users.quarantine_dir()}{f' ({quarantined.name})' if quarantined else ''}: the old database stays"
                  " encrypted, with the old password's wrapped key beside it (.key.json), so it opens with the old password"
                  " only; the old home folder is kept there unencrypted until you remove it. If they remember the old"
                  f" password after all, 'skald recover-reset {member.username}' gives them their old database and home"
                  " back (memberships the reset ended stay ended).")
        else:
            print("Their data is not encrypted with their password, so it stays as it is.")
        print(f"Start the server with {_serve_hint(args, settings)} and sign in with the new password.")
        return 0

    return _on_account(args, "reset", go)


def _on_account(args: argparse.Namespace, verb: str, act: Callable[[Any, Any, Settings], Awaitable[int]]) -> int:
    """``act(core, member, settings)`` on the account ``args.username`` names, with the
    server stopped (``_with_core``); a data dir without Skald or an unknown name is said
    first, changing nothing."""
    settings = _settings(args)
    where = settings.data_dir.resolve()
    if not (settings.database_dir / "system.db").exists():
        print(f"error: Skald is not set up in {where}: there is no account to {verb}", file=sys.stderr)
        return 1

    async def go(core: Any) -> int:
        member = await core.users.find(args.username)
        if member is None:
            print(f"error: no account named {args.username!r} in {where}", file=sys.stderr)
            return 1
        return await act(core, member, settings)

    return asyncio.run(_with_core(settings, go))


def _cmd_recover_reset(args: argparse.Namespace) -> int:
    """A reset undone, the server stopped: the member remembered the old password after
    all. The database the reset quarantined opens with it (its key file beside it) and
    is the account's again; what the account holds now is set aside in its place."""
    from skald_host.core.identity.crypto import CredentialError
    from skald_host.core.identity.users import MemberError

    async def go(core: Any, member: Any, settings: Settings) -> int:
        if args.password_stdin:
            password = sys.stdin.readline().rstrip("\n")
        elif sys.stdin.isatty():
            password = getpass.getpass(f"{member.username}'s old password (the one the reset replaced): ")
        else:
            print("no terminal: pass --password-stdin and the old password on standard input", file=sys.stderr)
            return 2
        try:
            recovered = await core.administration.recover_reset(member.id, password, args.source)
        except CredentialError:
            print(f"error: that is not the password the quarantined database of {member.username!r} was encrypted with;"
                  " nothing was changed", file=sys.stderr)
            return 2
        except MemberError as exc:
            print(f"error: {exc}", file=sys.stderr)
            if getattr(exc, "code", None) == "recover_nothing_found":
                found = [p.name for p in core.users.quarantined_resets(member.id)]
                print("Quarantined databases of this account with their key file: " + (", ".join(found) or "none"), file=sys.stderr)
                if not found:
                    print("A reset made by a version of Skald from before 'skald recover-reset' kept no key file:"
                          " its database opens with nothing and cannot be given back.", file=sys.stderr)
            return 2
        print(f"{member.username!r} has their database from before the reset back ({recovered.restored.name}), and their old"
              " password opens it again; every session and paired device of theirs has ended.")
        print("Their home folder from then is back too, if it was set aside. Shared folders and projects the reset ended"
              " are not given back: their owners must invite them again.")
        if recovered.set_aside is not None:
            print(f"What the account held since the reset was set aside in {core.users.quarantine_dir()}"
                  f" ({recovered.set_aside.name}, with its key file: it opens with the password the account had until"
                  " now, the one set at the reset or the one the member chose after it).")
        print(f"Start the server with {_serve_hint(args, settings)} and sign in with the old password.")
        return 0

    return _on_account(args, "recover", go)


def _serve_hint(args: argparse.Namespace, settings: Settings) -> str:
    """The commands that start a server on the data dir (and config) setup just used.
    Taken literally, a bare 'skald serve' or 'make run' starts on ./data: a setup on
    another dir must name it, or the admin it made is not the one the server knows."""
    import shlex

    serve, make = ["skald", "serve"], ["make", "run"]
    data_dir = settings.data_dir.resolve()
    if data_dir != Path("data").resolve():
        serve += ["--data-dir", str(data_dir)]
        make.insert(0, f"SKALD_DATA_DIR={shlex.quote(str(data_dir))}")  # the Makefile passes it on
    if args.config:
        config = str(Path(args.config).resolve())
        serve += ["--config", config]
        make.insert(0, f"SKALD_CONFIG={shlex.quote(config)}")
    return f"'{shlex.join(serve)}' (pip install) or '{' '.join(make)}' (source checkout)"


#: What ``skald plugins --json`` says of a missing plugin: a status's keys (as_dict).
_STATUS_KEYS = (
    "id", "name", "distribution", "version", "builtin", "state", "spec", "hooks", "error", "degraded",
    "import_ms", "healthy", "waiting", "needs_settings", "problems", "title", "description",
)


def _cmd_plugins(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if not (settings.database_dir / "system.db").exists():
        # A mistyped dir must not become a new, empty instance; a plugin author before
        # any setup still sees what is installed, as a new instance would find it.
        print(f"note: {settings.data_dir} holds no Skald data (no database/system.db): these are the installed plugins"
              " as a new instance finds them; name the server's data dir with --data-dir or SKALD_DATA_DIR for its own",
              file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="skald-plugins-") as scratch:
            return _plugins_table(args, load_settings(Path(args.config) if args.config else None, data_dir=Path(scratch)))
    return _plugins_table(args, settings)


def _plugins_table(args: argparse.Namespace, settings: Settings) -> int:

    async def go(core: Any) -> list[dict[str, Any]]:
        from skald_host.web.app import create_app, mount_plugin_routes

        # The server fails a plugin whose routes cannot be mounted, as it builds its web
        # app: mounted here too (nothing is served), or this table would call "disabled"
        # a plugin the catalog page calls failed.
        await mount_plugin_routes(create_app(settings, plugins=core.plugins), core)
        # Enabled, but installed no more: the catalog lists it as missing, so does this
        # table (left out, the admin read it as never having been there).
        missing = [core.catalog.missing_entry(plugin_id, None) for plugin_id in await core.catalog.missing()]
        statuses = [s.as_dict() for s in core.plugins.statuses()]
        return statuses + [
            {**{key: entry[key] for key in _STATUS_KEYS}, "traceback": None, "failures": [], "tool_failures": []}
            for entry in missing
        ]

    rows = asyncio.run(_with_core(settings, go))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    columns = ("id", "state", "version", "distribution", "spec", "hooks")
    table = [[str(r["id"]), r["state"], r["version"] or "", r["distribution"] or "", r["spec"] or "", ",".join(r["hooks"])] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in table)) if table else len(c) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip())
    for t, r in zip(table, rows):
        print("  ".join(v.ljust(w) for v, w in zip(t, widths)).rstrip())
        if r["error"]:  # on a line of its own: after the hooks column it ran off the screen
            print(f"    error: {_one_line(r['error'])}")
    # This command loads plugins to list them but runs no startup (it would open their
    # connections, their bots): a startup's failure is the server's to report.
    print(
        "Plugins were loaded here, not started: a plugin listed as loaded may still fail in its startup;"
        " the server's catalog page and log say so."
    )
    return 0


def _one_line(text: str | None) -> str:
    """A multi-line error on one table row, whole: its first line alone can be only the
    heading (pluggy's ``Plugin 'x' for hook 'startup'``) of what was wrong."""
    return " ".join(line.strip() for line in (text or "").splitlines() if line.strip())


#: How ``skald backup --list`` names a backup's kind (``archive.KINDS``; None: a manifest
#: an earlier version wrote, which backup.keep never removes).
_BACKUP_KINDS = {"scheduled": "scheduled", "manual": "taken by hand, never removed automatically"}


def _print_backup(info: dict[str, Any]) -> None:
    kind = _BACKUP_KINDS.get(info.get("kind") or "", "kind not recorded (an earlier version), never removed automatically")
    print(f"{info['path']}: {info['members']} member(s), {info['files']} file(s), {info['bytes']} bytes; {kind}")
    for item in info.get("skipped") or ():
        print(f"  not copied: {item['path']} ({item['reason']})", file=sys.stderr)


def _cmd_backup(args: argparse.Namespace) -> int:
    """Through the running server when there is one (only it can copy the files it
    holds open consistently), else with the data dir held for this process."""
    from skald_host.control import REPLY_TIMEOUT_SECONDS, ask
    from skald_host.core.backups import BackupError, list_backups
    from skald_host.core.storage.data_dir_lock import DataDirBusy, holder

    settings = _settings(args)
    to = Path(args.to).resolve() if args.to else None
    root = to or settings.resolve(settings.backup.dir)
    if args.list:
        if to is None and _holds_no_data(settings):  # its backups folder is the data dir's
            return 2
        _say_unfinished(_unfinished(settings, root))
        backups = list_backups(root)
        for backup in backups:
            _print_backup(backup.as_dict())
        if not backups:
            print(f"no backups in {root}" + ("" if root.is_dir() else " (it does not exist)"))
        return 0
    pid = holder(settings.data_dir)
    if pid:
        kept = _unfinished(settings, root)
        _say_unfinished(kept)
        finished = {b.path.name for b in list_backups(root)}
        try:
            reply = asyncio.run(ask(settings.data_dir, {"command": "backup", "to": str(to) if to else None}))
        except TimeoutError:
            print(
                f"error: the server running on {settings.data_dir} did not answer within {REPLY_TIMEOUT_SECONDS:.0f} s;"
                f" it may still be taking the backup: see '{_backup_command(args, '--list')}' later", file=sys.stderr,
            )
            return 1
        except OSError as error:
            print(_server_lost(args, settings, root, pid, error, {u.path.name for u in kept}, finished), file=sys.stderr)
            return 1
        if not reply.get("ok"):
            print(f"error: {reply.get('error')}", file=sys.stderr)
            return 1
        _print_backup(reply["backup"])
        return 0
    if _holds_no_data(settings):
        return 2
    _say_unfinished(_unfinished(settings, root))

    async def go(core: Any) -> Any:
        return await core.backups.take(to)

    try:
        info = asyncio.run(_with_core(settings, go))
    except (BackupError, DataDirBusy) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    _print_backup(info.as_dict())
    return 0


def _unfinished(settings: Settings, root: Path) -> list[Any]:
    """Remove the unfinished backups in ``root`` that no backup writes any more (a
    server killed while taking one leaves it), keep those being written: the server's
    own clean-up (``remove_partials``), which reaches only ``backup.dir`` at a restart.
    Nothing is touched in a folder backups cannot go into: a folder there named like
    one is a member's."""
    from skald_host.core.backups import BackupError, remove_partials
    from skald_host.core.backups.service import check_backup_root

    try:
        check_backup_root(settings.data_dir, root)
    except BackupError:
        return []
    return remove_partials(root, make=False)


def _say_unfinished(found: list[Any]) -> None:
    for item in found:
        if item.removed:
            print(
                f"removed the unfinished backup {item.path} ({_amount(item.bytes)}): the backup writing it stopped"
                " before it was whole (a server or 'skald backup' killed while taking it); it is no backup", file=sys.stderr,
            )
        else:
            print(f"kept the unfinished backup {item.path} ({_amount(item.bytes)}): {item.reason}", file=sys.stderr)


def _server_lost(
    args: argparse.Namespace, settings: Settings, root: Path, pid: int, error: OSError, kept: set[str], finished: set[str],
) -> str:
    """What to say when the server gave no answer: whether a backup was made, what is
    left of it in ``root`` (the unfinished copy a killed server was writing is removed
    here: its restart cleans only ``backup.dir``), and what to do."""
    import time

    from skald_host.core.backups import list_backups
    from skald_host.core.storage.data_dir_lock import holder

    who = f"the server (process {pid})" if pid > 0 else "the server"
    again = _backup_command(args)
    deadline = time.monotonic() + 5.0  # its socket closes a moment before the kernel drops its lock
    while holder(settings.data_dir) == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    if holder(settings.data_dir) == pid:
        return (
            f"error: {who} running on {settings.data_dir} does not answer on its control socket: {error}.\n"
            f"No backup was made. A server that is stopping removes its unfinished copy itself; see its log,"
            f" start it again if it stopped, and run '{again}' again."
        )
    lines = [f"error: {who} running on {settings.data_dir} stopped while taking the backup ({error})."]
    made = [b for b in list_backups(root) if b.path.name not in finished]
    if made:
        lines.append(
            f"It stopped after the backup was whole, before confirming it: {made[0].path} is there."
            f" Check it with 'skald restore {made[0].path} --check'."
        )
        return "\n".join([*lines, "Start the server again (skald serve, or its service)."])
    ours: dict[str, Any] = {}
    for _ in range(40):  # the kernel drops its lock on the unfinished copy as the process goes
        for item in _unfinished(settings, root):
            if item.path.name not in kept:
                ours[item.path.name] = item  # one removed is not found again
        if not any(item.being_written for item in ours.values()):
            break
        time.sleep(0.05)
    lines[0] += " No backup was made."
    for item in ours.values():
        if item.removed:
            lines.append(f"The unfinished copy it was writing, {item.path} ({_amount(item.bytes)}), was removed.")
        else:
            lines.append(
                f"Its unfinished copy {item.path} ({_amount(item.bytes)}) is left: {item.reason};"
                f" '{_backup_command(args, '--list')}' removes it once no backup writes it."
            )
    if not ours:
        lines.append(f"It left nothing in {root}.")
    lines.append(f"Start the server again (skald serve, or its service) and run '{again}' again.")
    return "\n".join(lines)


def _backup_command(args: argparse.Namespace, *more: str) -> str:
    import shlex

    words = ["skald", "backup", *more]
    for flag, value in (("--config", args.config), ("--data-dir", args.data_dir), ("--to", args.to)):
        if value:
            words += [flag, value]
    return shlex.join(words)


def _amount(size: int) -> str:
    if size < 1000:
        return f"{size} bytes"
    for unit, scale in (("kB", 10**3), ("MB", 10**6), ("GB", 10**9)):
        if size < scale * 1000 or unit == "GB":
            return f"{size / scale:.0f} {unit}" if size >= scale * 10 else f"{size / scale:.1f} {unit}"
    raise AssertionError("unreachable")


def _cmd_restore(args: argparse.Namespace) -> int:
    from skald_host.core.backups import BackupError, restore, verify

    backup = Path(args.backup)
    try:
        if args.check:
            info = verify(backup)
            print(f"{backup}: whole ({info.files} file(s), {info.bytes} bytes, {info.members} member(s), taken {info.created_at})")
            return 0
        settings = _settings(args)
        info = restore(backup, settings.data_dir)
    except BackupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"restored {backup.name} ({info.members} member(s), taken {info.created_at}) into {settings.data_dir}."
          f" Start the server on it with {_serve_hint(args, settings)}.")
    return 0


def _cmd_kdf(args: argparse.Namespace) -> int:
    """The configured Argon2id cost, or (``--calibrate``) the time cost this machine needs
    for one derivation to take at least ``--target-ms`` within the configured memory."""
    from skald_host.core.identity.crypto import CALIBRATION_MAX_TIME_COST, DEFAULT_KDF, calibrate_time_cost
    from skald_host.settings import config_path, save_setting

    settings = _settings(args)
    kdf = settings.kdf
    if not args.calibrate:
        if args.write:
            print("error: --write saves what --calibrate measures; pass both", file=sys.stderr)
            return 2
        print(f"Argon2id: memory_kib={kdf.memory_kib} time_cost={kdf.time_cost} parallelism={kdf.parallelism}")
        return 0
    if not 0 < args.target_ms <= 60_000:
        print(f"error: --target-ms must be between 1 and 60000, got {args.target_ms}", file=sys.stderr)
        return 2
    try:
        found = calibrate_time_cost(kdf.memory_kib, kdf.parallelism, target_seconds=args.target_ms / 1000)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    path = config_path(settings.data_dir, Path(args.config) if args.config else None)
    keep = kdf.time_cost > found.time_cost  # never weaken what the admin configured
    value = kdf.time_cost if keep else found.time_cost
    measured = (
        f"Argon2id with {kdf.memory_kib} KiB and {kdf.parallelism} lane(s) took {found.seconds * 1000:.0f} ms "
        f"per derivation at time_cost={found.time_cost} on this machine (the fastest of {found.runs})"
    )
    if not found.reached:
        measured += f", short of {args.target_ms} ms at the cap of {CALIBRATION_MAX_TIME_COST} passes"
    elif found.time_cost == DEFAULT_KDF.time_cost:
        measured += f", at least {args.target_ms} ms at the RFC 9106 default"
    else:
        measured += f", at least {args.target_ms} ms"
    if args.write and not keep:
        save_setting(path, "kdf", "time_cost", value)  # before saying "saved": it may fail
    if keep:
        plan = f"the configured time_cost={kdf.time_cost} is higher and stays"
    else:
        plan = f"{'saved' if args.write else 'would save'} kdf.time_cost: {value} in {path}"
    print(f"{measured}; {plan}.")
    if args.write and not keep:
        reread = _settings(args).kdf.time_cost
        if reread != value:
            print(f"note: the next start uses time_cost={reread}: the environment (SKALD_KDF_TIME_COST) overrides {path}", file=sys.stderr)
        else:
            print("The next start uses it; each member's key is re-wrapped with it at their next login.")
    elif not args.write and not keep:
        print("Run again with --write to save it.")
    if args.json:
        print(json.dumps({
            "memory_kib": found.memory_kib, "parallelism": found.parallelism, "time_cost": found.time_cost,
            "measured_ms": round(found.seconds * 1000, 3), "target_ms": args.target_ms, "runs": found.runs,
            "reached": found.reached, "saved": bool(args.write and not keep), "value": value, "path": str(path),
        }))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skald", description="A self-hosted assistant server for a small trusted group.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, data_dir: str = "where databases and logs live (default: $SKALD_DATA_DIR or ./data)") -> None:
        p.add_argument("--config", help="YAML settings file (default: $SKALD_CONFIG or <data dir>/skald.yml)")
        p.add_argument("--data-dir", help=data_dir)

    serve = sub.add_parser("serve", help="run the server")
    common(serve)
    serve.add_argument("--host", help="the address to listen on (default: the setting server.host, 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, help="the port to listen on (default: the setting server.port, 8080)")
    serve.add_argument("--safe-mode", action="store_true", help="load built-in plugins only")
    serve.set_defaults(func=_cmd_serve)

    setup = sub.add_parser("setup", help="create the first admin")
    common(setup)
    setup.add_argument("--username", help="the first admin's user name, to sign in with (asked for when not given)")
    setup.add_argument("--display-name", help="the name the admin is shown by (default: the user name)")
    setup.add_argument("--locale", default="en", help="the instance's language: en, de or any other the locale files have")
    setup.add_argument("--no-encryption", action="store_true", help="do not encrypt the admin's private data")
    setup.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    setup.add_argument("--check", action="store_true", help="say whether the data dir is set up (exit 0) or needs setup (exit 1); changes nothing")
    setup.set_defaults(func=_cmd_setup)

    reset = sub.add_parser(
        "reset-password",
        help="set a new password for an account, the server stopped (a forgotten password; an encrypted account's data is lost)",
    )
    common(reset)
    reset.add_argument("username", help="the account's user name")
    reset.add_argument("--password-stdin", action="store_true", help="read the new password from standard input")
    reset.add_argument("--confirm-data-loss", action="store_true",
                       help="required for an account whose data is encrypted with its password: it starts over, empty")
    reset.set_defaults(func=_cmd_reset_password)

    recover = sub.add_parser(
        "recover-reset",
        help="undo a data-losing password reset when the old password is remembered (server stopped)",
        description="Give an account back the database (and home folder) a password reset set aside in"
        " database/quarantine/, when its owner remembers the password the reset replaced. The old database opens"
        " only with that password and the key file kept beside it (<id>.<time>.admin-reset.key.json); a wrong"
        " password changes nothing. What the account holds now is set aside in the quarantine the same way, with"
        " its own key file, so nothing is deleted. Shared folders and projects the reset ended are not given back.",
    )
    common(recover)
    recover.add_argument("username", help="the account's user name")
    recover.add_argument("--from", dest="source", metavar="NAME",
                         help="the quarantined database to bring back, by file name (default: the newest one an admin reset set aside)")
    recover.add_argument("--password-stdin", action="store_true", help="read the old password from standard input")
    recover.set_defaults(func=_cmd_recover_reset)

    plugins = sub.add_parser("plugins", help="print the plugin status table")
    common(plugins)
    plugins.add_argument("--json", action="store_true", help="print every plugin's full status as JSON instead of the table")
    plugins.set_defaults(func=_cmd_plugins)

    backup = sub.add_parser(
        "backup",
        help="take a backup of the data dir (online: the running server takes it); one taken by hand is never removed by backup.keep",
        description="Take a backup of the data dir; with a server running, the server takes it. backup.keep removes only the"
                    " backups the schedule (backup.every_hours) took: one taken with this command, with or without --to, or"
                    " with \"Back up now\" on the admin page, stays until you remove it.",
    )
    common(backup)
    backup.add_argument("--to", help="the directory to put it in (default: the setting backup.dir)")
    backup.add_argument("--list", action="store_true", help="list the backups there instead, each with its kind (scheduled or taken by hand)")
    backup.set_defaults(func=_cmd_backup)

    kdf = sub.add_parser("kdf", help="show the Argon2id cost, or measure the time cost this machine needs")
    common(kdf)
    kdf.add_argument("--calibrate", action="store_true", help="measure the time cost reaching --target-ms per derivation")
    kdf.add_argument("--write", action="store_true", help="save the measured time cost to the settings file")
    kdf.add_argument("--target-ms", type=int, default=250, help="the time one derivation should take at least (default 250)")
    kdf.add_argument("--json", action="store_true", help="also print the measurement as one JSON line")
    kdf.set_defaults(func=_cmd_kdf)

    restore = sub.add_parser("restore", help="restore a backup into a new, empty data dir (server stopped)")
    # Not the live data dir: a restore writes into a new, empty one and refuses any other
    # (with SKALD_DATA_DIR set to the live dir, a bare 'skald restore' is refused).
    common(restore, data_dir=(
        "the new, empty data dir to restore into; it must not exist yet or be empty, so never the live one"
        " (default: $SKALD_DATA_DIR or ./data)"
    ))
    restore.add_argument("backup", help="the backup's directory (skald-backup-...)")
    restore.add_argument("--check", action="store_true", help="only verify the backup against its manifest")
    restore.set_defaults(func=_cmd_restore)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from skald_host.core.host import StartupError
        from skald_host.core.storage.data_dir_lock import DataDirBusy

        if isinstance(exc, DataDirBusy):
            print(_busy_message(args.command, exc), file=sys.stderr)
            return 1
        if isinstance(exc, StartupError):
            print(f"cannot start: {exc}", file=sys.stderr)
            return 1
        raise


def _busy_message(command: str, exc: Exception) -> str:
    """What to do when a running server holds the data dir: say so, and how to stop it."""
    pid = getattr(exc, "pid", None)
    stop = f"stop it first (Ctrl-C where it runs, or 'kill -TERM {pid}')" if pid and pid > 0 else "stop it first (Ctrl-C where it runs)"
    if command == "serve":
        return f"cannot start: {exc}. Only one server can use a data dir: {stop}, or pass another --data-dir."
    return f"error: 'skald {command}' needs the server stopped: {exc}. {stop[0].upper()}{stop[1:]}, then run 'skald {command}' again."


if __name__ == "__main__":
    sys.exit(main())
