#!/usr/bin/env python3
"""Offline tests for issuing_client.py and smoke.py against an in-process fake server.

    python3 -m unittest discover -s clients/python -v
"""

from __future__ import annotations

import base64
import decimal
import hashlib
import re
import io
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
import unittest
from contextlib import redirect_stderr, redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import issuing_client
import smoke
from issuing_client import (Client, IssuingApiError, IssuingClientError, derive_key,
                            open_envelope, seal)

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = HERE.parent.parent / "crates" / "envelope" / "tests" / "vectors.json"

API_KEY = "key-123"
API_SECRET = "secret-ключ-🔑"
TRON = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"
PROJECT_ID = "6740a1c2e1f0a9b3c4d5e6f7"
# The fake's one report file.
REPORT_CSV = b'card_id,label\r\nc1,"a, ""b"""\r\n'


class FakeServer:
    """Enough of the API to exercise the client and the smoke test: envelopes, plain
    errors before authentication, sealed errors after it, and a user table, all in
    the shapes of docs/api.md. ``quirks`` switches on deliberate deviations so the
    tests can prove smoke.py notices them."""

    def __init__(self):
        self.key = derive_key(API_SECRET)
        self.users = []  # newest first
        self.disputes = {}
        self.requests = []  # (path, headers, plaintext dict)
        self.quirks = set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                ok = self.path == "/reports/" + "t" * 43
                body = REPORT_CSV if ok else b"expired\n"
                self.send_response(200 if ok else 410)
                self.send_header("Content-Type", "text/csv; charset=utf-8")
                self.send_header("Content-Disposition", 'attachment; filename="cards.csv"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                fake.handle(self, raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def reply(self, h, status, doc, encrypt):
        if encrypt:
            doc = {"encrypted": seal(self.key, json.dumps(doc).encode())}
        body = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def error(self, h, status, slug, message, encrypt):
        doc = {"success": False, "error": message, "error_slug": slug}
        return self.reply(h, status, doc, encrypt)

    def ok(self, h, fields):
        return self.reply(h, 200, {"success": True, **fields}, True)

    def handle(self, h, raw):
        path = h.path
        if path == "/api/v2/raw/notjson":
            body = b"<html>bad gateway</html>"
            h.send_response(502)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        if h.headers.get("API-KEY") != API_KEY:
            return self.error(h, 401, "api_key_not_found", "API key not found", False)
        try:
            req = json.loads(open_envelope(self.key, json.loads(raw)["encrypted"]))
        except Exception:
            return self.error(h, 400, "decryption_failed", "Invalid encrypted payload format", False)
        self.requests.append((path, dict(h.headers), req))
        p = path[len("/api/v2/"):]
        if p == "system/health":
            return self.ok(h, {"status": "ok"})
        if p == "system/time":
            return self.ok(h, {"timestamp": time.time_ns() // 1000})
        if p == "project/balance":
            return self.ok(h, {"available": "1000.00", "currency": "usdt"})
        if p == "project/wallet/trc20":
            return self.ok(h, {"usdt_trc20": TRON})
        if p == "users/create":
            ext = req.get("external_user_id")
            if not isinstance(ext, str) or not ext.strip():
                return self.error(h, 400, "validation_error", "external_user_id must not be empty", True)
            if any(u["external_user_id"] == ext for u in self.users) and "duplicate_ok" not in self.quirks:
                return self.error(h, 409, "user_already_exists", "User already exists", True)
            now = "2026-01-02T03:04:05.123456Z"
            user = {"user_id": f"{len(self.users) + 1:024x}", "external_user_id": ext,
                    "project_id": PROJECT_ID, "usdt_balance": "0.00", "deposit_addresses": [],
                    "created_at": now, "updated_at": now}
            self.users.insert(0, user)
            if "wrapped_user" in self.quirks:
                return self.ok(h, {"user": user})
            return self.ok(h, user)
        if p == "users/get":
            ext = req.get("external_user_id")
            if not isinstance(ext, str) or not ext.strip():
                return self.error(h, 400, "validation_error", "external_user_id must not be empty", True)
            for u in self.users:
                if u["external_user_id"] == ext:
                    return self.ok(h, u)
            return self.error(h, 404, "user_not_found", "User not found", True)
        if p == "users/find":
            wanted = req.get("external_user_id")
            items = self.users
            if wanted is not None and "ignore_filters" not in self.quirks:
                items = [u for u in items if u["external_user_id"] == wanted]
            return self.ok(h, {"items": items[:20], "total": len(items), "skip": 0, "limit": 20})
        if p == "orders/check":
            self.order_polls = getattr(self, "order_polls", 0) + 1
            done = self.order_polls > getattr(self, "polls_until_done", 2)
            return self.ok(h, {"order_id": req.get("order_id"),
                               "status": "completed" if done else "processing"})
        if p == "reports/create" and "probe" not in req:
            if req.get("type") not in ("card_transactions", "ledger_entries", "cards", "disputes"):
                return self.error(h, 400, "validation_error", "type must be one of: card_transactions, ledger_entries, cards, disputes", True)
            return self.ok(h, {"report_id": "r" + "0" * 22 + "1", "status": "processing"})
        if p == "reports/get" and "probe" not in req:
            if req.get("report_id") != "r" + "0" * 22 + "1":
                return self.error(h, 404, "report_not_found", "Report not found", True)
            return self.ok(h, {"report_id": req["report_id"], "type": "cards", "format": "csv", "status": "ready",
                               "row_count": 1, "size": len(REPORT_CSV), "sha256": "00",
                               "download_url": self.url + "/reports/" + "t" * 43})
        if (p.startswith("disputes/") or p == "simulate/disputes/advance") and "probe" not in req:
            return self.dispute(h, p, req)
        if p in ("cards/statement", "project/statement") and "probe" not in req:
            return self.statement(h, p, req)
        if p in issuing_client.ENDPOINTS.values():
            return self.ok(h, {"echo": p})
        return self.error(h, 404, "not_found", "Unknown endpoint", True)

    def statement(self, h, p, req):
        """Statements in the shapes of docs/api.md: the month of its example (topup 100,
        purchase 30, refund 5, a hold of 12.50, a dispute credit of 10), the same checks."""
        period = req.get("period")
        if not isinstance(period, str) or not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", period):
            return self.error(h, 400, "validation_error", "period must be a month, YYYY-MM", True)
        if period > "2026-11":
            return self.error(h, 400, "validation_error", f"period {period} is in the future", True)
        skip, limit = req.get("skip", 0), req.get("limit", 100)
        if not 1 <= limit <= 500:
            return self.error(h, 400, "validation_error", "limit must be between 1 and 500", True)
        if skip > 10_000_000:
            return self.error(h, 400, "validation_error", "skip must be at most 10000000", True)
        if p == "project/statement":
            items = [{"id": "101", "type": "deposit", "amount": "1000.00", "balance_after": "1000.00",
                      "currency": "usdt", "transfer_id": "tr1", "order_id": None, "card_id": None,
                      "reference": "tx-1", "created_at": "2026-11-02T09:00:00.000000Z"}]
            totals = dict.fromkeys(["deposits", "card_issue_fees", "card_topups", "card_withdrawals",
                                    "card_closes", "disputes", "shortfalls", "adjustments"], "0.00")
            totals["deposits"] = "1000.00"
            return self.ok(h, {"period": period, "opening_balance": "0.00", "closing_balance": "1000.00",
                               "totals": totals, "items": items[skip:skip + limit], "total": len(items),
                               "skip": skip, "limit": limit})
        if req.get("card_id") != "c1":
            return self.error(h, 404, "card_not_found", "Card not found", True)
        if req.get("external_user_id", "alice") != "alice":
            return self.error(h, 422, "card_user_mismatch", "Card does not belong to this user", True)

        def item(day, kind, amount, after, description, **ids):
            return {"at": f"2026-11-{day}T10:00:00.000000Z", "kind": kind, "amount": amount,
                    "balance_after": after, "transaction_id": None, "order_id": None, **ids,
                    "description": description}
        items = [item("03", "topup", "100.00", "100.00", "Topup", order_id="o1"),
                 item("04", "purchase", "-30.00", "70.00", 'Purchase: Corner, "Shop"', transaction_id="t1"),
                 item("05", "refund", "5.00", "75.00", 'Refund: Corner, "Shop"', transaction_id="t2"),
                 item("06", "dispute_credit", "10.00", "85.00", "Dispute credit: Corner, \"Shop\"", dispute_id="d1")]
        totals = dict.fromkeys(["topups", "withdrawals", "purchases", "refunds", "dispute_credits",
                                "dispute_debits", "fees", "other"], "0.00")
        totals.update(topups="100.00", purchases="-30.00", refunds="5.00", dispute_credits="10.00")
        return self.ok(h, {"card_id": "c1", "period": period, "opening_balance": "0.00",
                           "closing_balance": "85.00", "pending_at_close": "12.50", "totals": totals,
                           "items": items[skip:skip + limit], "total": len(items), "skip": skip, "limit": limit})

    def dispute(self, h, p, req):
        """Disputes in the shapes of docs/api.md: one open dispute per transaction,
        evidence checked against its type's first bytes, final states refuse changes."""
        now = "2026-11-29T04:00:00.000000Z"
        final = ("won", "lost", "withdrawn")

        def move(d, to, reason):
            d.update(status=to, updated_at=now)
            if reason is not None:
                d.update(resolution_reason=reason, resolved_at=now)
            d["timeline"].append({"at": now, "status": to, "note": None})

        if p == "disputes/create":
            if "idempotency_key" not in req and h.headers.get("Idempotency-Key") is None:
                return self.error(h, 400, "idempotency_key_required", "Idempotency key is required", True)
            if req["transaction_id"] == "pending":
                return self.error(h, 422, "transaction_not_disputable", "The transaction never settled", True)
            if any(d["transaction_id"] == req["transaction_id"] and d["status"] not in final
                   for d in self.disputes.values()):
                return self.error(h, 409, "dispute_already_exists", "This transaction already has an open dispute", True)
            d = {"dispute_id": f"d{len(self.disputes) + 1:023d}", "transaction_id": req["transaction_id"],
                 "card_id": "c1", "external_user_id": "alice", "amount": req.get("amount", "32.00"),
                 "currency": "usdt", "reason": req["reason"], "customer_note": req.get("customer_note"),
                 "status": "submitted", "resolution_reason": None,
                 "provisional_credit": req.get("provisional_credit", False), "evidence": [],
                 "timeline": [{"at": now, "status": "submitted", "note": None}],
                 "created_at": now, "updated_at": now, "resolved_at": None}
            self.disputes[d["dispute_id"]] = d
            return self.ok(h, d)
        d = self.disputes.get(req.get("dispute_id"))
        if d is None:
            return self.error(h, 404, "dispute_not_found", "Dispute not found", True)
        if p == "disputes/get":
            return self.ok(h, d)
        if p == "disputes/evidence/get":
            for e in d["evidence"]:
                if e["evidence_id"] == req.get("evidence_id"):
                    meta = {k: v for k, v in e.items() if k != "_content"}
                    return self.ok(h, {**meta, "dispute_id": d["dispute_id"], "content": e["_content"]})
            return self.error(h, 404, "evidence_not_found", "Evidence not found", True)
        if d["status"] in final:
            return self.error(h, 422, "invalid_status_transition", "The dispute is final", True)
        if p == "disputes/withdraw":
            move(d, "withdrawn", "withdrawn")
            return self.ok(h, d)
        if p == "simulate/disputes/advance":
            default = {"won": "won_first_chargeback", "lost": "case_lost"}.get(req["to"])
            move(d, req["to"], req.get("resolution_reason", default) if default else None)
            return self.ok(h, d)
        if p == "disputes/evidence/add":
            raw = base64.b64decode(req["content"], validate=True)
            if req["content_type"] != "application/pdf" or not raw.startswith(b"%PDF-"):
                return self.error(h, 400, "validation_error", "content does not match content_type", True)
            meta = {"evidence_id": f"e{len(d['evidence']) + 1:023d}", "filename": req["filename"],
                    "content_type": req["content_type"], "size": len(raw),
                    "sha256": hashlib.sha256(raw).hexdigest(), "created_at": now}
            d["evidence"].append({**meta, "_content": req["content"]})
            return self.ok(h, meta)
        return self.error(h, 404, "not_found", "Unknown endpoint", True)


class EnvelopeTests(unittest.TestCase):
    def test_vectors_from_rust_crate(self):
        vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
        self.assertGreater(len(vectors), 0)
        for v in vectors:
            key = derive_key(v["secret"])
            self.assertEqual(key.hex(), v["key_hex"])
            nonce = bytes.fromhex(v["nonce_hex"])
            self.assertEqual(seal(key, v["plaintext"].encode(), nonce), v["encrypted"])
            self.assertEqual(open_envelope(key, v["encrypted"]).decode(), v["plaintext"])

    def test_base64_flavours(self):
        key = derive_key("s")
        sealed = seal(key, b"hello")
        raw = base64.b64decode(sealed)
        for enc in (sealed, sealed.rstrip("="), base64.urlsafe_b64encode(raw).decode(),
                    base64.urlsafe_b64encode(raw).decode().rstrip("="), f"  {sealed}\n"):
            self.assertEqual(open_envelope(key, enc), b"hello")

    def test_rejects_tampering_and_wrong_key(self):
        key = derive_key("s")
        raw = bytearray(base64.b64decode(seal(key, b"hello")))
        with self.assertRaises(IssuingClientError):
            open_envelope(derive_key("other"), base64.b64encode(bytes(raw)).decode())
        for i in range(len(raw)):
            t = bytearray(raw)
            t[i] ^= 1
            with self.assertRaises(IssuingClientError):
                open_envelope(key, base64.b64encode(bytes(t)).decode())

    def test_fresh_nonce(self):
        key = derive_key("s")
        self.assertNotEqual(seal(key, b"x"), seal(key, b"x"))


class ClientTests(unittest.TestCase):
    def setUp(self):
        self.server = FakeServer()
        self.client = Client(self.server.url + "/", API_KEY, API_SECRET)

    def tearDown(self):
        self.server.close()

    def test_encrypted_round_trip_and_headers(self):
        before = time.time_ns() // 1000
        status, body = self.client.call("users/create", external_user_id="e1", idempotency_key="idem-1")
        self.assertEqual(status, 200)
        self.assertEqual(body["external_user_id"], "e1")
        path, headers, req = self.server.requests[-1]
        self.assertEqual(path, "/api/v2/users/create")
        self.assertEqual(headers["Idempotency-Key"], "idem-1")
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertIsInstance(req["request_timestamp"], int)
        self.assertLessEqual(before, req["request_timestamp"])
        self.assertLessEqual(req["request_timestamp"], time.time_ns() // 1000)

    def test_no_idempotency_header_by_default(self):
        self.client.call("system/health")
        self.assertNotIn("Idempotency-Key", self.server.requests[-1][1])

    def test_plain_error_before_auth(self):
        status, body = Client(self.server.url, "wrong", API_SECRET).call("system/health")
        self.assertEqual((status, body["error_slug"]), (401, "api_key_not_found"))
        status, body = Client(self.server.url, API_KEY, "wrong secret").call("system/health")
        self.assertEqual((status, body["error_slug"]), (400, "decryption_failed"))

    def test_encrypted_error_status(self):
        status, body = self.client.call("users/get", external_user_id="missing")
        self.assertEqual((status, body["error_slug"], body["success"]), (404, "user_not_found", False))

    def test_non_json_and_unreachable(self):
        with self.assertRaisesRegex(IssuingClientError, "non-JSON"):
            self.client.call("raw/notjson")
        with self.assertRaises(IssuingClientError):
            Client("http://127.0.0.1:1", API_KEY, API_SECRET, timeout=2).call("system/health")

    def test_repr_hides_secret(self):
        self.assertNotIn(API_SECRET, repr(self.client))

    def test_cli(self):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = issuing_client.main(["--base-url", self.server.url, "--api-key", API_KEY,
                                      "--api-secret", API_SECRET, "project/balance", "{}"])
        self.assertEqual(rc, 0)
        # stdout is exactly the JSON answer (so it pipes into jq), nothing on stderr.
        self.assertEqual(json.loads(out.getvalue())["currency"], "usdt")
        self.assertNotIn("HTTP", out.getvalue())
        self.assertEqual(err.getvalue(), "")

    def test_cli_env_and_error_exit(self):
        env = {"ISSUING_BASE_URL": self.server.url, "ISSUING_API_KEY": API_KEY,
               "ISSUING_API_SECRET": API_SECRET}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                rc = issuing_client.main(["users/get", '{"external_user_id": "nope"}'])
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertEqual(rc, 1)
        # The error body alone on stdout; the status on stderr.
        self.assertEqual(json.loads(out.getvalue())["error_slug"], "user_not_found")
        self.assertIn("HTTP 404", err.getvalue())
        self.assertNotIn("HTTP 404", out.getvalue())

    def test_cli_script_stdout_is_only_json(self):
        env = dict(os.environ, ISSUING_BASE_URL=self.server.url, ISSUING_API_KEY=API_KEY,
                   ISSUING_API_SECRET=API_SECRET)
        script = str(HERE / "issuing_client.py")
        ok = subprocess.run([sys.executable, script, "project/balance"], env=env,
                            capture_output=True, text=True, timeout=30)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual(json.loads(ok.stdout), {"success": True, "available": "1000.00",
                                                 "currency": "usdt"})
        self.assertEqual(ok.stderr, "")
        bad = subprocess.run([sys.executable, script, "users/get", '{"external_user_id": "x"}'],
                             env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 1)
        self.assertEqual(json.loads(bad.stdout)["error_slug"], "user_not_found")
        self.assertIn("HTTP 404 user_not_found", bad.stderr)
        unreachable = subprocess.run([sys.executable, script, "--base-url", "http://127.0.0.1:1",
                                      "--timeout", "2", "system/health"],
                                     env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(unreachable.returncode, 2)
        self.assertEqual(unreachable.stdout, "")

    def test_endpoint_methods(self):
        self.assertEqual(len(issuing_client.ENDPOINTS), 60)
        for name, path in issuing_client.ENDPOINTS.items():
            if path.startswith("users/") or path == "orders/check":
                continue
            body = getattr(self.client, name)({"probe": name}, extra=1)
            self.assertTrue(body["success"], name)
            last_path, _, req = self.server.requests[-1]
            self.assertEqual(last_path, "/api/v2/" + path)
            self.assertEqual((req["probe"], req["extra"]), (name, 1))
        user = self.client.users_create(external_user_id="m1")
        self.assertEqual(user["external_user_id"], "m1")
        self.assertEqual(self.client.users_get({"external_user_id": "m1"})["user_id"], user["user_id"])
        self.client.cards_topup(card_id="c", amount="25", idempotency_key="k-1")
        self.assertEqual(self.server.requests[-1][1]["Idempotency-Key"], "k-1")

    def test_reports(self):
        c = self.client
        created = c.reports_create({"type": "cards", "from": "2026-01-01T00:00:00Z",
                                    "to": "2026-01-31T00:00:00Z", "format": "csv"})
        self.assertEqual(created["status"], "processing")
        with self.assertRaises(issuing_client.IssuingApiError) as bad:
            c.reports_create({"type": "payments", "from": "x", "to": "y", "format": "csv"})
        self.assertEqual((bad.exception.status, bad.exception.slug), (400, "validation_error"))
        report = c.reports_get(report_id=created["report_id"])
        self.assertEqual(report["status"], "ready")
        self.assertEqual(c.reports_download(report["download_url"]), REPORT_CSV)
        with self.assertRaises(issuing_client.IssuingClientError) as gone:
            c.reports_download(self.server.url + "/reports/expired")
        self.assertIn("410", str(gone.exception))
        self.assertNotIn("expired", str(gone.exception))
        with self.assertRaises(issuing_client.IssuingApiError) as missing:
            c.reports_get(report_id="nope")
        self.assertEqual((missing.exception.status, missing.exception.slug), (404, "report_not_found"))

    def test_disputes(self):
        c = self.client
        dispute = c.disputes_create(transaction_id="t1", reason="goods_services_not_received",
                                    customer_note="never arrived", provisional_credit=True,
                                    idempotency_key="dispute-t1")
        path, headers, req = self.server.requests[-1]
        self.assertEqual((path, headers["Idempotency-Key"]), ("/api/v2/disputes/create", "dispute-t1"))
        self.assertEqual((dispute["status"], dispute["resolution_reason"], dispute["provisional_credit"]),
                         ("submitted", None, True))
        self.assertEqual([t["status"] for t in dispute["timeline"]], ["submitted"])

        for fields, status, slug in (
                ({"transaction_id": "t1", "reason": "other", "idempotency_key": "k1"}, 409, "dispute_already_exists"),
                ({"transaction_id": "pending", "reason": "other", "idempotency_key": "k2"}, 422, "transaction_not_disputable"),
                ({"transaction_id": "t2", "reason": "other"}, 400, "idempotency_key_required")):
            with self.assertRaises(IssuingApiError) as cm:
                c.disputes_create(fields)
            self.assertEqual((cm.exception.status, cm.exception.slug, cm.exception.path),
                             (status, slug, "disputes/create"))
        with self.assertRaises(IssuingApiError) as cm:
            c.disputes_get(dispute_id="nope")
        self.assertEqual((cm.exception.status, cm.exception.slug), (404, "dispute_not_found"))

        # Bytes go out as standard padded base64 and come back byte for byte.
        pdf = b"%PDF-1.4\n\xff\xfe receipt"
        meta = c.disputes_evidence_add(dispute_id=dispute["dispute_id"], filename="receipt.pdf",
                                       content_type="application/pdf", content=pdf)
        self.assertEqual(self.server.requests[-1][2]["content"], base64.b64encode(pdf).decode())
        self.assertEqual((meta["size"], meta["sha256"]), (len(pdf), hashlib.sha256(pdf).hexdigest()))
        got = c.disputes_evidence_get({"dispute_id": dispute["dispute_id"], "evidence_id": meta["evidence_id"]})
        self.assertEqual((got["dispute_id"], base64.b64decode(got["content"])), (dispute["dispute_id"], pdf))
        with self.assertRaises(IssuingApiError) as cm:
            c.disputes_evidence_get(dispute_id=dispute["dispute_id"], evidence_id="nope")
        self.assertEqual((cm.exception.status, cm.exception.slug), (404, "evidence_not_found"))
        # A string is sent as it is: the caller's own base64.
        with self.assertRaises(IssuingApiError) as cm:
            c.disputes_evidence_add(dispute_id=dispute["dispute_id"], filename="x.png",
                                    content_type="image/png", content=base64.b64encode(b"%PDF-").decode())
        self.assertEqual((cm.exception.status, cm.exception.slug), (400, "validation_error"))

        withdrawn = c.disputes_withdraw(dispute_id=dispute["dispute_id"])
        self.assertEqual((withdrawn["status"], withdrawn["resolution_reason"]), ("withdrawn", "withdrawn"))
        self.assertEqual([t["status"] for t in withdrawn["timeline"]], ["submitted", "withdrawn"])
        for call in (lambda: c.disputes_withdraw(dispute_id=dispute["dispute_id"]),
                     lambda: c.disputes_evidence_add(dispute_id=dispute["dispute_id"], filename="r.pdf",
                                                     content_type="application/pdf", content=pdf)):
            with self.assertRaises(IssuingApiError) as cm:
                call()
            self.assertEqual((cm.exception.status, cm.exception.slug), (422, "invalid_status_transition"))

        # A final dispute frees its transaction; the sandbox plays the network.
        again = c.disputes_create(transaction_id="t1", reason="fraud_card_not_present", idempotency_key="k3")
        self.assertEqual(c.simulate_disputes_advance(dispute_id=again["dispute_id"], to="prearbitration")["status"],
                         "prearbitration")
        lost = c.simulate_disputes_advance(dispute_id=again["dispute_id"], to="lost",
                                           resolution_reason="network_rejected")
        self.assertEqual((lost["status"], lost["resolution_reason"]), ("lost", "network_rejected"))
        self.assertEqual(self.server.requests[-1][0], "/api/v2/simulate/disputes/advance")

    def test_statements(self):
        c = self.client
        s = c.cards_statement(card_id="c1", external_user_id="alice", period="2026-11")
        path, _, req = self.server.requests[-1]
        self.assertEqual(path, "/api/v2/cards/statement")
        self.assertEqual((req["card_id"], req["external_user_id"], req["period"]), ("c1", "alice", "2026-11"))
        self.assertEqual((s["opening_balance"], s["closing_balance"], s["pending_at_close"]),
                         ("0.00", "85.00", "12.50"))
        self.assertEqual([i["kind"] for i in s["items"]], ["topup", "purchase", "refund", "dispute_credit"])
        # Reconciling: opening + every item = closing, and the totals add up to the same.
        D = decimal.Decimal
        moved = sum((D(i["amount"]) for i in s["items"]), D(0))
        self.assertEqual(D(s["opening_balance"]) + moved, D(s["closing_balance"]))
        self.assertEqual(sum((D(t) for t in s["totals"].values()), D(0)), moved)
        self.assertEqual([D(i["balance_after"]) for i in s["items"]], [D(100), D(70), D(75), D(85)])
        purchase, dispute = s["items"][1], s["items"][3]
        self.assertEqual((purchase["transaction_id"], purchase["order_id"]), ("t1", None))
        self.assertEqual(purchase["description"], 'Purchase: Corner, "Shop"')
        self.assertEqual((dispute["dispute_id"], dispute["transaction_id"]), ("d1", None))
        self.assertNotIn("dispute_id", s["items"][0])

        page = c.cards_statement({"card_id": "c1", "period": "2026-11"}, skip=2, limit=1)
        self.assertEqual(([i["kind"] for i in page["items"]], page["total"], page["skip"], page["limit"]),
                         (["refund"], 4, 2, 1))
        self.assertEqual(page["totals"], s["totals"], "totals cover the whole period")

        p = c.project_statement(period="2026-11")
        self.assertEqual(self.server.requests[-1][0], "/api/v2/project/statement")
        self.assertEqual((p["closing_balance"], p["items"][0]["type"], p["totals"]["deposits"]),
                         ("1000.00", "deposit", "1000.00"))

        for call, status, slug in [
                (lambda: c.cards_statement(card_id="c1", period="2026-1"), 400, "validation_error"),
                (lambda: c.cards_statement(card_id="c1", period="2999-01"), 400, "validation_error"),
                (lambda: c.cards_statement(card_id="c1", period="2026-11", limit=501), 400, "validation_error"),
                (lambda: c.project_statement(period="2026-11", limit=0), 400, "validation_error"),
                (lambda: c.project_statement(period="2026-11", skip=10_000_001), 400, "validation_error"),
                (lambda: c.cards_statement(card_id="nope", period="2026-11"), 404, "card_not_found"),
                (lambda: c.cards_statement(card_id="c1", external_user_id="bob", period="2026-11"),
                 422, "card_user_mismatch")]:
            with self.assertRaises(IssuingApiError) as cm:
                call()
            self.assertEqual((cm.exception.status, cm.exception.slug), (status, slug))

    def test_decision_answers_and_requests(self):
        key = issuing_client.derive_key(API_SECRET)
        answer = json.loads(self.client.seal_decision(False, "velocity"))
        self.assertEqual(json.loads(issuing_client.open_envelope(key, answer["encrypted"])),
                         {"approved": False, "reason": "velocity"})
        request = {"type": "authorization_request", "transaction_id": "t1"}
        body = json.dumps({"encrypted": issuing_client.seal(key, json.dumps(request).encode())}).encode()
        self.assertEqual(self.client.open_webhook(API_KEY, body), request)
        with self.assertRaises(IssuingClientError):
            self.client.open_webhook("pk_other", body)
        with self.assertRaises(IssuingClientError):
            self.client.open_webhook(API_KEY, b'{"approved": true}')

    def test_endpoint_methods_raise_typed_errors(self):
        with self.assertRaises(IssuingApiError) as cm:
            self.client.users_get(external_user_id="missing")
        e = cm.exception
        self.assertEqual((e.status, e.slug, e.message, e.path), (404, "user_not_found", "User not found", "users/get"))
        with self.assertRaises(IssuingApiError) as cm:
            Client(self.server.url, "wrong", API_SECRET).system_health()
        self.assertEqual((cm.exception.status, cm.exception.slug), (401, "api_key_not_found"))

    def test_timestamps_are_unique(self):
        stamps = [issuing_client.next_request_timestamp() for _ in range(5000)]
        self.assertEqual(stamps, sorted(set(stamps)))
        self.assertLess(abs(stamps[-1] - time.time_ns() // 1000), 10_000_000)

    def test_sync_clock_and_wait_order(self):
        offset = self.client.sync_clock()
        self.assertLess(abs(offset), 1_000_000)
        self.server.order_polls, self.server.polls_until_done = 0, 2
        self.assertEqual(self.client.wait_order("o1", interval=0.01)["status"], "completed")
        self.assertEqual(self.server.order_polls, 3)
        self.server.order_polls, self.server.polls_until_done = 0, 10**9
        with self.assertRaisesRegex(IssuingClientError, "still processing"):
            self.client.wait_order("o2", timeout=0.1, interval=0.01)

    def test_smoke_passes(self):
        out = io.StringIO()
        with redirect_stdout(out):
            rc = smoke.main(["--base-url", self.server.url, "--api-key", API_KEY, "--api-secret", API_SECRET])
        self.assertEqual(rc, 0, out.getvalue())
        self.assertIn("smoke test passed (8 checks)", out.getvalue())
        paths = [path for path, _, _ in self.server.requests]
        self.assertEqual(paths.count("/api/v2/users/create"), 2, "create, then the duplicate")
        find = [req for path, _, req in self.server.requests if path == "/api/v2/users/find"]
        self.assertEqual(len(find), 1)
        self.assertTrue(find[0]["external_user_id"].startswith("smoke-"), find[0])

    def test_smoke_fails_clearly(self):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = smoke.main(["--base-url", self.server.url, "--api-key", "wrong", "--api-secret", API_SECRET])
        self.assertEqual(rc, 1)
        self.assertIn("system/health: expected HTTP 200 with success=true, got HTTP 401", err.getvalue())
        self.assertIn("api_key_not_found", err.getvalue())

    def run_smoke(self):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = smoke.main(["--base-url", self.server.url, "--api-key", API_KEY, "--api-secret", API_SECRET])
        return rc, err.getvalue()

    def test_smoke_rejects_a_wrapped_user(self):
        self.server.quirks.add("wrapped_user")
        rc, err = self.run_smoke()
        self.assertEqual(rc, 1)
        self.assertIn("users/create: user is missing", err)

    def test_smoke_requires_409_on_duplicate(self):
        self.server.quirks.add("duplicate_ok")
        rc, err = self.run_smoke()
        self.assertEqual(rc, 1)
        self.assertIn("users/create: expected HTTP 409 with error_slug='user_already_exists', got HTTP 200", err)

    def test_smoke_requires_the_find_filter(self):
        self.client.call("users/create", external_user_id="someone-else")
        self.server.quirks.add("ignore_filters")
        rc, err = self.run_smoke()
        self.assertEqual(rc, 1)
        self.assertIn("users/find: `total` should be 1", err)


class SmokeHelperTests(unittest.TestCase):
    def test_tron_address_check(self):
        self.assertTrue(smoke.is_tron_address(TRON))
        self.assertTrue(smoke.is_tron_address("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"))
        for bad in ("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u", "T" * 34, "short", None, 5,
                    "0" + TRON[1:]):
            self.assertFalse(smoke.is_tron_address(bad), bad)

    def test_formats(self):
        for good in ("0.00", "12.50", "0.000001", "1000.00"):
            self.assertRegex(good, smoke.AMOUNT)
        for bad in ("12", "12.5", "1.0000001", "1e3", ""):
            self.assertNotRegex(bad, smoke.AMOUNT)
        self.assertRegex("2026-11-21T20:00:33.516217Z", smoke.RFC3339_UTC)
        self.assertNotRegex("2026-11-21T20:00:33+00:00", smoke.RFC3339_UTC)
        self.assertTrue(smoke.is_int(5))
        self.assertFalse(smoke.is_int(True))


if __name__ == "__main__":
    unittest.main()
