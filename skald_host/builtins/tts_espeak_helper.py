"""The espeak-ng engine's helper process: it starts the ``espeak-ng`` processes so the
host does not.

Started from the host, every synthesis cost the event loop a fork of the whole host
process, a child-watcher thread to start (``Thread.start`` waits until it runs, which on
a busy machine takes milliseconds) and the pipe reads, one sentence at a time; under a
crowd of listeners the chat's token stream stalled behind them. This small process
(started once, ``NICE`` steps below the host, so every espeak-ng it starts is too) does
all that; the host writes one line and reads one answer per sentence.

The pipe: stdin ``{"id": n, "binary", "voice", "text", "timeout"}`` one JSON line each;
stdout ``{"id": n, "bytes": k}`` and ``k`` bytes of WAV, or ``{"id": n, "error": "why"}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

NICE = 10


def main() -> None:
    try:
        os.nice(NICE)
    except OSError:
        pass
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        try:
            done = subprocess.run(
                [request["binary"], "-v", request["voice"], "-b", "1", "--stdout"],
                input=request["text"].encode("utf-8"), capture_output=True, timeout=request.get("timeout", 30),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            answer, audio = {"id": request["id"], "error": f"espeak-ng does not run: {exc}"}, b""
        else:
            if done.returncode != 0 or not done.stdout.startswith(b"RIFF"):
                message = f"espeak-ng failed (exit {done.returncode}): {done.stderr.decode(errors='replace')[:200]}"
                answer, audio = {"id": request["id"], "error": message}, b""
            else:
                answer, audio = {"id": request["id"], "bytes": len(done.stdout)}, done.stdout
        protocol.write(json.dumps(answer).encode() + b"\n" + audio)
        protocol.flush()


if __name__ == "__main__":
    main()
