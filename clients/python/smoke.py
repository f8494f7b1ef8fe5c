#!/usr/bin/env python3
"""End-to-end smoke test of a running card-issuing API server.

Exercises the encrypted envelope both ways and the endpoints that exist today,
checking the exact response shapes of docs/api.md (no fallbacks, no guessing):
system/health, system/time, project/balance, project/wallet/trc20,
users/create (and its 409 on a duplicate), users/get, users/find.

    python3 clients/python/smoke.py --base-url http://127.0.0.1:8080 \\
        --api-key KEY --api-secret SECRET

(or set ISSUING_BASE_URL / ISSUING_API_KEY / ISSUING_API_SECRET). Prints one
line per check and exits 0 when all pass; on the first failure prints what was
sent and received and exits 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
import uuid
from typing import Any, Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from issuing_client import Client, IssuingClientError  # noqa: E402

# Amounts: decimal strings with 2 to 6 fractional digits ("0.00", "12.50", "0.000001").
AMOUNT = re.compile(r"^-?[0-9]+\.[0-9]{2,6}$")
# Identifiers: ObjectId-style, 24 lowercase hex characters.
OBJECT_ID = re.compile(r"^[0-9a-f]{24}$")
# Timestamps: RFC 3339 in UTC, as the server writes them (microseconds, "Z").
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")

BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

USER_FIELDS = ("user_id", "external_user_id", "project_id", "usdt_balance",
               "deposit_addresses", "created_at", "updated_at")

# How far the server clock may be from ours: the server refuses request
# timestamps more than 30 seconds away from its own time.
MAX_CLOCK_SKEW_MICROS = 30_000_000


def is_tron_address(address: Any) -> bool:
    """34-character base58check string: version byte 0x41, 20 bytes, 4-byte checksum."""
    if not isinstance(address, str) or len(address) != 34 or not address.startswith("T"):
        return False
    n = 0
    for ch in address:
        i = BASE58_ALPHABET.find(ch)
        if i < 0:
            return False
        n = n * 58 + i
    raw = n.to_bytes(25, "big") if n < 1 << 200 else b""
    if len(raw) != 25 or raw[0] != 0x41:
        return False
    payload, checksum = raw[:21], raw[21:]
    return hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] == checksum


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SmokeFailure(Exception):
    pass


def show(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True)


class Smoke:
    def __init__(self, client: Client):
        self.client = client
        self.passed = 0

    def request(self, path: str, fields: Dict[str, Any]):
        try:
            return self.client.request(path, fields)
        except IssuingClientError as e:
            raise SmokeFailure(f"{path}: {e}") from e

    def call(self, path: str, fields: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Call ``path`` and require HTTP 200 with ``"success": true``."""
        fields = fields or {}
        status, body = self.request(path, fields)
        if status != 200 or body.get("success") is not True:
            raise SmokeFailure(
                f"{path}: expected HTTP 200 with success=true, got HTTP {status}\n"
                f"  request fields: {show(fields)}\n  response: {show(body)}"
            )
        return body

    def call_error(self, path: str, fields: Dict[str, Any], status: int, slug: str) -> Dict[str, Any]:
        """Call ``path`` and require the standard error object with ``status`` and ``slug``."""
        got, body = self.request(path, fields)
        if (
            got != status
            or body.get("success") is not False
            or body.get("error_slug") != slug
            or not isinstance(body.get("error"), str)
            or not body["error"]
        ):
            raise SmokeFailure(
                f"{path}: expected HTTP {status} with error_slug={slug!r}, got HTTP {got}\n"
                f"  request fields: {show(fields)}\n  response: {show(body)}"
            )
        return body

    def check(self, path: str, ok: bool, what: str, body: Dict[str, Any]) -> None:
        if not ok:
            raise SmokeFailure(f"{path}: {what}\n  response: {show(body)}")

    def ok(self, path: str, detail: str) -> None:
        self.passed += 1
        print(f"ok   {path:<22} {detail}")

    def check_user(self, path: str, user: Any, body: Dict[str, Any]) -> None:
        """The user shape: every field present with its documented type."""
        self.check(path, isinstance(user, dict), "a user must be a JSON object", body)
        missing = [f for f in USER_FIELDS if f not in user]
        self.check(path, not missing, f"user is missing {missing}", body)
        for f in ("user_id", "project_id"):
            self.check(path, isinstance(user[f], str) and OBJECT_ID.match(user[f]) is not None,
                       f"`{f}` should be a 24-hex id, got {user[f]!r}", body)
        self.check(path, isinstance(user["usdt_balance"], str) and AMOUNT.match(user["usdt_balance"]) is not None,
                   f"`usdt_balance` should be a decimal string, got {user['usdt_balance']!r}", body)
        self.check(path, isinstance(user["deposit_addresses"], list)
                   and all(isinstance(a, str) for a in user["deposit_addresses"]),
                   "`deposit_addresses` should be a list of strings", body)
        for f in ("created_at", "updated_at"):
            self.check(path, isinstance(user[f], str) and RFC3339_UTC.match(user[f]) is not None,
                       f"`{f}` should be an RFC 3339 UTC time, got {user[f]!r}", body)

    def run(self) -> None:
        path = "system/health"
        body = self.call(path)
        self.check(path, body.get("status") == "ok", "`status` should be \"ok\"", body)
        self.ok(path, "status=ok")

        path = "system/time"
        before = time.time_ns() // 1000
        body = self.call(path)
        after = time.time_ns() // 1000
        ts = body.get("timestamp")
        self.check(path, is_int(ts), f"`timestamp` should be integer microseconds, got {ts!r}", body)
        skew = 0 if before <= ts <= after else min(abs(ts - before), abs(ts - after))
        self.check(path, skew <= MAX_CLOCK_SKEW_MICROS,
                   f"server clock is {skew / 1e6:.1f} s away from ours (requests need < 30 s)", body)
        self.ok(path, f"timestamp={ts} (skew {skew / 1e6:.3f} s)")

        path = "project/balance"
        body = self.call(path)
        available = body.get("available")
        self.check(path, isinstance(available, str) and AMOUNT.match(available) is not None
                   and not available.startswith("-"),
                   f"`available` should be a non-negative decimal string, got {available!r}", body)
        self.check(path, body.get("currency") == "usdt",
                   f"`currency` should be \"usdt\", got {body.get('currency')!r}", body)
        self.ok(path, f"available={available} usdt")

        path = "project/wallet/trc20"
        body = self.call(path)
        address = body.get("usdt_trc20")
        self.check(path, is_tron_address(address),
                   f"`usdt_trc20` should be a base58check Tron address (34 chars, T...), got {address!r}",
                   body)
        self.ok(path, address)

        external_id = f"smoke-{uuid.uuid4()}"
        path = "users/create"
        created = self.call(path, {"external_user_id": external_id})
        self.check_user(path, created, created)
        self.check(path, created["external_user_id"] == external_id,
                   f"expected external_user_id {external_id!r}, got {created['external_user_id']!r}",
                   created)
        self.check(path, created["created_at"] == created["updated_at"],
                   "a new user's created_at and updated_at should be equal", created)
        user_id = created["user_id"]
        self.ok(path, f"external_user_id={external_id} user_id={user_id}")

        self.call_error(path, {"external_user_id": external_id}, 409, "user_already_exists")
        self.ok(path, "duplicate -> 409 user_already_exists")

        path = "users/get"
        body = self.call(path, {"external_user_id": external_id})
        self.check_user(path, body, body)
        same = {f: body[f] for f in USER_FIELDS} == {f: created[f] for f in USER_FIELDS}
        self.check(path, same, f"users/get should return the user users/create returned:\n  {show(created)}",
                   body)
        self.ok(path, f"user_id={user_id}")

        path = "users/find"
        body = self.call(path, {"external_user_id": external_id})
        items = body.get("items")
        self.check(path, isinstance(items, list), "missing `items` list", body)
        self.check(path, body.get("total") == 1 and is_int(body.get("total")),
                   f"`total` should be 1 for external_user_id={external_id!r}", body)
        self.check(path, body.get("skip") == 0 and body.get("limit") == 20,
                   "`skip` and `limit` should echo the defaults 0 and 20", body)
        self.check(path, len(items) == 1, f"expected exactly one item, got {len(items)}", body)
        self.check_user(path, items[0], body)
        self.check(path, items[0]["user_id"] == user_id,
                   f"expected user_id {user_id!r}, got {items[0]['user_id']!r}", body)
        self.ok(path, f"external_user_id filter: total={body['total']}")


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default=os.environ.get("ISSUING_BASE_URL"))
    parser.add_argument("--api-key", default=os.environ.get("ISSUING_API_KEY"))
    parser.add_argument("--api-secret", default=os.environ.get("ISSUING_API_SECRET"))
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    missing = [n for n, v in (("--base-url", args.base_url), ("--api-key", args.api_key),
                              ("--api-secret", args.api_secret)) if not v]
    if missing:
        parser.error("missing " + ", ".join(missing) + " (or the ISSUING_* environment variables)")

    smoke = Smoke(Client(args.base_url, args.api_key, args.api_secret, timeout=args.timeout))
    print(f"smoke test against {args.base_url}")
    try:
        smoke.run()
    except SmokeFailure as e:
        print(f"FAIL {e}", file=sys.stderr)
        print(f"smoke test FAILED after {smoke.passed} passing checks", file=sys.stderr)
        return 1
    print(f"smoke test passed ({smoke.passed} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
