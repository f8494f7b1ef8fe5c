// Offline tests: envelope against the Rust crate's vectors, and the client against an
// in-process fake server (node:http) speaking the shapes of docs/api.md.
//
//     node --test clients/typescript/test/

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

import {
  ENDPOINTS,
  IssuingClient,
  IssuingClientError,
  IssuingError,
  decodeBase64,
  deriveKey,
  nextRequestTimestamp,
  openEnvelope,
  seal,
  sealJson,
} from "../index.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const VECTORS = join(HERE, "..", "..", "..", "crates", "envelope", "tests", "vectors.json");

const API_KEY = "pk_test-123";
const API_SECRET = "secret-ключ-🔑";
const KEY = deriveKey(API_SECRET);

const hex = (/** @type {Uint8Array} */ b) => Buffer.from(b).toString("hex");
const fromHex = (/** @type {string} */ s) => new Uint8Array(Buffer.from(s, "hex"));
const utf8 = (/** @type {Uint8Array} */ b) => Buffer.from(b).toString("utf8");

describe("envelope", () => {
  test("matches the test vectors of crates/envelope", () => {
    const vectors = JSON.parse(readFileSync(VECTORS, "utf8"));
    assert.ok(Array.isArray(vectors) && vectors.length > 0);
    for (const v of vectors) {
      const key = deriveKey(v.secret);
      assert.equal(hex(key), v.key_hex, `key of ${JSON.stringify(v.secret)}`);
      assert.equal(seal(key, v.plaintext, fromHex(v.nonce_hex)), v.encrypted, `seal ${JSON.stringify(v.plaintext)}`);
      assert.equal(utf8(openEnvelope(key, v.encrypted)), v.plaintext);
    }
  });

  test("accepts every base64 flavour the server sends or accepts", () => {
    const sealed = seal(KEY, "hello");
    const raw = Buffer.from(sealed, "base64");
    const urlSafe = raw.toString("base64url");
    for (const enc of [sealed, sealed.replace(/=+$/, ""), urlSafe, `${urlSafe}${"=".repeat((4 - (urlSafe.length % 4)) % 4)}`, `  ${sealed}\n`]) {
      assert.equal(utf8(openEnvelope(KEY, enc)), "hello", enc);
    }
  });

  test("rejects bad base64, mixed alphabets, wrong version, short input, tampering, wrong key", () => {
    for (const bad of ["***", "A", "ab+_cd==", "abc==="]) {
      assert.throws(() => decodeBase64(bad), IssuingClientError, bad);
    }
    const raw = new Uint8Array(Buffer.from(seal(KEY, "hello"), "base64"));
    assert.throws(() => openEnvelope(deriveKey("other"), Buffer.from(raw).toString("base64")), /does not open/);
    for (let i = 0; i < raw.length; i++) {
      const t = raw.slice();
      t[i] ^= 1;
      assert.throws(() => openEnvelope(KEY, Buffer.from(t).toString("base64")), IssuingClientError, `byte ${i}`);
    }
    assert.throws(() => openEnvelope(KEY, Buffer.from([2, 1, 2]).toString("base64")), /too short/);
    assert.throws(() => openEnvelope(KEY, ""), /empty/);
  });

  test("a fresh nonce per message, MAC before ciphertext", () => {
    assert.notEqual(seal(KEY, "x"), seal(KEY, "x"));
    const raw = Buffer.from(seal(KEY, "abc"), "base64");
    assert.equal(raw[0], 0x02);
    assert.equal(raw.length, 1 + 24 + 16 + 3);
  });

  test("request timestamps are integers, strictly increasing, near the clock", () => {
    const now = Date.now() * 1000;
    const seen = new Set();
    let prev = 0;
    for (let i = 0; i < 5000; i++) {
      const ts = nextRequestTimestamp();
      assert.ok(Number.isSafeInteger(ts));
      assert.ok(ts > prev);
      prev = ts;
      seen.add(ts);
    }
    assert.equal(seen.size, 5000);
    assert.ok(Math.abs(prev - now) < 10_000_000);
    // A large correction (server 60 s behind) starts again from the corrected clock.
    const behind = nextRequestTimestamp(-60_000_000);
    assert.ok(Math.abs(behind - (Date.now() * 1000 - 60_000_000)) < 1_000_000);
  });
});

/**
 * Enough of the API for the client: plain errors before authentication, sealed answers
 * after it, a replay check, a clock that can be moved, orders that complete after a few
 * polls, and a record of every request.
 */
/** The fake's one report file. */
const REPORT_CSV = 'card_id,label\r\nc1,"a, ""b"""\r\n';

class FakeServer {
  constructor() {
    /** @type {{path: string, headers: http.IncomingHttpHeaders, req: any}[]} */
    this.requests = [];
    this.clockOffsetMicros = 0;
    this.orderPolls = 0;
    this.pollsUntilDone = 2;
    this.seen = new Set();
    this.users = new Map();
    /** @type {Map<string, any>} */
    this.disputes = new Map();
    this.server = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => this.handle(req, res, Buffer.concat(chunks).toString("utf8")));
    });
  }

  async start() {
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", () => resolve(undefined)));
    const addr = /** @type {import("node:net").AddressInfo} */ (this.server.address());
    this.url = `http://127.0.0.1:${addr.port}`;
  }

  async stop() {
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(() => resolve(undefined)));
  }

  now() {
    return Date.now() * 1000 + this.clockOffsetMicros;
  }

  /** @param {http.ServerResponse} res @param {number} status @param {any} doc @param {boolean} sealed */
  reply(res, status, doc, sealed) {
    const body = sealed ? sealJson(KEY, doc) : JSON.stringify(doc);
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
  }

  /** @param {any} res @param {number} status @param {string} slug @param {string} message @param {boolean} sealed */
  error(res, status, slug, message, sealed) {
    this.reply(res, status, { success: false, error: message, error_slug: slug }, sealed);
  }

  /** @param {any} res @param {Record<string, unknown>} fields */
  ok(res, fields) {
    this.reply(res, 200, { success: true, ...fields }, true);
  }

  /** @param {http.IncomingMessage} h @param {http.ServerResponse} res @param {string} raw */
  handle(h, res, raw) {
    const url = h.url ?? "";
    if (url === "/api/v2/raw/notjson") {
      res.writeHead(502);
      return res.end("<html>bad gateway</html>");
    }
    if (url.startsWith("/reports/")) {
      if (h.method !== "GET") {
        res.writeHead(405);
        return res.end();
      }
      const ok = url === `/reports/${"t".repeat(43)}`;
      res.writeHead(ok ? 200 : 410, { "Content-Type": "text/csv; charset=utf-8", "Content-Disposition": 'attachment; filename="cards.csv"' });
      return res.end(ok ? REPORT_CSV : "expired\n");
    }
    if (url === "/api/v2/raw/plainsuccess") return this.reply(res, 200, { success: true }, false);
    if (url === "/api/v2/raw/slow") return setTimeout(() => this.ok(res, {}), 1000);
    if (url === "/api/v2/raw/redirect") {
      res.writeHead(307, { Location: "/api/v2/system/health" });
      return res.end();
    }
    if (h.headers["api-key"] !== API_KEY) return this.error(res, 401, "api_key_not_found", "API key not found", false);
    let req;
    try {
      req = JSON.parse(utf8(openEnvelope(KEY, JSON.parse(raw).encrypted)));
    } catch {
      return this.error(res, 400, "decryption_failed", "Invalid encrypted payload format", false);
    }
    const path = url.slice("/api/v2/".length);
    this.requests.push({ path, headers: h.headers, req });
    if (path !== "system/time") {
      const ts = req.request_timestamp;
      if (ts === undefined) return this.error(res, 400, "request_timestamp_missing", "request_timestamp is required", false);
      if (!Number.isSafeInteger(ts)) return this.error(res, 400, "request_timestamp_invalid", "bad request_timestamp", false);
      if (Math.abs(this.now() - ts) > 30_000_000) {
        return this.error(res, 400, "request_timestamp_out_of_window", "request_timestamp is outside the allowed window", false);
      }
      const triple = `${path} ${ts}`;
      if (this.seen.has(triple)) return this.error(res, 400, "duplicate_request", "Duplicate request", false);
      this.seen.add(triple);
    }
    switch (path) {
      case "system/health":
        return this.ok(res, { status: "ok" });
      case "system/time":
        return this.ok(res, { timestamp: this.now() });
      case "project/balance":
        return this.ok(res, { available: "1000.00", currency: "usdt" });
      case "users/create": {
        if (this.users.has(req.external_user_id)) return this.error(res, 409, "user_already_exists", "User already exists", true);
        const user = { user_id: "6b01f8616a3bd9d83c93eb62", external_user_id: req.external_user_id };
        this.users.set(req.external_user_id, user);
        return this.ok(res, user);
      }
      case "users/get": {
        const user = this.users.get(req.external_user_id);
        return user ? this.ok(res, user) : this.error(res, 404, "user_not_found", "User not found", true);
      }
      case "orders/check": {
        if (req.order_id === "missing") return this.error(res, 404, "order_not_found", "Order not found", true);
        this.orderPolls += 1;
        const done = this.orderPolls > this.pollsUntilDone;
        return this.ok(res, { order_id: req.order_id, status: done ? (req.order_id === "bad" ? "failed" : "completed") : "processing" });
      }
      case "disputes/create":
      case "disputes/get":
      case "disputes/withdraw":
      case "disputes/evidence/add":
      case "disputes/evidence/get":
      case "simulate/disputes/advance":
        if (req.probe === undefined) return this.dispute(res, path, req, h.headers);
        return this.ok(res, { echo: path });
      case "cards/statement":
      case "project/statement":
        if (req.probe === undefined) return this.statement(res, path, req);
        return this.ok(res, { echo: path });
      case "reports/create":
        if (req.probe !== undefined) return this.ok(res, { echo: path });
        if (!["card_transactions", "ledger_entries", "cards", "disputes"].includes(req.type)) {
          return this.error(res, 400, "validation_error", "type must be one of: card_transactions, ledger_entries, cards, disputes", true);
        }
        return this.ok(res, { report_id: "r0000000000000000000001", status: "processing" });
      case "reports/get":
        if (req.probe !== undefined) return this.ok(res, { echo: path });
        if (req.report_id !== "r0000000000000000000001") return this.error(res, 404, "report_not_found", "Report not found", true);
        return this.ok(res, {
          report_id: req.report_id, type: "cards", format: "csv", status: "ready", row_count: 1, size: REPORT_CSV.length,
          sha256: "00", download_url: `${this.url}/reports/${"t".repeat(43)}`,
        });
      default:
        if (Object.values(ENDPOINTS).includes(path)) return this.ok(res, { echo: path });
        return this.error(res, 404, "not_found", "Not found", true);
    }
  }

  /**
   * Disputes in the shapes of docs/api.md: one open dispute per transaction, evidence
   * checked against its type's first bytes, final states refuse changes.
   * @param {any} res @param {string} path @param {any} req @param {http.IncomingHttpHeaders} headers
   */
  dispute(res, path, req, headers) {
    const now = "2026-11-29T04:00:00.000000Z";
    const find = () => this.disputes.get(req.dispute_id);
    const isFinal = (/** @type {any} */ d) => ["won", "lost", "withdrawn"].includes(d.status);
    const moveTo = (/** @type {any} */ d, /** @type {string} */ to, /** @type {string | null} */ reason) => {
      d.status = to;
      d.updated_at = now;
      if (reason !== null) {
        d.resolution_reason = reason;
        d.resolved_at = now;
      }
      d.timeline.push({ at: now, status: to, note: null });
    };
    switch (path) {
      case "disputes/create": {
        if (req.idempotency_key === undefined && headers["idempotency-key"] === undefined) {
          return this.error(res, 400, "idempotency_key_required", "Idempotency key is required", true);
        }
        if (req.transaction_id === "missing") return this.error(res, 404, "transaction_not_found", "Transaction not found", true);
        if (req.transaction_id === "old") return this.error(res, 422, "dispute_window_closed", "The dispute window has closed", true);
        if ([...this.disputes.values()].some((d) => d.transaction_id === req.transaction_id && !isFinal(d))) {
          return this.error(res, 409, "dispute_already_exists", "This transaction already has an open dispute", true);
        }
        const d = {
          dispute_id: `d${String(this.disputes.size + 1).padStart(23, "0")}`,
          transaction_id: req.transaction_id,
          card_id: "c1",
          external_user_id: "alice",
          amount: req.amount ?? "32.00",
          currency: "usdt",
          reason: req.reason,
          customer_note: req.customer_note ?? null,
          status: "submitted",
          resolution_reason: null,
          provisional_credit: req.provisional_credit ?? false,
          evidence: /** @type {any[]} */ ([]),
          timeline: [{ at: now, status: "submitted", note: null }],
          created_at: now,
          updated_at: now,
          resolved_at: null,
        };
        this.disputes.set(d.dispute_id, d);
        return this.ok(res, d);
      }
      case "disputes/get": {
        const d = find();
        return d ? this.ok(res, d) : this.error(res, 404, "dispute_not_found", "Dispute not found", true);
      }
      case "disputes/withdraw": {
        const d = find();
        if (!d) return this.error(res, 404, "dispute_not_found", "Dispute not found", true);
        if (isFinal(d)) return this.error(res, 422, "invalid_status_transition", "The dispute is final", true);
        moveTo(d, "withdrawn", "withdrawn");
        return this.ok(res, d);
      }
      case "simulate/disputes/advance": {
        const d = find();
        if (!d) return this.error(res, 404, "dispute_not_found", "Dispute not found", true);
        if (isFinal(d)) return this.error(res, 422, "invalid_status_transition", "The dispute is final", true);
        const reason = req.to === "won" ? (req.resolution_reason ?? "won_first_chargeback") : req.to === "lost" ? (req.resolution_reason ?? "case_lost") : null;
        moveTo(d, req.to, reason);
        return this.ok(res, d);
      }
      case "disputes/evidence/add": {
        const d = find();
        if (!d) return this.error(res, 404, "dispute_not_found", "Dispute not found", true);
        if (isFinal(d)) return this.error(res, 422, "invalid_status_transition", "The dispute is final", true);
        const bytes = Buffer.from(req.content, "base64");
        if (req.content_type !== "application/pdf" || bytes.subarray(0, 5).toString("latin1") !== "%PDF-") {
          return this.error(res, 400, "validation_error", "content does not match content_type", true);
        }
        const meta = {
          evidence_id: `e${String(d.evidence.length + 1).padStart(23, "0")}`,
          filename: req.filename,
          content_type: req.content_type,
          size: bytes.length,
          sha256: createHash("sha256").update(bytes).digest("hex"),
          created_at: now,
        };
        d.evidence.push({ ...meta, _content: req.content });
        return this.ok(res, meta);
      }
      case "disputes/evidence/get": {
        const d = find();
        if (!d) return this.error(res, 404, "dispute_not_found", "Dispute not found", true);
        const e = d.evidence.find((/** @type {any} */ x) => x.evidence_id === req.evidence_id);
        if (!e) return this.error(res, 404, "evidence_not_found", "Evidence not found", true);
        const { _content, ...meta } = e;
        return this.ok(res, { ...meta, dispute_id: d.dispute_id, content: _content });
      }
    }
    return this.error(res, 404, "not_found", "Not found", true);
  }

  /**
   * Statements in the shapes of docs/api.md: the month of its example (topup 100,
   * purchase 30, refund 5, a hold of 12.50, a dispute credit of 10), the same checks.
   * @param {any} res @param {string} path @param {any} req
   */
  statement(res, path, req) {
    if (typeof req.period !== "string" || !/^\d{4}-(0[1-9]|1[0-2])$/.test(req.period)) {
      return this.error(res, 400, "validation_error", "period must be a month, YYYY-MM", true);
    }
    if (req.period > "2026-11") return this.error(res, 400, "validation_error", `period ${req.period} is in the future`, true);
    const skip = req.skip ?? 0;
    const limit = req.limit ?? 100;
    if (!(limit >= 1 && limit <= 500)) return this.error(res, 400, "validation_error", "limit must be between 1 and 500", true);
    if (skip > 10_000_000) return this.error(res, 400, "validation_error", "skip must be at most 10000000", true);
    if (path === "project/statement") {
      const items = [
        { id: "101", type: "deposit", amount: "1000.00", balance_after: "1000.00", currency: "usdt", transfer_id: "tr1", order_id: null, card_id: null, reference: "tx-1", created_at: "2026-11-02T09:00:00.000000Z" },
        { id: "102", type: "card_issue", amount: "-2.00", balance_after: "998.00", currency: "usdt", transfer_id: "tr2", order_id: "o0", card_id: "c1", reference: null, created_at: "2026-11-02T09:01:00.000000Z" },
      ];
      const totals = { deposits: "1000.00", card_issue_fees: "-2.00", card_topups: "0.00", card_withdrawals: "0.00", card_closes: "0.00", disputes: "0.00", shortfalls: "0.00", adjustments: "0.00" };
      return this.ok(res, { period: req.period, opening_balance: "0.00", closing_balance: "998.00", totals, items: items.slice(skip, skip + limit), total: items.length, skip, limit });
    }
    if (req.card_id !== "c1") return this.error(res, 404, "card_not_found", "Card not found", true);
    if (req.external_user_id !== undefined && req.external_user_id !== "alice") {
      return this.error(res, 422, "card_user_mismatch", "Card does not belong to this user", true);
    }
    const item = (/** @type {string} */ at, /** @type {string} */ kind, /** @type {string} */ amount, /** @type {string} */ after, /** @type {Record<string, unknown>} */ ids, /** @type {string} */ description) =>
      ({ at: `2026-11-${at}Z`, kind, amount, balance_after: after, transaction_id: null, order_id: null, ...ids, description });
    const items = [
      item("03T10:00:00.000000", "topup", "100.00", "100.00", { order_id: "o1" }, "Topup"),
      item("04T12:30:00.000000", "purchase", "-30.00", "70.00", { transaction_id: "t1" }, 'Purchase: Corner, "Shop"'),
      item("05T08:00:00.000000", "refund", "5.00", "75.00", { transaction_id: "t2" }, 'Refund: Corner, "Shop"'),
      item("06T16:45:00.000000", "dispute_credit", "10.00", "85.00", { dispute_id: "d1" }, "Dispute credit: Corner, \"Shop\""),
    ];
    const totals = { topups: "100.00", withdrawals: "0.00", purchases: "-30.00", refunds: "5.00", dispute_credits: "10.00", dispute_debits: "0.00", fees: "0.00", other: "0.00" };
    const month = req.period === "2026-11";
    return this.ok(res, {
      card_id: req.card_id,
      period: req.period,
      opening_balance: "0.00",
      closing_balance: month ? "85.00" : "0.00",
      pending_at_close: month ? "12.50" : "0.00",
      totals: month ? totals : Object.fromEntries(Object.keys(totals).map((k) => [k, "0.00"])),
      items: month ? items.slice(skip, skip + limit) : [],
      total: month ? items.length : 0,
      skip,
      limit,
    });
  }
}

describe("client against a fake server", () => {
  /** @type {FakeServer} */
  let fake;
  /** @type {IssuingClient} */
  let client;

  before(async () => {
    fake = new FakeServer();
    await fake.start();
    client = new IssuingClient(`${fake.url}/`, API_KEY, API_SECRET, { timeoutMs: 5000 });
  });
  after(async () => {
    await fake.stop();
  });

  test("seals the request, sends API-KEY, opens the answer", async () => {
    const beforeTs = Date.now() * 1000;
    const user = await client.usersCreate({ external_user_id: "alice" });
    assert.equal(user.success, true);
    assert.equal(user.external_user_id, "alice");
    const last = fake.requests.at(-1);
    assert.ok(last);
    assert.equal(last.path, "users/create");
    assert.equal(last.headers["api-key"], API_KEY);
    assert.equal(last.headers["content-type"], "application/json");
    assert.equal(last.headers["idempotency-key"], undefined);
    assert.ok(Number.isInteger(last.req.request_timestamp));
    assert.ok(last.req.request_timestamp >= beforeTs);
    assert.equal(last.req.external_user_id, "alice");
  });

  test("parallel calls on one path get distinct timestamps", async () => {
    const answers = await Promise.all(Array.from({ length: 50 }, () => client.systemHealth()));
    assert.equal(answers.length, 50);
    const ts = fake.requests.filter((r) => r.path === "system/health").map((r) => r.req.request_timestamp);
    assert.equal(new Set(ts).size, ts.length);
  });

  test("sends the Idempotency-Key header when asked", async () => {
    await client.cardsTopup({ card_id: "c1", amount: "25" }, { idempotencyKey: "topup-1" });
    const last = fake.requests.at(-1);
    assert.equal(last?.path, "cards/topup");
    assert.equal(last?.headers["idempotency-key"], "topup-1");
  });

  test("a sealed API error is a typed IssuingError", async () => {
    await assert.rejects(client.usersGet({ external_user_id: "nobody" }), (e) => {
      assert.ok(e instanceof IssuingError);
      assert.equal(e.status, 404);
      assert.equal(e.slug, "user_not_found");
      assert.equal(e.message, "User not found");
      assert.equal(e.path, "users/get");
      return true;
    });
  });

  test("a plain error before authentication is a typed IssuingError", async () => {
    const wrongKey = new IssuingClient(fake.url, "pk_wrong", API_SECRET);
    await assert.rejects(wrongKey.systemHealth(), { name: "IssuingError", status: 401, slug: "api_key_not_found" });
    const wrongSecret = new IssuingClient(fake.url, API_KEY, "wrong secret");
    await assert.rejects(wrongSecret.systemHealth(), { name: "IssuingError", status: 400, slug: "decryption_failed" });
  });

  test("protocol violations are decode errors", async () => {
    await assert.rejects(client.call("raw/notjson"), { name: "IssuingClientError", kind: "decode", status: 502 });
    await assert.rejects(client.call("raw/plainsuccess"), /not sealed/);
    await assert.rejects(client.call("raw/redirect"), { name: "IssuingClientError", kind: "decode", status: 307 });
  });

  test("transport failures and timeouts", async () => {
    const dead = new IssuingClient("http://127.0.0.1:1", API_KEY, API_SECRET, { timeoutMs: 2000 });
    await assert.rejects(dead.systemHealth(), { name: "IssuingClientError", kind: "transport" });
    await assert.rejects(client.call("raw/slow", {}, { timeoutMs: 200 }), { name: "IssuingClientError", kind: "timeout" });
  });

  test("bad input is refused before anything is sent", () => {
    assert.throws(() => new IssuingClient("ftp://x", API_KEY, API_SECRET), { kind: "config" });
    assert.throws(() => new IssuingClient(fake.url, "", API_SECRET), { kind: "config" });
    assert.throws(() => new IssuingClient(fake.url, API_KEY, ""), { kind: "config" });
    assert.throws(() => IssuingClient.fromEnv({}), /ISSUING_BASE_URL/);
    return assert.rejects(client.call("../etc", {}), { kind: "config" });
  });

  test("the secret never shows", () => {
    const c = new IssuingClient(fake.url, API_KEY, API_SECRET);
    assert.ok(!String(c).includes(API_SECRET));
    assert.ok(!JSON.stringify(c).includes(hex(KEY)));
    assert.ok(!Object.keys(c).some((k) => k.includes("key") && k !== "apiKey"));
  });

  test("learns the clock offset on demand and after an out-of-window refusal", async () => {
    fake.clockOffsetMicros = 120_000_000; // the server is 2 minutes ahead
    try {
      const c = new IssuingClient(fake.url, API_KEY, API_SECRET, { syncClockOnSkew: false });
      await assert.rejects(c.projectBalance(), { slug: "request_timestamp_out_of_window" });
      const offset = await c.syncClock();
      assert.ok(Math.abs(offset - 120_000_000) < 1_000_000, String(offset));
      assert.equal((await c.projectBalance()).available, "1000.00");

      const auto = new IssuingClient(fake.url, API_KEY, API_SECRET);
      const n = fake.requests.length;
      assert.equal((await auto.projectBalance()).currency, "usdt");
      assert.deepEqual(fake.requests.slice(n).map((r) => r.path), ["project/balance", "system/time", "project/balance"]);
      assert.ok(Math.abs(auto.clockOffsetMicros - 120_000_000) < 1_000_000);
    } finally {
      fake.clockOffsetMicros = 0;
    }
  });

  test("waitOrder polls until the order finishes", async () => {
    fake.orderPolls = 0;
    fake.pollsUntilDone = 2;
    const order = await client.waitOrder("o1", { intervalMs: 10 });
    assert.equal(order.status, "completed");
    assert.equal(fake.orderPolls, 3);
    fake.orderPolls = 0;
    assert.equal((await client.waitOrder("bad", { intervalMs: 10 })).status, "failed");
    fake.orderPolls = 0;
    fake.pollsUntilDone = 1_000_000;
    await assert.rejects(client.waitOrder("o2", { timeoutMs: 100, intervalMs: 10 }), { kind: "timeout" });
    await assert.rejects(client.waitOrder("missing"), { slug: "order_not_found" });
  });

  test("disputes: create with a key, evidence as bytes, withdraw, typed errors", async () => {
    const dispute = await client.disputesCreate(
      { transaction_id: "t1", reason: "goods_services_not_received", customer_note: "never arrived", provisional_credit: true },
      { idempotencyKey: "dispute-t1" },
    );
    assert.equal(fake.requests.at(-1)?.path, "disputes/create");
    assert.equal(fake.requests.at(-1)?.headers["idempotency-key"], "dispute-t1");
    assert.equal(dispute.status, "submitted");
    assert.equal(dispute.resolution_reason, null);
    assert.equal(dispute.provisional_credit, true);
    assert.deepEqual(dispute.timeline.map((/** @type {any} */ t) => t.status), ["submitted"]);

    await assert.rejects(client.disputesCreate({ transaction_id: "t1", reason: "other", idempotency_key: "dispute-t1b" }), {
      name: "IssuingError", status: 409, slug: "dispute_already_exists", path: "disputes/create",
    });
    await assert.rejects(client.disputesCreate({ transaction_id: "missing", reason: "other", idempotency_key: "k" }), { status: 404, slug: "transaction_not_found" });
    await assert.rejects(client.disputesCreate({ transaction_id: "old", reason: "other", idempotency_key: "k2" }), { status: 422, slug: "dispute_window_closed" });
    await assert.rejects(client.disputesGet({ dispute_id: "nope" }), { status: 404, slug: "dispute_not_found" });

    // Bytes go out as standard padded base64 and come back byte for byte.
    const pdf = new Uint8Array(Buffer.from("%PDF-1.4\n\xff\xfe receipt", "latin1"));
    const meta = await client.disputesEvidenceAdd({ dispute_id: dispute.dispute_id, filename: "receipt.pdf", content_type: "application/pdf", content: pdf });
    assert.equal(fake.requests.at(-1)?.req.content, Buffer.from(pdf).toString("base64"));
    assert.equal(meta.size, pdf.length);
    assert.equal(meta.sha256, createHash("sha256").update(pdf).digest("hex"));
    const file = await client.disputesEvidenceGet({ dispute_id: dispute.dispute_id, evidence_id: meta.evidence_id });
    assert.equal(file.dispute_id, dispute.dispute_id);
    assert.deepEqual(decodeBase64(file.content), pdf);
    await assert.rejects(client.disputesEvidenceGet({ dispute_id: dispute.dispute_id, evidence_id: "nope" }), { status: 404, slug: "evidence_not_found" });
    // A string is sent as it is: the caller's own base64.
    await assert.rejects(
      client.disputesEvidenceAdd({ dispute_id: dispute.dispute_id, filename: "x.png", content_type: "image/png", content: Buffer.from("%PDF-").toString("base64") }),
      { status: 400, slug: "validation_error" },
    );

    const withdrawn = await client.disputesWithdraw({ dispute_id: dispute.dispute_id });
    assert.equal(withdrawn.status, "withdrawn");
    assert.equal(withdrawn.resolution_reason, "withdrawn");
    assert.deepEqual(withdrawn.timeline.map((/** @type {any} */ t) => t.status), ["submitted", "withdrawn"]);
    await assert.rejects(client.disputesWithdraw({ dispute_id: dispute.dispute_id }), { status: 422, slug: "invalid_status_transition" });
    await assert.rejects(
      client.disputesEvidenceAdd({ dispute_id: dispute.dispute_id, filename: "r.pdf", content_type: "application/pdf", content: pdf }),
      { status: 422, slug: "invalid_status_transition" },
    );

    // A final dispute frees its transaction; the sandbox plays the network.
    const again = await client.disputesCreate({ transaction_id: "t1", reason: "fraud_card_not_present", idempotency_key: "dispute-t1c" });
    const moved = await client.simulateDisputesAdvance({ dispute_id: again.dispute_id, to: "representment" });
    assert.equal(moved.status, "representment");
    const won = await client.simulateDisputesAdvance({ dispute_id: again.dispute_id, to: "won", resolution_reason: "won_arbitration" });
    assert.equal(won.resolution_reason, "won_arbitration");
    assert.deepEqual(fake.requests.at(-1)?.req, { request_timestamp: fake.requests.at(-1)?.req.request_timestamp, dispute_id: again.dispute_id, to: "won", resolution_reason: "won_arbitration" });
  });

  test("statements: a card's month adds up, pages, the project's month, typed errors", async () => {
    const s = await client.cardsStatement({ card_id: "c1", external_user_id: "alice", period: "2026-11" });
    assert.deepEqual(fake.requests.at(-1)?.req, { request_timestamp: fake.requests.at(-1)?.req.request_timestamp, card_id: "c1", external_user_id: "alice", period: "2026-11" });
    assert.equal(s.success, true);
    assert.equal(s.period, "2026-11");
    assert.deepEqual([s.opening_balance, s.closing_balance, s.pending_at_close], ["0.00", "85.00", "12.50"]);
    assert.deepEqual(s.items.map((i) => i.kind), ["topup", "purchase", "refund", "dispute_credit"]);
    // Amounts are decimal strings: add them in cents, never as floats.
    const cents = (/** @type {string} */ a) => Math.round(Number(a) * 100);
    const sum = s.items.reduce((acc, i) => acc + cents(i.amount), 0);
    assert.equal(cents(s.opening_balance) + sum, cents(s.closing_balance));
    assert.equal(Object.values(s.totals).reduce((acc, t) => acc + cents(t), 0), sum);
    assert.equal(s.items[1].transaction_id, "t1");
    assert.equal(s.items[1].description, 'Purchase: Corner, "Shop"');
    assert.equal(s.items[0].order_id, "o1");
    assert.equal(s.items[0].transaction_id, null);
    assert.equal(s.items[3].dispute_id, "d1");
    assert.equal(s.items[3].transaction_id, null);
    assert.equal(s.items[0].dispute_id, undefined);

    const page = await client.cardsStatement({ card_id: "c1", period: "2026-11", skip: 1, limit: 2 });
    assert.deepEqual(fake.requests.at(-1)?.req.skip, 1);
    assert.deepEqual(page.items.map((i) => i.kind), ["purchase", "refund"]);
    assert.deepEqual([page.total, page.skip, page.limit], [4, 1, 2]);
    assert.deepEqual(page.totals, s.totals, "totals cover the whole period whatever the page");

    const p = await client.projectStatement({ period: "2026-11" });
    assert.equal(fake.requests.at(-1)?.path, "project/statement");
    assert.equal(p.closing_balance, "998.00");
    assert.equal(p.items[0].type, "deposit");
    assert.equal(p.totals.card_issue_fees, "-2.00");

    for (const period of ["2026-1", "2026-13", "2999-01", "2026/11"]) {
      await assert.rejects(client.cardsStatement({ card_id: "c1", period }), { name: "IssuingError", status: 400, slug: "validation_error", path: "cards/statement" }, period);
    }
    await assert.rejects(client.projectStatement({ period: "2026-11", limit: 501 }), { status: 400, slug: "validation_error", path: "project/statement" });
    await assert.rejects(client.cardsStatement({ card_id: "c1", period: "2026-11", limit: 0 }), { status: 400, slug: "validation_error" });
    await assert.rejects(client.cardsStatement({ card_id: "nope", period: "2026-11" }), { status: 404, slug: "card_not_found" });
    await assert.rejects(client.cardsStatement({ card_id: "c1", external_user_id: "bob", period: "2026-11" }), { status: 422, slug: "card_user_mismatch" });
  });

  test("reports: create, get, download", async () => {
    const created = await client.reportsCreate({ type: "cards", from: "2026-01-01T00:00:00Z", to: "2026-01-31T00:00:00Z", format: "csv" });
    assert.equal(created.status, "processing");
    await assert.rejects(client.reportsCreate({ type: "payments", from: "x", to: "y", format: "csv" }), { status: 400, slug: "validation_error" });
    const report = await client.reportsGet({ report_id: created.report_id });
    assert.equal(report.status, "ready");
    const file = await client.reportsDownload(/** @type {string} */ (report.download_url));
    assert.equal(file, REPORT_CSV);
    await assert.rejects(client.reportsDownload(`${fake.url}/reports/expired`), (e) => {
      assert.equal(/** @type {any} */ (e).kind, "transport");
      assert.equal(/** @type {any} */ (e).status, 410);
      assert.ok(!String(/** @type {any} */ (e).message).includes("expired"), "the URL stays out of the message");
      return true;
    });
    await assert.rejects(client.reportsGet({ report_id: "nope" }), { status: 404, slug: "report_not_found" });
  });

  test("every endpoint has its method, calling its path", async () => {
    const paths = Object.values(ENDPOINTS);
    assert.equal(paths.length, 60);
    for (const [method, path] of Object.entries(ENDPOINTS)) {
      assert.equal(typeof (/** @type {any} */ (client)[method]), "function", method);
      if (path === "orders/check" || path.startsWith("users/")) continue;
      const n = fake.requests.length;
      await /** @type {any} */ (client)[method]({ probe: method });
      const r = fake.requests[n];
      assert.equal(r.path, path, method);
      assert.equal(r.req.probe, method);
    }
  });
});

describe("decision endpoint answers", () => {
  const client = new IssuingClient("http://127.0.0.1:9", API_KEY, API_SECRET);

  test("seals approvals and declines with the project's key", () => {
    const approve = JSON.parse(client.sealDecision(true));
    assert.deepEqual(JSON.parse(Buffer.from(openEnvelope(KEY, approve.encrypted)).toString("utf8")), { approved: true });
    const decline = JSON.parse(client.sealDecision(false, "velocity"));
    assert.deepEqual(JSON.parse(Buffer.from(openEnvelope(KEY, decline.encrypted)).toString("utf8")), { approved: false, reason: "velocity" });
  });
});

describe("webhooks", () => {
  const client = new IssuingClient("http://127.0.0.1:9", API_KEY, API_SECRET);
  const event = { event_type: "card.freeze", delivery_id: "d1", project_id: "p1", data: { card_id: "c1", status: "frozen" } };
  const body = sealJson(KEY, event);

  test("opens a delivery with node, fetch and plain headers", () => {
    assert.deepEqual(client.openWebhook({ "api-key": API_KEY, "content-type": "application/json" }, body), event);
    assert.deepEqual(client.openWebhook(new Headers({ "API-KEY": ` ${API_KEY} ` }), Buffer.from(body)), event);
    assert.deepEqual(client.openWebhook({ "API-KEY": API_KEY }, JSON.parse(body)), event);
  });

  test("refuses a wrong or missing API-KEY, a foreign key, garbage", () => {
    assert.throws(() => client.openWebhook({}, body), { kind: "webhook" });
    assert.throws(() => client.openWebhook({ "api-key": "pk_other" }, body), /API-KEY/);
    const foreign = sealJson(deriveKey("another secret"), event);
    assert.throws(() => client.openWebhook({ "api-key": API_KEY }, foreign), /does not open/);
    assert.throws(() => client.openWebhook({ "api-key": API_KEY }, "not json"), /not JSON/);
    assert.throws(() => client.openWebhook({ "api-key": API_KEY }, "{}"), /encrypted/);
    const array = JSON.stringify({ encrypted: seal(KEY, "[1,2]") });
    assert.throws(() => client.openWebhook({ "api-key": API_KEY }, array), /not a JSON object/);
  });

  test("works inside an http receiver", async () => {
    /** @type {any[]} */
    const received = [];
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        try {
          received.push(client.openWebhook(req.headers, Buffer.concat(chunks)));
          res.writeHead(200, { "Content-Type": "application/json" }).end('{"success":true}');
        } catch {
          res.writeHead(400).end('{"success":false}');
        }
      });
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", () => r(undefined)));
    const port = /** @type {import("node:net").AddressInfo} */ (server.address()).port;
    try {
      const good = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers: { "API-KEY": API_KEY }, body });
      assert.equal(good.status, 200);
      const bad = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", headers: { "API-KEY": "nope" }, body });
      assert.equal(bad.status, 400);
      assert.deepEqual(received, [event]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(() => r(undefined)));
    }
  });
});
