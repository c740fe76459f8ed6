"""README's HTTP API section named ``POST /api/conversations/<id>/messages`` but not its
body: a reader guessed ``{"content": …}`` and was told 400 "'text' is required"
(newcomer report). The README shows the body now, and the body it shows is one the
server takes."""

from __future__ import annotations

import json
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _message_example() -> dict:
    section = README.read_text(encoding="utf-8").split("## HTTP API", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"^POST /api/conversations/<id>/messages\n(\{.*\})$", section, re.MULTILINE)
    assert found, "README's HTTP API section shows no body for POST /api/conversations/<id>/messages"
    return json.loads(found.group(1))


async def test_the_readme_message_body_is_one_the_server_takes(skald):
    body = _message_example()
    host = await skald.start()
    member = await host.member("erin")
    created = await member.post("/api/conversations", json={})
    assert created.status_code == 201, created.text
    cid = created.json()["id"]
    sent = await member.post(f"/api/conversations/{cid}/messages", json=body)
    assert sent.status_code == 202, sent.text
    assert set(sent.json()) >= {"conversation_id", "queued", "message_id"}, sent.json()
    # The same key again (a resend after a lost answer) stores the message once, as it says.
    again = await member.post(f"/api/conversations/{cid}/messages", json=body)
    assert again.status_code == 202 and again.json()["message_id"] == sent.json()["message_id"], again.text


def test_the_readme_says_how_a_private_ca_is_trusted():
    """Test connection's advice for an untrusted certificate names SSL_CERT_FILE; the
    README's part on adding a provider said nothing of it (newcomer report)."""
    models = README.read_text(encoding="utf-8").split("### Models and chat", 1)[1].split("\n### ", 1)[0]
    assert "SSL_CERT_FILE" in models and "restart" in models
