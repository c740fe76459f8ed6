"""Envelope encryption of each member's database key (DEK) — design "Identity, storage,
privacy", checks A3, B3, B4.

system.db is readable by the box owner, so it holds nothing that derives a member's key:
only the DEK sealed with AES-256-GCM under KEK = Argon2id(password, salt). The GCM tag is the
password verifier, so one derivation both authenticates the member and yields the key.

Every failure to open a record — wrong password, tampered or swapped record, weakened
parameters, unknown format — raises the same `CredentialError`, so an attacker learns nothing
about which part was wrong. Python cannot reliably zero `bytes`, so no attempt is made; keys
live as long as the objects holding them. Nothing in this module logs.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import os
import secrets
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from argon2.exceptions import HashingError
from argon2.low_level import Type, hash_secret_raw
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .passwords import normalize_password

SEALED_ALGORITHM = "argon2id+aes-256-gcm"
VERIFIER_ALGORITHM = "argon2id"
FORMAT_VERSION = 1
KEY_BYTES = 32
SALT_BYTES = 16
NONCE_BYTES = 12
TAG_BYTES = 16
_UINT32 = 2**32


@dataclass(frozen=True)
class KdfParams:
    """Argon2id cost: memory in KiB, passes, lanes."""

    memory_kib: int
    time_cost: int
    parallelism: int

    def at_least(self, other: KdfParams) -> bool:
        """True when no component is weaker than `other`'s."""
        return (
            self.memory_kib >= other.memory_kib
            and self.time_cost >= other.time_cost
            and self.parallelism >= other.parallelism
        )

    def validated(self) -> KdfParams:
        """Return self if usable as configuration, else raise: the host calls this when it
        loads settings, so the server can never be configured to seal below the floor."""
        check_at_least_floor(self)
        if self.memory_kib < 8 * self.parallelism:
            raise ValueError(
                f"kdf memory_kib={self.memory_kib} must be at least 8 × parallelism "
                f"({8 * self.parallelism}); Argon2 needs 8 KiB per lane"
            )
        return self


DEFAULT_KDF = KdfParams(memory_kib=65536, time_cost=3, parallelism=4)
"""RFC 9106 §4, second recommended option (64 MiB, t=3, p=4)."""

KDF_FLOOR = KdfParams(memory_kib=19456, time_cost=2, parallelism=1)
"""OWASP Password Storage Cheat Sheet minimum for Argon2id (19 MiB, t=2, p=1). Nothing is
sealed below it and no record below it is opened (downgrade defence, check B3)."""


class WeakKdfParams(ValueError):
    """Configured KDF parameters are below `KDF_FLOOR`."""


def check_at_least_floor(params: KdfParams) -> None:
    """Raise `WeakKdfParams` naming every component below the floor."""
    weak = [
        f"{name}={getattr(params, name)} (floor {getattr(KDF_FLOOR, name)})"
        for name in ("memory_kib", "time_cost", "parallelism")
        if getattr(params, name) < getattr(KDF_FLOOR, name)
    ]
    if weak:
        raise WeakKdfParams(
            "kdf parameters below the Argon2id floor (OWASP: memory_kib=19456, time_cost=2, "
            f"parallelism=1): {', '.join(weak)}; raise them in the settings"
        )


class CredentialError(Exception):
    """The one error for every way opening a record can fail. It never carries detail and is
    raised outside any `except` block, so no chained exception reveals the cause."""

    def __init__(self) -> None:
        super().__init__("invalid credentials")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _load_fields(text: str | bytes, expected: set[str]) -> dict[str, Any] | None:
    """Parse a record's JSON, or None for anything that is not exactly the expected fields."""
    try:
        data = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) != expected:
        return None
    return data


def _params_usable(params: KdfParams) -> bool:
    """Whether a stored record's parameters may be derived with. Checked before any
    derivation, so an edit to m=8/t=1 fails fast, and absurd values never reach Argon2."""
    values = (params.memory_kib, params.time_cost, params.parallelism)
    return (
        all(type(v) is int and 0 < v < _UINT32 for v in values)
        and params.at_least(KDF_FLOOR)
        and params.memory_kib >= 8 * params.parallelism
        and params.parallelism < 2**24
    )


def _params_aad(params: KdfParams) -> bytes:
    return struct.pack(">III", params.memory_kib, params.time_cost, params.parallelism)


def _params_from(data: dict[str, Any]) -> KdfParams:
    return KdfParams(data["memory_kib"], data["time_cost"], data["parallelism"])


@dataclass(frozen=True, repr=False)
class SealedKey:
    """A member's DEK sealed under their password, as stored in the registry."""

    algorithm: str
    version: int
    memory_kib: int
    time_cost: int
    parallelism: int
    salt: bytes
    nonce: bytes
    ciphertext: bytes  # DEK followed by the 16-byte GCM tag

    _FIELDS = frozenset(
        {"algorithm", "version", "memory_kib", "time_cost", "parallelism", "salt", "nonce",
         "ciphertext"}
    )

    @property
    def params(self) -> KdfParams:
        return KdfParams(self.memory_kib, self.time_cost, self.parallelism)

    def to_json(self) -> str:
        return json.dumps(
            {
                "algorithm": self.algorithm,
                "version": self.version,
                "memory_kib": self.memory_kib,
                "time_cost": self.time_cost,
                "parallelism": self.parallelism,
                "salt": _b64(self.salt),
                "nonce": _b64(self.nonce),
                "ciphertext": _b64(self.ciphertext),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> SealedKey:
        sealed = cls._parse(text)
        if sealed is None:
            raise CredentialError()
        return sealed

    @classmethod
    def _parse(cls, text: str | bytes) -> SealedKey | None:
        data = _load_fields(text, set(cls._FIELDS))
        if data is None:
            return None
        salt, nonce, ciphertext = (_unb64(data[k]) for k in ("salt", "nonce", "ciphertext"))
        if salt is None or nonce is None or ciphertext is None:
            return None
        sealed = cls(
            data["algorithm"], data["version"], data["memory_kib"], data["time_cost"],
            data["parallelism"], salt, nonce, ciphertext,
        )
        return sealed if _well_formed(sealed) else None

    def __repr__(self) -> str:
        return (
            f"SealedKey(algorithm={self.algorithm!r}, version={self.version!r}, "
            f"memory_kib={self.memory_kib!r}, time_cost={self.time_cost!r}, "
            f"parallelism={self.parallelism!r}, salt=<redacted>, nonce=<redacted>, "
            "ciphertext=<redacted>)"
        )


def _well_formed(sealed: SealedKey) -> bool:
    return (
        sealed.algorithm == SEALED_ALGORITHM
        and type(sealed.version) is int
        and sealed.version == FORMAT_VERSION
        and _params_usable(sealed.params)
        and isinstance(sealed.salt, bytes) and len(sealed.salt) == SALT_BYTES
        and isinstance(sealed.nonce, bytes) and len(sealed.nonce) == NONCE_BYTES
        and isinstance(sealed.ciphertext, bytes)
        and len(sealed.ciphertext) == KEY_BYTES + TAG_BYTES
    )


def _dek_aad(user_id: str, params: KdfParams) -> bytes:
    """Binds the record to its owner (a record copied into another member's row fails) and to
    its KDF parameters (editing m/t/p in the row breaks the tag). The fixed-width parameters
    come before the user id, so no two (params, user id) pairs encode alike."""
    return b"skald/dek/v1\x00" + _params_aad(params) + user_id.encode("utf-8")


def seal_dek(dek: bytes, kek: bytes, user_id: str, params: KdfParams, salt: bytes) -> SealedKey:
    """Seal `dek` under an already derived `kek`. Refuses parameters below the floor, so no
    caller can produce a weak record."""
    check_at_least_floor(params)
    if len(dek) != KEY_BYTES or len(kek) != KEY_BYTES or len(salt) != SALT_BYTES:
        raise ValueError("dek and kek must be 32 bytes and salt 16 bytes")
    nonce = secrets.token_bytes(NONCE_BYTES)
    ciphertext = AESGCM(kek).encrypt(nonce, dek, _dek_aad(user_id, params))
    return SealedKey(
        SEALED_ALGORITHM, FORMAT_VERSION, params.memory_kib, params.time_cost,
        params.parallelism, salt, nonce, ciphertext,
    )


def open_dek(sealed: SealedKey, kek: bytes, user_id: str) -> bytes:
    """Return the DEK, or raise `CredentialError` (wrong key, tampered or swapped record)."""
    dek = _try_open(sealed, kek, user_id)
    if dek is None:
        raise CredentialError()
    return dek


def _try_open(sealed: SealedKey, kek: bytes, user_id: str) -> bytes | None:
    if not _well_formed(sealed) or len(kek) != KEY_BYTES:
        return None
    try:
        aad = _dek_aad(user_id, sealed.params)
        return AESGCM(kek).decrypt(sealed.nonce, sealed.ciphertext, aad)
    except (InvalidTag, ValueError):
        return None


@dataclass(frozen=True, repr=False)
class PasswordVerifier:
    """For a member who chose no encryption there is no DEK whose tag could verify the
    password, so the registry stores HMAC(Argon2id(password, salt), user id + params)."""

    algorithm: str
    version: int
    params: KdfParams
    salt: bytes
    digest: bytes

    _FIELDS = frozenset(
        {"algorithm", "version", "memory_kib", "time_cost", "parallelism", "salt", "digest"}
    )

    def to_json(self) -> str:
        return json.dumps(
            {
                "algorithm": self.algorithm,
                "version": self.version,
                "memory_kib": self.params.memory_kib,
                "time_cost": self.params.time_cost,
                "parallelism": self.params.parallelism,
                "salt": _b64(self.salt),
                "digest": _b64(self.digest),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> PasswordVerifier:
        verifier = cls._parse(text)
        if verifier is None:
            raise CredentialError()
        return verifier

    @classmethod
    def _parse(cls, text: str | bytes) -> PasswordVerifier | None:
        data = _load_fields(text, set(cls._FIELDS))
        if data is None:
            return None
        salt, digest = _unb64(data["salt"]), _unb64(data["digest"])
        if salt is None or digest is None:
            return None
        verifier = cls(data["algorithm"], data["version"], _params_from(data), salt, digest)
        return verifier if _verifier_well_formed(verifier) else None

    def __repr__(self) -> str:
        return (
            f"PasswordVerifier(algorithm={self.algorithm!r}, version={self.version!r}, "
            f"params={self.params!r}, salt=<redacted>, digest=<redacted>)"
        )


def _verifier_well_formed(verifier: PasswordVerifier) -> bool:
    return (
        verifier.algorithm == VERIFIER_ALGORITHM
        and type(verifier.version) is int
        and verifier.version == FORMAT_VERSION
        and isinstance(verifier.params, KdfParams)
        and _params_usable(verifier.params)
        and isinstance(verifier.salt, bytes) and len(verifier.salt) == SALT_BYTES
        and isinstance(verifier.digest, bytes) and len(verifier.digest) == KEY_BYTES
    )


def _verifier_digest(derived: bytes, user_id: str, params: KdfParams) -> bytes:
    """Same bindings as the DEK's AAD: a verifier copied to another member, or with edited
    parameters, no longer matches."""
    message = b"skald/verifier/v1\x00" + _params_aad(params) + user_id.encode("utf-8")
    return hmac.digest(derived, message, "sha256")


def _argon2id(secret: bytes, salt: bytes, params: KdfParams) -> bytes:
    return hash_secret_raw(
        secret, salt, params.time_cost, params.memory_kib, params.parallelism,
        hash_len=KEY_BYTES, type=Type.ID,
    )


CALIBRATION_TARGET_SECONDS = 0.25
"""What ``skald kdf --calibrate`` aims for: one derivation takes at least this long."""

CALIBRATION_MAX_TIME_COST = 256
"""Calibration stops here, whatever the target: a bound on how long it may run."""


@dataclass(frozen=True)
class Calibration:
    """A time cost (never below `DEFAULT_KDF`'s) whose derivation at ``memory_kib``
    and ``parallelism`` took at least ``target_seconds`` here: ``seconds`` is the fastest of
    ``runs`` derivations at it. ``reached`` is False when the cap stopped the search."""

    memory_kib: int
    parallelism: int
    time_cost: int
    seconds: float
    target_seconds: float
    runs: int
    reached: bool


def calibrate_time_cost(
    memory_kib: int, parallelism: int, *, target_seconds: float = CALIBRATION_TARGET_SECONDS, runs: int = 3
) -> Calibration:
    """Measure Argon2id on this machine within the memory budget (blocking: call it from
    a thread or a command). Starts at `DEFAULT_KDF`'s time cost, estimates the next one
    from the time per pass, and measures again until the fastest of ``runs`` derivations
    reaches the target: the answer is backed by its own measurement, not by the estimate."""
    import time

    KdfParams(memory_kib, DEFAULT_KDF.time_cost, parallelism).validated()
    if not target_seconds > 0 or runs < 1:
        raise ValueError("the target must be positive and at least one run made")
    secret, salt = secrets.token_bytes(16), secrets.token_bytes(SALT_BYTES)

    def fastest(time_cost: int) -> float:
        best = float("inf")
        for _ in range(runs):
            started = time.perf_counter()
            _argon2id(secret, salt, KdfParams(memory_kib, time_cost, parallelism))
            best = min(best, time.perf_counter() - started)
        return best

    time_cost = DEFAULT_KDF.time_cost
    seconds = fastest(time_cost)
    while seconds < target_seconds and time_cost < CALIBRATION_MAX_TIME_COST:
        per_pass = seconds / time_cost
        estimate = int(target_seconds / per_pass) + 1 if per_pass > 0 else time_cost * 2
        time_cost = min(CALIBRATION_MAX_TIME_COST, max(time_cost + 1, estimate))
        seconds = fastest(time_cost)
    return Calibration(memory_kib, parallelism, time_cost, seconds, target_seconds, runs, seconds >= target_seconds)


#: Nice value of the derivation threads (and the Argon2 lane threads they spawn, which
#: inherit it). Logins are bulk work; at equal priority eight lane threads on two cores
#: starve the event loop, and every other request waits behind a login storm.
KDF_NICE = 10


def _lower_thread_priority() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), KDF_NICE)
    except (AttributeError, OSError):  # not Linux, or not permitted: run at normal priority
        pass


class KeyDerivation:
    """The host's one gate to Argon2id. Derivations run in worker threads behind a semaphore,
    so a burst of logins neither blocks the event loop nor holds more than
    `permits × memory_kib` of Argon2 memory at once."""

    def __init__(self, params: KdfParams, permits: int = 2) -> None:
        if permits < 1:
            raise ValueError("permits must be at least 1")
        self.params = params.validated()
        self._permits = permits
        self._semaphore: asyncio.Semaphore | None = None
        self._executor = ThreadPoolExecutor(
            max_workers=permits, thread_name_prefix="skald-kdf", initializer=_lower_thread_priority
        )
        self.in_flight = 0  # derivations running in a thread now (bench and tests read it)
        self.waiting = 0  # derivations queued for a permit

    def _gate(self) -> asyncio.Semaphore:
        # Created on first use so it belongs to the loop that runs the host.
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self._permits)
        return self._semaphore

    async def derive(self, password: str, salt: bytes, params: KdfParams) -> bytes:
        """32-byte Argon2id output of the NFC-normalised, UTF-8 encoded password."""
        secret = normalize_password(password).encode("utf-8")
        gate = self._gate()
        self.waiting += 1
        try:
            await gate.acquire()
        finally:
            self.waiting -= 1
        self.in_flight += 1
        worker = asyncio.get_running_loop().run_in_executor(self._executor, _argon2id, secret, salt, params)

        def finished(task: asyncio.Future[bytes]) -> None:
            # The permit is returned when the thread is done, not when the caller stops
            # waiting: a cancelled login must not let a third derivation start while the
            # cancelled one still holds its memory.
            self.in_flight -= 1
            gate.release()
            if not task.cancelled():
                task.exception()  # mark retrieved; the awaiting caller gets it if still there

        worker.add_done_callback(finished)
        return await asyncio.shield(worker)

    async def _derive_for_record(
        self, password: str, salt: bytes, params: KdfParams
    ) -> bytes | None:
        try:
            return await self.derive(password, salt, params)
        except HashingError:  # e.g. memory the host cannot allocate for an edited record
            return None

    async def seal_new(self, password: str, user_id: str) -> tuple[bytes, SealedKey]:
        """A fresh random DEK for a new member, sealed under their password."""
        dek = secrets.token_bytes(KEY_BYTES)
        return dek, await self.rewrap(dek, password, user_id)

    async def unseal(self, password: str, user_id: str, sealed: SealedKey) -> bytes:
        """The member's DEK, or `CredentialError`. Records below the floor or malformed are
        refused before deriving, with the same error."""
        dek = None
        if _well_formed(sealed):
            kek = await self._derive_for_record(password, sealed.salt, sealed.params)
            if kek is not None:
                dek = _try_open(sealed, kek, user_id)
        if dek is None:
            raise CredentialError()
        return dek

    async def rewrap(self, dek: bytes, new_password: str, user_id: str) -> SealedKey:
        """Seal the same DEK under a (new) password with fresh salt and nonce and the current
        parameters: a password change or a parameter upgrade never re-encrypts the file."""
        salt = secrets.token_bytes(SALT_BYTES)
        kek = await self.derive(new_password, salt, self.params)
        return seal_dek(dek, kek, user_id, self.params, salt)

    def needs_rewrap(self, sealed: SealedKey) -> bool:
        """True when some configured component exceeds the record's: after the next
        successful login the caller re-wraps with the same password. A record stronger than
        the configuration is left alone."""
        return not sealed.params.at_least(self.params)

    async def make_verifier(self, password: str, user_id: str) -> PasswordVerifier:
        salt = secrets.token_bytes(SALT_BYTES)
        derived = await self.derive(password, salt, self.params)
        return PasswordVerifier(
            VERIFIER_ALGORITHM, FORMAT_VERSION, self.params, salt,
            _verifier_digest(derived, user_id, self.params),
        )

    async def check_verifier(self, password: str, user_id: str, verifier: PasswordVerifier) -> None:
        """Return if the password matches, else raise `CredentialError`."""
        matches = False
        if _verifier_well_formed(verifier):
            derived = await self._derive_for_record(password, verifier.salt, verifier.params)
            if derived is not None:
                expected = _verifier_digest(derived, user_id, verifier.params)
                matches = hmac.compare_digest(expected, verifier.digest)
        if not matches:
            raise CredentialError()

    def needs_new_verifier(self, verifier: PasswordVerifier) -> bool:
        """Same upgrade rule as `needs_rewrap`, for members without encryption."""
        return not verifier.params.at_least(self.params)

    async def dummy(self) -> None:
        """One derivation at the current parameters, discarded. The unknown-user login path
        runs it so its latency matches a wrong password and names cannot be enumerated (A3)."""
        await self.derive(secrets.token_urlsafe(16), secrets.token_bytes(SALT_BYTES), self.params)
