"""WXBizMsgCrypt against every official vector (reference §4), plus the strictness the samples lack."""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.wecom.conftest import AES_KEY, CORP_ID, TOKEN, load_vectors
from xihe.integrations.wecom.crypto import (
    Base64Error,
    DecryptError,
    InvalidAESKeyError,
    LengthError,
    MsgCrypto,
    ReceiveIdError,
    SignatureError,
    aes_key,
    signature,
)

VECTORS = load_vectors()


def _ciphertext(v: dict[str, Any]) -> str:
    return v["echostr"] if v["kind"] == "url_verification" else v["encrypt"]


def _plaintext(v: dict[str, Any]) -> str:
    return v["decrypted_echostr"] if v["kind"] == "url_verification" else v["plaintext"]


def _crypto(v: dict[str, Any]) -> MsgCrypto:
    return MsgCrypto.create(v["token"], v["encoding_aes_key"], v["receiveid"])


def test_the_vector_file_has_every_kind() -> None:
    kinds = {v["kind"] for v in VECTORS}
    assert kinds == {"url_verification", "post_decrypt_xml", "post_decrypt_json", "negative_signature"}
    assert len(VECTORS) == 7


@pytest.mark.parametrize("v", VECTORS, ids=[v["id"] for v in VECTORS])
def test_signature_matches_exactly_when_the_vector_says_so(v: dict[str, Any]) -> None:
    expected = v["verification"]["signature_expected_to_match"]
    assert (
        signature(v["token"], v["timestamp"], v["nonce"], _ciphertext(v)) == v["msg_signature"]
    ) is expected
    if expected:
        _crypto(v).check_signature(v["msg_signature"], v["timestamp"], v["nonce"], _ciphertext(v))
    else:
        with pytest.raises(SignatureError) as err:
            _crypto(v).check_signature(v["msg_signature"], v["timestamp"], v["nonce"], _ciphertext(v))
        assert err.value.errcode == -40001


@pytest.mark.parametrize("v", VECTORS, ids=[v["id"] for v in VECTORS])
def test_decrypts_to_the_stated_plaintext_and_receiveid(v: dict[str, Any]) -> None:
    opened = _crypto(v).open(_ciphertext(v))
    assert opened.msg.decode("utf-8") == _plaintext(v)
    assert opened.receiveid == v["receiveid"]
    assert opened.random16.hex() == v["verification"]["random16_hex"]
    assert _crypto(v).decrypt(_ciphertext(v)) == opened.msg


@pytest.mark.parametrize(
    "v", [v for v in VECTORS if v["verification"]["signature_expected_to_match"]], ids=lambda v: v["id"]
)
def test_verify_and_decrypt_accepts_every_positive_vector(v: dict[str, Any]) -> None:
    msg = _crypto(v).verify_and_decrypt(v["msg_signature"], v["timestamp"], v["nonce"], _ciphertext(v))
    assert msg.decode("utf-8") == _plaintext(v)


def test_the_negative_vector_is_refused_before_decryption() -> None:
    (v,) = [v for v in VECTORS if v["kind"] == "negative_signature"]
    with pytest.raises(SignatureError):
        _crypto(v).verify_and_decrypt(v["msg_signature"], v["timestamp"], v["nonce"], v["encrypt"])


@pytest.mark.parametrize("v", VECTORS, ids=[v["id"] for v in VECTORS])
def test_reencryption_with_the_recovered_random_is_byte_identical(v: dict[str, Any]) -> None:
    random16 = bytes.fromhex(v["verification"]["random16_hex"])
    assert _crypto(v).encrypt(_plaintext(v).encode("utf-8"), random16) == _ciphertext(v)
    # the injectable random source gives the same bytes
    injected = MsgCrypto.create(
        v["token"], v["encoding_aes_key"], v["receiveid"], random=lambda n: random16[:n]
    )
    assert injected.encrypt(_plaintext(v).encode("utf-8")) == _ciphertext(v)


def test_doc_90968_sort_order_prefix() -> None:
    (v,) = [v for v in VECTORS if v["id"] == "weworkapi_golang.post_xml"]
    joined = "".join(sorted([v["token"], v["timestamp"], v["nonce"], v["encrypt"]]))
    assert joined.startswith(v["sort_str_from_doc_90968_prefix"])


def test_receiveid_is_authenticated_not_tousername() -> None:
    # A-post-json says tousername wx5823… but its embedded receiveid is the corp of set A
    (v,) = [v for v in VECTORS if v["id"] == "weworkapi_python.post_json"]
    assert MsgCrypto.create(v["token"], v["encoding_aes_key"], "ww1436e0e65a779aee").decrypt(v["encrypt"])
    with pytest.raises(ReceiveIdError) as err:
        MsgCrypto.create(v["token"], v["encoding_aes_key"], "wx5823bf96d3bd56c7").decrypt(v["encrypt"])
    assert err.value.errcode == -40005


def test_ai_bot_receiveid_is_empty_and_round_trips() -> None:
    bot = MsgCrypto.create(TOKEN, AES_KEY, "")
    ct = bot.encrypt(b'{"msgid":"1"}')
    assert bot.decrypt(ct) == b'{"msgid":"1"}'
    with pytest.raises(ReceiveIdError):
        MsgCrypto.create(TOKEN, AES_KEY, CORP_ID).decrypt(ct)


def _raw_encrypt(key: bytes, plain: bytes) -> str:
    enc = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    return base64.b64encode(enc.update(plain) + enc.finalize()).decode()


def _framed(msg: bytes, receiveid: bytes = CORP_ID.encode()) -> bytes:
    return b"r" * 16 + struct.pack(">I", len(msg)) + msg + receiveid


@pytest.mark.parametrize(
    "tail",
    [b"\x00" * 32, b"\x21" * 32, b"\x05\x05\x05\x04\x05", b"x" * 31 + b"\x02"],
    ids=["zero-pad", "pad-33", "inconsistent-pad", "pad-value-lies"],
)
def test_bad_pkcs7_padding_is_rejected_strictly(tail: bytes) -> None:
    key = aes_key(AES_KEY)
    body = _framed(b"hello")
    # fill up so body + tail is a multiple of 32
    filler = b"f" * ((-len(body) - len(tail)) % 32)
    ct = _raw_encrypt(key, body + filler + tail)
    with pytest.raises(DecryptError) as err:
        MsgCrypto.create(TOKEN, AES_KEY, CORP_ID).decrypt(ct)
    assert err.value.errcode == -40007


def test_sixteen_byte_aligned_ciphertext_is_rejected() -> None:
    key = aes_key(AES_KEY)
    ct = _raw_encrypt(key, b"a" * 48)  # AES-valid length, but not a 32-byte multiple
    with pytest.raises(DecryptError):
        MsgCrypto.create(TOKEN, AES_KEY, CORP_ID).decrypt(ct)


def test_length_field_beyond_the_buffer_is_rejected() -> None:
    key = aes_key(AES_KEY)
    plain = b"r" * 16 + struct.pack(">I", 10_000) + b"short"
    pad = 32 - len(plain) % 32
    with pytest.raises(LengthError) as err:
        MsgCrypto.create(TOKEN, AES_KEY, CORP_ID).decrypt(_raw_encrypt(key, plain + bytes([pad]) * pad))
    assert err.value.errcode == -40008


@pytest.mark.parametrize("bad", ["not base64!!", "QUJD\n", "QUJD=", "ＡＢＣＤ", ""])
def test_bad_base64_is_rejected_with_40010_or_40007(bad: str) -> None:
    with pytest.raises((Base64Error, DecryptError)) as err:
        MsgCrypto.create(TOKEN, AES_KEY, CORP_ID).decrypt(bad)
    assert err.value.errcode in (-40010, -40007)


def test_invalid_base64_alphabet_is_40010() -> None:
    with pytest.raises(Base64Error) as err:
        MsgCrypto.create(TOKEN, AES_KEY, CORP_ID).decrypt("@@@@" * 11)
    assert err.value.errcode == -40010


@pytest.mark.parametrize("bad", ["short", "x" * 44, "6qkdMrq68nTKduznJYO1A37W2oEgpkMUvkttRToqhU+"])
def test_encoding_aes_key_must_be_43_alphanumerics(bad: str) -> None:
    with pytest.raises(InvalidAESKeyError) as err:
        aes_key(bad)
    assert err.value.errcode == -40004
    assert bad not in str(err.value)


def test_signature_check_handles_junk_input_and_never_leaks_secrets() -> None:
    crypto = MsgCrypto.create(TOKEN, AES_KEY, CORP_ID)
    for junk in ["", "ZZ", "é" * 40, crypto.sign("1", "2", "3").upper()]:
        with pytest.raises(SignatureError) as err:
            crypto.check_signature(junk, "1", "2", "3")
        assert TOKEN not in str(err.value) and AES_KEY not in str(err.value)
    assert TOKEN not in repr(crypto) and AES_KEY not in repr(crypto)


def test_random_prefix_must_be_sixteen_bytes() -> None:
    with pytest.raises(ValueError):
        MsgCrypto.create(TOKEN, AES_KEY, CORP_ID).encrypt(b"x", b"short")
