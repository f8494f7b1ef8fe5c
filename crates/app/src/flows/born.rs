//! Orders born leased: the master balance's writer inserts the orders it creates already
//! leased to this process's order workers and, once its batch is durable, hands them to
//! them here, so a new order costs no claim (a write that found it and leased it: on
//! PostgreSQL 1.5 ms per 16 orders, on SQLite a turn of the one writer thread).
//!
//! - An order is born leased only with a place reserved for it in this bounded queue
//!   before its insert, so a leased order always has a place to go; without room it is
//!   born unleased and a worker claims it as before.
//! - The lease is the one a claim would take (`LEASE`, held by `worker_id`), so
//!   everything after it is the claimed path: steps fenced on it, a crash leaving the
//!   order to be claimed when it runs out, a stopping server handing it back.
//! - The hand-over follows the commit: a worker never acts on an order that might not
//!   exist. Were the hand-over lost (the request that made the order gone before its
//!   answer), the order waits out its lease and is claimed like a crashed worker's.
//! - A card issue comes with its card and its holder's name from the batch that made it,
//!   so its worker reads neither before calling the provider (a claimed one reads them).
//! - An order that waited here until its lease could no longer cover a provider call is
//!   not started but handed back, due at once (`workers/orders.rs`): a claim then leases
//!   it afresh, as a worker must never run a step on a lease that may expire under it.

use issuing_domain::ids::new_id;
use issuing_store::cards::CardRecord;
use issuing_store::orders::OrderRecord;
use tokio::sync::{mpsc, Mutex};

/// How long a claimed order stays with its worker without a saved step; a crashed
/// worker's orders wait at most this long. Longer than `PROVIDER_TIMEOUT`, so a live
/// worker always saves (and renews) before its lease can run out.
const _: () = assert!(LEASE.as_secs() > crate::provider::PROVIDER_TIMEOUT.as_secs());
pub const LEASE: std::time::Duration = std::time::Duration::from_secs(15);

/// The lease a claim takes, in microseconds: also the lease of an order born leased.
pub fn lease_micros() -> i64 {
    i64::try_from(LEASE.as_micros()).unwrap_or(i64::MAX)
}

/// Orders handed over and not yet taken: bounds what waits in memory (and how long:
/// 16 rounds of two workers' 16 orders); beyond it new orders are claimed from the
/// table.
const QUEUE: usize = 512;

/// An order born leased, with the end of its lease (microseconds).
#[derive(Debug)]
pub struct Leased {
    pub order: OrderRecord,
    pub until: i64,
    /// For a card issue, what its creating batch knew: its worker then reads nothing
    /// before calling the provider.
    pub issue: Option<Box<IssueFacts>>,
}

/// A new card as its issue request made it, and its cardholder's name for the provider.
pub struct IssueFacts {
    pub card: CardRecord,
    pub holder_name: String,
}

impl std::fmt::Debug for IssueFacts {
    // The name is personal data: kept out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssueFacts")
            .field("card", &self.card)
            .finish_non_exhaustive()
    }
}

/// The queue of orders born leased to this process.
#[derive(Debug)]
pub struct Born {
    /// Holds the lease of every order born here, whichever worker takes it.
    worker_id: String,
    sender: mpsc::Sender<Leased>,
    receiver: Mutex<mpsc::Receiver<Leased>>,
}

/// An order's place in the queue, reserved before its insert; handed over after the
/// commit.
#[derive(Debug)]
pub struct Place(mpsc::OwnedPermit<Leased>);

impl Place {
    /// Queues the committed order, leased until `until`, for this process's workers.
    pub fn hand_over(self, order: OrderRecord, until: i64, issue: Option<Box<IssueFacts>>) {
        self.0.send(Leased {
            order,
            until,
            issue,
        });
    }
}

impl Default for Born {
    fn default() -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE);
        Born {
            worker_id: new_id(),
            sender,
            receiver: Mutex::new(receiver),
        }
    }
}

impl Born {
    /// The lease holder of the orders born here.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// A place for one more order, if the queue has room.
    pub fn reserve(&self) -> Option<Place> {
        self.sender.clone().try_reserve_owned().ok().map(Place)
    }

    /// Up to `max` orders, waiting for the first. Cancel-safe: an order is taken only
    /// when this returns.
    pub async fn take(&self, max: usize) -> Vec<Leased> {
        let mut orders = Vec::with_capacity(max);
        let mut receiver = self.receiver.lock().await;
        receiver.recv_many(&mut orders, max).await;
        orders
    }

    /// Up to `max` orders already waiting, without waiting for any.
    pub fn take_waiting(&self, max: usize) -> Vec<Leased> {
        let mut orders = Vec::new();
        if let Ok(mut receiver) = self.receiver.try_lock() {
            while orders.len() < max {
                match receiver.try_recv() {
                    Ok(order) => orders.push(order),
                    Err(_) => break,
                }
            }
        }
        orders
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(id: &str) -> OrderRecord {
        crate::flows::topup::new_order("prj", id, "card_topup", "card", 1, serde_json::json!({}))
    }

    #[tokio::test]
    async fn places_are_bounded_and_freed_when_not_used() {
        let born = Born::default();
        let places: Vec<Place> = (0..QUEUE).map_while(|_| born.reserve()).collect();
        assert_eq!(places.len(), QUEUE, "every place up to the bound");
        assert!(born.reserve().is_none(), "no place beyond the bound");
        // A place given up (its batch rolled back, its answer lost) is free again.
        drop(places);
        assert!(born.reserve().is_some());
    }

    #[tokio::test]
    async fn handed_over_orders_are_taken_in_order_with_their_lease() {
        let born = Born::default();
        let (a, b, c) = (born.reserve(), born.reserve(), born.reserve());
        assert!(born.take_waiting(16).is_empty(), "a place is not an order");
        a.unwrap().hand_over(order("ord_a"), 10, None);
        b.unwrap().hand_over(order("ord_b"), 20, None);
        drop(c);
        let taken = born.take_waiting(1);
        assert_eq!(taken.len(), 1, "at most what was asked");
        assert_eq!((taken[0].order.id.as_str(), taken[0].until), ("ord_a", 10));
        let taken = born.take(16).await;
        assert_eq!(taken.len(), 1);
        assert_eq!((taken[0].order.id.as_str(), taken[0].until), ("ord_b", 20));
        assert!(born.take_waiting(16).is_empty());
    }
}
