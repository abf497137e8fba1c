#!/usr/bin/env python3
"""Deterministic ES256 (RFC 6979) signatures made by OpenSSL's own signer, as a reference for the
worker's signer (Tests/APNsTests/DeterministicSignatureTests.swift).

PyPI `cryptography` (in the peers' venv, scripts/peers.sh) bundles an OpenSSL of 3.2 or later, whose
ECDSA derives the nonce itself (`deterministic_signing=True`, OpenSSL's `nonce-type` 1): an
implementation other than ours, on another OpenSSL than the one the worker links.

    es256-reference.py --random N --seed S   N fresh keys, each signing three messages
    es256-reference.py --scalar HEX MESSAGE  the key with private scalar HEX signing MESSAGE (UTF-8)

Prints one JSON object a line: the key as PKCS#8 PEM, the message and r || s in hex.
"""
import argparse
import json
import random
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def line(key, message):
    r, s = decode_dss_signature(key.sign(message, ec.ECDSA(hashes.SHA256(), deterministic_signing=True)))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return json.dumps({
        "pem": pem.decode(),
        "message": message.hex(),
        "signature": r.to_bytes(32, "big").hex() + s.to_bytes(32, "big").hex(),
    })


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--random", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scalar", nargs=2, metavar=("HEX", "MESSAGE"), action="append", default=[])
    arguments = parser.parse_args()
    for scalar, message in arguments.scalar:
        print(line(ec.derive_private_key(int(scalar, 16), ec.SECP256R1()), message.encode()))
    messages = random.Random(arguments.seed)
    for _ in range(arguments.random):
        key = ec.generate_private_key(ec.SECP256R1())
        for length in (0, 1, messages.randrange(2, 400)):
            print(line(key, bytes(messages.randrange(256) for _ in range(length))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
