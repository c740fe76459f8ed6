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


def test_the_main_readme_names_the_audio_format_the_speech_route_makes():
    """The main README said the mobile app uses the OGG/Opus file; its ``/speech`` route
    makes WAV (``HostApi.synthesize_speech(..., format="wav")``)."""
    from skald_mobile_connector import routes

    assert 'format="wav"' in Path(routes.__file__).read_text(encoding="utf-8")
    speech = (README.parents[2] / "README.md").read_text(encoding="utf-8").split("### Speech", 1)[1].split("\n### ", 1)[0]
    said = " ".join(speech.split())
    assert "which the mobile app and plugins use" not in said
    assert "the mobile app gets one WAV file from its `/speech` route" in said
