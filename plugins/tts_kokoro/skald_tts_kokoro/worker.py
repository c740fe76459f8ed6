"""The Kokoro worker process: the model lives and runs here, never in the host.

Kokoro's phonemiser and its onnx glue are Python: run in the host, they hold the host's
GIL for much of each synthesis and the chat's token stream stalls behind them. One
long-lived process per engine (``python -m skald_tts_kokoro.worker``, started by
``KokoroEngine`` at the first need, again if it dies) owns a GIL of its own and runs
``NICE`` steps below the host.

The pipe, one message a line of JSON (the text never appears on a command line):

- stdin, from the host: ``{"id": n, "text", "voice", "lang"}`` asks for one unit;
  ``{"cancel": n}`` drops a request not started yet (the one running finishes; the host
  discards its audio).
- stdout, to the host: ``{"ready": true, "voices": [...]}`` once the model is loaded (or
  ``{"failed": "why"}`` and exit), then per request ``{"id": n, "bytes": k}`` followed by
  ``k`` bytes of 16-bit mono WAV (and ``"took"``: seconds it took), or ``{"id": n, "error": "why"}``, or
  ``{"id": n, "skipped": true}`` for a cancelled one.
"""

from __future__ import annotations

import io
import json
import os
import queue
import sys
import threading
import time
import wave
from typing import Any, BinaryIO

#: How much lower the worker's priority is than the host's (nice, 0..19).
NICE = 10


def lower_priority() -> None:
    try:
        os.nice(NICE)
    except OSError:
        pass


def build(config: dict[str, Any]) -> Any:
    """The model on an onnxruntime session tuned for a small machine: ``threads``
    intra-op threads (1 on 2 cores: the host and the chat need the other), one inter-op
    thread, no spinning between runs (a spinning pool burns the core the host needs),
    every graph optimisation. The voice vectors are read once, not at each request."""
    import onnxruntime
    from kokoro_onnx import Kokoro

    from skald_tts_kokoro.model import joined_model

    model = config["model"] or str(joined_model(__import__("pathlib").Path(config["cache_dir"])))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = int(config.get("threads") or 1)
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    kokoro = Kokoro.from_session(session, config["voices"])
    # kokoro-onnx keeps the .npz open and decompresses a voice at every request.
    kokoro.voices = {name: kokoro.voices[name] for name in kokoro.voices.files}
    return kokoro


def speak(kokoro: Any, text: str, voice: str, lang: str) -> bytes:
    import numpy as np

    samples, rate = kokoro.create(text, voice=voice, speed=1.0, lang=lang)
    pcm = (np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(rate))
        w.writeframes(pcm.tobytes())
    return out.getvalue()


def _send(out: BinaryIO, header: dict[str, Any], payload: bytes = b"") -> None:
    out.write(json.dumps(header).encode() + b"\n" + payload)
    out.flush()


def serve(config: dict[str, Any], stdin: BinaryIO, stdout: BinaryIO) -> None:
    from skald_tts_kokoro.model import ModelError

    try:
        kokoro = build(config)
        speak(kokoro, "Ready.", sorted(kokoro.voices)[0], "en-us")  # the first run allocates
    except ModelError as exc:  # the packaged model damaged, its cache not writable
        _send(stdout, {"failed": str(exc)})
        return
    except Exception as exc:  # onnxruntime refusing the file, a broken voice pack
        _send(stdout, {"failed": f"the Kokoro model could not be loaded: {type(exc).__name__}: {exc}"})
        return
    _send(stdout, {"ready": True, "voices": sorted(kokoro.voices)})
    requests: "queue.Queue[dict[str, Any] | None]" = queue.Queue()
    cancelled: set[int] = set()
    lock = threading.Lock()

    def read() -> None:
        """Cancels take effect while a synthesis runs: a thread reads the pipe."""
        for line in stdin:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "cancel" in message:
                with lock:
                    cancelled.add(message["cancel"])
            else:
                requests.put(message)
        requests.put(None)  # the host closed the pipe: finish

    threading.Thread(target=read, daemon=True).start()
    while (request := requests.get()) is not None:
        with lock:
            skip = request["id"] in cancelled
            cancelled.discard(request["id"])
        if skip:
            _send(stdout, {"id": request["id"], "skipped": True})
            continue
        started = time.perf_counter()
        try:
            audio = speak(kokoro, request["text"], request["voice"], request["lang"])
        except Exception as exc:
            _send(stdout, {"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})
            continue
        _send(stdout, {"id": request["id"], "bytes": len(audio), "took": time.perf_counter() - started}, audio)


def main() -> None:
    lower_priority()
    # The protocol keeps the real stdout; anything a library prints goes to stderr.
    protocol = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    config = json.loads(sys.stdin.buffer.readline())
    serve(config, sys.stdin.buffer, protocol)


if __name__ == "__main__":
    main()
