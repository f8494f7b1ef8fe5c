//! The settings of a project's real-time decision webhook (CONTRACT §11) and how its
//! answer is read.

use issuing_wire::ApiError;
use serde_json::Value;

pub const MIN_TIMEOUT_MS: u32 = 300;
pub const MAX_TIMEOUT_MS: u32 = 4000;
pub const DEFAULT_TIMEOUT_MS: u32 = 2000;
/// The longest `reason` kept from an answer.
pub const MAX_REASON_LEN: usize = 64;

/// Why an authorization was declined at the decision step (`failure_reason`).
pub const DECLINE_WEBHOOK: &str = "webhook_declined";
pub const DECLINE_TIMEOUT: &str = "webhook_timeout";
pub const DECLINE_ERROR: &str = "webhook_error";

/// What happens when the endpoint does not answer in time or answers badly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    Approve,
    Decline,
}

impl OnTimeout {
    pub const fn as_str(self) -> &'static str {
        match self {
            OnTimeout::Approve => "approve",
            OnTimeout::Decline => "decline",
        }
    }

    pub fn parse(s: &str) -> Option<OnTimeout> {
        match s {
            "approve" => Some(OnTimeout::Approve),
            "decline" => Some(OnTimeout::Decline),
            _ => None,
        }
    }
}

/// `live` calls the endpoint; `stand_in` makes no call and applies `on_timeout` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMode {
    Live,
    StandIn,
}

impl CallMode {
    pub const fn as_str(self) -> &'static str {
        match self {
            CallMode::Live => "live",
            CallMode::StandIn => "stand_in",
        }
    }

    pub fn parse(s: &str) -> Option<CallMode> {
        match s {
            "live" => Some(CallMode::Live),
            "stand_in" => Some(CallMode::StandIn),
            _ => None,
        }
    }
}

/// The validated optional settings of `wh/decision/set` (the URL is checked like a
/// subscription's, elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub timeout_ms: u32,
    pub on_timeout: OnTimeout,
    pub mode: CallMode,
}

pub fn parse_settings(
    timeout_ms: Option<&Value>,
    on_timeout: Option<&str>,
    mode: Option<&str>,
) -> Result<Settings, ApiError> {
    let timeout_ms = match timeout_ms {
        None | Some(Value::Null) => DEFAULT_TIMEOUT_MS,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(n))
            .ok_or_else(|| {
                ApiError::validation(format!(
                    "timeout_ms must be an integer from {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS}"
                ))
            })?,
    };
    let on_timeout = match on_timeout.map(str::trim).filter(|s| !s.is_empty()) {
        None => OnTimeout::Decline,
        Some(s) => OnTimeout::parse(s)
            .ok_or_else(|| ApiError::validation("on_timeout must be approve or decline"))?,
    };
    let mode = match mode.map(str::trim).filter(|s| !s.is_empty()) {
        None => CallMode::Live,
        Some(s) => CallMode::parse(s)
            .ok_or_else(|| ApiError::validation("mode must be live or stand_in"))?,
    };
    Ok(Settings {
        timeout_ms,
        on_timeout,
        mode,
    })
}

/// What the endpoint's answer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Approved,
    Declined {
        reason: Option<String>,
    },
    /// No answer within the time (`webhook_timeout`).
    TimedOut,
    /// Any other answer (`webhook_error`): another status, an unreadable body, no
    /// `approved`, a redirect.
    Failed(String),
}

/// Reads the opened (decrypted) body of an HTTP 200 answer.
pub fn read_answer(body: &Value) -> Answer {
    match body.get("approved") {
        Some(Value::Bool(true)) => Answer::Approved,
        Some(Value::Bool(false)) => {
            let reason = body
                .get("reason")
                .and_then(Value::as_str)
                .map(|r| {
                    r.chars()
                        .filter(|c| !c.is_control())
                        .take(MAX_REASON_LEN)
                        .collect::<String>()
                })
                .filter(|r| !r.is_empty());
            Answer::Declined { reason }
        }
        _ => Answer::Failed("the answer has no boolean approved".into()),
    }
}

/// The outcome of a decision: approve, or decline with a reason (and the endpoint's
/// own reason, kept as `decision_reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub approve: bool,
    pub failure_reason: Option<&'static str>,
    pub decision_reason: Option<String>,
}

/// Applies `on_timeout` where the endpoint gave no usable answer.
pub fn outcome(answer: Answer, on_timeout: OnTimeout) -> Outcome {
    let fallback = |reason: &'static str| Outcome {
        approve: on_timeout == OnTimeout::Approve,
        failure_reason: (on_timeout == OnTimeout::Decline).then_some(reason),
        decision_reason: None,
    };
    match answer {
        Answer::Approved => Outcome {
            approve: true,
            failure_reason: None,
            decision_reason: None,
        },
        Answer::Declined { reason } => Outcome {
            approve: false,
            failure_reason: Some(DECLINE_WEBHOOK),
            decision_reason: reason,
        },
        Answer::TimedOut => fallback(DECLINE_TIMEOUT),
        Answer::Failed(_) => fallback(DECLINE_ERROR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings() {
        let s = parse_settings(None, None, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s,
            Settings {
                timeout_ms: 2000,
                on_timeout: OnTimeout::Decline,
                mode: CallMode::Live
            }
        );
        assert!(parse_settings(Some(&json!(299)), None, None).is_err());
        assert!(parse_settings(Some(&json!(4001)), None, None).is_err());
        assert!(parse_settings(Some(&json!("500")), None, None).is_err());
        assert!(parse_settings(None, Some("maybe"), None).is_err());
        assert!(parse_settings(None, None, Some("offline")).is_err());
        let s = parse_settings(Some(&json!(300)), Some("approve"), Some("stand_in"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (s.timeout_ms, s.on_timeout, s.mode),
            (300, OnTimeout::Approve, CallMode::StandIn)
        );
    }

    #[test]
    fn answers() {
        assert_eq!(read_answer(&json!({"approved": true})), Answer::Approved);
        assert_eq!(
            read_answer(&json!({"approved": false, "reason": "x".repeat(100)})),
            Answer::Declined {
                reason: Some("x".repeat(64))
            }
        );
        assert!(matches!(
            read_answer(&json!({"approved": "yes"})),
            Answer::Failed(_)
        ));
        assert!(matches!(read_answer(&json!({})), Answer::Failed(_)));
    }

    #[test]
    fn on_timeout_applies_to_timeouts_and_errors_only() {
        let o = outcome(Answer::TimedOut, OnTimeout::Decline);
        assert_eq!(
            (o.approve, o.failure_reason),
            (false, Some(DECLINE_TIMEOUT))
        );
        let o = outcome(Answer::Failed("x".into()), OnTimeout::Decline);
        assert_eq!(o.failure_reason, Some(DECLINE_ERROR));
        let o = outcome(Answer::Failed("x".into()), OnTimeout::Approve);
        assert_eq!((o.approve, o.failure_reason), (true, None));
        let o = outcome(
            Answer::Declined {
                reason: Some("r".into()),
            },
            OnTimeout::Approve,
        );
        assert_eq!(
            (o.approve, o.failure_reason, o.decision_reason.as_deref()),
            (false, Some(DECLINE_WEBHOOK), Some("r"))
        );
    }
}
