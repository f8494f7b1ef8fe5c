use serde::Serialize;
use std::fmt;

/// Every error slug the service answers with, and the HTTP status it travels with.
///
/// The statuses come from the spec's tables and CONTRACT §1 and §4; this is the only
/// place that maps a slug to a status, so a slug can never be answered with two codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorSlug {
    // Authentication and envelope (answered in plain JSON: no key is usable yet).
    ApiKeyNotFound,
    ApiKeyInvalid,
    EncryptedPayloadMissing,
    DecryptionFailed,
    RequestTimestampMissing,
    RequestTimestampInvalid,
    RequestTimestampOutOfWindow,
    DuplicateRequest,
    PayloadTooLarge,
    MethodNotAllowed,
    UriTooLong,
    HeadersTooLarge,
    RequestTimeout,
    RateLimited,
    // Request validation.
    InvalidRequest,
    ValidationError,
    InvalidAmount,
    IdempotencyKeyRequired,
    IdempotencyConflict,
    KycRequired,
    KycUnexpectedFields,
    ExternalUserIdRequired,
    // Money.
    InsufficientFunds,
    // Not found.
    NotFound,
    ProjectNotFound,
    WalletNotFound,
    UserNotFound,
    SubproviderNotFound,
    CardholderNotFound,
    ProductNotFound,
    CardNotFound,
    OrderNotFound,
    SubscriptionNotFound,
    DeliveryNotFound,
    TransactionNotFound,
    RuleNotFound,
    DecisionWebhookNotFound,
    DisputeNotFound,
    EvidenceNotFound,
    ReportNotFound,
    // Conflicts.
    UserAlreadyExists,
    CardholderAlreadyExists,
    DisputeAlreadyExists,
    // Business rules.
    CardNotActive,
    CardUserMismatch,
    InvalidStatusTransition,
    SecurementIdInvalid,
    CardDetailsPlaintextUnavailable,
    ProviderWithdrawNotSupported,
    ProductNotActive,
    CardholderNotReady,
    InvalidPricing,
    CardProductLimitsInvalid,
    AmountBelowMinimum,
    AmountAboveMaximum,
    CurrencyMismatch,
    SubscriptionLimitReached,
    SubscriptionInactive,
    InvalidTransactionState,
    RuleLimitReached,
    TransactionNotDisputable,
    DisputeWindowClosed,
    // Server side.
    InternalError,
    ProviderError,
    TopupAttemptsExceeded,
    /// `GET /ready` while the database does not answer.
    NotReady,
    /// No database server answers (a failover under way, CONTRACT §18): answered with
    /// `Retry-After`; the same request may be sent again, with the same idempotency key.
    ServiceUnavailable,
}

impl ErrorSlug {
    pub const fn as_str(self) -> &'static str {
        use ErrorSlug::*;
        match self {
            ApiKeyNotFound => "api_key_not_found",
            ApiKeyInvalid => "api_key_invalid",
            EncryptedPayloadMissing => "encrypted_payload_missing",
            DecryptionFailed => "decryption_failed",
            RequestTimestampMissing => "request_timestamp_missing",
            RequestTimestampInvalid => "request_timestamp_invalid",
            RequestTimestampOutOfWindow => "request_timestamp_out_of_window",
            DuplicateRequest => "duplicate_request",
            PayloadTooLarge => "payload_too_large",
            MethodNotAllowed => "method_not_allowed",
            UriTooLong => "uri_too_long",
            HeadersTooLarge => "headers_too_large",
            RequestTimeout => "request_timeout",
            RateLimited => "rate_limited",
            InvalidRequest => "invalid_request",
            ValidationError => "validation_error",
            InvalidAmount => "invalid_amount",
            IdempotencyKeyRequired => "idempotency_key_required",
            IdempotencyConflict => "idempotency_conflict",
            KycRequired => "kyc_required",
            KycUnexpectedFields => "kyc_unexpected_fields",
            ExternalUserIdRequired => "external_user_id_required",
            InsufficientFunds => "insufficient_funds",
            NotFound => "not_found",
            ProjectNotFound => "project_not_found",
            WalletNotFound => "wallet_not_found",
            UserNotFound => "user_not_found",
            SubproviderNotFound => "subprovider_not_found",
            CardholderNotFound => "cardholder_not_found",
            ProductNotFound => "product_not_found",
            CardNotFound => "card_not_found",
            OrderNotFound => "order_not_found",
            UserAlreadyExists => "user_already_exists",
            CardholderAlreadyExists => "cardholder_already_exists",
            CardNotActive => "card_not_active",
            CardUserMismatch => "card_user_mismatch",
            InvalidStatusTransition => "invalid_status_transition",
            SecurementIdInvalid => "securement_id_invalid",
            CardDetailsPlaintextUnavailable => "card_details_plaintext_unavailable",
            ProviderWithdrawNotSupported => "provider_withdraw_not_supported",
            ProductNotActive => "product_not_active",
            CardholderNotReady => "cardholder_not_ready",
            InvalidPricing => "invalid_pricing",
            CardProductLimitsInvalid => "card_product_limits_invalid",
            AmountBelowMinimum => "amount_below_minimum",
            AmountAboveMaximum => "amount_above_maximum",
            CurrencyMismatch => "currency_mismatch",
            SubscriptionNotFound => "subscription_not_found",
            DeliveryNotFound => "delivery_not_found",
            SubscriptionLimitReached => "subscription_limit_reached",
            SubscriptionInactive => "subscription_inactive",
            TransactionNotFound => "transaction_not_found",
            InvalidTransactionState => "invalid_transaction_state",
            RuleNotFound => "rule_not_found",
            DecisionWebhookNotFound => "decision_webhook_not_found",
            DisputeNotFound => "dispute_not_found",
            ReportNotFound => "report_not_found",
            EvidenceNotFound => "evidence_not_found",
            DisputeAlreadyExists => "dispute_already_exists",
            TransactionNotDisputable => "transaction_not_disputable",
            DisputeWindowClosed => "dispute_window_closed",
            RuleLimitReached => "rule_limit_reached",
            InternalError => "internal_error",
            ProviderError => "provider_error",
            TopupAttemptsExceeded => "topup_attempts_exceeded",
            NotReady => "not_ready",
            ServiceUnavailable => "service_unavailable",
        }
    }

    pub const fn status(self) -> u16 {
        use ErrorSlug::*;
        match self {
            ApiKeyNotFound => 401,
            ApiKeyInvalid | InsufficientFunds => 403,
            PayloadTooLarge => 413,
            MethodNotAllowed => 405,
            RequestTimeout => 408,
            UriTooLong => 414,
            HeadersTooLarge => 431,
            RateLimited => 429,
            EncryptedPayloadMissing
            | DecryptionFailed
            | RequestTimestampMissing
            | RequestTimestampInvalid
            | RequestTimestampOutOfWindow
            | DuplicateRequest
            | InvalidRequest
            | ValidationError
            | InvalidAmount
            | IdempotencyKeyRequired
            | IdempotencyConflict
            | KycRequired
            | KycUnexpectedFields
            | ExternalUserIdRequired => 400,
            NotFound
            | ProjectNotFound
            | WalletNotFound
            | UserNotFound
            | SubproviderNotFound
            | CardholderNotFound
            | ProductNotFound
            | CardNotFound
            | OrderNotFound
            | SubscriptionNotFound
            | DeliveryNotFound
            | TransactionNotFound
            | RuleNotFound
            | DecisionWebhookNotFound
            | DisputeNotFound
            | ReportNotFound
            | EvidenceNotFound => 404,
            UserAlreadyExists | CardholderAlreadyExists | DisputeAlreadyExists => 409,
            CardNotActive
            | CardUserMismatch
            | InvalidStatusTransition
            | SecurementIdInvalid
            | CardDetailsPlaintextUnavailable
            | ProviderWithdrawNotSupported
            | ProductNotActive
            | CardholderNotReady
            | InvalidPricing
            | CardProductLimitsInvalid
            | AmountBelowMinimum
            | AmountAboveMaximum
            | CurrencyMismatch
            | SubscriptionLimitReached
            | SubscriptionInactive
            | InvalidTransactionState
            | RuleLimitReached
            | TransactionNotDisputable
            | DisputeWindowClosed => 422,
            // CONTRACT §4: provider failures on synchronous calls are 500.
            InternalError | ProviderError => 500,
            TopupAttemptsExceeded | NotReady | ServiceUnavailable => 503,
        }
    }

    /// The seconds an answer with this slug tells the client to wait before it tries
    /// again (`Retry-After`); None where trying again is not the remedy.
    pub const fn retry_after_secs(self) -> Option<u32> {
        match self {
            ErrorSlug::ServiceUnavailable => Some(2),
            _ => None,
        }
    }

    /// All slugs, for exhaustive tests and documentation.
    pub const ALL: &'static [ErrorSlug] = &[
        ErrorSlug::ApiKeyNotFound,
        ErrorSlug::ApiKeyInvalid,
        ErrorSlug::EncryptedPayloadMissing,
        ErrorSlug::DecryptionFailed,
        ErrorSlug::RequestTimestampMissing,
        ErrorSlug::RequestTimestampInvalid,
        ErrorSlug::RequestTimestampOutOfWindow,
        ErrorSlug::DuplicateRequest,
        ErrorSlug::PayloadTooLarge,
        ErrorSlug::MethodNotAllowed,
        ErrorSlug::UriTooLong,
        ErrorSlug::HeadersTooLarge,
        ErrorSlug::RequestTimeout,
        ErrorSlug::RateLimited,
        ErrorSlug::InvalidRequest,
        ErrorSlug::ValidationError,
        ErrorSlug::InvalidAmount,
        ErrorSlug::IdempotencyKeyRequired,
        ErrorSlug::IdempotencyConflict,
        ErrorSlug::KycRequired,
        ErrorSlug::KycUnexpectedFields,
        ErrorSlug::ExternalUserIdRequired,
        ErrorSlug::InsufficientFunds,
        ErrorSlug::NotFound,
        ErrorSlug::ProjectNotFound,
        ErrorSlug::WalletNotFound,
        ErrorSlug::UserNotFound,
        ErrorSlug::SubproviderNotFound,
        ErrorSlug::CardholderNotFound,
        ErrorSlug::ProductNotFound,
        ErrorSlug::CardNotFound,
        ErrorSlug::OrderNotFound,
        ErrorSlug::UserAlreadyExists,
        ErrorSlug::CardholderAlreadyExists,
        ErrorSlug::CardNotActive,
        ErrorSlug::CardUserMismatch,
        ErrorSlug::InvalidStatusTransition,
        ErrorSlug::SecurementIdInvalid,
        ErrorSlug::CardDetailsPlaintextUnavailable,
        ErrorSlug::ProviderWithdrawNotSupported,
        ErrorSlug::ProductNotActive,
        ErrorSlug::CardholderNotReady,
        ErrorSlug::InvalidPricing,
        ErrorSlug::CardProductLimitsInvalid,
        ErrorSlug::AmountBelowMinimum,
        ErrorSlug::AmountAboveMaximum,
        ErrorSlug::CurrencyMismatch,
        ErrorSlug::SubscriptionNotFound,
        ErrorSlug::DeliveryNotFound,
        ErrorSlug::SubscriptionLimitReached,
        ErrorSlug::SubscriptionInactive,
        ErrorSlug::TransactionNotFound,
        ErrorSlug::InvalidTransactionState,
        ErrorSlug::RuleNotFound,
        ErrorSlug::DecisionWebhookNotFound,
        ErrorSlug::RuleLimitReached,
        ErrorSlug::DisputeNotFound,
        ErrorSlug::ReportNotFound,
        ErrorSlug::EvidenceNotFound,
        ErrorSlug::DisputeAlreadyExists,
        ErrorSlug::TransactionNotDisputable,
        ErrorSlug::DisputeWindowClosed,
        ErrorSlug::InternalError,
        ErrorSlug::ProviderError,
        ErrorSlug::TopupAttemptsExceeded,
        ErrorSlug::NotReady,
        ErrorSlug::ServiceUnavailable,
    ];
}

impl fmt::Display for ErrorSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one error type of the API: a slug and a readable message. Its JSON form is the
/// spec's standard error object `{success: false, error, error_slug}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{slug}: {message}")]
pub struct ApiError {
    pub slug: ErrorSlug,
    pub message: String,
}

impl ApiError {
    pub fn new(slug: ErrorSlug, message: impl Into<String>) -> Self {
        ApiError {
            slug,
            message: message.into(),
        }
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorSlug::ValidationError, message)
    }

    /// The message clients see for unexpected failures; details go to the log only.
    pub fn internal() -> Self {
        Self::new(ErrorSlug::InternalError, "Internal server error")
    }

    /// The database does not answer; the client retries after `Retry-After`.
    pub fn unavailable() -> Self {
        Self::new(
            ErrorSlug::ServiceUnavailable,
            "The service is temporarily unavailable; retry after the Retry-After delay \
             (with the same idempotency key)",
        )
    }

    pub fn status(&self) -> u16 {
        self.slug.status()
    }

    pub fn body(&self) -> serde_json::Value {
        #[derive(Serialize)]
        struct Body<'a> {
            success: bool,
            error: &'a str,
            error_slug: &'a str,
        }
        serde_json::json!(Body {
            success: false,
            error: &self.message,
            error_slug: self.slug.as_str(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn slugs_are_unique_and_statuses_are_errors() {
        let mut seen = HashSet::new();
        for slug in ErrorSlug::ALL {
            assert!(seen.insert(slug.as_str()), "duplicate slug {slug}");
            assert!((400..600).contains(&slug.status()), "{slug}");
        }
    }

    #[test]
    fn contract_statuses() {
        assert_eq!(ErrorSlug::ApiKeyNotFound.status(), 401);
        assert_eq!(ErrorSlug::InsufficientFunds.status(), 403);
        assert_eq!(ErrorSlug::ExternalUserIdRequired.status(), 400);
        assert_eq!(ErrorSlug::CurrencyMismatch.status(), 422);
        assert_eq!(ErrorSlug::ProviderError.status(), 500);
        assert_eq!(ErrorSlug::TopupAttemptsExceeded.status(), 503);
        assert_eq!(ErrorSlug::NotReady.status(), 503);
        assert_eq!(ErrorSlug::NotReady.as_str(), "not_ready");
        assert_eq!(ErrorSlug::ServiceUnavailable.status(), 503);
        assert_eq!(ErrorSlug::ServiceUnavailable.retry_after_secs(), Some(2));
        assert_eq!(ErrorSlug::InternalError.retry_after_secs(), None);
    }

    #[test]
    fn body_shape() {
        let body = ApiError::new(ErrorSlug::UserNotFound, "User not found").body();
        assert_eq!(
            body,
            serde_json::json!({"success": false, "error": "User not found", "error_slug": "user_not_found"})
        );
    }
}
