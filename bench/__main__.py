import asyncio
import sys

from bench import chat, logins, mcp, memory, mobile, plugins, sandbox, soak, storage, subagents, telegram, tts

SUITES = {"storage": storage.main, "logins": logins.main, "chat": chat.main, "memory": memory.main, "sandbox": sandbox.main, "soak": soak.main, "telegram": telegram.main, "plugins": plugins.main, "mcp": mcp.main, "tts": tts.main, "mobile": mobile.main, "subagents": subagents.main}


def main(argv: list[str]) -> int:
    names = argv or list(SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(SUITES)}")
        return 2
    for name in names:
        print(f"\n== {name} ==")
        asyncio.run(SUITES[name]())
    return 0


sys.exit(main(sys.argv[1:]))
