"""Logging setup. Log lines carry ids and metadata only — never message text, memory,
passwords, keys or tokens (privacy is the product: the admin reads these files)."""

from __future__ import annotations

import logging
import logging.handlers
import os

from skald_host.core.storage import secure_dir
from skald_host.settings import Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(settings: Settings) -> None:
    root = logging.getLogger()
    root.setLevel(settings.log.level.upper())
    for handler in list(root.handlers):
        root.removeHandler(handler)
    stream = logging.StreamHandler()
    stream.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(stream)
    if settings.log.file is not None:
        path = settings.resolve(settings.log.file)
        secure_dir(path.parent)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8")
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
        os.chmod(path, 0o600)
