"""The sealed box itself: it opens only with the member's private key, for the member
and the row it was sealed for, and untouched."""

from __future__ import annotations

import dataclasses

import pytest

from skald_host.core.identity.sealing import InboxKeyPair, SealError, open_sealed, seal


def test_a_sealed_box_opens_only_with_the_right_key_member_row_and_bytes():
    pair = InboxKeyPair.generate()
    box = seal(pair.public, b"meet at the old mill", member_id="m1", sealed_id="s1")
    assert b"old mill" not in box.ciphertext and len(box.nonce) == 12 and len(box.ephemeral_public) == 32
    assert open_sealed(pair, box, member_id="m1", sealed_id="s1") == b"meet at the old mill"
    assert InboxKeyPair.from_private(pair.private) == pair

    with pytest.raises(SealError):
        open_sealed(InboxKeyPair.generate(), box, member_id="m1", sealed_id="s1")
    with pytest.raises(SealError):
        open_sealed(pair, box, member_id="m2", sealed_id="s1")  # moved to another member
    with pytest.raises(SealError):
        open_sealed(pair, box, member_id="m1", sealed_id="s2")  # moved to another row
    flipped = bytes([box.ciphertext[0] ^ 1]) + box.ciphertext[1:]
    with pytest.raises(SealError):
        open_sealed(pair, dataclasses.replace(box, ciphertext=flipped), member_id="m1", sealed_id="s1")
    with pytest.raises(SealError):
        open_sealed(pair, dataclasses.replace(box, version=2), member_id="m1", sealed_id="s1")


def test_two_seals_of_the_same_text_share_nothing():
    pair = InboxKeyPair.generate()
    a = seal(pair.public, b"same", member_id="m", sealed_id="x")
    b = seal(pair.public, b"same", member_id="m", sealed_id="x")
    assert a.ephemeral_public != b.ephemeral_public and a.nonce != b.nonce and a.ciphertext != b.ciphertext
