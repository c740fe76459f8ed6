"""The README's install steps: what an admin must know that the Plugins page does not
say (a probe installed the plugin, found no card until a restart, and got a QR code
pointing at the proxy's inside address)."""

from __future__ import annotations

from pathlib import Path

from skald_mobile_connector import CONFIG_SCHEMA

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_says_restart_after_installing_the_public_address_and_https_for_push():
    install = README.read_text(encoding="utf-8").split("## Install", 1)[1]
    assert "pip install -e plugins/mobile_connector" in install and "restart the host" in install
    public_address = next(f.label for f in CONFIG_SCHEMA if f.name == "public_url")
    assert f"**{public_address}**" in install and "reverse proxy" in install and "QR" in install
    assert "Web Push" in install and "**https**" in install
