"""The admin's status names the code and the data the server runs: the package version
stayed 0.1.0 across 850 commits, so "Skald version 0.1.0" told an admin nothing about
which checkout they had started (operator probe)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from skald_host.core.host import source_revision
from skald_host.core.schema.registry import REGISTRY_MIGRATIONS

CHECKOUT = Path(__file__).resolve().parents[2]


async def test_the_status_gives_the_checkouts_commit_and_the_data_schema(skald):
    if not (CHECKOUT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not run from a git checkout: there is no commit to name")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=CHECKOUT, capture_output=True, text=True, check=True).stdout.strip()
    host = await skald.start()
    status = (await (await host.admin()).get("/api/admin/status")).json()
    assert status["revision"] == head[:12]
    assert status["schema"] == REGISTRY_MIGRATIONS.latest


def test_a_revision_is_read_from_loose_and_packed_refs_and_a_detached_head(tmp_path):
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text("# pack-refs with: peeled\n" + "a" * 40 + " refs/heads/main\n")
    assert source_revision(tmp_path) == "a" * 12
    (git / "refs" / "heads" / "main").write_text("b" * 40 + "\n")
    assert source_revision(tmp_path) == "b" * 12
    (git / "HEAD").write_text("c" * 40 + "\n")
    assert source_revision(tmp_path) == "c" * 12
    assert source_revision(tmp_path / "elsewhere") is None
