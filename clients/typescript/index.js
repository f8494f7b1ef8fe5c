// A client for the card-issuing API (`/api/v2`), for Node.js >= 20.
//
// Every endpoint is `POST {baseUrl}/api/v2/<path>` with the header `API-KEY` and the body
// `{"encrypted": base64(0x02 ‖ nonce ‖ secretbox(json))}`; the key is SHA-256 of the UTF-8
// API secret, and the sealed JSON holds `request_timestamp` (integer microseconds) and the
// endpoint's fields at the root. Answers are sealed the same way, except the plain errors
// the server sends before it can use the key. See docs/api.md.
//
//     import { IssuingClient } from "issuing-client";
//     const client = new IssuingClient("http://127.0.0.1:8080", "pk_...", "sk_...");
//     const balance = await client.projectBalance();   // {success: true, available, currency}
//
// Successful answers resolve to the whole opened JSON object. API errors reject with an
// `IssuingError` (status, slug, message); transport and protocol failures with an
// `IssuingClientError` (kind: "config" | "transport" | "timeout" | "decode" | "webhook").
//
// Plain ES module with JSDoc types; `index.d.ts` holds the types for TypeScript users.

import { createHash, randomBytes } from "node:crypto";
import nacl from "tweetnacl";

/** First byte of every envelope. */
export const VERSION = 0x02;
/** Nonce length of XSalsa20-Poly1305 (secretbox). */
export const NONCE_LENGTH = 24;
/** Length of the Poly1305 MAC at the start of a secretbox. */
export const MAC_LENGTH = 16;
/** The server accepts a `request_timestamp` this far from its clock (microseconds). */
export const TIMESTAMP_WINDOW_MICROS = 30_000_000;
/** Default timeout of one call, from sending to the end of the answer. */
export const DEFAULT_TIMEOUT_MS = 30_000;

const USER_AGENT = "issuing-client-js/0.1";

/**
 * An error answered by the API: `{"success": false, "error", "error_slug"}` with a 4xx/5xx
 * status, sealed or plain. Branch on `slug`; the message text may change.
 */
export class IssuingError extends Error {
  /**
   * @param {number} status HTTP status.
   * @param {string} slug `error_slug` (`unknown_error` when the body had none).
   * @param {string} message `error`, the readable message.
   * @param {Record<string, unknown>} [body] The whole error body.
   * @param {string} [path] The endpoint that answered it.
   */
  constructor(status, slug, message, body = {}, path = "") {
    super(message);
    this.name = "IssuingError";
    /** @type {number} */
    this.status = status;
    /** @type {string} */
    this.slug = slug;
    /** @type {Record<string, unknown>} */
    this.body = body;
    /** @type {string} */
    this.path = path;
  }

  toString() {
    return `${this.name}: ${this.message} (${this.slug}, HTTP ${this.status}${this.path ? `, ${this.path}` : ""})`;
  }
}

/**
 * Anything that is not an API answer: bad input to the client ("config"), a failed or
 * timed-out request ("transport", "timeout"), an answer that is not the protocol
 * ("decode": not JSON, an envelope that does not open with this key, ...), or a webhook
 * delivery that is refused ("webhook").
 */
export class IssuingClientError extends Error {
  /**
   * @param {"config"|"transport"|"timeout"|"decode"|"webhook"} kind
   * @param {string} message
   * @param {{status?: number, path?: string, cause?: unknown}} [extra]
   */
  constructor(kind, message, extra = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = "IssuingClientError";
    /** @type {"config"|"transport"|"timeout"|"decode"|"webhook"} */
    this.kind = kind;
    /** @type {number | undefined} */
    this.status = extra.status;
    /** @type {string | undefined} */
    this.path = extra.path;
  }
}

// ---------------------------------------------------------------------------------------
// Envelope

/**
 * The 32-byte secretbox key of a project: SHA-256 of the secret's UTF-8 bytes.
 * @param {string} apiSecret
 * @returns {Uint8Array}
 */
export function deriveKey(apiSecret) {
  if (typeof apiSecret !== "string") {
    throw new IssuingClientError("config", "the API secret must be a string");
  }
  return new Uint8Array(createHash("sha256").update(apiSecret, "utf8").digest());
}

/** @param {string | Uint8Array} data */
function toBytes(data) {
  if (typeof data === "string") return new Uint8Array(Buffer.from(data, "utf8"));
  if (data instanceof Uint8Array) return data;
  throw new IssuingClientError("config", "expected a string or a Uint8Array");
}

/**
 * Seals `plaintext` into standard padded base64 of `0x02 ‖ nonce ‖ secretbox(plaintext)`.
 * Leave `nonce` out except in tests: a fresh random nonce per message is what keeps
 * secretbox secure.
 * @param {Uint8Array} key 32 bytes, from {@link deriveKey}.
 * @param {string | Uint8Array} plaintext A string is encoded as UTF-8.
 * @param {Uint8Array} [nonce] 24 bytes.
 * @returns {string}
 */
export function seal(key, plaintext, nonce) {
  checkKey(key);
  const n = nonce ?? new Uint8Array(randomBytes(NONCE_LENGTH));
  if (!(n instanceof Uint8Array) || n.length !== NONCE_LENGTH) {
    throw new IssuingClientError("config", `the nonce must be ${NONCE_LENGTH} bytes`);
  }
  const box = nacl.secretbox(toBytes(plaintext), n, key); // MAC ‖ ciphertext
  const out = new Uint8Array(1 + NONCE_LENGTH + box.length);
  out[0] = VERSION;
  out.set(n, 1);
  out.set(box, 1 + NONCE_LENGTH);
  return Buffer.from(out).toString("base64");
}

/**
 * Decodes base64 as the server does: standard or URL-safe alphabet, padded or not,
 * surrounding ASCII whitespace ignored; a string that mixes the alphabets is refused.
 * @param {string} text
 * @returns {Uint8Array}
 */
export function decodeBase64(text) {
  if (typeof text !== "string") throw new IssuingClientError("decode", "base64 text must be a string");
  const s = text.replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, "");
  const body = s.replace(/={1,2}$/, "");
  const standard = /^[A-Za-z0-9+/]*$/.test(body);
  const urlSafe = /^[A-Za-z0-9_-]*$/.test(body);
  if (!standard && !urlSafe) throw new IssuingClientError("decode", "invalid base64");
  if (body.length % 4 === 1) throw new IssuingClientError("decode", "invalid base64 length");
  if (s.length !== body.length && (s.length - body.length !== (4 - (body.length % 4)) % 4)) {
    throw new IssuingClientError("decode", "invalid base64 padding");
  }
  return new Uint8Array(Buffer.from(body, urlSafe && !standard ? "base64url" : "base64"));
}

/**
 * Opens an envelope (from the server, a webhook delivery, or {@link seal}). Throws an
 * `IssuingClientError` of kind "decode" when it is malformed or does not open with `key`.
 * @param {Uint8Array} key
 * @param {string} encoded
 * @returns {Uint8Array} The plaintext bytes.
 */
export function openEnvelope(key, encoded) {
  checkKey(key);
  const raw = decodeBase64(encoded);
  if (raw.length === 0) throw new IssuingClientError("decode", "the envelope is empty");
  if (raw[0] !== VERSION) {
    throw new IssuingClientError("decode", `unknown envelope version 0x${raw[0].toString(16).padStart(2, "0")}`);
  }
  if (raw.length < 1 + NONCE_LENGTH + MAC_LENGTH) throw new IssuingClientError("decode", "the envelope is too short");
  const plain = nacl.secretbox.open(raw.subarray(1 + NONCE_LENGTH), raw.subarray(1, 1 + NONCE_LENGTH), key);
  if (!plain) {
    throw new IssuingClientError("decode", "the envelope does not open with this key (wrong API secret?)");
  }
  return plain;
}

/** @param {unknown} key */
function checkKey(key) {
  if (!(key instanceof Uint8Array) || key.length !== 32) {
    throw new IssuingClientError("config", "the key must be 32 bytes (use deriveKey)");
  }
}

/**
 * Seals a JSON object for the wire: the HTTP body `{"encrypted": "..."}` as a string.
 * @param {Uint8Array} key
 * @param {Record<string, unknown>} doc
 * @returns {string}
 */
export function sealJson(key, doc) {
  return JSON.stringify({ encrypted: seal(key, JSON.stringify(doc)) });
}

// ---------------------------------------------------------------------------------------
// Timestamps

let lastTimestamp = 0;

/**
 * A `request_timestamp`: microseconds since the epoch, plus `offsetMicros` (the server
 * clock's lead over ours), strictly increasing within this process. The server refuses a
 * second request with the same (key, path, timestamp) within 30 s, so calls made in the
 * same microsecond still get distinct values. After a large clock correction (more than the
 * server's window) the sequence restarts from the corrected clock: the values it would
 * skip were out of the window, so the server never recorded them.
 * @param {number} [offsetMicros]
 * @returns {number}
 */
export function nextRequestTimestamp(offsetMicros = 0) {
  const now = Date.now() * 1000 + Math.trunc(offsetMicros);
  let next = now;
  if (now <= lastTimestamp && lastTimestamp - now <= TIMESTAMP_WINDOW_MICROS + 5_000_000) {
    next = lastTimestamp + 1;
  }
  lastTimestamp = next;
  return next;
}

// ---------------------------------------------------------------------------------------
// The client

/**
 * @typedef {Record<string, unknown>} Fields
 * @typedef {{ idempotencyKey?: string, timeoutMs?: number, signal?: AbortSignal }} CallOptions
 * @typedef {{ timeoutMs?: number, fetch?: typeof fetch, syncClockOnSkew?: boolean, userAgent?: string }} ClientOptions
 */

/** @param {string} baseUrl */
function normalizeBaseUrl(baseUrl) {
  if (typeof baseUrl !== "string" || !baseUrl.trim()) {
    throw new IssuingClientError("config", "the base URL is empty");
  }
  let url;
  try {
    url = new URL(baseUrl.trim());
  } catch {
    throw new IssuingClientError("config", `the base URL is not a URL: ${baseUrl}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new IssuingClientError("config", `the base URL must be http(s): ${baseUrl}`);
  }
  let s = url.toString().replace(/\/+$/, "");
  if (s.endsWith("/api/v2")) s = s.slice(0, -"/api/v2".length);
  return s;
}

/** @param {string} path */
function normalizePath(path) {
  if (typeof path !== "string") throw new IssuingClientError("config", "the path must be a string");
  let p = path.trim().replace(/^\/+/, "");
  if (p.startsWith("api/v2/")) p = p.slice("api/v2/".length);
  if (!p || !/^[A-Za-z0-9_\-./]+$/.test(p) || p.split("/").some((seg) => seg === "" || seg === "." || seg === "..")) {
    throw new IssuingClientError("config", `not an endpoint path: ${JSON.stringify(path)}`);
  }
  return p;
}

/** @param {string} s */
function preview(s) {
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

/** @param {unknown} v */
function isObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** @param {number} ms @param {AbortSignal} [signal] */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

export class IssuingClient {
  /**
   * A client for one project's credentials on one server.
   * @param {string} baseUrl The server root, e.g. `http://127.0.0.1:8080` (without `/api/v2`).
   * @param {string} apiKey The project's API key (`pk_...`).
   * @param {string} apiSecret The project's API secret (`sk_...`).
   * @param {ClientOptions} [options]
   */
  constructor(baseUrl, apiKey, apiSecret, options = {}) {
    this.baseUrl = normalizeBaseUrl(baseUrl);
    const key = typeof apiKey === "string" ? apiKey.trim() : "";
    if (!key) throw new IssuingClientError("config", "the API key is empty");
    if (/[^\x21-\x7e]/.test(key)) throw new IssuingClientError("config", "the API key holds characters a header cannot carry");
    if (typeof apiSecret !== "string" || !apiSecret) throw new IssuingClientError("config", "the API secret is empty");
    /** @type {string} */
    this.apiKey = key;
    /** @type {number} */
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    /** Microseconds the server clock is ahead of ours; set by {@link syncClock}. */
    this.clockOffsetMicros = 0;
    /** When true (default), a `request_timestamp_out_of_window` answer makes the client
     * learn the server clock from `system/time` and send the call once more. The server
     * refuses such a request before recording or running it, so this is safe. */
    this.syncClockOnSkew = options.syncClockOnSkew ?? true;
    this.userAgent = options.userAgent ?? USER_AGENT;
    const key32 = deriveKey(apiSecret);
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== "function") throw new IssuingClientError("config", "no fetch implementation (Node >= 20 has one)");
    // Kept off enumerable properties so console.log(client) never shows the key material.
    Object.defineProperty(this, "_key", { value: key32, enumerable: false });
    Object.defineProperty(this, "_fetch", { value: fetchImpl, enumerable: false });
  }

  /**
   * A client from `ISSUING_BASE_URL`, `ISSUING_API_KEY` and `ISSUING_API_SECRET`.
   * @param {Record<string, string | undefined>} [env]
   * @param {ClientOptions} [options]
   * @returns {IssuingClient}
   */
  static fromEnv(env = process.env, options = {}) {
    const missing = ["ISSUING_BASE_URL", "ISSUING_API_KEY", "ISSUING_API_SECRET"].filter((n) => !env[n]);
    if (missing.length) throw new IssuingClientError("config", `missing ${missing.join(", ")}`);
    return new IssuingClient(/** @type {string} */ (env.ISSUING_BASE_URL), /** @type {string} */ (env.ISSUING_API_KEY), /** @type {string} */ (env.ISSUING_API_SECRET), options);
  }

  /** @returns {string} */
  toString() {
    return `IssuingClient(${this.baseUrl}, apiKey=${this.apiKey})`;
  }

  [Symbol.for("nodejs.util.inspect.custom")]() {
    return this.toString();
  }

  /**
   * The full URL of an endpoint, e.g. `http://host/api/v2/cards/get`.
   * @param {string} path
   */
  endpointUrl(path) {
    return `${this.baseUrl}/api/v2/${normalizePath(path)}`;
  }

  /**
   * Calls any endpoint: `body` holds its fields (`request_timestamp` is added unless
   * present). Resolves to the opened success body; rejects with `IssuingError` for an API
   * error and `IssuingClientError` for everything else.
   * @param {string} path e.g. `"cards/freeze"`.
   * @param {Fields} [body]
   * @param {CallOptions} [options]
   * @returns {Promise<Record<string, any>>}
   */
  async call(path, body = {}, options = {}) {
    try {
      return await this._callOnce(path, body, options);
    } catch (e) {
      if (
        this.syncClockOnSkew &&
        e instanceof IssuingError &&
        e.slug === "request_timestamp_out_of_window" &&
        !(isObject(body) && "request_timestamp" in body)
      ) {
        await this.syncClock(options);
        return this._callOnce(path, body, options);
      }
      throw e;
    }
  }

  /**
   * @param {string} path
   * @param {Fields} body
   * @param {CallOptions} options
   */
  async _callOnce(path, body, options) {
    const p = normalizePath(path);
    if (body === null || body === undefined) body = {};
    if (!isObject(body)) throw new IssuingClientError("config", "the request body must be a plain object", { path: p });
    const fields = { ...body };
    if (!("request_timestamp" in fields)) fields.request_timestamp = nextRequestTimestamp(this.clockOffsetMicros);
    let envelope;
    try {
      envelope = sealJson(/** @type {any} */ (this)._key, fields);
    } catch (e) {
      throw new IssuingClientError("config", `the request body cannot be serialised: ${/** @type {Error} */ (e).message}`, { path: p, cause: e });
    }
    /** @type {Record<string, string>} */
    const headers = {
      "API-KEY": this.apiKey,
      "Content-Type": "application/json",
      Accept: "application/json",
      "User-Agent": this.userAgent,
    };
    if (options.idempotencyKey !== undefined) headers["Idempotency-Key"] = options.idempotencyKey;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let status;
    let text;
    try {
      const response = await /** @type {any} */ (this)._fetch(`${this.baseUrl}/api/v2/${p}`, {
        method: "POST",
        headers,
        body: envelope,
        signal,
        // The API never redirects; a redirected POST would lose its body.
        redirect: "manual",
      });
      status = response.status;
      text = await response.text();
    } catch (e) {
      if (timeout.aborted && !options.signal?.aborted) {
        throw new IssuingClientError("timeout", `${p}: no answer within ${timeoutMs} ms`, { path: p, cause: e });
      }
      const cause = /** @type {any} */ (e)?.cause;
      const detail = cause?.code || cause?.message || "";
      throw new IssuingClientError("transport", `${p}: request failed: ${/** @type {Error} */ (e).message}${detail ? ` (${detail})` : ""}`, { path: p, cause: e });
    }
    return this._interpret(p, status, text);
  }

  /**
   * Turns a status and raw body into the success body or an error.
   * @param {string} path
   * @param {number} status
   * @param {string} text
   * @returns {Record<string, any>}
   */
  _interpret(path, status, text) {
    /** @param {string} reason */
    const decode = (reason) =>
      new IssuingClientError("decode", `${path}: unreadable response (HTTP ${status}): ${reason}`, { status, path });
    let outer;
    try {
      outer = JSON.parse(text);
    } catch {
      throw decode(`not JSON: ${preview(text)}`);
    }
    let body = outer;
    let sealed = false;
    if (isObject(outer) && typeof outer.encrypted === "string") {
      let plain;
      try {
        plain = openEnvelope(/** @type {any} */ (this)._key, outer.encrypted);
      } catch (e) {
        throw decode(`${/** @type {Error} */ (e).message}: the API secret does not match this API key?`);
      }
      try {
        body = JSON.parse(Buffer.from(plain).toString("utf8"));
      } catch {
        throw decode("the opened response is not JSON");
      }
      sealed = true;
    }
    if (!isObject(body)) throw decode(`the response is not a JSON object: ${preview(JSON.stringify(body))}`);
    const ok = status >= 200 && status < 300;
    if (body.success === true) {
      if (!ok) throw decode(`a success body with an error status: ${preview(JSON.stringify(body))}`);
      // The server seals every answer that passed authentication; a plain success could
      // come from anything between us and it.
      if (!sealed) throw decode("a success response that is not sealed");
      return body;
    }
    if (ok && body.success !== false) throw decode(`a 2xx answer without a success flag: ${preview(JSON.stringify(body))}`);
    const slug = typeof body.error_slug === "string" ? body.error_slug : "unknown_error";
    const message =
      typeof body.error === "string" ? body.error : typeof body.message === "string" ? body.message : preview(JSON.stringify(body));
    throw new IssuingError(status, slug, message, body, path);
  }

  /**
   * Learns the server clock from `system/time` and keeps the offset (server minus local,
   * halfway through the round trip) for later `request_timestamp`s.
   * @param {CallOptions} [options]
   * @returns {Promise<number>} The offset in microseconds.
   */
  async syncClock(options = {}) {
    const before = Date.now() * 1000;
    const answer = await this._callOnce("system/time", {}, options);
    const after = Date.now() * 1000;
    const ts = Number(answer.timestamp);
    if (!Number.isSafeInteger(ts)) {
      throw new IssuingClientError("decode", `system/time: the timestamp is not an integer: ${JSON.stringify(answer.timestamp)}`, { path: "system/time" });
    }
    this.clockOffsetMicros = Math.round(ts - (before + after) / 2);
    return this.clockOffsetMicros;
  }

  /**
   * Opens a webhook delivery: checks its `API-KEY` header against this client's key and
   * opens its body (`{"encrypted": ...}`, sealed with the project's key). Returns the
   * event: `{event_type, project_id, delivery_id, data}` or a typed event with `type` and
   * `delivery_id`. Throws an `IssuingClientError` of kind "webhook" otherwise; answer such
   * a delivery with a 4xx.
   * @param {Headers | Record<string, string | string[] | undefined> | Map<string, string>} headers
   *   The request's headers: a fetch `Headers`, node's `req.headers`, or a plain object.
   * @param {string | Uint8Array | Record<string, unknown>} body The raw body (or its parsed JSON).
   * @returns {Record<string, any>}
   */
  openWebhook(headers, body) {
    const given = headerValue(headers, "api-key");
    if (given === undefined || given.trim() !== this.apiKey) {
      throw new IssuingClientError("webhook", "webhook API-KEY header is missing or does not match this client's API key");
    }
    let outer = body;
    if (typeof body === "string" || body instanceof Uint8Array) {
      try {
        outer = JSON.parse(typeof body === "string" ? body : Buffer.from(body).toString("utf8"));
      } catch {
        throw new IssuingClientError("webhook", "webhook body rejected: the body is not JSON");
      }
    }
    if (!isObject(outer) || typeof (/** @type {any} */ (outer).encrypted) !== "string") {
      throw new IssuingClientError("webhook", "webhook body rejected: the body has no `encrypted` string");
    }
    let plain;
    try {
      plain = openEnvelope(/** @type {any} */ (this)._key, /** @type {any} */ (outer).encrypted);
    } catch (e) {
      throw new IssuingClientError("webhook", `webhook body rejected: ${/** @type {Error} */ (e).message}`, { cause: e });
    }
    let event;
    try {
      event = JSON.parse(Buffer.from(plain).toString("utf8"));
    } catch {
      event = undefined;
    }
    if (!isObject(event)) throw new IssuingClientError("webhook", "webhook body rejected: the plaintext is not a JSON object");
    return event;
  }

  /**
   * The HTTP body (answer it with status 200) of a decision endpoint's answer to an
   * `authorization_request` opened with `openWebhook`: `{"encrypted": ...}` over
   * `{"approved", "reason"?}`, sealed with this project's key.
   * @param {boolean} approved
   * @param {string} [reason] at most 64 characters, kept as `card_tx_data.decision_reason`
   * @returns {string}
   */
  sealDecision(approved, reason) {
    /** @type {Record<string, unknown>} */
    const answer = { approved: Boolean(approved) };
    if (reason !== undefined) answer.reason = String(reason);
    return sealJson(/** @type {any} */ (this)._key, answer);
  }

  /**
   * Polls `orders/check` until the order is `completed` or `failed`, and returns it in
   * that state (a failed order is returned, not thrown: see `last_error_slug`). Rejects with
   * an `IssuingClientError` of kind "timeout" when it is still unfinished after `timeoutMs`.
   * @param {string} orderId
   * @param {{ timeoutMs?: number, intervalMs?: number, signal?: AbortSignal }} [options]
   * @returns {Promise<Record<string, any>>}
   */
  async waitOrder(orderId, options = {}) {
    const timeoutMs = options.timeoutMs ?? 60_000;
    let interval = options.intervalMs ?? 100;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const order = await this.ordersCheck({ order_id: orderId }, { signal: options.signal });
      if (order.status === "completed" || order.status === "failed") return order;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new IssuingClientError("timeout", `order ${orderId} is still ${order.status} after ${timeoutMs} ms`, { path: "orders/check" });
      }
      await sleep(Math.min(interval, left), options.signal);
      interval = Math.min(interval * 2, 2_000);
    }
  }

  // --- One method per endpoint (docs/api.md). Each takes the endpoint's fields and the
  // --- call options, and resolves to the opened success body.

  /** @param {Fields} [body] @param {CallOptions} [o] */ systemHealth(body = {}, o) { return this.call("system/health", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ systemTime(body = {}, o) { return this.call("system/time", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ projectBalance(body = {}, o) { return this.call("project/balance", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ projectTxs(body = {}, o) { return this.call("project/txs", body, o); }
  /** A UTC month (`period`, `YYYY-MM`) of the master balance: opening and closing
   * balances, totals per kind, the items paged (`skip`, `limit` up to 500).
   * @param {Fields} body @param {CallOptions} [o] */ projectStatement(body, o) { return this.call("project/statement", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ projectWalletTrc20(body = {}, o) { return this.call("project/wallet/trc20", body, o); }

  /** @param {Fields} body @param {CallOptions} [o] */ usersCreate(body, o) { return this.call("users/create", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ usersGet(body, o) { return this.call("users/get", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ usersFind(body = {}, o) { return this.call("users/find", body, o); }

  /** @param {Fields} body @param {CallOptions} [o] */ cardholdersCreate(body, o) { return this.call("cardholders/create", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardholdersGet(body, o) { return this.call("cardholders/get", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ cardholdersFind(body = {}, o) { return this.call("cardholders/find", body, o); }

  /** @param {Fields} [body] @param {CallOptions} [o] */ cardsProducts(body = {}, o) { return this.call("cards/products", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsCreate(body, o) { return this.call("cards/create", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsGet(body, o) { return this.call("cards/get", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ cardsFind(body = {}, o) { return this.call("cards/find", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsBalance(body, o) { return this.call("cards/balance", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsDetails(body, o) { return this.call("cards/details", body, o); }
  /** A single-use page for the cardholder's browser: hand `url` to it, never log it.
   * @param {Fields} body @param {CallOptions} [o] */ cardsRevealCreate(body, o) { return this.call("cards/reveal/create", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsFreeze(body, o) { return this.call("cards/freeze", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsUnfreeze(body, o) { return this.call("cards/unfreeze", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsTopup(body, o) { return this.call("cards/topup", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsWithdraw(body, o) { return this.call("cards/withdraw", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsTxs(body, o) { return this.call("cards/txs", body, o); }
  /** A UTC month (`period`, `YYYY-MM`) of a card's funds (available + pending): opening
   * and closing balances, `pending_at_close`, totals per kind, the items paged.
   * @param {Fields} body @param {CallOptions} [o] */ cardsStatement(body, o) { return this.call("cards/statement", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsClose(body, o) { return this.call("cards/close", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cards3dsConfirm(body, o) { return this.call("cards/3ds/confirm", body, o); }

  /** @param {Fields} body @param {CallOptions} [o] */ cardsLimitsSet(body, o) { return this.call("cards/limits/set", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ cardsLimitsGet(body, o) { return this.call("cards/limits/get", body, o); }

  /** @param {Fields} body @param {CallOptions} [o] */ rulesCreate(body, o) { return this.call("rules/create", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ rulesUpdate(body, o) { return this.call("rules/update", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ rulesGet(body, o) { return this.call("rules/get", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ rulesList(body = {}, o) { return this.call("rules/list", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ rulesDelete(body, o) { return this.call("rules/delete", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ rulesResults(body = {}, o) { return this.call("rules/results", body, o); }

  /** @param {Fields} body @param {CallOptions} [o] */ ordersCheck(body, o) { return this.call("orders/check", body, o); }

  /** @param {Fields} body @param {CallOptions} [o] */ whSubscribe(body, o) { return this.call("wh/subscribe", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ whUnsubscribe(body, o) { return this.call("wh/unsubscribe", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ whSubscriptions(body = {}, o) { return this.call("wh/subscriptions", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ whDeliveries(body = {}, o) { return this.call("wh/deliveries", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ whRedeliver(body, o) { return this.call("wh/redeliver", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ whDecisionSet(body, o) { return this.call("wh/decision/set", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ whDecisionGet(body = {}, o) { return this.call("wh/decision/get", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ whDecisionDelete(body = {}, o) { return this.call("wh/decision/delete", body, o); }

  /** Idempotent: `idempotency_key` in the body or `o.idempotencyKey` (the header).
   * @param {Fields} body @param {CallOptions} [o] */ disputesCreate(body, o) { return this.call("disputes/create", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ disputesGet(body, o) { return this.call("disputes/get", body, o); }
  /** @param {Fields} [body] @param {CallOptions} [o] */ disputesFind(body = {}, o) { return this.call("disputes/find", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ disputesWithdraw(body, o) { return this.call("disputes/withdraw", body, o); }
  /** `content` may be the file's bytes (a Uint8Array or Buffer): it is sent as standard
   * padded base64. A string is sent as it is (already base64).
   * @param {Fields} body @param {CallOptions} [o] */
  disputesEvidenceAdd(body, o) {
    if (isObject(body) && body.content instanceof Uint8Array) {
      body = { ...body, content: Buffer.from(body.content).toString("base64") };
    }
    return this.call("disputes/evidence/add", body, o);
  }
  /** The answer's `content` is base64: `decodeBase64(answer.content)` gives the bytes.
   * @param {Fields} body @param {CallOptions} [o] */ disputesEvidenceGet(body, o) { return this.call("disputes/evidence/get", body, o); }

  /** Asks for a report (`type`, `from`, `to`, `format`); it is built in the background.
   * @param {Fields} body @param {CallOptions} [o] */ reportsCreate(body, o) { return this.call("reports/create", body, o); }
  /** A report; once `ready`, with a new `download_url` good for one hour.
   * @param {Fields} body @param {CallOptions} [o] */ reportsGet(body, o) { return this.call("reports/get", body, o); }
  /**
   * Downloads a ready report's file from its `download_url` (a plain GET: the token in
   * the URL is the credential). Resolves to the file's text; rejects with
   * `IssuingClientError` (`transport`, with `status`) when the link is unknown (404) or
   * over its hour (410).
   * @param {string} url
   * @param {CallOptions} [options]
   * @returns {Promise<string>}
   */
  async reportsDownload(url, options = {}) {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let response;
    try {
      response = await /** @type {any} */ (this)._fetch(url, { method: "GET", signal, redirect: "manual", headers: { "User-Agent": this.userAgent } });
    } catch (e) {
      if (timeout.aborted && !options.signal?.aborted) {
        throw new IssuingClientError("timeout", `report download: no answer within ${timeoutMs} ms`, { cause: e });
      }
      throw new IssuingClientError("transport", `report download failed: ${/** @type {Error} */ (e).message}`, { cause: e });
    }
    const text = await response.text();
    if (response.status !== 200) {
      // The message never names the URL: it holds the link's token.
      throw new IssuingClientError("transport", `report download: HTTP ${response.status}`, { status: response.status });
    }
    return text;
  }

  /** @param {Fields} body @param {CallOptions} [o] */ simulateCardsAuth(body, o) { return this.call("simulate/cards/auth", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ simulateCardsClear(body, o) { return this.call("simulate/cards/clear", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ simulateCardsReversal(body, o) { return this.call("simulate/cards/reversal", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ simulateCardsRefund(body, o) { return this.call("simulate/cards/refund", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ simulateCards3ds(body, o) { return this.call("simulate/cards/3ds", body, o); }
  /** @param {Fields} body @param {CallOptions} [o] */ simulateProjectDeposit(body, o) { return this.call("simulate/project/deposit", body, o); }
  /** Sandbox: plays the card network's move on a dispute.
   * @param {Fields} body @param {CallOptions} [o] */ simulateDisputesAdvance(body, o) { return this.call("simulate/disputes/advance", body, o); }
  /** Sandbox: plants a settlement reconciliation break (`kind`: `missing_here`, `missing_there`, `amount_mismatch`) on a settled transaction.
   * @param {Fields} body @param {CallOptions} [o] */ simulateSettlementBreak(body, o) { return this.call("simulate/settlement/break", body, o); }
}

/** Method name → endpoint path, for every endpoint of docs/api.md. */
export const ENDPOINTS = Object.freeze({
  systemHealth: "system/health",
  systemTime: "system/time",
  projectBalance: "project/balance",
  projectTxs: "project/txs",
  projectStatement: "project/statement",
  projectWalletTrc20: "project/wallet/trc20",
  usersCreate: "users/create",
  usersGet: "users/get",
  usersFind: "users/find",
  cardholdersCreate: "cardholders/create",
  cardholdersGet: "cardholders/get",
  cardholdersFind: "cardholders/find",
  cardsProducts: "cards/products",
  cardsCreate: "cards/create",
  cardsGet: "cards/get",
  cardsFind: "cards/find",
  cardsBalance: "cards/balance",
  cardsDetails: "cards/details",
  cardsRevealCreate: "cards/reveal/create",
  cardsFreeze: "cards/freeze",
  cardsUnfreeze: "cards/unfreeze",
  cardsTopup: "cards/topup",
  cardsWithdraw: "cards/withdraw",
  cardsTxs: "cards/txs",
  cardsStatement: "cards/statement",
  cardsClose: "cards/close",
  cards3dsConfirm: "cards/3ds/confirm",
  cardsLimitsSet: "cards/limits/set",
  cardsLimitsGet: "cards/limits/get",
  rulesCreate: "rules/create",
  rulesUpdate: "rules/update",
  rulesGet: "rules/get",
  rulesList: "rules/list",
  rulesDelete: "rules/delete",
  rulesResults: "rules/results",
  ordersCheck: "orders/check",
  whSubscribe: "wh/subscribe",
  whUnsubscribe: "wh/unsubscribe",
  whSubscriptions: "wh/subscriptions",
  whDeliveries: "wh/deliveries",
  whRedeliver: "wh/redeliver",
  whDecisionSet: "wh/decision/set",
  whDecisionGet: "wh/decision/get",
  whDecisionDelete: "wh/decision/delete",
  disputesCreate: "disputes/create",
  disputesGet: "disputes/get",
  disputesFind: "disputes/find",
  disputesWithdraw: "disputes/withdraw",
  disputesEvidenceAdd: "disputes/evidence/add",
  disputesEvidenceGet: "disputes/evidence/get",
  reportsCreate: "reports/create",
  reportsGet: "reports/get",
  simulateCardsAuth: "simulate/cards/auth",
  simulateCardsClear: "simulate/cards/clear",
  simulateCardsReversal: "simulate/cards/reversal",
  simulateCardsRefund: "simulate/cards/refund",
  simulateCards3ds: "simulate/cards/3ds",
  simulateProjectDeposit: "simulate/project/deposit",
  simulateDisputesAdvance: "simulate/disputes/advance",
  simulateSettlementBreak: "simulate/settlement/break",
});

/**
 * @param {any} headers
 * @param {string} name lower case
 * @returns {string | undefined}
 */
function headerValue(headers, name) {
  if (!headers) return undefined;
  if (typeof headers.get === "function") {
    const v = headers.get(name) ?? headers.get(name.toUpperCase());
    return v === null || v === undefined ? undefined : Array.isArray(v) ? v[0] : String(v);
  }
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v[0] : v === undefined ? undefined : String(v);
  }
  return undefined;
}

export default IssuingClient;
