#!/usr/bin/env python3
"""Generate TRC20 deposit-address vectors for issuing-domain using bip_utils.

Writes crates/domain/tests/tron_vectors.json. The issuing server derives project n's
deposit address as the Tron address of child 0/n of the operator's account xpub
(m/44'/195'/0'); this script derives the same addresses with an independent
implementation, so the Rust test `tron_vectors` can check ours against it. Output is
deterministic (fixed seeds), so rerunning the script must not change the committed file.

The seeds here are public test seeds: never send funds to these addresses.

Usage: pip install bip_utils && python3 scripts/tron_vectors.py
"""

import json
import pathlib

from bip_utils import Bip39SeedGenerator, Bip44, Bip44Changes, Bip44Coins

# The BIP39 test mnemonic, and BIP32 test vector 1's seed.
MNEMONIC = (
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon "
    "abandon about"
)
SEEDS = [
    ("bip39 test mnemonic", bytes(Bip39SeedGenerator(MNEMONIC).Generate())),
    ("bip32 test vector 1 seed", bytes.fromhex("000102030405060708090a0b0c0d0e0f")),
]

# First indexes, a larger one, and the largest non-hardened index (2^31 - 1).
INDEXES = [0, 1, 2, 3, 4, 5, 19, 1000, 65536, 2**31 - 1]


def vector(name: str, seed: bytes) -> dict:
    account = Bip44.FromSeed(seed, Bip44Coins.TRON).Purpose().Coin().Account(0)
    external = account.Change(Bip44Changes.CHAIN_EXT)
    children = []
    for n in INDEXES:
        child = external.AddressIndex(n)
        children.append(
            {
                "index": n,
                "path": f"m/44'/195'/0'/0/{n}",
                "public_key_uncompressed": child.PublicKey().RawUncompressed().ToHex(),
                "address": child.PublicKey().ToAddress(),
            }
        )
    return {
        "name": name,
        "seed_hex": seed.hex(),
        "account_path": "m/44'/195'/0'",
        "account_xpub": account.PublicKey().ToExtended(),
        "children": children,
    }


def main() -> None:
    out = {
        "generator": "scripts/tron_vectors.py (bip_utils)",
        "vectors": [vector(name, seed) for name, seed in SEEDS],
    }
    path = pathlib.Path(__file__).resolve().parent.parent / "crates/domain/tests/tron_vectors.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
