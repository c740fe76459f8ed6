"""Admin API for backups of the whole data dir (check G6): list them, take one now.
A backup is taken into the configured ``backup.dir`` only: no request names a path."""

import errno

from quart import Blueprint, current_app

from skald_host.core.backups import BackupBusy, BackupError
from skald_host.core.storage import DiskFull
from skald_host.settings import config_path
from skald_host.web.auth import requires
from skald_host.web.errors import ApiError

bp = Blueprint("admin_backups", __name__)


def _core():
    return current_app.config["SKALD_CORE"]


@bp.get("/api/admin/backups")
@requires("backups.manage")
async def list_backups() -> dict:
    core = _core()
    settings = core.settings.backup
    return {
        "dir": str(core.backups.root),
        "every_hours": settings.every_hours,
        # Where backup.every_hours is set (the page said only "set backup.every_hours"):
        # the data dir's skald.yml, or the file SKALD_CONFIG names.
        "config_file": str(config_path(core.settings.data_dir)),
        "keep": settings.keep,
        "backups": [b.as_dict() for b in await core.backups.list()],
    }


@bp.post("/api/admin/backups")
@requires("backups.manage")
async def take_backup() -> tuple[dict, int]:
    try:
        info = await _core().backups.take()
    except BackupBusy as error:
        raise ApiError.refusing(409, error) from None
    except BackupError as error:
        cause = error.__cause__
        full = isinstance(cause, DiskFull) or (isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT))
        raise ApiError.refusing(507 if full else 500, error) from None
    return {"backup": info.as_dict()}, 201
