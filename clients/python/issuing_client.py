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

    from issuing_client import Client, IssuingApiError
    client = Client("http://localhost:8080", "my-api-key", "my-api-secret")
    # One method per endpoint: returns the success body, raises IssuingApiError
    # (status, slug, message) for an API error.
    balance = client.project_balance()
    user = client.users_create(external_user_id="u-1")
    card = client.cards_create(external_user_id="u-1", product_code="virtual_usd",
                               idempotency_key="card-1")
    order = client.wait_order(card["order"]["order_id"])
    # The lower-level call returns (http_status, body) and raises nothing for
    # API errors. Endpoints that need an idempotency key take it as a keyword;
    # it is sent as the Idempotency-Key header:
    status, body = client.call("cards/topup", idempotency_key="topup-42", card_id="...", amount="25")

CLI use (values may also come from ISSUING_BASE_URL, ISSUING_API_KEY and
ISSUING_API_SECRET); stdout holds only the answer's JSON, so it pipes into jq::

    python3 issuing_client.py --base-url http://localhost:8080 \\
        --api-key K --api-secret S users/get '{"external_user_id": "u-1"}'
    issuing-client project/balance | jq -r .available   # after pip install ./clients/python

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
import threading
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
    "IssuingApiError",
    "ENDPOINTS",
    "next_request_timestamp",
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


class IssuingApiError(Exception):
    """An error answered by the API (raised by the per-endpoint methods, not by ``call``).

    ``status`` is the HTTP status, ``slug`` the ``error_slug`` (``unknown_error`` if the
    body had none), ``message`` the readable ``error`` and ``body`` the whole answer.
    """

    def __init__(self, status: int, slug: str, message: str, body: Dict[str, Any], path: str = ""):
        super().__init__(f"{message} ({slug}, HTTP {status})")
        self.status = status
        self.slug = slug
        self.message = message
        self.body = body
        self.path = path


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


_TIMESTAMP_LOCK = threading.Lock()
_last_timestamp = 0
# The server accepts a request_timestamp this far from its clock (microseconds).
TIMESTAMP_WINDOW_MICROS = 30_000_000


def next_request_timestamp(offset_micros: int = 0) -> int:
    """A ``request_timestamp``: :func:`now_micros` plus ``offset_micros`` (the server
    clock's lead over ours), strictly increasing within the process, so two calls in the
    same microsecond are not refused as ``duplicate_request``. After a clock correction
    larger than the server's window the sequence restarts from the corrected clock (the
    values it skips were outside the window, so the server never recorded them)."""
    global _last_timestamp
    with _TIMESTAMP_LOCK:
        now = now_micros() + int(offset_micros)
        nxt = now
        if now <= _last_timestamp and _last_timestamp - now <= TIMESTAMP_WINDOW_MICROS + 5_000_000:
            nxt = _last_timestamp + 1
        _last_timestamp = nxt
        return nxt


# Method name -> endpoint path, for every endpoint of docs/api.md.
ENDPOINTS = {
    "system_health": "system/health",
    "system_time": "system/time",
    "project_balance": "project/balance",
    "project_txs": "project/txs",
    "project_statement": "project/statement",
    "project_wallet_trc20": "project/wallet/trc20",
    "users_create": "users/create",
    "users_get": "users/get",
    "users_find": "users/find",
    "cardholders_create": "cardholders/create",
    "cardholders_get": "cardholders/get",
    "cardholders_find": "cardholders/find",
    "cards_products": "cards/products",
    "cards_create": "cards/create",
    "cards_get": "cards/get",
    "cards_find": "cards/find",
    "cards_balance": "cards/balance",
    "cards_details": "cards/details",
    "cards_reveal_create": "cards/reveal/create",
    "cards_freeze": "cards/freeze",
    "cards_unfreeze": "cards/unfreeze",
    "cards_topup": "cards/topup",
    "cards_withdraw": "cards/withdraw",
    "cards_txs": "cards/txs",
    "cards_statement": "cards/statement",
    "cards_close": "cards/close",
    "cards_3ds_confirm": "cards/3ds/confirm",
    "cards_limits_set": "cards/limits/set",
    "cards_limits_get": "cards/limits/get",
    "rules_create": "rules/create",
    "rules_update": "rules/update",
    "rules_get": "rules/get",
    "rules_list": "rules/list",
    "rules_delete": "rules/delete",
    "rules_results": "rules/results",
    "orders_check": "orders/check",
    "wh_subscribe": "wh/subscribe",
    "wh_unsubscribe": "wh/unsubscribe",
    "wh_subscriptions": "wh/subscriptions",
    "wh_deliveries": "wh/deliveries",
    "wh_redeliver": "wh/redeliver",
    "wh_decision_set": "wh/decision/set",
    "wh_decision_get": "wh/decision/get",
    "wh_decision_delete": "wh/decision/delete",
    "disputes_create": "disputes/create",
    "disputes_get": "disputes/get",
    "disputes_find": "disputes/find",
    "disputes_withdraw": "disputes/withdraw",
    "disputes_evidence_add": "disputes/evidence/add",
    "disputes_evidence_get": "disputes/evidence/get",
    "reports_create": "reports/create",
    "reports_get": "reports/get",
    "simulate_cards_auth": "simulate/cards/auth",
    "simulate_cards_clear": "simulate/cards/clear",
    "simulate_cards_reversal": "simulate/cards/reversal",
    "simulate_cards_refund": "simulate/cards/refund",
    "simulate_cards_3ds": "simulate/cards/3ds",
    "simulate_project_deposit": "simulate/project/deposit",
    "simulate_disputes_advance": "simulate/disputes/advance",
    "simulate_settlement_break": "simulate/settlement/break",
}


def _endpoint(path: str):
    def method(self, fields: Optional[Dict[str, Any]] = None, /, *,
               idempotency_key: Optional[str] = None, **kwargs: Any) -> Dict[str, Any]:
        return self.invoke(path, fields, idempotency_key=idempotency_key, **kwargs)

    method.__doc__ = (f"POST ``{path}``: fields as a dict and/or keywords. Returns the success "
                      "body; raises IssuingApiError for an API error (see docs/api.md).")
    return method


def _evidence_endpoint(path: str):
    """Like :func:`_endpoint`, and a ``content`` given as bytes is sent as standard padded
    base64 (a string is sent as it is: already base64)."""
    def method(self, fields: Optional[Dict[str, Any]] = None, /, *,
               idempotency_key: Optional[str] = None, **kwargs: Any) -> Dict[str, Any]:
        merged: Dict[str, Any] = dict(fields or {})
        merged.update(kwargs)
        content = merged.get("content")
        if isinstance(content, (bytes, bytearray, memoryview)):
            merged["content"] = base64.b64encode(bytes(content)).decode("ascii")
        return self.invoke(path, merged, idempotency_key=idempotency_key)

    method.__doc__ = (f"POST ``{path}``: fields as a dict and/or keywords; ``content`` as bytes "
                      "or base64 text. Returns the success body; raises IssuingApiError for an "
                      "API error (see docs/api.md).")
    return method


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
        # Microseconds the server clock is ahead of ours; set by sync_clock().
        self.clock_offset_micros = 0

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
        payload: Dict[str, Any] = {"request_timestamp": next_request_timestamp(self.clock_offset_micros)}
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

    def invoke(
        self,
        path: str,
        fields: Optional[Dict[str, Any]] = None,
        /,
        *,
        idempotency_key: Optional[str] = None,
        **kwargs: Any,
    ) -> Dict[str, Any]:
        """POST to ``path`` and return the success body (``"success": true`` and the
        fields at the root). Fields come as a dict, as keywords, or both. An API error
        raises :class:`IssuingApiError`; transport and protocol failures raise
        :class:`IssuingClientError`."""
        merged: Dict[str, Any] = dict(fields or {})
        merged.update(kwargs)
        status, body = self.request(path, merged, idempotency_key=idempotency_key)
        if 200 <= status < 300 and body.get("success") is True:
            return body
        if 200 <= status < 300:
            raise IssuingClientError(f"{path}: HTTP {status} without success=true: {body!r}")
        slug = body.get("error_slug") if isinstance(body.get("error_slug"), str) else "unknown_error"
        message = body.get("error") if isinstance(body.get("error"), str) else json.dumps(body)
        raise IssuingApiError(status, slug, message, body, path)

    def sync_clock(self) -> int:
        """Learn the server clock from ``system/time``; keeps and returns the offset
        (server minus local, in microseconds) used for later ``request_timestamp`` values."""
        before = now_micros()
        answer = self.invoke("system/time")
        after = now_micros()
        ts = answer.get("timestamp")
        if not isinstance(ts, int) or isinstance(ts, bool):
            raise IssuingClientError(f"system/time: the timestamp is not an integer: {ts!r}")
        self.clock_offset_micros = ts - (before + after) // 2
        return self.clock_offset_micros

    def wait_order(self, order_id: str, timeout: float = 60.0, interval: float = 0.1) -> Dict[str, Any]:
        """Poll ``orders/check`` until the order is ``completed`` or ``failed`` and return
        it (a failed order is returned, not raised: see ``last_error_slug``). Raises
        :class:`IssuingClientError` if it is still unfinished after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            order = self.orders_check(order_id=order_id)
            if order.get("status") in ("completed", "failed"):
                return order
            left = deadline - time.monotonic()
            if left <= 0:
                raise IssuingClientError(
                    f"order {order_id} is still {order.get('status')} after {timeout} s")
            time.sleep(min(interval, left))
            interval = min(interval * 2, 2.0)

    system_health = _endpoint("system/health")
    system_time = _endpoint("system/time")
    project_balance = _endpoint("project/balance")
    project_txs = _endpoint("project/txs")
    # A UTC month (``period="YYYY-MM"``) of the master balance: opening and closing
    # balances, totals per kind, items as project/txs shows them (``skip``, ``limit`` <= 500).
    project_statement = _endpoint("project/statement")
    project_wallet_trc20 = _endpoint("project/wallet/trc20")
    users_create = _endpoint("users/create")
    users_get = _endpoint("users/get")
    users_find = _endpoint("users/find")
    cardholders_create = _endpoint("cardholders/create")
    cardholders_get = _endpoint("cardholders/get")
    cardholders_find = _endpoint("cardholders/find")
    cards_products = _endpoint("cards/products")
    cards_create = _endpoint("cards/create")
    cards_get = _endpoint("cards/get")
    cards_find = _endpoint("cards/find")
    cards_balance = _endpoint("cards/balance")
    cards_details = _endpoint("cards/details")
    # A single-use page for the cardholder's browser: hand ``url`` to it, never log it.
    cards_reveal_create = _endpoint("cards/reveal/create")
    cards_freeze = _endpoint("cards/freeze")
    cards_unfreeze = _endpoint("cards/unfreeze")
    cards_topup = _endpoint("cards/topup")
    cards_withdraw = _endpoint("cards/withdraw")
    cards_txs = _endpoint("cards/txs")
    # A UTC month (``period="YYYY-MM"``) of a card's funds (available + pending): opening and
    # closing balances, ``pending_at_close``, totals per kind, the items paged. Amounts are
    # decimal strings: add them with ``decimal.Decimal``, never as floats.
    cards_statement = _endpoint("cards/statement")
    cards_close = _endpoint("cards/close")
    cards_3ds_confirm = _endpoint("cards/3ds/confirm")
    cards_limits_set = _endpoint("cards/limits/set")
    cards_limits_get = _endpoint("cards/limits/get")
    rules_create = _endpoint("rules/create")
    rules_update = _endpoint("rules/update")
    rules_get = _endpoint("rules/get")
    rules_list = _endpoint("rules/list")
    rules_delete = _endpoint("rules/delete")
    rules_results = _endpoint("rules/results")
    orders_check = _endpoint("orders/check")
    wh_subscribe = _endpoint("wh/subscribe")
    wh_unsubscribe = _endpoint("wh/unsubscribe")
    wh_subscriptions = _endpoint("wh/subscriptions")
    wh_deliveries = _endpoint("wh/deliveries")
    wh_redeliver = _endpoint("wh/redeliver")
    wh_decision_set = _endpoint("wh/decision/set")
    wh_decision_get = _endpoint("wh/decision/get")
    wh_decision_delete = _endpoint("wh/decision/delete")
    # Needs an idempotency key: ``idempotency_key=`` (the header) or the field.
    disputes_create = _endpoint("disputes/create")
    disputes_get = _endpoint("disputes/get")
    disputes_find = _endpoint("disputes/find")
    disputes_withdraw = _endpoint("disputes/withdraw")
    # At most 4 MiB decoded, 10 files per dispute; ``content`` may be the file's bytes.
    disputes_evidence_add = _evidence_endpoint("disputes/evidence/add")
    # The answer's ``content`` is base64: ``base64.b64decode(answer["content"])``.
    disputes_evidence_get = _endpoint("disputes/evidence/get")
    # ``type``, ``from``, ``to`` (RFC 3339, at most 366 days apart), ``format`` (csv or
    # jsonl); the report is built in the background.
    reports_create = _endpoint("reports/create")
    # Once ``ready``, with a new ``download_url`` (a credential, good for one hour).
    reports_get = _endpoint("reports/get")

    def reports_download(self, url: str) -> bytes:
        """GET a ready report's file from its ``download_url`` (plain, outside the
        envelope: the token in the URL is the credential). Returns the file's bytes;
        raises :class:`IssuingClientError` for any answer but 200 (404 unknown link,
        410 a link over its hour). Errors never repeat the URL: it holds the token."""
        req = urllib.request.Request(url, headers={"User-Agent": "issuing-client-python/1"}, method="GET")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            status = e.code
            e.close()
            raise IssuingClientError(f"report download: HTTP {status}") from None
        except (urllib.error.URLError, OSError) as e:
            raise IssuingClientError(f"report download failed: {type(e).__name__}") from None

    simulate_cards_auth = _endpoint("simulate/cards/auth")
    simulate_cards_clear = _endpoint("simulate/cards/clear")
    simulate_cards_reversal = _endpoint("simulate/cards/reversal")
    simulate_cards_refund = _endpoint("simulate/cards/refund")
    simulate_cards_3ds = _endpoint("simulate/cards/3ds")
    simulate_project_deposit = _endpoint("simulate/project/deposit")
    # Sandbox: the network moves a dispute (``to``, optional ``resolution_reason``).
    simulate_disputes_advance = _endpoint("simulate/disputes/advance")
    # Sandbox: plants a settlement reconciliation break (``transaction_id``, ``kind``:
    # ``missing_here``, ``missing_there`` or ``amount_mismatch``).
    simulate_settlement_break = _endpoint("simulate/settlement/break")

    def open_webhook(self, api_key_header: Optional[str], body: bytes) -> Dict[str, Any]:
        """Open a webhook delivery or a decision request: ``api_key_header`` is its
        ``API-KEY`` header and ``body`` its raw body ``{"encrypted": ...}``. Returns the
        plaintext JSON object; raises :class:`IssuingClientError` if it is not this
        project's."""
        if (api_key_header or "").strip() != self.api_key:
            raise IssuingClientError("webhook API-KEY header is missing or not this client's key")
        try:
            outer = json.loads(body)
            plain = json.loads(open_envelope(self._key, outer["encrypted"]).decode("utf-8"))
        except Exception as e:  # noqa: BLE001 - every way a body can be wrong
            raise IssuingClientError(f"webhook body rejected: {e}") from e
        if not isinstance(plain, dict):
            raise IssuingClientError("webhook body rejected: the plaintext is not a JSON object")
        return plain

    def seal_decision(self, approved: bool, reason: Optional[str] = None) -> bytes:
        """The HTTP body (answer it with status 200) of a decision endpoint's answer to an
        ``authorization_request``: ``{"encrypted": ...}`` over ``{"approved", "reason"?}``,
        sealed with this project's key (``reason`` at most 64 characters)."""
        answer: Dict[str, Any] = {"approved": bool(approved)}
        if reason is not None:
            answer["reason"] = reason
        sealed = seal(self._key, json.dumps(answer).encode("utf-8"))
        return json.dumps({"encrypted": sealed}).encode("utf-8")

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
        epilog="Prints only the decrypted JSON answer on stdout (error answers too), so the output "
               "pipes into jq; a non-2xx status is also reported on stderr. "
               "Exit status: 0 for HTTP 2xx, 1 for other HTTP statuses, 2 for usage or transport errors.",
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
    # stdout carries only the JSON answer, so `issuing-client ... | jq` works; the
    # status of an error goes to stderr (and into the exit code).
    print(json.dumps(body, indent=2, ensure_ascii=False))
    if 200 <= status < 300:
        return 0
    print(f"error: HTTP {status} {body.get('error_slug', '')}".rstrip(), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
