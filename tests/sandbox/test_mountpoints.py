"""The folders a membership mounts on inside a home are made by descriptor (no engine
needed: this is the host's side, before any backend is asked)."""

from __future__ import annotations

import os

import pytest

from skald_hookspecs.sandbox import SandboxUnavailable
from skald_host.core.sandbox import manager
from skald_host.core.sandbox.manager import SANDBOX_HOME, _prepare_mountpoints


def test_a_folder_swapped_for_a_link_on_the_way_is_refused_and_nothing_is_made_outside(tmp_path, monkeypatch):
    """The race a sandbox can run: ``~/shared`` is a folder when looked at, a link to
    anywhere when the next folder is made in it. Root made folders anywhere this way
    (a security probe: one hit every 4 s); now nothing is made outside and the member
    is told what to move."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    home.mkdir()
    outside.mkdir()
    (home / "shared").mkdir()
    real_mkdir = os.mkdir

    def mkdir_then_swap(path, mode=0o777, *, dir_fd=None):
        try:
            real_mkdir(path, mode, dir_fd=dir_fd)
        finally:
            if path == "shared" and not (home / "shared").is_symlink():
                (home / "shared").rename(home / "shared-real")
                (home / "shared").symlink_to(outside)

    monkeypatch.setattr(manager.os, "mkdir", mkdir_then_swap)
    with pytest.raises(SandboxUnavailable, match="~/shared in your home is not a folder"):
        _prepare_mountpoints(home, [f"{SANDBOX_HOME}/shared/pictures"])
    assert list(outside.iterdir()) == []
    monkeypatch.setattr(manager.os, "mkdir", real_mkdir)
    (home / "shared").unlink()
    _prepare_mountpoints(home, [f"{SANDBOX_HOME}/shared/pictures", f"{SANDBOX_HOME}/projects/olga/notes"])
    assert (home / "shared" / "pictures").is_dir() and (home / "projects" / "olga" / "notes").is_dir()
