"""Password policy: what a member may choose as a password (check A5).

The policy only runs when a password is *set*; logging in never re-checks it, so a policy
change cannot lock anyone out. Nothing here truncates: Argon2id takes input of any length
(unlike bcrypt's 72 bytes), so `72*"a"+"b"` and `72*"a"+"c"` stay different passwords.
"""

from __future__ import annotations

import string
import unicodedata
from functools import lru_cache

from skald_host.core.refusal import Refusal

MIN_LENGTH = 8
"""Minimum length in code points after NFC (ASVS V6.2.1)."""

MAX_LENGTH = 1024
"""Maximum length in code points; ASVS asks for at least 64 and the checks for 128. The cap
only bounds the work one request can ask of the KDF; longer input is refused, never cut."""


class PasswordRejected(Refusal):
    """The chosen password breaks the policy; the message tells the member what to change."""


def normalize_password(password: str) -> str:
    """Unicode NFC, so the same password typed on keyboards that produce composed or
    decomposed characters ("é" vs "e" + U+0301) derives the same key."""
    return unicodedata.normalize("NFC", password)


@lru_cache(maxsize=1)
def _breached_passwords() -> frozenset[str]:
    """zxcvbn's bundled list of the 30,000 most common passwords from real breaches, loaded on
    first use so importing the identity package stays cheap."""
    from zxcvbn.frequency_lists import FREQUENCY_LISTS

    return frozenset(entry.casefold() for entry in FREQUENCY_LISTS["passwords"])


def check_password_policy(password: str, *, user_name: str | None = None) -> str:
    """Return the NFC-normalised password, or raise `PasswordRejected` saying what to fix.

    Length is counted after NFC so that the decomposed spelling of a password is not longer
    than the composed one.
    """
    normalized = normalize_password(password)
    length = len(normalized)
    if length < MIN_LENGTH:
        raise PasswordRejected(f"password must be at least {MIN_LENGTH} characters", code="password_too_short", minimum=MIN_LENGTH)
    if length > MAX_LENGTH:
        raise PasswordRejected(
            f"password must be at most {MAX_LENGTH} characters (this one has {length})", code="password_too_long", maximum=MAX_LENGTH
        )
    if not normalized.strip():
        raise PasswordRejected("password must not consist only of spaces", code="password_blank")
    folded = normalized.casefold()
    if user_name is not None and folded == normalize_password(user_name).casefold():
        raise PasswordRejected("password must not be the same as the user name", code="password_is_username")
    if folded in _breached_passwords() or _decorated_breached(folded):
        raise PasswordRejected(
            "password is too common: it appears in lists of breached passwords; choose another", code="password_common"
        )
    return normalized


#: What people add around a common word to pass a rule ("Password123!", "letmein123"):
#: digits, punctuation and spaces, at most this many characters in all.
DECORATION = string.digits + string.punctuation + " "
DECORATION_MAX = 6


def _decorated_breached(folded: str) -> bool:
    """A breached word with a few digits or symbols around it: guessing tools try those
    first, so "Password123!" is no stronger than "password" (security sweep: it was
    accepted). The word must be 4 characters or more, so a passphrase that merely ends
    in a digit after a short common word is not caught by chance."""
    word = folded.strip(DECORATION)
    return word != folded and len(word) >= 4 and len(folded) - len(word) <= DECORATION_MAX and word in _breached_passwords()
