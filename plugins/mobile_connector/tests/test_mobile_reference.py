"""The mobile API in the server's HTTP reference: every route with its body and answers,
the stream with every event it carries, and the document still valid OpenAPI."""

from __future__ import annotations

from openapi_spec_validator import validate

from mobile_support import BASE


async def test_every_mobile_route_is_documented_with_its_answers_and_the_stream_events(setup):
    doc = (await setup.admin.get("/api/openapi.json")).json()
    validate(doc)
    mine = {path: item for path, item in doc["paths"].items() if path.startswith(f"{BASE}/")}
    served = {rule.rule for rule in setup.host.app.url_map.iter_rules() if rule.rule.startswith(f"{BASE}/")}
    assert len(mine) == len(served) >= 15
    for path, item in mine.items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            assert operation["summary"].strip(), where
            if path.endswith(".js") or path.endswith("/app/") or "{name}" in path:
                continue
            ok = [s for s in operation["responses"] if s.startswith("2")]
            assert ok and all("content" in operation["responses"][s] for s in ok), f"{where} has no documented answer"
            if method in ("post", "put") and not path.endswith(("/pairing", "/stop", "/conversations")):
                assert "requestBody" in operation, where
    stream = mine[f"{BASE}/stream"]["get"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    assert set(stream["properties"]["kind"]["enum"]) >= {"typing", "partial", "answer", "approval", "approval_resolved", "notification", "error", "closed"}
    pair = mine[f"{BASE}/pair"]["post"]
    assert pair["x-skald-auth"] == "public" and pair["requestBody"]["content"]["application/json"]["schema"]["required"] == ["code"]
    assert "423" in mine[f"{BASE}/conversations"]["get"]["responses"]
