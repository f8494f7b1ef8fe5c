#!/usr/bin/env python3
"""Offline tests for issuing_client.py and smoke.py against an in-process fake server.

    python3 -m unittest discover -s clients/python -v
"""

from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import threading
import time
import unittest
from contextlib import redirect_stderr, redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import issuing_client
import smoke
from issuing_client import Client, IssuingClientError, derive_key, open_envelope, seal

HERE = pathlib.Path(__file__).resolve().parent
VECTORS = HERE.parent.parent / "crates" / "envelope" / "tests" / "vectors.json"

API_KEY = "key-123"
API_SECRET = "secret-ключ-🔑"
TRON = "TJRyWwFs9wTFGZg3JbrVriFbNfCug5tDeC"


class FakeServer:
    """Enough of the API to exercise the client: envelopes, errors, a user table."""

    def __init__(self):
        self.key = derive_key(API_SECRET)
        self.users = []
        self.requests = []  # (path, headers, plaintext dict)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

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
            return self.reply(h, 401, {"success": False, "error": "api_key_not_found"}, False)
        try:
            req = json.loads(open_envelope(self.key, json.loads(raw)["encrypted"]))
        except Exception:
            return self.reply(h, 400, {"success": False, "error": "decryption_failed"}, False)
        self.requests.append((path, dict(h.headers), req))
        p = path[len("/api/v2/"):]
        if p == "system/health":
            return self.reply(h, 200, {"success": True}, True)
        if p == "system/time":
            return self.reply(h, 200, {"success": True, "server_time": int(time.time() * 1e6)}, True)
        if p == "project/balance":
            return self.reply(h, 200, {"success": True, "available": "0.00", "currency": "USDT"}, True)
        if p == "project/wallet/trc20":
            return self.reply(h, 200, {"success": True, "usdt_trc20": TRON}, True)
        if p == "users/create":
            user = {"user_id": f"u{len(self.users)}", "external_user_id": req["external_user_id"]}
            self.users.insert(0, user)
            return self.reply(h, 200, {"success": True, "user": user}, True)
        if p == "users/get":
            for u in self.users:
                if u["user_id"] == req.get("user_id") or u["external_user_id"] == req.get("external_user_id"):
                    return self.reply(h, 200, {"success": True, **u}, True)
            return self.reply(h, 404, {"success": False, "error": "user_not_found"}, True)
        if p == "users/find":
            return self.reply(h, 200, {"success": True, "items": self.users, "total": len(self.users),
                                       "skip": 0, "limit": 100}, True)
        return self.reply(h, 404, {"success": False, "error": "not_found"}, True)


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
        self.assertEqual(body["user"]["external_user_id"], "e1")
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
        self.assertEqual((status, body["error"]), (401, "api_key_not_found"))
        status, body = Client(self.server.url, API_KEY, "wrong secret").call("system/health")
        self.assertEqual((status, body["error"]), (400, "decryption_failed"))

    def test_encrypted_error_status(self):
        status, body = self.client.call("users/get", user_id="missing")
        self.assertEqual((status, body["error"]), (404, "user_not_found"))

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
        self.assertTrue(out.getvalue().startswith("HTTP 200\n"))
        self.assertEqual(json.loads(out.getvalue().split("\n", 1)[1])["currency"], "USDT")

    def test_cli_env_and_error_exit(self):
        env = {"ISSUING_BASE_URL": self.server.url, "ISSUING_API_KEY": API_KEY,
               "ISSUING_API_SECRET": API_SECRET}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            out = io.StringIO()
            with redirect_stdout(out):
                rc = issuing_client.main(["users/get", '{"user_id": "nope"}'])
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 404", out.getvalue())

    def test_smoke_passes(self):
        out = io.StringIO()
        with redirect_stdout(out):
            rc = smoke.main(["--base-url", self.server.url, "--api-key", API_KEY, "--api-secret", API_SECRET])
        self.assertEqual(rc, 0, out.getvalue())
        self.assertIn("smoke test passed (7 checks)", out.getvalue())

    def test_smoke_fails_clearly(self):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = smoke.main(["--base-url", self.server.url, "--api-key", "wrong", "--api-secret", API_SECRET])
        self.assertEqual(rc, 1)
        self.assertIn("system/health: expected HTTP 2xx with success=true, got HTTP 401", err.getvalue())
        self.assertIn("api_key_not_found", err.getvalue())


if __name__ == "__main__":
    unittest.main()
