//! Crediting one chain deposit: the same ledger path as `issuing admin deposit` (a
//! `deposit` transfer from the project's deposit source to its master balance, the
//! chain transaction id as reference), in one transaction with the record that makes it
//! happen once.

use issuing_domain::time::now_micros;
use issuing_store::chain_deposits::{self, ChainDeposit, Recorded};
use issuing_store::{ledger, Store, StoreError};
use issuing_wire::Amount;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credit {
    /// Credited now.
    Credited {
        transfer_id: String,
        balance_after: Amount,
    },
    /// Credited before (another page, a restart, another process): the earlier record.
    /// When it differs (amount or sender) these are two transfers in one transaction to
    /// one address, which only the first credits; see docs/operations.md.
    AlreadyCredited { earlier: Option<Recorded> },
    /// An operator had credited this transaction id by hand (`admin deposit
    /// --reference`); it is recorded against that transfer and not credited again.
    CreditedByOperator { transfer_id: String },
}

pub async fn credit(store: &Store, d: &ChainDeposit) -> Result<Credit, StoreError> {
    let mut tx = store.begin().await?;
    // The insert comes first: it is the dedup, and on PostgreSQL it makes a concurrent
    // credit of the same transfer wait for this one.
    if !chain_deposits::record(&mut tx, d, now_micros()).await? {
        let earlier = chain_deposits::get(
            &mut tx,
            &d.project_id,
            &d.network,
            &d.transaction_id,
            &d.address,
        )
        .await?;
        return Ok(Credit::AlreadyCredited { earlier });
    }
    if let Some(transfer_id) =
        chain_deposits::deposit_with_reference(&mut tx, &d.project_id, &d.transaction_id).await?
    {
        chain_deposits::link_transfer(&mut tx, d, &transfer_id).await?;
        tx.commit().await?;
        return Ok(Credit::CreditedByOperator { transfer_id });
    }
    let posted = ledger::deposit(&mut tx, &d.project_id, d.amount, Some(&d.transaction_id)).await?;
    chain_deposits::link_transfer(&mut tx, d, &posted.transfer_id).await?;
    let balance_after = ledger::master_balance(&mut tx, &d.project_id).await?;
    tx.commit().await?;
    Ok(Credit::Credited {
        transfer_id: posted.transfer_id,
        balance_after,
    })
}
