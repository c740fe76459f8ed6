"""An admin who updates a checkout an earlier version installed and runs `skald backup`
before `make run` has the new host without its contract package (skald-hookspecs came
later than the one 'skald' distribution). They are told what to run, not left with a
bare ModuleNotFoundError from deep inside the host."""

from __future__ import annotations

import subprocess
import sys


def test_the_host_without_its_contract_says_to_run_make_install():
    script = "import sys; sys.modules['skald_hookspecs'] = None; import skald_host.cli"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: skald_hookspecs (the plugin contract"), last
    assert "run `make install` (or `make run`) once after updating" in last
