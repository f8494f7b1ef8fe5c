//! The plaintext of a delivery in its form (spec §Events, CONTRACT §6), sealed with the
//! project's key like every response.

use issuing_domain::webhooks::{form_of, PayloadForm};
use serde_json::{json, Value};

/// The event as the receiver decrypts it. `stored` is what the outbox holds: the
/// `data` object of an envelope event, or the whole body of a typed one.
pub fn plaintext(event_type: &str, project_id: &str, delivery_id: &str, stored: &Value) -> Value {
    match form_of(event_type) {
        Some(PayloadForm::Typed) => {
            let mut body = match stored {
                Value::Object(m) => Value::Object(m.clone()),
                other => json!({ "data": other }),
            };
            body["type"] = json!(event_type);
            body["delivery_id"] = json!(delivery_id);
            body
        }
        // Unknown types travel in the envelope form, which names them.
        Some(PayloadForm::Envelope) | None => json!({
            "event_type": event_type,
            "project_id": project_id,
            "delivery_id": delivery_id,
            "data": stored,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn forms() {
        let e = plaintext("card.freeze", "p1", "d1", &json!({"card_id": "c"}));
        assert_eq!(
            e,
            json!({"event_type": "card.freeze", "project_id": "p1", "delivery_id": "d1", "data": {"card_id": "c"}})
        );
        let t = plaintext(
            "card_otp",
            "p1",
            "d2",
            &json!({"type": "card_otp", "card_id": "c", "code": "123456"}),
        );
        assert_eq!(t["type"], "card_otp");
        assert_eq!(t["delivery_id"], "d2");
        assert_eq!(t["code"], "123456");
        assert!(t.get("event_type").is_none());
    }
}
