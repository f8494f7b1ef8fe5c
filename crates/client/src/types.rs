//! Typed requests and answers of every endpoint (docs/api.md has the meaning of each
//! field).
//!
//! The models live in `issuing_wire::api`, shared with the server: it parses requests
//! into them and builds its answers from them, so what this client sends and reads is
//! what the server serialises. They are re-exported here, under their old paths.
//!
//! Requests serialize to the endpoint's fields; optional fields that are `None` (and
//! empty filter lists) are left out. Answers deserialize from the opened success body and
//! ignore fields they do not know, so a server that adds fields does not break them.
//! Amounts are [`Decimal`] strings as on the wire, never floats; the one exception is
//! [`CardTxData`], whose amounts the API sends as JSON numbers.

pub use issuing_wire::api::*;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimals_convert_to_micros() {
        for (text, micros) in [
            ("0.00", Some(0)),
            ("12.5", Some(12_500_000)),
            ("-2.00", Some(-2_000_000)),
            ("0.000001", Some(1)),
            ("10", Some(10_000_000)),
            ("1.0000001", None),
            ("1e3", None),
            (".5", None),
            ("5.", None),
            ("", None),
        ] {
            assert_eq!(Decimal::from(text).to_micros(), micros, "{text}");
        }
    }

    #[test]
    fn requests_leave_out_what_is_not_set() {
        let v = serde_json::to_value(CardsFind {
            statuses: vec!["active".into()],
            page: ListQuery {
                limit: Some(5),
                ..ListQuery::default()
            },
            ..CardsFind::default()
        })
        .unwrap();
        assert_eq!(v, json!({"statuses": ["active"], "limit": 5}));
        let v = serde_json::to_value(SimulateAuth {
            card_id: "c".into(),
            transaction_amount: "1.00".into(),
            ..SimulateAuth::default()
        })
        .unwrap();
        assert_eq!(v, json!({"card_id": "c", "transactionAmount": "1.00"}));
    }

    #[test]
    fn answers_ignore_unknown_fields_and_read_tx_numbers() {
        let tx: SimulatedTransaction = serde_json::from_value(json!({
            "success": true, "transactionId": "t", "new_field": 1,
            "transaction": {"type": "card_transaction", "transaction_id": "t", "tx_type": "x",
              "card_id": "c", "tx_at": "2026-01-01T00:00:00Z",
              "card_tx_data": {"auth_type": "authorization", "status": "pending", "type": "auth",
                "card_label": "1234", "merchant": {"name": "M"}, "card_amount": 1e-6,
                "card_currency": "USD", "merchant_amount": 30.0, "merchant_currency": "USD",
                "fee_amount": 0.0, "fee_currency": "usd", "failure_reason": null}}
        }))
        .unwrap();
        assert_eq!(tx.transaction.card_tx_data.card_amount, 1e-6);
        assert_eq!(
            tx.transaction.card_tx_data.merchant.name.as_deref(),
            Some("M")
        );
    }
}
