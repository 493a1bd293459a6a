"""WeCom callback crypto (WXBizMsgCrypt), written against the `cryptography` package.

    signature  = lowercase hex SHA1 of sorted(token, timestamp, nonce, ciphertext) concatenated
    key        = b64decode(EncodingAESKey + "=")  (32 bytes),  IV = key[:16]
    ciphertext = base64(AES-256-CBC(pkcs7_32(random16 + len(msg) as 4-byte big-endian + msg + receiveid)))

The receiveid is the CorpID for a self-built app and "" for the AI bot. Unlike the official samples,
the padding is validated strictly. Every failure raises a `CallbackCryptoError` carrying the
WXBizMsgCrypt return code; messages never contain the token or the key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from xihe.agent.errors import WeComError

BLOCK = 32  # WeCom pads to 32-byte multiples, not AES's 16
_AES_KEY_RE = re.compile(r"^[A-Za-z0-9]{43}$")

Random = Callable[[int], bytes]


class CallbackCryptoError(WeComError):
    """A callback failed verification or decryption; `errcode` is the WXBizMsgCrypt code."""

    code = -40007

    def __init__(self, message: str) -> None:
        super().__init__(message, errcode=self.code, retryable=False)


class SignatureError(CallbackCryptoError):
    """msg_signature does not match (-40001)."""

    code = -40001


class InvalidAESKeyError(CallbackCryptoError):
    """EncodingAESKey is not 43 alphanumeric characters (-40004)."""

    code = -40004


class ReceiveIdError(CallbackCryptoError):
    """The decrypted receiveid is not ours (-40005)."""

    code = -40005


class DecryptError(CallbackCryptoError):
    """AES decryption failed or the PKCS#7 padding is invalid (-40007)."""

    code = -40007


class LengthError(CallbackCryptoError):
    """The decrypted buffer's length field is inconsistent (-40008)."""

    code = -40008


class Base64Error(CallbackCryptoError):
    """The ciphertext is not valid base64 (-40010)."""

    code = -40010


def aes_key(encoding_aes_key: str) -> bytes:
    """Decode a 43-character EncodingAESKey into the 32-byte AES key."""
    if not _AES_KEY_RE.match(encoding_aes_key or ""):
        raise InvalidAESKeyError("EncodingAESKey must be 43 characters of [A-Za-z0-9]")
    return base64.b64decode(encoding_aes_key + "=")


def signature(token: str, timestamp: str, nonce: str, ciphertext: str) -> str:
    """Lowercase hex SHA1 over the four strings sorted by value and concatenated."""
    joined = "".join(sorted([token, timestamp, nonce, ciphertext]))
    return hashlib.sha1(joined.encode("utf-8")).hexdigest()


def _pad(data: bytes) -> bytes:
    n = BLOCK - len(data) % BLOCK
    return data + bytes([n]) * n


def _unpad(data: bytes) -> bytes:
    if not data or len(data) % BLOCK:
        raise DecryptError("decrypted length is not a multiple of 32")
    n = data[-1]
    # compare the whole tail so a one-byte check can't pass a forged pad
    if not 1 <= n <= BLOCK or not hmac.compare_digest(data[-n:], bytes([n]) * n):
        raise DecryptError("invalid PKCS#7 padding")
    return data[:-n]


@dataclass(frozen=True)
class Decrypted:
    """What one ciphertext held: the message, its receiveid and the random prefix."""

    msg: bytes
    receiveid: str
    random16: bytes


@dataclass(frozen=True)
class MsgCrypto:
    """Signs, verifies, encrypts and decrypts callbacks for one (token, key, receiveid)."""

    token: str = field(repr=False)
    key: bytes = field(repr=False)
    receiveid: str
    random: Random = field(default=os.urandom, repr=False, compare=False)

    @classmethod
    def create(
        cls, token: str, encoding_aes_key: str, receiveid: str, random: Random = os.urandom
    ) -> MsgCrypto:
        """Build from the admin-facing EncodingAESKey."""
        return cls(token=token, key=aes_key(encoding_aes_key), receiveid=receiveid, random=random)

    def sign(self, timestamp: str, nonce: str, ciphertext: str) -> str:
        """The msg_signature WeCom would send for these values."""
        return signature(self.token, timestamp, nonce, ciphertext)

    def check_signature(self, msg_signature: str, timestamp: str, nonce: str, ciphertext: str) -> None:
        """Raise SignatureError unless msg_signature matches (constant-time compare)."""
        expected = self.sign(timestamp, nonce, ciphertext).encode("ascii")
        if not hmac.compare_digest(expected, msg_signature.encode("utf-8", "surrogateescape")):
            raise SignatureError("msg_signature does not match")

    def _cipher(self) -> Cipher[modes.CBC]:
        return Cipher(algorithms.AES(self.key), modes.CBC(self.key[:16]))

    def open(self, ciphertext: str) -> Decrypted:
        """Decrypt and parse without checking the receiveid."""
        try:
            raw = base64.b64decode(ciphertext.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise Base64Error("ciphertext is not valid base64") from None
        if not raw or len(raw) % BLOCK:
            raise DecryptError("ciphertext length is not a multiple of 32")
        dec = self._cipher().decryptor()
        plain = _unpad(dec.update(raw) + dec.finalize())
        if len(plain) < 20:
            raise LengthError("decrypted buffer shorter than its 20-byte header")
        (msg_len,) = struct.unpack(">I", plain[16:20])
        if 20 + msg_len > len(plain):
            raise LengthError("message length field exceeds the decrypted buffer")
        try:
            receiveid = plain[20 + msg_len :].decode("utf-8")
        except UnicodeDecodeError:
            raise ReceiveIdError("receiveid is not UTF-8") from None
        return Decrypted(plain[20 : 20 + msg_len], receiveid, plain[:16])

    def decrypt(self, ciphertext: str) -> bytes:
        """Decrypt `ciphertext` and check its receiveid; return the message bytes."""
        opened = self.open(ciphertext)
        if not hmac.compare_digest(opened.receiveid.encode("utf-8"), self.receiveid.encode("utf-8")):
            raise ReceiveIdError("receiveid does not match this app")
        return opened.msg

    def verify_and_decrypt(self, msg_signature: str, timestamp: str, nonce: str, ciphertext: str) -> bytes:
        """Check the signature, then decrypt (the order the official libraries use)."""
        self.check_signature(msg_signature, timestamp, nonce, ciphertext)
        return self.decrypt(ciphertext)

    def encrypt(self, msg: bytes, random16: bytes | None = None) -> str:
        """Encrypt `msg` for our receiveid; `random16` (or the injected source) fills the prefix."""
        prefix = random16 if random16 is not None else self.random(16)
        if len(prefix) != 16:
            raise ValueError("the random prefix must be 16 bytes")
        body = prefix + struct.pack(">I", len(msg)) + msg + self.receiveid.encode("utf-8")
        enc = self._cipher().encryptor()
        return base64.b64encode(enc.update(_pad(body)) + enc.finalize()).decode("ascii")
