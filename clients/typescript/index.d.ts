// Types for the issuing API client (index.js). Hand-written; see docs/api.md for the
// meaning of every field. Objects carry an index signature because the server may add
// fields: read the ones you know, ignore the rest.

/** First byte of every envelope (0x02). */
export const VERSION: number;
export const NONCE_LENGTH: number;
export const MAC_LENGTH: number;
/** The server's `request_timestamp` window, in microseconds (30 s). */
export const TIMESTAMP_WINDOW_MICROS: number;
export const DEFAULT_TIMEOUT_MS: number;

/** An error answered by the API (`{"success": false, "error", "error_slug"}`). */
export class IssuingError extends Error {
  constructor(status: number, slug: string, message: string, body?: Record<string, unknown>, path?: string);
  readonly name: "IssuingError";
  /** HTTP status, e.g. 404. */
  status: number;
  /** `error_slug`, e.g. `"user_not_found"`; `"unknown_error"` when the body had none. */
  slug: ErrorSlug;
  /** The whole error body. */
  body: Record<string, unknown>;
  /** The endpoint path that answered. */
  path: string;
}

export type ClientErrorKind = "config" | "transport" | "timeout" | "decode" | "webhook";

/** Not an API answer: bad client input, transport failure, timeout, unreadable answer, refused webhook. */
export class IssuingClientError extends Error {
  constructor(kind: ClientErrorKind, message: string, extra?: { status?: number; path?: string; cause?: unknown });
  readonly name: "IssuingClientError";
  kind: ClientErrorKind;
  status?: number;
  path?: string;
}

/** SHA-256 of the secret's UTF-8 bytes: the 32-byte secretbox key. */
export function deriveKey(apiSecret: string): Uint8Array;
/** Standard padded base64 of `0x02 ‖ nonce ‖ secretbox(plaintext)`. Leave `nonce` out outside tests. */
export function seal(key: Uint8Array, plaintext: string | Uint8Array, nonce?: Uint8Array): string;
/** Opens an envelope; throws `IssuingClientError` (kind "decode") when it does not open. */
export function openEnvelope(key: Uint8Array, encoded: string): Uint8Array;
/** Standard or URL-safe base64, padded or not, surrounding whitespace ignored. */
export function decodeBase64(text: string): Uint8Array;
/** `{"encrypted": seal(key, JSON.stringify(doc))}` as a string. */
export function sealJson(key: Uint8Array, doc: Record<string, unknown>): string;
/** Microseconds since the epoch plus `offsetMicros`, strictly increasing within the process. */
export function nextRequestTimestamp(offsetMicros?: number): number;

export interface ClientOptions {
  /** Timeout of one call in ms (default 30000). */
  timeoutMs?: number;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof fetch;
  /** Re-sync the clock from `system/time` and retry once on `request_timestamp_out_of_window` (default true). */
  syncClockOnSkew?: boolean;
  userAgent?: string;
}

export interface CallOptions {
  /** Sent as the `Idempotency-Key` header (or put `idempotency_key` in the body). */
  idempotencyKey?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface WaitOrderOptions {
  /** Give up after this many ms (default 60000). */
  timeoutMs?: number;
  /** First polling interval in ms (default 100; doubles up to 2000). */
  intervalMs?: number;
  signal?: AbortSignal;
}

export type ErrorSlug =
  | "api_key_not_found" | "api_key_invalid" | "encrypted_payload_missing" | "decryption_failed"
  | "request_timestamp_missing" | "request_timestamp_invalid" | "request_timestamp_out_of_window"
  | "duplicate_request" | "payload_too_large" | "method_not_allowed" | "invalid_request"
  | "validation_error" | "invalid_amount" | "idempotency_key_required" | "idempotency_conflict"
  | "kyc_required" | "kyc_unexpected_fields" | "external_user_id_required" | "insufficient_funds"
  | "not_found" | "project_not_found" | "wallet_not_found" | "user_not_found" | "subprovider_not_found"
  | "cardholder_not_found" | "product_not_found" | "card_not_found" | "order_not_found"
  | "subscription_not_found" | "delivery_not_found" | "transaction_not_found" | "user_already_exists"
  | "cardholder_already_exists" | "card_not_active" | "card_user_mismatch" | "invalid_status_transition"
  | "securement_id_invalid" | "card_details_plaintext_unavailable" | "provider_withdraw_not_supported"
  | "product_not_active" | "cardholder_not_ready" | "invalid_pricing" | "card_product_limits_invalid"
  | "amount_below_minimum" | "amount_above_maximum" | "currency_mismatch" | "subscription_limit_reached"
  | "subscription_inactive" | "invalid_transaction_state" | "internal_error" | "provider_error"
  | "topup_attempts_exceeded" | "not_ready" | "service_unavailable" | "unknown_error"
  | "dispute_not_found" | "evidence_not_found" | "dispute_already_exists" | "transaction_not_disputable"
  | "dispute_window_closed" | "report_not_found"
  | (string & {});

/** A decimal string with 2 to 6 fractional digits, e.g. `"12.50"`. */
export type Amount = string;
/** What requests accept as an amount: a decimal string or a JSON number. */
export type AmountInput = string | number;
/** RFC 3339 in UTC with microseconds, e.g. `"2026-11-21T20:00:33.516217Z"`. */
export type Timestamp = string;

export interface Success {
  success: true;
  [field: string]: unknown;
}

export interface Page<T> extends Success {
  items: T[];
  total: number;
  skip: number;
  limit: number;
}

export interface ListQuery {
  skip?: number | string;
  limit?: number | string;
  sort_by?: string;
  sort_dir?: "asc" | "desc" | string;
  [field: string]: unknown;
}

export interface Health extends Success { status: string }
export interface ServerTime extends Success { timestamp: number }
export interface ProjectBalance extends Success { available: Amount; currency: string }
export interface Wallet extends Success { usdt_trc20: string }

export interface User {
  user_id: string;
  external_user_id: string;
  project_id: string;
  usdt_balance: Amount;
  deposit_addresses: string[];
  created_at: Timestamp;
  updated_at: Timestamp;
  [field: string]: unknown;
}

export interface KycData {
  first_name: string;
  last_name: string;
  birth_date: string;
  email: string;
  phone_number_full: string;
  country_iso: string;
  address?: { line1?: string; line2?: string; city?: string; state?: string; postal_code?: string; country_iso?: string };
  id_document?: { type?: string; number?: string; country_iso?: string; expiry_date?: string };
}

export interface Cardholder {
  cardholder_id: string;
  user_id: string;
  external_user_id: string;
  project_id: string;
  subprovider_code: string;
  subprovider_id: string;
  product_code: string | null;
  registration_status: "pending" | "active" | "suspended" | "failed" | (string & {});
  kyc_status: "not_started" | "pending" | "approved" | "rejected" | "expired" | (string & {});
  kyc_level: "none" | "basic" | "advanced" | "full" | (string & {});
  created_at: Timestamp;
  updated_at: Timestamp;
  registered_at: Timestamp | null;
  activated_at: Timestamp | null;
  [field: string]: unknown;
}

export type CardStatus = "pending" | "active" | "frozen" | "failed" | "closed" | (string & {});

export interface CardBalance {
  currency: string;
  available: Amount;
  pending: Amount;
}

export interface Card {
  card_id: string;
  user_id: string;
  project_id: string;
  external_user_id: string;
  product_code: string;
  status: CardStatus;
  balance: CardBalance;
  label: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  issued_at: Timestamp | null;
  activated_at: Timestamp | null;
  frozen_at: Timestamp | null;
  closed_at: Timestamp | null;
  [field: string]: unknown;
}

/** The answer of `cards/reveal/create`: `url` (and `urls`) are for the cardholder's browser alone. */
export interface RevealSession {
  reveal_id: string;
  url: string;
  expires_at: Timestamp;
  /** A provider's embed (Lithic without PAN access): one single-use page per detail. */
  urls?: { pan: string; cvv: string; exp_month: string; exp_year: string };
  [field: string]: unknown;
}

export type OrderStatus = "new" | "processing" | "completed" | "failed" | (string & {});

export interface Order {
  order_id: string;
  order_type: "card_issue" | "card_topup" | "card_withdraw" | "card_status_change" | (string & {});
  status: OrderStatus;
  card_id?: string;
  balance_before?: Amount;
  balance_after?: Amount;
  last_error?: string;
  last_error_slug?: string;
  data: Record<string, unknown>;
  created_at: Timestamp;
  updated_at: Timestamp;
  completed_at?: Timestamp;
  failed_at?: Timestamp;
  issue_status?: string;
  is_issued?: boolean;
  provider_card_status?: string;
  topup_status?: string;
  [field: string]: unknown;
}

export interface CardTxData {
  auth_type: string;
  status: string;
  type: string;
  card_label: string | null;
  merchant: { name?: string; mcc?: string; country?: string; [field: string]: unknown };
  card_amount: number;
  card_currency: string;
  merchant_amount: number;
  merchant_currency: string;
  fee_amount: number;
  fee_currency: string;
  failure_reason: string | null;
  original_transaction_id?: string;
  /** Why rules (`rule_ids`) or a limit (the limit and its usage) declined it. */
  decline?: Decline;
  /** The decision webhook's reason, when it gave one. */
  decision_reason?: string;
  /** Only on a dispute's credit or debit (`type` `other`, `auth_type` `dispute`): the dispute. */
  dispute_id?: string;
  [field: string]: unknown;
}

export interface Decline {
  rule_ids?: string[];
  interval?: LimitInterval;
  window_seconds?: number;
  limit?: number;
  count?: number;
  spent?: number;
  used_count?: number;
  mccs?: string[];
  [field: string]: unknown;
}

export type LimitInterval = "per_authorization" | "daily" | "weekly" | "monthly" | "yearly" | "all_time" | "rolling";

export interface CardLimit {
  interval: LimitInterval | (string & {});
  amount?: AmountInput;
  count?: number;
  window_seconds?: number;
  mccs?: string[];
}

export interface CardLimitUsage {
  interval: string;
  amount?: string;
  count?: number;
  window_seconds?: number;
  mccs?: string[];
  spent: string;
  used_count: number;
  remaining_amount?: string;
  remaining_count?: number;
  window_start?: Timestamp;
  window_end?: Timestamp;
  [field: string]: unknown;
}

export interface CardLimits {
  card_id: string;
  timezone: string;
  limits: CardLimitUsage[];
  [field: string]: unknown;
}

export interface RuleCondition {
  attribute: "mcc" | "merchant_country" | "merchant_name" | "amount" | (string & {});
  operator: "is_one_of" | "is_not_one_of" | "contains" | "greater_than" | "greater_or_equal" | "less_than" | "less_or_equal" | (string & {});
  value: string | string[];
}

export interface Rule {
  rule_id: string;
  name: string;
  conditions: RuleCondition[];
  mode: "active" | "shadow" | "inactive" | (string & {});
  priority: number;
  card_ids?: string[];
  version: number;
  created_at: Timestamp;
  updated_at: Timestamp;
  [field: string]: unknown;
}

export interface RuleResult {
  rule_id: string;
  version: number;
  transaction_id: string;
  card_id: string;
  mode: string;
  matched: true;
  decided: "declined" | "none" | (string & {});
  evaluated_at: Timestamp;
  [field: string]: unknown;
}

export interface DecisionEndpoint {
  configured: boolean;
  url?: string;
  timeout_ms?: number;
  on_timeout?: "approve" | "decline" | (string & {});
  mode?: "live" | "stand_in" | (string & {});
  created_at?: Timestamp;
  updated_at?: Timestamp;
  [field: string]: unknown;
}

export interface CardTransaction {
  type: "card_transaction";
  transaction_id: string;
  tx_type: string;
  card_id: string;
  tx_at: Timestamp;
  card_tx_data: CardTxData;
  [field: string]: unknown;
}

export interface SimulatedTransaction extends Success {
  transactionId: string;
  transaction: CardTransaction;
}

export interface Subscription {
  id: string;
  title: string;
  url: string;
  active: boolean;
  created_at: Timestamp;
  event_types: string[];
  deactivated_at?: Timestamp;
  /** `unsubscribed`, `receiver answered 410 Gone` or `failing` (every attempt failed for 5 days). */
  deactivated_reason?: string;
  [field: string]: unknown;
}

export type DisputeStatus =
  | "submitted" | "representment" | "prearbitration" | "arbitration" | "won" | "lost" | "withdrawn"
  | (string & {});

export type DisputeReason =
  | "atm_cash_misdispense" | "cancelled" | "duplicated" | "fraud_card_not_present" | "fraud_card_present"
  | "fraud_other" | "goods_services_not_as_described" | "goods_services_not_received" | "incorrect_amount"
  | "missing_auth" | "other" | "processing_error" | "recurring_transaction_not_cancelled" | "refund_not_processed"
  | (string & {});

/** `won_*` for `won`; `case_lost`, `network_rejected`, `past_filing_date`, `no_dispute_rights` for `lost`; `withdrawn`. */
export type ResolutionReason =
  | "won_first_chargeback" | "won_prearbitration" | "won_arbitration"
  | "case_lost" | "network_rejected" | "past_filing_date" | "no_dispute_rights"
  | "withdrawn"
  | (string & {});

export type EvidenceContentType = "application/pdf" | "image/png" | "image/jpeg";

/** One status a dispute took (`timeline` is oldest first and only grows). */
export interface TimelineEntry {
  at: Timestamp;
  status: DisputeStatus;
  note: string | null;
  [field: string]: unknown;
}

/** An evidence file's metadata (the answer of `disputes/evidence/add`, the items of `evidence`). */
export interface Evidence {
  evidence_id: string;
  filename: string;
  content_type: EvidenceContentType | (string & {});
  /** Bytes, decoded. */
  size: number;
  /** Hex SHA-256 of the content. */
  sha256: string;
  created_at: Timestamp;
  [field: string]: unknown;
}

/** An evidence file with its content (the answer of `disputes/evidence/get`). */
export interface EvidenceFile extends Evidence {
  dispute_id: string;
  /** The file, standard padded base64 (`decodeBase64` gives the bytes). */
  content: string;
}

export interface Dispute {
  dispute_id: string;
  transaction_id: string;
  card_id: string;
  external_user_id: string;
  amount: Amount;
  /** Always `"usdt"`. */
  currency: string;
  reason: DisputeReason;
  customer_note: string | null;
  status: DisputeStatus;
  /** `null` until the dispute is final (`won`, `lost`, `withdrawn`). */
  resolution_reason: ResolutionReason | null;
  provisional_credit: boolean;
  evidence: Evidence[];
  timeline: TimelineEntry[];
  created_at: Timestamp;
  updated_at: Timestamp;
  /** `null` until the dispute is final. */
  resolved_at: Timestamp | null;
  [field: string]: unknown;
}

export type ReportType = "card_transactions" | "ledger_entries" | "cards" | "disputes" | (string & {});
export type ReportFormat = "csv" | "jsonl" | (string & {});
export type ReportStatus = "processing" | "ready" | "failed" | (string & {});

/** A report (the answer of `reports/get`). `row_count`, `size` and `sha256` are null until it is ready. */
export interface Report {
  report_id: string;
  type: ReportType;
  format: ReportFormat;
  from: string;
  to: string;
  status: ReportStatus;
  row_count: number | null;
  /** Bytes of the file. */
  size: number | null;
  /** Hex SHA-256 of the file. */
  sha256: string | null;
  created_at: string;
  ready_at: string | null;
  /** When the file is deleted: 7 days after it was ready. */
  expires_at: string | null;
  /** Ready only: `GET` it (see `reportsDownload`); a credential, good for one hour. */
  download_url?: string;
  download_expires_at?: string;
}

/** `data` of a `report.ready` event. */
export interface ReportEventData {
  report_id: string;
  type: ReportType;
  status: "ready" | "failed" | (string & {});
}

/** `data` of a `dispute.updated` event: the dispute without `timeline` and `evidence`. */
export type DisputeEventData = Omit<Dispute, "timeline" | "evidence">;

export interface DisputesFindQuery extends ListQuery {
  dispute_id?: string | string[];
  dispute_ids?: string | string[];
  card_id?: string | string[];
  card_ids?: string | string[];
  transaction_id?: string | string[];
  transaction_ids?: string | string[];
  status?: DisputeStatus | DisputeStatus[];
  statuses?: DisputeStatus | DisputeStatus[];
  /** RFC 3339, `YYYY-MM-DD` or integer microseconds. */
  created_from?: string | number;
  /** RFC 3339, `YYYY-MM-DD` (the whole day) or integer microseconds. */
  created_to?: string | number;
}

/** A UTC month, `YYYY-MM`: not in the future (the current month runs up to now). */
export type StatementPeriod = string;

export interface StatementQuery {
  period: StatementPeriod;
  /** Items to skip (default 0, at most 10,000,000). */
  skip?: number;
  /** Items to answer (default 100, 1 to 500). */
  limit?: number;
}

export type StatementItemKind =
  | "topup" | "withdrawal" | "purchase" | "refund" | "dispute_credit" | "dispute_debit" | "fee" | "other"
  | (string & {});

/** One posted movement of a card's funds (a hold moves nothing: it is not an item). */
export interface StatementItem {
  at: Timestamp;
  kind: StatementItemKind;
  /** Signed: positive adds to the card's funds. */
  amount: Amount;
  /** The card's funds after this item: the opening balance plus every item up to it. */
  balance_after: Amount;
  /** The card transaction (a purchase's, or the refund's own); `null` for order movements and disputes. */
  transaction_id: string | null;
  /** The order (topups, withdrawals, fees); `null` otherwise. */
  order_id: string | null;
  /** Only on `dispute_credit` and `dispute_debit`. */
  dispute_id?: string;
  /** For people, not programs: `"Topup"`, `"Purchase: Corner Shop"` (the merchant's name), `"Dispute credit"`, … */
  description: string;
  [field: string]: unknown;
}

/** A card statement's totals over the whole period (whatever page is asked), signed. */
export interface CardStatementTotals {
  topups: Amount;
  withdrawals: Amount;
  purchases: Amount;
  refunds: Amount;
  dispute_credits: Amount;
  dispute_debits: Amount;
  /** Fees taken from the card's funds. */
  fees: Amount;
  other: Amount;
}

/** `cards/statement`: opening + the sum of every item = closing; the totals add up to the same difference. */
export interface CardStatement extends Success {
  card_id: string;
  period: StatementPeriod;
  /** The card's funds (available + pending) at the period's start. */
  opening_balance: Amount;
  /** The card's funds at the period's end (now, for the current month). */
  closing_balance: Amount;
  /** The part of the closing balance open holds keep. */
  pending_at_close: Amount;
  totals: CardStatementTotals;
  items: StatementItem[];
  total: number;
  skip: number;
  limit: number;
}

/** An item of `project/txs` and `project/statement`: one movement of the master balance. */
export interface ProjectTx {
  id: string;
  /** `deposit`, `card_issue`, `card_topup`, `fee`, `card_withdraw`, `refund`, `card_shortfall`, … */
  type: string;
  amount: Amount;
  balance_after: Amount;
  currency: string;
  transfer_id: string;
  order_id: string | null;
  card_id: string | null;
  reference: string | null;
  created_at: Timestamp;
  [field: string]: unknown;
}

/** A project statement's totals over the whole period, signed. */
export interface ProjectStatementTotals {
  deposits: Amount;
  card_issue_fees: Amount;
  /** Topups and their fees. */
  card_topups: Amount;
  card_withdrawals: Amount;
  /** What `cards/close` brought back from closed cards. */
  card_closes: Amount;
  /** A closed card's dispute credits and what lost disputes took back. */
  disputes: Amount;
  shortfalls: Amount;
  /** Everything else: refunds of failed orders and operator adjustments. */
  adjustments: Amount;
}

/** `project/statement`: the master balance at the period's bounds; items oldest first. */
export interface ProjectStatementResponse extends Success {
  period: StatementPeriod;
  opening_balance: Amount;
  closing_balance: Amount;
  totals: ProjectStatementTotals;
  items: ProjectTx[];
  total: number;
  skip: number;
  limit: number;
}

/** A webhook event: the envelope form (`event_type`, `data`) or a typed form (`type`). */
export interface WebhookEvent {
  delivery_id: string;
  event_type?: string;
  type?: string;
  project_id?: string;
  data?: Record<string, unknown>;
  [field: string]: unknown;
}

type Fields = Record<string, unknown>;
type R<T> = Promise<T & Success>;

export class IssuingClient {
  /** `baseUrl` is the server root, e.g. `http://127.0.0.1:8080` (without `/api/v2`). */
  constructor(baseUrl: string, apiKey: string, apiSecret: string, options?: ClientOptions);
  /** From `ISSUING_BASE_URL`, `ISSUING_API_KEY`, `ISSUING_API_SECRET`. */
  static fromEnv(env?: Record<string, string | undefined>, options?: ClientOptions): IssuingClient;

  readonly baseUrl: string;
  readonly apiKey: string;
  timeoutMs: number;
  /** Microseconds the server clock is ahead of ours (set by `syncClock`). */
  clockOffsetMicros: number;
  syncClockOnSkew: boolean;
  userAgent: string;

  endpointUrl(path: string): string;
  /** Any endpoint. Resolves to the opened success body; rejects with `IssuingError` or `IssuingClientError`. */
  call<T = Success>(path: string, body?: Fields | null, options?: CallOptions): Promise<T>;
  /** Learns the server clock from `system/time`; returns the offset in microseconds. */
  syncClock(options?: CallOptions): Promise<number>;
  /** Checks a delivery's `API-KEY` header and opens its body; throws `IssuingClientError` (kind "webhook"). */
  openWebhook(
    headers: Headers | Map<string, string> | Record<string, string | string[] | undefined>,
    body: string | Uint8Array | Record<string, unknown>,
  ): WebhookEvent;
  /** The HTTP body (send it with status 200) answering an `authorization_request` to the project's decision endpoint. */
  sealDecision(approved: boolean, reason?: string): string;
  /** Polls `orders/check` until `completed` or `failed`; returns the order in that state. */
  waitOrder(orderId: string, options?: WaitOrderOptions): R<Order>;

  systemHealth(body?: Fields, options?: CallOptions): R<Health>;
  systemTime(body?: Fields, options?: CallOptions): R<ServerTime>;
  projectBalance(body?: Fields, options?: CallOptions): R<ProjectBalance>;
  projectTxs(body?: ListQuery & { order_id?: string | string[]; created_from?: string | number; created_to?: string | number }, options?: CallOptions): R<Page<ProjectTx>>;
  /** A UTC month of the master balance. */
  projectStatement(body: StatementQuery & Fields, options?: CallOptions): R<ProjectStatementResponse>;
  projectWalletTrc20(body?: Fields, options?: CallOptions): R<Wallet>;

  usersCreate(body: { external_user_id: string } & Fields, options?: CallOptions): R<User>;
  usersGet(body: { external_user_id: string } & Fields, options?: CallOptions): R<User>;
  usersFind(body?: ListQuery, options?: CallOptions): R<Page<User>>;

  cardholdersCreate(
    body: { external_user_id: string; subprovider_code: string; product_code?: string; kyc_data?: KycData | null } & Fields,
    options?: CallOptions,
  ): R<Cardholder>;
  cardholdersGet(body: Fields, options?: CallOptions): R<Cardholder>;
  cardholdersFind(body?: ListQuery, options?: CallOptions): R<Page<Cardholder>>;

  cardsProducts(body?: Fields, options?: CallOptions): R<{ items: Record<string, unknown>[]; total: number }>;
  cardsCreate(
    body: { external_user_id: string; product_code: string; kyc_data?: KycData | null; initial_topup?: AmountInput; idempotency_key?: string } & Fields,
    options?: CallOptions,
  ): R<{ card_id: string; status: CardStatus; order: Order }>;
  cardsGet(body: { card_id: string; external_user_id: string } & Fields, options?: CallOptions): R<Card>;
  cardsFind(body?: ListQuery, options?: CallOptions): R<Page<Card>>;
  cardsBalance(body: { card_id: string; external_user_id: string } & Fields, options?: CallOptions): R<CardBalance & { card_id: string }>;
  cardsDetails(body: { card_id: string; external_user_id: string } & Fields, options?: CallOptions): R<Success>;
  /** A single-use page showing the card's details to the cardholder's browser (framed by a page of `target_origin`). */
  cardsRevealCreate(
    body: { card_id: string; external_user_id?: string; target_origin: string; ttl_seconds?: number } & Fields,
    options?: CallOptions,
  ): R<RevealSession>;
  cardsFreeze(body: { card_id: string; external_user_id?: string } & Fields, options?: CallOptions): R<Success>;
  cardsUnfreeze(body: { card_id: string; external_user_id?: string } & Fields, options?: CallOptions): R<Success>;
  cardsTopup(body: { card_id: string; amount: AmountInput; idempotency_key?: string; currency?: string } & Fields, options?: CallOptions): R<Success>;
  cardsWithdraw(body: { card_id: string; amount: AmountInput; idempotency_key?: string; currency?: string } & Fields, options?: CallOptions): R<Success>;
  cardsTxs(body: { card_id: string; external_user_id: string } & Fields, options?: CallOptions): R<Page<CardTransaction>>;
  /** A UTC month of the card's funds; `external_user_id`, when given, must be the card's user. */
  cardsStatement(body: { card_id: string; external_user_id?: string } & StatementQuery & Fields, options?: CallOptions): R<CardStatement>;
  cardsClose(body: { card_id: string; idempotency_key?: string; reason?: string } & Fields, options?: CallOptions): R<Success>;
  cards3dsConfirm(
    body: { card_id: string; external_user_id: string; securement_id: string; confirm: boolean } & Fields,
    options?: CallOptions,
  ): R<Success>;

  cardsLimitsSet(body: { card_id: string; limits: CardLimit[]; timezone?: string; external_user_id?: string } & Fields, options?: CallOptions): R<CardLimits>;
  cardsLimitsGet(body: { card_id: string; external_user_id?: string } & Fields, options?: CallOptions): R<CardLimits>;

  rulesCreate(
    body: { name: string; conditions: RuleCondition[]; mode?: "active" | "shadow" | "inactive"; priority?: number; card_ids?: string[] } & Fields,
    options?: CallOptions,
  ): R<Rule>;
  rulesUpdate(
    body: { rule_id: string; name?: string; conditions?: RuleCondition[]; mode?: "active" | "shadow" | "inactive"; priority?: number; card_ids?: string[] } & Fields,
    options?: CallOptions,
  ): R<Rule>;
  rulesGet(body: { rule_id: string } & Fields, options?: CallOptions): R<Rule>;
  rulesList(body?: ListQuery & { mode?: string }, options?: CallOptions): R<Page<Rule>>;
  rulesDelete(body: { rule_id: string } & Fields, options?: CallOptions): R<{ rule_id: string; deleted: boolean }>;
  rulesResults(body?: ListQuery & { rule_id?: string; transaction_id?: string }, options?: CallOptions): R<Page<RuleResult>>;

  ordersCheck(body: { order_id: string } & Fields, options?: CallOptions): R<Order>;

  whSubscribe(body: { url: string; title?: string; event_types?: string[] } & Fields, options?: CallOptions): R<Subscription>;
  whUnsubscribe(body: { id: string } & Fields, options?: CallOptions): R<Subscription>;
  whSubscriptions(body?: ListQuery, options?: CallOptions): R<Page<Subscription>>;
  whDeliveries(body?: ListQuery, options?: CallOptions): R<Page<Record<string, unknown>>>;
  whRedeliver(body: Fields, options?: CallOptions): R<Success>;
  whDecisionSet(
    body: { url: string; timeout_ms?: number; on_timeout?: "approve" | "decline"; mode?: "live" | "stand_in" } & Fields,
    options?: CallOptions,
  ): R<DecisionEndpoint>;
  whDecisionGet(body?: Fields, options?: CallOptions): R<DecisionEndpoint>;
  whDecisionDelete(body?: Fields, options?: CallOptions): R<DecisionEndpoint>;

  /** Needs an idempotency key: `idempotency_key` in the body or `options.idempotencyKey`. */
  disputesCreate(
    body: {
      transaction_id: string;
      reason: DisputeReason;
      /** Default: all that is still disputable. */
      amount?: AmountInput;
      /** At most 5,000 characters. */
      customer_note?: string;
      provisional_credit?: boolean;
      idempotency_key?: string;
    } & Fields,
    options?: CallOptions,
  ): R<Dispute>;
  disputesGet(body: { dispute_id: string } & Fields, options?: CallOptions): R<Dispute>;
  disputesFind(body?: DisputesFindQuery, options?: CallOptions): R<Page<Dispute>>;
  disputesWithdraw(body: { dispute_id: string } & Fields, options?: CallOptions): R<Dispute>;
  /** At most 4 MiB decoded, 10 files per dispute. `content` as bytes is sent as base64. */
  disputesEvidenceAdd(
    body: { dispute_id: string; filename: string; content_type: EvidenceContentType; content: string | Uint8Array } & Fields,
    options?: CallOptions,
  ): R<Evidence>;
  disputesEvidenceGet(body: { dispute_id: string; evidence_id: string } & Fields, options?: CallOptions): R<EvidenceFile>;

  /** Asks for a report of the project's rows created in [from, to] (RFC 3339, at most 366 days apart). */
  reportsCreate(
    body: { type: ReportType; from: string; to: string; format: ReportFormat } & Fields,
    options?: CallOptions,
  ): R<{ report_id: string; status: "processing" }>;
  /** A report; once `ready`, with a new `download_url` good for one hour. */
  reportsGet(body: { report_id: string } & Fields, options?: CallOptions): R<Report>;
  /** The file of a `download_url` (a plain GET), as text. */
  reportsDownload(url: string, options?: CallOptions): Promise<string>;

  simulateCardsAuth(
    body: { card_id: string; transactionAmount: AmountInput; merchant?: Fields; merchantCurrency?: string; merchantAmount?: AmountInput; network_message_id?: string } & Fields,
    options?: CallOptions,
  ): R<SimulatedTransaction>;
  simulateCardsClear(body: { transactionId?: string; card_id?: string; billAmount?: AmountInput } & Fields, options?: CallOptions): R<SimulatedTransaction>;
  simulateCardsReversal(body: { transactionId: string; amount?: AmountInput } & Fields, options?: CallOptions): R<SimulatedTransaction>;
  simulateCardsRefund(body: { transactionId?: string; card_id?: string; amount?: AmountInput } & Fields, options?: CallOptions): R<SimulatedTransaction>;
  simulateCards3ds(
    body: { card_id: string; amount: AmountInput; currency?: string; merchant?: { name?: string; country?: string }; external_user_id?: string } & Fields,
    options?: CallOptions,
  ): R<{ method: "OOB" | "OTP" | (string & {}); card_id: string; securement_id?: string; status?: string; code?: string }>;
  /** Sandbox: a confirmed USDT TRC20 deposit to the project's address, credited once per transaction_id. */
  simulateProjectDeposit(
    body: { amount: AmountInput; transaction_id?: string; from?: string } & Fields,
    options?: CallOptions,
  ): R<{ transaction_id: string; address: string; from: string; amount: string; credited: boolean; transfer_id: string | null; available: string; currency: string }>;
  /** Sandbox: the network moves the dispute (`to`: `representment`, `prearbitration`, `arbitration`, `won` or `lost`). */
  simulateDisputesAdvance(
    body: { dispute_id: string; to: "representment" | "prearbitration" | "arbitration" | "won" | "lost" | (string & {}); resolution_reason?: ResolutionReason } & Fields,
    options?: CallOptions,
  ): R<Dispute>;
  /** Sandbox: plants a settlement reconciliation break in the sandbox provider's settlement records, on a settled transaction. */
  simulateSettlementBreak(
    body: { transaction_id: string; kind: "missing_here" | "missing_there" | "amount_mismatch" | (string & {}) } & Fields,
    options?: CallOptions,
  ): R<{ transaction_id: string; kind: string; event_token: string; date: string; subprovider_code: string }>;
}

/** Method name → endpoint path. */
export const ENDPOINTS: Readonly<Record<string, string>>;

export default IssuingClient;
