//! The shared models keep the wire format the server has always written: which optional
//! fields are `null` and which are left out, amounts as decimal strings, lenient
//! request reading.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::{Amount, PageRequest, SortDir};
use serde_json::json;

#[test]
fn answers_write_null_or_leave_out_as_before() {
    let tx = ProjectTx {
        id: "1".into(),
        kind: "deposit".into(),
        amount: Amount::from_micros(2_500_000).into(),
        balance_after: Amount::from_micros(-1).into(),
        currency: "usdt".into(),
        transfer_id: "t".into(),
        order_id: None,
        card_id: None,
        reference: None,
        created_at: "2026-01-01T00:00:00Z".into(),
    };
    assert_eq!(
        serde_json::to_value(&tx).unwrap(),
        json!({"id": "1", "type": "deposit", "amount": "2.50", "balance_after": "-0.000001",
               "currency": "usdt", "transfer_id": "t", "order_id": null, "card_id": null,
               "reference": null, "created_at": "2026-01-01T00:00:00Z"})
    );
    let order: Order = serde_json::from_value(json!({
        "order_id": "o", "order_type": "card_topup", "status": "new", "data": {"amount": "1.00"},
        "created_at": "c", "updated_at": "u"
    }))
    .unwrap();
    assert_eq!(
        serde_json::to_value(&order).unwrap(),
        json!({"order_id": "o", "order_type": "card_topup", "status": "new",
               "data": {"amount": "1.00"}, "created_at": "c", "updated_at": "u"})
    );
}

#[test]
fn pages_carry_the_paging_used() {
    let request = PageRequest {
        skip: 5,
        limit: 10,
        sort_by: "created_at",
        sort_dir: SortDir::Desc,
    };
    let page = Page::new(vec![1, 2], 7, &request);
    assert_eq!(
        serde_json::to_value(&page).unwrap(),
        json!({"items": [1, 2], "total": 7, "skip": 5, "limit": 10})
    );
}

#[test]
fn requests_read_missing_and_null_fields_as_empty() {
    let r: CardRef = serde_json::from_value(json!({"card_id": null, "extra": 1})).unwrap();
    assert_eq!(r, CardRef::default());
    let s: WhSubscribe = serde_json::from_value(json!({"url": "u", "event_types": null})).unwrap();
    assert_eq!((s.url.as_str(), s.event_types.len()), ("u", 0));
    // A field of the wrong type is still an error (the server's validation_error).
    assert!(serde_json::from_value::<UsersCreate>(json!({"external_user_id": 5})).is_err());
}
