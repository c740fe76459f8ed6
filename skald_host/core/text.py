"""Small text rules shared by the core: which characters a name may not hide, a title
made safe to show on one line, and what a name looks like to a reader (its scripts and
its confusable skeleton).

A format character (Unicode category Cf: a bidi override such as U+202E, a zero-width
space, a BOM) shows nothing itself but changes how the text around it reads: a note
named "\\u202egnp.md" shows as "dm.png". Control characters (Cc), private-use (Co) and
surrogate (Cs) code points and the line and paragraph separators (Zl, Zp) have no
business in a one-line name either. Two joiners are kept where they are part of
ordinary writing: the zero-width joiner inside an emoji sequence (👩‍💻) and both joiners
between letters of the scripts that use them (Persian, the Indic scripts).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from skald_host.core.refusal import Refusal

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})

_ZWNJ, _ZWJ = "\u200c", "\u200d"
#: Scripts whose ordinary spelling uses the zero-width (non-)joiner between letters.
_JOINING_SCRIPTS = frozenset({
    "ARABIC", "SYRIAC", "NKO", "MONGOLIAN", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA",
    "TAMIL", "TELUGU", "KANNADA", "MALAYALAM", "SINHALA",
})


def _script_word(ch: str) -> str:
    return unicodedata.name(ch, "").split(" ", 1)[0]


def _emoji(ch: str, *, before: bool) -> bool:
    category = unicodedata.category(ch)
    if category == "So":
        return True
    # What may end the emoji before a joiner: a skin tone (Sk) or the emoji presentation selector.
    return before and (ch == "\ufe0f" or (category == "Sk" and 0x1F3FB <= ord(ch) <= 0x1F3FF))


def _joining_letter(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LM" and _script_word(ch) in _JOINING_SCRIPTS


def _wanted_joiner(text: str, index: int) -> bool:
    ch = text[index]
    if ch not in (_ZWNJ, _ZWJ) or index == 0 or index + 1 >= len(text):
        return False
    before, after = text[index - 1], text[index + 1]
    if ch == _ZWJ and _emoji(before, before=True) and _emoji(after, before=False):
        return True
    return _joining_letter(before) and _joining_letter(after)


def hidden_character(text: str) -> str | None:
    """The first character of ``text`` that a one-line name may not hold (see the
    module's docstring), or None."""
    for index, ch in enumerate(text):
        if unicodedata.category(ch) in HIDDEN_CATEGORIES and not _wanted_joiner(text, index):
            return ch
    return None


def code_point(ch: str) -> str:
    """``U+202E``: how a refusal names a character that cannot be shown."""
    return f"U+{ord(ch):04X}"


def check_shown_name(value: str, field: str, error: type[Refusal] = Refusal) -> str:
    """``value`` unchanged, or a refusal (``error``, code ``name_hidden_character``) when
    it holds a character a one-line name that other people read may not hold
    (``hidden_character``: C0 and C1 controls, bidi overrides and isolates, zero-width
    characters, line separators). Refused rather than stripped: the person who typed
    the name sees what was wrong with it, and what is stored is what they typed."""
    hidden = hidden_character(value)
    if hidden is not None:
        raise error(
            f"{field} may not contain invisible or control characters such as {code_point(hidden)}",
            code="name_hidden_character", field=field, char=code_point(hidden),
        )
    return value


def clean_title(value: Any) -> str:
    """A title as it is stored and shown: NFC; format characters (Cf: bidi overrides,
    zero-width spaces, a BOM) and lone surrogates dropped; control characters, private
    use, line and paragraph separators and every run of white space a single space; no
    white space at either end. "a\\r\\nX-Injected: 1" → "a X-Injected: 1"."""
    if not isinstance(value, str):
        return ""
    if value.isascii() and value.isprintable() and value == " ".join(value.split()):
        return value  # most titles: no category to look up (a per-character loop per message)
    text = unicodedata.normalize("NFC", value)
    kept = []
    for index, ch in enumerate(text):
        category = unicodedata.category(ch)
        if category in HIDDEN_CATEGORIES and not _wanted_joiner(text, index):
            if category in ("Cf", "Cs"):
                continue
            ch = " "
        kept.append(ch)
    return " ".join("".join(kept).split())


# -- what a name looks like ----------------------------------------------------------------

#: Scripts that may share one name (UTS #39 "highly restrictive"): Japanese writes Han,
#: Hiragana and Katakana together, Korean Han and Hangul, Chinese Han and Bopomofo, each
#: with Latin. Any other mix of scripts in a name is refused.
_SCRIPTS_TOGETHER = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
)
_SCRIPT_ALIASES = {"CJK": "HAN", "KATAKANA-HIRAGANA": "KATAKANA", "HALFWIDTH": "KATAKANA", "IDEOGRAPHIC": "HAN"}


def letter_scripts(text: str) -> list[str]:
    """The scripts of the letters of ``text`` in the order they first appear (digits,
    punctuation and symbols belong to none), named by the first word of each letter's
    Unicode name: "LATIN", "CYRILLIC", "GREEK", "HAN" …"""
    seen: list[str] = []
    for ch in text:
        if not unicodedata.category(ch).startswith("L"):
            continue
        word = _script_word(ch) or "UNKNOWN"
        script = _SCRIPT_ALIASES.get(word, word)
        if script not in seen:
            seen.append(script)
    return seen


def mixes_scripts(text: str) -> bool:
    """Whether ``text`` has letters of scripts that do not belong together (Latin with
    Cyrillic or Greek, say), so that it may pass for a name in another script."""
    scripts = set(letter_scripts(text))
    return len(scripts) > 1 and not any(scripts <= allowed for allowed in _SCRIPTS_TOGETHER)


#: Letters that look like a Latin one in lower case (UTS #39 confusables, the common
#: ones): Cyrillic, Greek, Armenian, and Latin letters of other shapes.
_LOOK_ALIKES = str.maketrans({
    # Cyrillic
    "а": "a", "с": "c", "ԁ": "d", "е": "e", "ё": "ë", "һ": "h", "і": "i", "ї": "ï", "ј": "j", "ӏ": "l", "п": "n",
    "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "ѵ": "v", "ԝ": "w", "х": "x", "у": "y", "ү": "y", "з": "3",
    "б": "6",
    # Greek
    "α": "a", "ϲ": "c", "η": "n", "ι": "i", "ϳ": "j", "ν": "v", "ο": "o", "ρ": "p", "υ": "u", "χ": "x", "γ": "y",
    "ω": "w",
    # Armenian
    "ա": "w", "զ": "q", "հ": "h", "ո": "n", "ս": "u", "օ": "o", "ց": "g",
    "ь": "b",
    # Cherokee (case folded to its capitals), by the Latin letter each passes for
    "Ꭰ": "d", "Ꭱ": "r", "Ꭲ": "t", "Ꭵ": "i", "Ꭹ": "y", "Ꭺ": "a", "Ꭻ": "j", "Ꭼ": "e", "Ꮃ": "w", "Ꮇ": "m", "Ꮋ": "h",
    "Ꮎ": "o", "Ꮐ": "g", "Ꮒ": "h", "Ꮓ": "z", "Ꮟ": "b", "Ꮢ": "r", "Ꮩ": "v", "Ꮪ": "s", "Ꮮ": "l", "Ꮯ": "c", "Ꮲ": "p",
    "Ꮶ": "k", "Ᏼ": "b",
    # Latin letters of other shapes, and digits that pass for letters (small capitals,
    # dotless letters and letters with a stroke or hook: by name, ``_latin_base``)
    "ı": "i", "ɩ": "i", "ɑ": "a", "ɡ": "g", "ƅ": "b",
    "0": "o", "1": "l",
})

#: A Latin letter's plain form by its Unicode name: "LATIN LETTER SMALL CAPITAL A",
#: "LATIN SMALL LETTER DOTLESS J", "LATIN SMALL LETTER B WITH HOOK" (what NFKC leaves).
_LATIN_BASE = re.compile(r"^LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL |DOTLESS )?([A-Z])(?: WITH .+)?$")


def _latin_base(ch: str) -> str:
    if unicodedata.decomposition(ch):
        return ch  # an accent one sees ("é"): another name, as NFKC keeps it
    match = _LATIN_BASE.match(unicodedata.name(ch, ""))
    return match.group(1).lower() if match else ch


def skeleton(text: str) -> str:
    """What ``text`` looks like, for telling whether two names would be mistaken for
    each other: NFKC, case folded, look-alike letters mapped to the Latin letter they
    pass for (Cyrillic "а" → "a", Greek "ο" → "o", "0" → "o", "1" → "l"), "rn" → "m".
    Two names with one skeleton read as the same name."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_LOOK_ALIKES)
    mapped = unicodedata.normalize("NFKC", "".join(_latin_base(ch) if ord(ch) > 127 else ch for ch in folded))
    return mapped.replace("rn", "m")


def search_form(text: str | None) -> str:
    """``text`` as a search compares it: case folded ("ß" as "ss"), accents dropped
    ("Café" as "cafe", "Größe" as "grosse"), as the message index folds its words."""
    decomposed = unicodedata.normalize("NFKD", text or "")
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


_SHARP_S = re.compile(r"ss|ß|ẞ", re.IGNORECASE)
#: Spellings of one word tried at most (each "ss"/"ß" either way: 2 ** 3); a word with
#: more has three: as typed, every one as "ß", every one as "ss".
MAX_SHARP_S_SPELLINGS = 8


def sharp_s_spellings(word: str) -> list[str]:
    """``word`` as typed first, then as spelled with "ß" for "ss" and "ss" for "ß"
    (Swiss German, a keyboard without "ß"), each occurrence either way."""
    parts = _SHARP_S.split(word)
    if len(parts) == 1:
        return [word]
    found = _SHARP_S.findall(word)
    choices = [(mark, "ss" if mark.lower() != "ss" else "ß") for mark in found]
    if 2 ** len(choices) > MAX_SHARP_S_SPELLINGS:
        picks = [list(found), ["ß" if m.lower() == "ss" else m for m in found], ["ss" if m.lower() != "ss" else m for m in found]]
    else:
        picks = [[c[(n >> i) & 1] for i, c in enumerate(choices)] for n in range(2 ** len(choices))]
    spellings: list[str] = []
    for pick in picks:
        spelled = parts[0] + "".join(mark + part for mark, part in zip(pick, parts[1:]))
        if spelled not in spellings:
            spellings.append(spelled)
    return spellings


def encodable(text: str) -> str:
    """``text`` as UTF-8 can carry it: each lone surrogate ("\\ud800", which a Python str
    holds and no encoder sends) a U+FFFD; a pair of surrogates the character it spells.
    A tool's result is stored and sent to the model as UTF-8: one such code point failed
    the next request, and with it the turn."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def surrogates_escaped(text: str) -> str:
    """``text`` as UTF-8 can carry it, each lone surrogate kept as its JSON escape
    (``\\ud800``) and a pair of surrogates the character it spells. For JSON text a
    model streamed (a call's arguments): stored as it came it failed the write of the
    whole answer; as its escape, the JSON says what the model sent and its reader
    (``read_json``) refuses it as no text, which the model is told."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        paired = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        return paired.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
