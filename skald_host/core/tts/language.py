"""The language a text is written in, for the voice that reads it aloud (README
"Speech": the member's voice when it speaks the reply's language, else the instance
default for that language). A member who set German for the interface and asked for an
English answer hears it read by an English voice, not by a German one spelling English.

``py3langid`` (a maintained fork of langid.py: a naive Bayes model over byte n-grams,
97 languages, deterministic, numpy only) decides among the languages that matter: those
some voice speaks and the member's own. Its model takes a few seconds to load, once per
process, in a thread (``detect`` is called through ``asyncio.to_thread``); a decision
takes well under a millisecond. A text too short or too mixed to tell (its best language
below ``CONFIDENCE``) keeps the caller's fallback, as does a host without the library.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterable

log = logging.getLogger(__name__)

#: Below this share (among the candidate languages) the text keeps the fallback: "OK",
#: "Hallo" or a name alone say nothing reliable about the language of a reply.
CONFIDENCE = 0.8

_lock = threading.Lock()
_identifier: Any = None
_missing = False


def _load() -> Any:
    global _identifier, _missing
    with _lock:
        if _identifier is None and not _missing:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier
            except ImportError:
                _missing = True
                log.warning("py3langid is not installed: speech reads every text in the member's own language")
                return None
            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


def detect(text: str, candidates: Iterable[str]) -> str | None:
    """The language (``de``, ``en``, …) of ``text`` among ``candidates``, or None when
    it cannot be told. Blocking (the first call loads the model): run it in a thread."""
    wanted = {c.split("-")[0].lower() for c in candidates if c}
    if not text.strip() or not wanted:
        return None
    identifier = _load()
    if identifier is None:
        return None
    scores = [(lang, score) for lang, score in identifier.rank(text) if lang in wanted]
    total = sum(score for _, score in scores)
    if not scores or total <= 0:
        return None
    language, best = max(scores, key=lambda pair: pair[1])
    return language if best / total >= CONFIDENCE else None
