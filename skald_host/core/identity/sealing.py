"""The member's inbox key pair and sealed boxes (the sealed inbox, issue 6).

A message for a locked member must be kept without the host being able to read it:
the host holds no key of theirs while they are locked. So each member has an X25519
key pair; the public half sits in the registry, the private half in their own file
(readable only while they are unlocked). Sealing is ephemeral-static ECDH:
a fresh key pair per message, the shared secret through HKDF-SHA256 into an
AES-256-GCM key, with the member id, the sealed row's id and the format version as
associated data, so a box moved to another row or member fails to open.

A member who chose no encryption has a plain owner file: their private key is then
only as private as that file, and so are their sealed messages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SEAL_VERSION = 1
_INFO = b"skald sealed inbox v1"
_RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class SealError(ValueError):
    """A sealed box that does not open with this key for this member and row."""


@dataclass(frozen=True)
class InboxKeyPair:
    private: bytes  # 32 raw bytes; lives only in the member's own file
    public: bytes  # 32 raw bytes; the registry holds this

    @classmethod
    def generate(cls) -> "InboxKeyPair":
        key = X25519PrivateKey.generate()
        private = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
        return cls(private, key.public_key().public_bytes(*_RAW))

    @classmethod
    def from_private(cls, private: bytes) -> "InboxKeyPair":
        key = X25519PrivateKey.from_private_bytes(private)
        return cls(private, key.public_key().public_bytes(*_RAW))


@dataclass(frozen=True)
class SealedBox:
    ephemeral_public: bytes
    nonce: bytes
    ciphertext: bytes
    version: int = SEAL_VERSION


def _aad(member_id: str, sealed_id: str, version: int) -> bytes:
    return f"skald-sealed|v{version}|{member_id}|{sealed_id}".encode()


def _key(shared: bytes, ephemeral_public: bytes, recipient_public: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=ephemeral_public + recipient_public, info=_INFO).derive(shared)


def seal(recipient_public: bytes, plaintext: bytes, *, member_id: str, sealed_id: str) -> SealedBox:
    ephemeral = X25519PrivateKey.generate()
    ephemeral_public = ephemeral.public_key().public_bytes(*_RAW)
    shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(recipient_public))
    nonce = os.urandom(12)
    key = _key(shared, ephemeral_public, recipient_public)
    ciphertext = AESGCM(key).encrypt(nonce, plaintext, _aad(member_id, sealed_id, SEAL_VERSION))
    return SealedBox(ephemeral_public, nonce, ciphertext)


def open_sealed(pair: InboxKeyPair, box: SealedBox, *, member_id: str, sealed_id: str) -> bytes:
    if box.version != SEAL_VERSION:
        raise SealError(f"unknown sealed-box version {box.version}")
    try:
        shared = X25519PrivateKey.from_private_bytes(pair.private).exchange(X25519PublicKey.from_public_bytes(box.ephemeral_public))
        key = _key(shared, box.ephemeral_public, pair.public)
        return AESGCM(key).decrypt(box.nonce, box.ciphertext, _aad(member_id, sealed_id, box.version))
    except (InvalidTag, ValueError) as exc:
        raise SealError("the sealed box does not open with this member's key") from exc


async def ensure_inbox_key(owner: Any) -> InboxKeyPair:
    """The member's key pair from their open file, created there when missing (at
    registration, or at the first unlock of a member created before the inbox)."""

    def read_or_create(conn: Any) -> InboxKeyPair:
        row = conn.execute("SELECT private_key FROM inbox_key WHERE id = 1").fetchone()
        if row is not None:
            return InboxKeyPair.from_private(bytes(row[0]))
        pair = InboxKeyPair.generate()
        conn.execute("INSERT INTO inbox_key (id, private_key, public_key) VALUES (1, ?, ?)", (pair.private, pair.public))
        return pair

    return await owner.transaction(read_or_create)
