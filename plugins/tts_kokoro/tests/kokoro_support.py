"""Reading the audio the host returns, for assertions on what was really synthesised."""

from __future__ import annotations

import io
import struct

import numpy as np
import soundfile


def streamed_wav(data: bytes) -> tuple[int, np.ndarray]:
    """``/api/tts``'s WAV: a 44-byte header whose sizes say 'unknown', then 16-bit mono."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE" and data[36:40] == b"data", data[:44]
    channels, rate, bits = struct.unpack("<H", data[22:24])[0], struct.unpack("<I", data[24:28])[0], struct.unpack("<H", data[34:36])[0]
    assert (channels, bits) == (1, 16)
    return rate, np.frombuffer(data[44:], dtype="<i2")


def ogg(data: bytes) -> tuple[int, np.ndarray]:
    assert data[:4] == b"OggS" and b"OpusHead" in data[:200], data[:64]
    samples, rate = soundfile.read(io.BytesIO(data), dtype="int16")
    return rate, samples


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if len(samples) else 0.0
