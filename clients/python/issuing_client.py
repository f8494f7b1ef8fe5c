#!/usr/bin/env python3
"""Minimal client and CLI for the card-issuing API (``/api/v2``).

Every request body is a JSON object sealed with NaCl secretbox and sent as
``{"encrypted": "<base64>"}``:

* key       = SHA-256 of the UTF-8 bytes of the project's API secret
* envelope  = 0x02 || nonce (24 random bytes) || secretbox(plaintext)
              (secretbox in NaCl combined form: 16-byte MAC, then ciphertext)
* encoding  = standard base64 with padding

The plaintext always carries ``request_timestamp`` (integer microseconds since
the epoch); the server rejects stale or replayed timestamps. Successful
responses come back sealed the same way; errors raised before the server could
authenticate the caller (unknown API key, undecryptable body, ...) come back as
plain JSON, so both are handled.

Library use::

    from issuing_client import Client
    client = Client("http://localhost:8080", "my-api-key", "my-api-secret")
    status, body = client.call("project/balance")
    status, body = client.call("users/create", external_user_id="u-1")
    # Endpoints that need an idempotency key take it as a keyword; it is sent
    # as the Idempotency-Key header:
    #   client.call(path, idempotency_key="topup-42", **fields)

CLI use (values may also come from ISSUING_BASE_URL, ISSUING_API_KEY and
ISSUING_API_SECRET)::

    python3 issuing_client.py --base-url http://localhost:8080 \\
        --api-key K --api-secret S users/get '{"external_user_id": "u-1"}'

Only dependency beyond the standard library: PyNaCl (``pip install pynacl``).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Optional, Tuple

import nacl.exceptions
import nacl.secret
import nacl.utils

__all__ = [
    "Client",
    "IssuingClientError",
    "derive_key",
    "seal",
    "open_envelope",
    "decode_base64",
    "VERSION",
]

VERSION = 0x02
NONCE_LEN = nacl.secret.SecretBox.NONCE_SIZE  # 24
MAC_LEN = nacl.secret.SecretBox.MACBYTES  # 16


class IssuingClientError(Exception):
    """The server could not be reached, or answered something that is not the protocol."""


def derive_key(api_secret: str) -> bytes:
    """The 32-byte secretbox key for a project: SHA-256 of the secret's UTF-8 bytes."""
    return hashlib.sha256(api_secret.encode("utf-8")).digest()


def seal(key: bytes, plaintext: bytes, nonce: Optional[bytes] = None) -> str:
    """Seal ``plaintext``; returns standard padded base64 of 0x02 || nonce || box.

    Leave ``nonce`` as None outside of tests: a fresh random nonce per message
    is what keeps secretbox secure.
    """
    if nonce is None:
        nonce = nacl.utils.random(NONCE_LEN)
    if len(nonce) != NONCE_LEN:
        raise ValueError(f"nonce must be {NONCE_LEN} bytes")
    box = nacl.secret.SecretBox(key).encrypt(plaintext, nonce).ciphertext  # MAC || ct
    return base64.b64encode(bytes([VERSION]) + nonce + box).decode("ascii")


def decode_base64(s: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not (as the server does)."""
    s = s.strip()
    alt = b"-_" if ("-" in s or "_" in s) else b"+/"
    s += "=" * (-len(s) % 4)
    try:
        return base64.b64decode(s, altchars=alt, validate=True)
    except (binascii.Error, ValueError) as e:
        raise IssuingClientError(f"invalid base64 in encrypted response: {e}") from e


def open_envelope(key: bytes, encoded: str) -> bytes:
    """Open an envelope produced by the server (or by :func:`seal`)."""
    raw = decode_base64(encoded)
    if not raw:
        raise IssuingClientError("encrypted response is empty")
    if raw[0] != VERSION:
        raise IssuingClientError(f"unknown envelope version 0x{raw[0]:02x}")
    if len(raw) < 1 + NONCE_LEN + MAC_LEN:
        raise IssuingClientError("encrypted response is too short")
    nonce, box = raw[1 : 1 + NONCE_LEN], raw[1 + NONCE_LEN :]
    try:
        return nacl.secret.SecretBox(key).decrypt(box, nonce)
    except nacl.exceptions.CryptoError as e:
        raise IssuingClientError(
            "could not decrypt the response (wrong API secret for this key?)"
        ) from e


def now_micros() -> int:
    """Current time in integer microseconds since the epoch (``request_timestamp``)."""
    return time.time_ns() // 1000


class Client:
    """A client bound to one project's API key and secret.

    ``base_url`` is the server root, e.g. ``http://localhost:8080``; requests go
    to ``{base_url}/api/v2/{path}``.
    """

    def __init__(self, base_url: str, api_key: str, api_secret: str, timeout: float = 30.0):
        if not base_url:
            raise ValueError("base_url is required")
        if not api_key:
            raise ValueError("api_key is required")
        if not api_secret:
            raise ValueError("api_secret is required")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self._key = derive_key(api_secret)

    def __repr__(self) -> str:  # never show the secret or key
        return f"Client({self.base_url!r}, api_key={self.api_key!r})"

    def url(self, path: str) -> str:
        return f"{self.base_url}/api/v2/{path.lstrip('/')}"

    def call(
        self, path: str, /, *, idempotency_key: Optional[str] = None, **fields: Any
    ) -> Tuple[int, Dict[str, Any]]:
        """POST ``fields`` to ``path``; returns ``(http_status, decoded JSON body)``.

        ``request_timestamp`` is added automatically (a field of that name
        overrides it). HTTP error statuses are returned, not raised; only
        transport failures and protocol violations raise
        :class:`IssuingClientError`.
        """
        return self.request(path, fields, idempotency_key=idempotency_key)

    def request(
        self,
        path: str,
        fields: Optional[Dict[str, Any]] = None,
        idempotency_key: Optional[str] = None,
    ) -> Tuple[int, Dict[str, Any]]:
        """Like :meth:`call`, with the fields as a dict (any field name allowed)."""
        payload: Dict[str, Any] = {"request_timestamp": now_micros()}
        payload.update(fields or {})
        plaintext = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        body = json.dumps({"encrypted": seal(self._key, plaintext)}).encode("ascii")

        headers = {
            "API-KEY": self.api_key,
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "issuing-client-python/1",
        }
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key

        req = urllib.request.Request(self.url(path), data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            # 4xx/5xx: the body is still the API's answer.
            status, raw = e.code, e.read()
            e.close()
        except (urllib.error.URLError, OSError) as e:
            raise IssuingClientError(f"POST {self.url(path)} failed: {e}") from e
        return status, self._decode(path, status, raw)

    def _decode(self, path: str, status: int, raw: bytes) -> Dict[str, Any]:
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            snippet = raw[:500].decode("utf-8", "replace")
            raise IssuingClientError(
                f"{path}: HTTP {status} with a non-JSON body: {snippet!r}"
            ) from e
        if isinstance(doc, dict) and isinstance(doc.get("encrypted"), str):
            plaintext = open_envelope(self._key, doc["encrypted"])
            try:
                doc = json.loads(plaintext.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                raise IssuingClientError(
                    f"{path}: HTTP {status}: decrypted body is not JSON"
                ) from e
        if not isinstance(doc, dict):
            raise IssuingClientError(f"{path}: HTTP {status}: expected a JSON object, got {doc!r}")
        return doc


def _parse_fields(text: Optional[str]) -> Dict[str, Any]:
    if text is None:
        return {}
    if text == "-":
        text = sys.stdin.read()
    try:
        fields = json.loads(text)
    except ValueError as e:
        raise SystemExit(f"error: fields must be a JSON object: {e}") from e
    if not isinstance(fields, dict):
        raise SystemExit("error: fields must be a JSON object")
    return fields


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Call the card-issuing API with an encrypted request and print the decrypted answer.",
        epilog="Exit status: 0 for HTTP 2xx, 1 for other HTTP statuses, 2 for usage or transport errors.",
    )
    parser.add_argument("--base-url", default=os.environ.get("ISSUING_BASE_URL"),
                        help="server root URL (env ISSUING_BASE_URL)")
    parser.add_argument("--api-key", default=os.environ.get("ISSUING_API_KEY"),
                        help="project API key (env ISSUING_API_KEY)")
    parser.add_argument("--api-secret", default=os.environ.get("ISSUING_API_SECRET"),
                        help="project API secret (env ISSUING_API_SECRET)")
    parser.add_argument("--idempotency-key", help="send an Idempotency-Key header")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    parser.add_argument("path", help="endpoint below /api/v2/, e.g. project/balance")
    parser.add_argument("fields", nargs="?",
                        help="request fields as a JSON object, or - to read it from stdin")
    args = parser.parse_args(argv)

    missing = [name for name, value in (("--base-url", args.base_url),
                                        ("--api-key", args.api_key),
                                        ("--api-secret", args.api_secret)) if not value]
    if missing:
        parser.error("missing " + ", ".join(missing) + " (or the ISSUING_* environment variables)")

    client = Client(args.base_url, args.api_key, args.api_secret, timeout=args.timeout)
    try:
        status, body = client.request(args.path, _parse_fields(args.fields),
                                      idempotency_key=args.idempotency_key)
    except IssuingClientError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"HTTP {status}")
    print(json.dumps(body, indent=2, ensure_ascii=False))
    return 0 if 200 <= status < 300 else 1


if __name__ == "__main__":
    sys.exit(main())
