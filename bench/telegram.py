"""B11, the Telegram channel under Telegram's limits: 5 linked chats each send one
message a second for a minute (``SKALD_BENCH_TELEGRAM_SECONDS`` shortens it, e.g. 10
for a quick run), the model streams every answer over about two seconds, and the Bot
API stand-in of the plugin's tests (``plugins/telegram/tests/telegram_standin.py``)
answers as Telegram does: 429 with ``retry_after`` past one message a second per chat
or thirty a second overall.

Printed: lost (a member's message no answer ever covered), duplicated (an answer shown
in two messages, or a message covered by two answers), early retries (a call to a chat
before the end of the flood wait it was given — the stand-in records each), the 429s
the plugin was given, and the reply latency (the member's message arriving at the
stand-in to the final text of the answer covering it being shown) p50/p99 beside the
model's own time for one answer.

Turns of one conversation run one at a time and a message that arrives during a turn
starts the next one with whatever else came meanwhile, so an answer may cover several
messages; the scripted model names the messages each answer covers (their tags), which
is how lost and duplicated are counted. The host, the plugin, the stand-in and the model
server share this process and its event loop (the stand-in and model are light next to
the host); the clock is the stand-in's record, not this loop's.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from skald_host.testing.model_server import RecordedRequest, Reply, ScriptedModelServer, split_words

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "telegram" / "tests"))

from telegram_standin import TOKEN, BotApiStandIn  # noqa: E402

MODEL = "bench-telegram"
API_KEY = "sk-bench-telegram"
CHATS = 5
SECONDS = float(os.environ.get("SKALD_BENCH_TELEGRAM_SECONDS", "60"))
TOKENS = 20
TOKEN_DELAY = 0.1  # some 24 tokens: the model streams each answer for a little over two seconds
TAG = re.compile(r"\bm(\d+)-(\d+)\b")
CODE = re.compile(r"\b([A-Z2-7]{5}-[A-Z2-7]{5})\b")


def _answer(request: RecordedRequest) -> Reply:
    """Names every message of the member since the model's last answer (the ones this
    turn covers), then streams filler words and an end mark."""
    tags: list[str] = []
    for message in reversed(request.messages):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "user":
            tags[:0] = [f"m{a}-{b}" for a, b in TAG.findall(str(message.get("content")))]
    words = " ".join(f"w{i}" for i in range(TOKENS))
    return Reply(f"covers {' '.join(tags)}: {words} end.", token_delay=TOKEN_DELAY)


def model_seconds(text: str) -> float:
    """How long the scripted model streams this answer (its first token comes at once)."""
    return TOKEN_DELAY * (len(split_words(text)) - 1)


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def _pair(host: Any, api: BotApiStandIn, index: int, chat_id: int) -> None:
    member = await host.member(f"tg{index}", display_name=f"Member {index}")
    api.send(chat_id, "hello")
    texts = await api.wait_texts(chat_id, 1, timeout=30)
    code = CODE.search(texts[0])
    assert code, texts[0]
    saved = await member.put("/api/plugins/telegram/my-config", json={"config": {"code": code.group(1)}})
    assert saved.status_code == 200, saved.text
    await api.wait_texts(chat_id, 2, timeout=30)


async def main() -> None:
    from skald_host.testing.host import start_host, test_settings

    with tempfile.TemporaryDirectory(prefix="skald-bench-telegram-") as tmp:
        async with ScriptedModelServer(models=(MODEL,), api_key=API_KEY, responder=_answer) as model, BotApiStandIn() as api:
            host = await start_host(test_settings(Path(tmp) / "data"), use_entry_points=True)
            try:
                admin = await host.admin()
                provider = await admin.post("/api/admin/models/providers", json={"name": "scripted", "base_url": model.base_url, "api_key": API_KEY})
                assert provider.status_code == 201, provider.text
                entry = {"provider_id": provider.json()["id"], "model": MODEL, "priority": 1, "strength": 60}
                assert (await admin.post("/api/admin/models/entries", json=entry)).status_code == 201
                config = {"bot_token": TOKEN, "api_base_url": api.url, "poll_timeout_seconds": 1}
                assert (await admin.put("/api/admin/plugins/telegram/config", json={"config": config})).status_code == 200
                assert (await admin.put("/api/admin/plugins/telegram/enabled", json={"enabled": True})).status_code == 200
                chats = [7770001 + i for i in range(CHATS)]
                for index, chat_id in enumerate(chats):
                    await _pair(host, api, index, chat_id)
                print(f"{CHATS} chats x 1 message/s for {SECONDS:.0f} s; the model streams each answer at {1 / TOKEN_DELAY:.0f} tokens/s")

                sent_at: dict[str, float] = {}
                started = time.monotonic()
                for second in range(int(SECONDS)):
                    await asyncio.sleep(max(0.0, started + second - time.monotonic()))
                    for chat_id in chats:
                        tag = f"m{chat_id}-{second}"
                        api.send(chat_id, f"message {tag}")
                        sent_at[tag] = time.monotonic()

                def finals() -> dict[int, dict[str, Any]]:
                    """The answers' messages that show their whole text (partials are prefixes)."""
                    return {i: m for i, m in api.messages.items() if str(m["text"]).startswith("covers ") and str(m["text"]).endswith(" end.")}

                def covered() -> dict[str, list[tuple[int, float]]]:
                    """tag -> (message id, when its final text was shown) of each answer naming it."""
                    found: dict[str, list[tuple[int, float]]] = {}
                    for message_id, message in finals().items():
                        for a, b in TAG.findall(str(message["text"])):
                            found.setdefault(f"m{a}-{b}", []).append((message_id, message["at"]))
                    return found

                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and len(covered()) < len(sent_at):
                    await asyncio.sleep(0.1)
                await asyncio.sleep(3.0)  # room for a late duplicate
                found = covered()
                shown = [str(m["text"]) for m in finals().values()]
                lost = sorted(set(sent_at) - set(found))
                duplicated = sorted(tag for tag, where in found.items() if len(where) > 1)
                latencies = [min(at for _, at in found[tag]) - sent_at[tag] for tag in sent_at if tag in found]
                model_times = [model_seconds(text) for text in shown]
                floods = [c for c in api.calls if c.status == 429]
                edits = [c for c in api.calls if c.method == "editMessageText" and c.status == 200]
                print(f"messages sent: {len(sent_at)}; answers shown: {len(shown)} (a turn covers what came during the one before)")
                print(f"lost: {len(lost)}  duplicated: {len(duplicated) + len(shown) - len(set(shown))}  early retries: {len(api.early)}  429s given: {len(floods)}")
                print(
                    f"reply latency p50 {_p(latencies, 0.5):.2f} s, p99 {_p(latencies, 0.99):.2f} s;"
                    f" the model's own time per answer p50 {_p(model_times, 0.5):.2f} s, p99 {_p(model_times, 0.99):.2f} s"
                )
                stale = [m for i, m in api.messages.items() if str(m["text"]).startswith("covers ") and i not in finals()]
                print(
                    f"streaming: {len(edits)} edits accepted, {sum(1 for m in api.messages.values() if m['edits'])} messages edited,"
                    f" {len(stale)} left showing a partial text"
                )
                if lost:
                    print(f"  lost: {lost[:10]}")
                if duplicated:
                    print(f"  duplicated: {duplicated[:10]}")
            finally:
                await host.stop()
