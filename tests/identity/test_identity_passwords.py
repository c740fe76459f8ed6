"""Password policy (check A5). The KDF side of A5 (no truncation, NFC) is in
test_identity_crypto.py, where it is shown on real sealed records."""

import unicodedata

import pytest
from zxcvbn.frequency_lists import FREQUENCY_LISTS

from skald_host.core.identity.passwords import (
    MAX_LENGTH,
    MIN_LENGTH,
    PasswordRejected,
    check_password_policy,
    normalize_password,
)


def test_limits_are_the_documented_policy():
    assert MIN_LENGTH == 8
    assert MAX_LENGTH >= 128


def test_seven_characters_rejected_with_what_to_fix():
    with pytest.raises(PasswordRejected, match="at least 8 characters"):
        check_password_policy("Zx9#kLm")


@pytest.mark.parametrize("length", [8, 15, 64, 128, MAX_LENGTH])
def test_lengths_8_15_64_128_and_max_accepted(length):
    password = ("Vq7!rT2#mZ" * 200)[:length]
    assert check_password_policy(password) == password


def test_length_over_max_rejected_with_limit_in_message():
    with pytest.raises(PasswordRejected, match=str(MAX_LENGTH)) as caught:
        check_password_policy("Vq7!rT2#mZ" * 103)  # 1030 characters
    assert "at most" in str(caught.value)
    with pytest.raises(PasswordRejected, match="1024"):
        check_password_policy("x" * 1025)


def test_nfc_and_nfd_spellings_are_the_same_password():
    composed = "Grüße-Café-Noël"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert normalize_password(decomposed) == normalize_password(composed) == composed
    assert check_password_policy(decomposed) == check_password_policy(composed) == composed


def test_length_counted_after_nfc():
    # 7 code points composed, 9 decomposed: still too short.
    short = unicodedata.normalize("NFD", "äöüäöüx")
    assert len(short) == 13
    with pytest.raises(PasswordRejected, match="at least 8"):
        check_password_policy(short)


def test_no_truncation_in_policy():
    assert check_password_policy("a" * 72 + "b") != check_password_policy("a" * 72 + "c")


@pytest.mark.parametrize("password", ["password1", "qwerty123", "Password1", "QWERTY123", "iloveyou"])
def test_common_passwords_rejected_case_insensitively(password):
    with pytest.raises(PasswordRejected, match="too common"):
        check_password_policy(password)


def test_every_eligible_password_of_the_top_3000_rejected():
    top = [p for p in FREQUENCY_LISTS["passwords"][:3000] if len(p) >= MIN_LENGTH]
    assert len(top) > 500
    for password in top:
        with pytest.raises(PasswordRejected, match="too common"):
            check_password_policy(password)


def test_password_equal_to_user_name_rejected():
    with pytest.raises(PasswordRejected, match="user name"):
        check_password_policy("Bartholomew", user_name="bartholomew")
    assert check_password_policy("Bartholomew!2", user_name="bartholomew") == "Bartholomew!2"


def test_all_whitespace_rejected():
    with pytest.raises(PasswordRejected, match="spaces"):
        check_password_policy(" " * 10)
    with pytest.raises(PasswordRejected, match="spaces"):
        check_password_policy("\t \u3000 \n   ")


def test_rejection_is_a_value_error():
    assert issubclass(PasswordRejected, ValueError)


@pytest.mark.parametrize("password", ["Password123!", "letmein123", "!!Dragon2024", "monkey 1234", "Sunshine#99"])
def test_a_breached_word_with_digits_or_symbols_around_it_is_rejected(password):
    """Guessing tools try the decorations first; "Password123!" and "letmein123" were
    accepted (security sweep)."""
    with pytest.raises(PasswordRejected, match="too common"):
        check_password_policy(password)


@pytest.mark.parametrize("password", ["correct horse battery staple 7", "Vq7!rT2#mZ", "my dog rex 2019!", "sun1234567890"])
def test_a_password_that_only_contains_a_common_word_or_is_mostly_digits_is_kept(password):
    assert check_password_policy(password) == password
