#!/usr/bin/env python3
"""End-to-end smoke test of a running card-issuing API server.

Exercises the encrypted envelope both ways and a few read/write endpoints:
system/health, system/time, project/balance, project/wallet/trc20,
users/create, users/get, users/find.

    python3 clients/python/smoke.py --base-url http://127.0.0.1:8080 \\
        --api-key KEY --api-secret SECRET

(or set ISSUING_BASE_URL / ISSUING_API_KEY / ISSUING_API_SECRET). Prints one
line per check and exits 0 when all pass; on the first failure prints what was
sent and received and exits 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any, Dict, Iterable, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from issuing_client import Client, IssuingClientError  # noqa: E402

# Base58 alphabet used by Tron addresses.
BASE58 = set("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz")


class SmokeFailure(Exception):
    pass


def show(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True)


def find(doc: Dict[str, Any], name: str, nests: Iterable[str] = ()) -> Any:
    """``doc[name]``, or ``doc[n][name]`` for the first nesting key ``n`` that has it.

    The smoke test pins the fields it needs, not whether an endpoint wraps
    them in an object (e.g. ``{"user": {...}}``).
    """
    if name in doc:
        return doc[name]
    for n in nests:
        inner = doc.get(n)
        if isinstance(inner, dict) and name in inner:
            return inner[name]
    return None


class Smoke:
    def __init__(self, client: Client):
        self.client = client
        self.passed = 0

    def call(self, path: str, fields: Optional[Dict[str, Any]] = None,
             idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Call ``path`` and require HTTP 2xx with ``success: true``."""
        fields = fields or {}
        try:
            status, body = self.client.request(path, fields, idempotency_key=idempotency_key)
        except IssuingClientError as e:
            raise SmokeFailure(f"{path}: {e}") from e
        if not (200 <= status < 300) or body.get("success") is not True:
            raise SmokeFailure(
                f"{path}: expected HTTP 2xx with success=true, got HTTP {status}\n"
                f"  request fields: {show(fields)}\n  response: {show(body)}"
            )
        return body

    def check(self, path: str, ok: bool, what: str, body: Dict[str, Any]) -> None:
        if not ok:
            raise SmokeFailure(f"{path}: {what}\n  response: {show(body)}")

    def ok(self, path: str, detail: str) -> None:
        self.passed += 1
        print(f"ok   {path:<22} {detail}")

    def run(self) -> None:
        body = self.call("system/health")
        self.ok("system/health", "")

        body = self.call("system/time")
        self.ok("system/time", json.dumps({k: v for k, v in body.items() if k != "success"}))

        path = "project/balance"
        body = self.call(path)
        available = find(body, "available", ("balance",))
        currency = find(body, "currency", ("balance",))
        self.check(path, available is not None, "missing `available`", body)
        self.check(path, isinstance(currency, str) and currency != "", "missing `currency`", body)
        self.ok(path, f"available={available} {currency}")

        path = "project/wallet/trc20"
        body = self.call(path)
        address = find(body, "usdt_trc20", ("wallet",))
        self.check(
            path,
            isinstance(address, str) and len(address) == 34 and address.startswith("T")
            and set(address) <= BASE58,
            f"`usdt_trc20` should be a 34-character base58 Tron address starting with T, got {address!r}",
            body,
        )
        self.ok(path, address)

        external_id = f"smoke-{uuid.uuid4()}"
        path = "users/create"
        body = self.call(path, {"external_user_id": external_id}, idempotency_key=f"smoke-create-{external_id}")
        created_ext = find(body, "external_user_id", ("user",))
        user_id = find(body, "user_id", ("user",))
        self.check(path, created_ext == external_id,
                   f"expected external_user_id {external_id!r}, got {created_ext!r}", body)
        self.ok(path, f"external_user_id={external_id} user_id={user_id}")

        path = "users/get"
        body, sent = self.get_user(external_id, user_id)
        got_ext = find(body, "external_user_id", ("user",))
        self.check(path, got_ext == external_id,
                   f"looked up by {sent}: expected external_user_id {external_id!r}, got {got_ext!r}", body)
        self.ok(path, f"by {', '.join(sent)}")

        # Newest first is the default order, so the user just created is on the
        # first page whether or not the server applies any filter.
        path = "users/find"
        body = self.call(path, {"limit": 100})
        items = body.get("items")
        self.check(path, isinstance(items, list), "missing `items` list", body)
        self.check(path, isinstance(body.get("total"), int) and body["total"] >= 1,
                   "`total` should be an integer >= 1", body)
        self.check(path, any(isinstance(u, dict) and u.get("external_user_id") == external_id for u in items),
                   f"created user {external_id!r} not in the first page", body)
        self.ok(path, f"total={body['total']}")

    def get_user(self, external_id: str, user_id: Optional[str]) -> Tuple[Dict[str, Any], list]:
        # Prefer the server-assigned id when create returned one; fall back to
        # the external id so the smoke test does not hinge on which lookup
        # key users/get favours.
        attempts = []
        if user_id:
            attempts.append({"user_id": user_id})
        attempts.append({"external_user_id": external_id})
        failures = []
        for fields in attempts:
            try:
                return self.call("users/get", fields), list(fields)
            except SmokeFailure as e:
                failures.append(str(e))
        raise SmokeFailure("\n".join(failures))


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
