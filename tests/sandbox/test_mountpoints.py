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


def test_the_disk_use_of_a_home_never_walks_a_folder_swapped_for_a_link(tmp_path, monkeypatch):
    """home_usage lists a folder, then walks into what it listed: a folder swapped for
    a link to ``/`` in between had the host's whole disk walked (and counted against
    the member). Each folder opened must be the one its listing showed."""
    from skald_host.core.sandbox import quota

    home, outside = tmp_path / "home", tmp_path / "outside"
    (home / "a").mkdir(parents=True)
    (home / "a" / "mine.bin").write_bytes(b"m" * 4096)
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * (1 << 20))
    baseline = quota.home_usage(home)
    real_open, real_scandir = os.open, os.scandir

    def swap(target) -> None:  # the listing saw a folder; the sandbox wins before it is entered
        if isinstance(target, str) and target.endswith("/a") and not (home / "a").is_symlink():
            (home / "a").rename(home / "a-real")
            (home / "a").symlink_to(outside)

    monkeypatch.setattr(quota.os, "open", lambda target, *a, **k: (swap(target), real_open(target, *a, **k))[1])
    monkeypatch.setattr(quota.os, "scandir", lambda target: (swap(target), real_scandir(target))[1])
    swapped = quota.home_usage(home)
    monkeypatch.setattr(quota.os, "open", real_open)
    monkeypatch.setattr(quota.os, "scandir", real_scandir)
    assert (home / "a").is_symlink(), "the swap did not happen: the test proves nothing"
    assert baseline < (1 << 19) and swapped <= baseline  # the outside megabyte was not walked into
