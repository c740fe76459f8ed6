"""Absolute paths outside the home go into the member's sandbox, never the bare host:
the fs tools and the viewer read and write there through ``Skald.sandbox`` (here the
bubblewrap backend, which mounts only ``/usr``, a few ``/etc`` files, a fresh ``/tmp``
and the member's own folders). Skipped, with the reason, where bubblewrap cannot run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skald_host.builtins.sandbox_bwrap import BubblewrapBackend
from skald_host.core.files.ops import MemberFiles
from skald_host.core.files.service import FileError
from skald_host.testing import ScriptedModelServer, SkaldHarness
from tests.chat.support import API_KEY


@pytest.fixture
def bwrap_reason() -> str | None:
    return BubblewrapBackend().available()


async def test_sandbox_paths_are_read_in_the_sandbox_and_not_on_the_host(skald: SkaldHarness, bwrap_reason):
    if bwrap_reason:
        pytest.skip(f"bubblewrap cannot run here: {bwrap_reason}")
    async with ScriptedModelServer(models=("m",), api_key=API_KEY):
        host = await skald.start(settings=skald.settings(sandbox={"backend": "bubblewrap"}))
        alice_client = await host.member("alice")
        alice = MemberFiles(host.core, await host.core.users.find("alice"))
        # The host has a /etc/hostname and a /etc/shadow; the sandbox has neither.
        # Missing there, they read as missing (a 404), not as base64's own complaint.
        for path in ("/etc/shadow", "/etc/hostname", "/root/.bashrc"):
            with pytest.raises(FileError, match=f"^{path} does not exist$"):
                await alice.read_text(path)
            response = await alice_client.get("/api/file", params={"path": path})
            assert response.status_code == 404 and b"root:" not in response.content, (path, response.text)
            assert "base64" not in response.text
        with pytest.raises(FileError, match="^/usr/bin is a folder; use list_files$"):
            await alice.read_text("/usr/bin")
        # /usr is the host's, read-only: readable, never writable.
        assert await alice.read_text("/usr/lib/os-release") == Path("/usr/lib/os-release").read_text()
        with pytest.raises(FileError, match="sandbox could not"):
            await alice.write_text("/usr/local/owned.txt", "owned")
        assert not Path("/usr/local/owned.txt").exists()
        # A sandbox write happens in the sandbox's own /tmp (or is refused there), never the host's.
        marker = f"/tmp/skald-sandbox-write-{os.getpid()}.txt"
        try:
            assert "Created" in await alice.write_text(marker, "inside")
        except FileError as exc:
            assert "sandbox could not" in str(exc)
        assert not Path(marker).exists()
        # The home reached by its sandbox spelling is the host home, through the mount.
        await alice.write_text("/home/member/from-sandbox-path.txt", "home")
        home = host.core.files.home((await host.core.users.find("alice")).id)
        assert (home / "from-sandbox-path.txt").read_text() == "home"
        entries = {e["path"] for e in await alice.list("/usr")}
        assert "/usr/bin" in entries
