//! Stage 5: the project's decision webhook, for authorizations that passed stages 1–4.
//! Without an endpoint the authorization is approved; `stand_in` (or a budget too short
//! to call) applies `on_timeout` at once, without a call; otherwise the endpoint is
//! asked, within the smaller of its `timeout_ms` and what the caller's budget leaves.

use crate::network::controls::Endpoint;
use issuing_domain::controls::decision::{outcome, Answer, CallMode, Outcome};
use std::time::Duration;

/// Below this there is no time for a round trip: the decision is made as on a timeout.
pub const MIN_CALL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Approve,
    /// Ask the endpoint, allowing it this long.
    Ask(Duration),
    /// Decided without a call.
    Decided(Outcome),
}

pub fn route(endpoint: Option<&Endpoint>, budget: Option<Duration>) -> Route {
    let Some(e) = endpoint else {
        return Route::Approve;
    };
    let time = budget.map_or(e.timeout, |b| b.min(e.timeout));
    match e.mode {
        CallMode::StandIn => Route::Decided(outcome(Answer::TimedOut, e.on_timeout)),
        CallMode::Live if time < MIN_CALL => {
            Route::Decided(outcome(Answer::TimedOut, e.on_timeout))
        }
        CallMode::Live => Route::Ask(time),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use issuing_domain::controls::decision::OnTimeout;

    fn endpoint(mode: CallMode, on_timeout: OnTimeout) -> Endpoint {
        Endpoint {
            url: "http://127.0.0.1:9/".into(),
            timeout: Duration::from_millis(2000),
            on_timeout,
            mode,
        }
    }

    #[test]
    fn routes() {
        assert_eq!(route(None, None), Route::Approve);
        let live = endpoint(CallMode::Live, OnTimeout::Decline);
        assert_eq!(
            route(Some(&live), None),
            Route::Ask(Duration::from_millis(2000))
        );
        assert_eq!(
            route(Some(&live), Some(Duration::from_millis(700))),
            Route::Ask(Duration::from_millis(700))
        );
        let Route::Decided(o) = route(Some(&live), Some(Duration::from_millis(10))) else {
            panic!("no time to call")
        };
        assert_eq!(
            (o.approve, o.failure_reason),
            (false, Some("webhook_timeout"))
        );
        let Route::Decided(o) = route(Some(&endpoint(CallMode::StandIn, OnTimeout::Approve)), None)
        else {
            panic!("stand-in")
        };
        assert!(o.approve);
    }
}
