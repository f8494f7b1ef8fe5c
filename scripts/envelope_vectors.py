#!/usr/bin/env python3
"""Generate interoperability vectors for the issuing-envelope crate using PyNaCl.

Writes crates/envelope/tests/vectors.json. Output is deterministic (fixed
nonces), so rerunning the script must not change the committed file; the Rust
test `vectors` checks the crate reproduces every vector byte for byte.

Usage: pip install pynacl && python3 scripts/envelope_vectors.py
"""

import base64
import hashlib
import json
import pathlib

import nacl.secret

VERSION = b"\x02"

SECRETS = [
    "",
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
    "pässwörd-秘密-🔑",
    "a" * 200,
]

PLAINTEXTS = [
    "",
    "x",
    '{"request_timestamp":1700000000000000,"external_user_id":"user-42","amount":"12.50"}',
    "ünïcödé ✓ 中文 🚀",
    "0123456789abcdef" * 9,  # spans several 64-byte Salsa20 blocks
]


def nonce_for(i: int, j: int) -> bytes:
    # Distinct, recognisable, fixed nonces; reuse across secrets is fine for
    # vectors because they are never used to protect real data.
    return hashlib.sha256(f"envelope-vector-nonce/{i}/{j}".encode()).digest()[:24]


def main() -> None:
    vectors = []
    for i, secret in enumerate(SECRETS):
        key = hashlib.sha256(secret.encode("utf-8")).digest()
        box = nacl.secret.SecretBox(key)
        for j, plaintext in enumerate(PLAINTEXTS):
            nonce = nonce_for(i, j)
            sealed = box.encrypt(plaintext.encode("utf-8"), nonce)
            # EncryptedMessage is nonce ‖ MAC ‖ ciphertext; .ciphertext drops the nonce.
            assert bytes(sealed) == nonce + sealed.ciphertext
            envelope = VERSION + nonce + sealed.ciphertext
            vectors.append(
                {
                    "secret": secret,
                    "key_hex": key.hex(),
                    "nonce_hex": nonce.hex(),
                    "plaintext": plaintext,
                    "encrypted": base64.standard_b64encode(envelope).decode("ascii"),
                }
            )

    out = pathlib.Path(__file__).resolve().parent.parent / "crates/envelope/tests/vectors.json"
    out.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(vectors)} vectors to {out}")


if __name__ == "__main__":
    main()
