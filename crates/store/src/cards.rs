//! Cards. Sensitive data (PAN, CVV) is stored only sealed under the master key.

use crate::query::{find_page, Filter, Source};
use crate::writer::{BatchConn, Lookup, Part, RowRead};
use crate::{Backend, Conn, StoreError};
use issuing_wire::{Amount, PageRequest};
use sqlx::Row;

#[derive(Clone, PartialEq, Eq)]
pub struct CardRecord {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub external_user_id: String,
    pub cardholder_id: String,
    pub product_code: String,
    pub subprovider_code: String,
    pub card_currency: String,
    pub status: String,
    pub label: Option<String>,
    pub provider_card_id: Option<String>,
    pub secrets_enc: Option<String>,
    pub expiry_month: Option<i64>,
    pub expiry_year: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub issued_at: Option<i64>,
    pub activated_at: Option<i64>,
    pub frozen_at: Option<i64>,
    pub closed_at: Option<i64>,
    /// The card's spending limits (JSON, `issuing_domain::controls::limits`); None: none.
    pub limits: Option<String>,
    /// The IANA zone of the limits' calendar windows; None: UTC.
    pub limits_timezone: Option<String>,
}

impl std::fmt::Debug for CardRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardRecord")
            .field("id", &self.id)
            .field("project_id", &self.project_id)
            .field("status", &self.status)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

pub const SORT_KEYS: &[&str] = &[
    "card_id",
    "user_id",
    "status",
    "product_code",
    "created_at",
    "updated_at",
    "issued_at",
    "activated_at",
    "frozen_at",
    "closed_at",
];

#[derive(Debug, Default, Clone)]
pub struct CardFilter {
    pub card_ids: Vec<String>,
    pub external_user_ids: Vec<String>,
    pub user_ids: Vec<String>,
    pub statuses: Vec<String>,
    pub product_codes: Vec<String>,
}

pub(crate) fn from_row(r: &impl RowRead) -> Result<CardRecord, StoreError> {
    Ok(CardRecord {
        id: r.text("id")?,
        project_id: r.text("project_id")?,
        user_id: r.text("user_id")?,
        external_user_id: r.text("external_user_id")?,
        cardholder_id: r.text("cardholder_id")?,
        product_code: r.text("product_code")?,
        subprovider_code: r.text("subprovider_code")?,
        card_currency: r.text("card_currency")?,
        status: r.text("status")?,
        label: r.opt_text("label")?,
        provider_card_id: r.opt_text("provider_card_id")?,
        secrets_enc: r.opt_text("secrets_enc")?,
        expiry_month: r.opt_int("expiry_month")?,
        expiry_year: r.opt_int("expiry_year")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
        issued_at: r.opt_int("issued_at")?,
        activated_at: r.opt_int("activated_at")?,
        frozen_at: r.opt_int("frozen_at")?,
        closed_at: r.opt_int("closed_at")?,
        limits: r.opt_text("limits")?,
        limits_timezone: r.opt_text("limits_timezone")?,
    })
}

/// The project's cards `ids` that exist, by id, and the project's controls revision
/// read with them (`None` when none of them exists), in one query.
pub async fn many(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    ids: &[&str],
) -> Result<(std::collections::HashMap<String, CardRecord>, Option<i64>), StoreError> {
    let rows = conn
        .together(&[many_part(project_id, ids.to_vec())])
        .await?;
    many_of(rows.iter().flatten())
}

/// `many` as a part of a batch's statement (`BatchConn::together`).
pub fn many_part<'a>(project_id: &'a str, ids: Vec<&'a str>) -> Part<'a> {
    Part::Keys(Lookup {
        table: "cards JOIN projects ON projects.id = cards.project_id",
        columns: "cards.*, projects.controls_revision AS controls_revision",
        key: "cards.id",
        scope: "cards.project_id = $1",
        scope_params: vec![project_id.into()],
        keys: ids,
    })
}

/// What `many` answers, from the rows of its part.
pub fn many_of<'r>(
    rows: impl IntoIterator<Item = &'r crate::writer::Row>,
) -> Result<(std::collections::HashMap<String, CardRecord>, Option<i64>), StoreError> {
    let mut revision = None;
    let mut cards = std::collections::HashMap::new();
    for r in rows {
        if revision.is_none() {
            revision = Some(r.int("controls_revision")?);
        }
        let card = from_row(r)?;
        cards.insert(card.id.clone(), card);
    }
    Ok((cards, revision))
}

pub async fn insert(conn: &mut Conn, c: &CardRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO cards (id, project_id, user_id, external_user_id, cardholder_id, product_code, \
         subprovider_code, card_currency, status, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&c.id)
    .bind(&c.project_id)
    .bind(&c.user_id)
    .bind(&c.external_user_id)
    .bind(&c.cardholder_id)
    .bind(&c.product_code)
    .bind(&c.subprovider_code)
    .bind(&c.card_currency)
    .bind(&c.status)
    .bind(c.created_at)
    .bind(c.updated_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// Adds many new cards to `inserts` (a batch writer's), as `insert` writes one.
pub fn insert_many(inserts: &mut crate::query::Inserts, cards: &[CardRecord]) {
    use crate::query::Cell;
    let rows = cards
        .iter()
        .map(|c| {
            vec![
                Cell::text(&c.id),
                Cell::text(&c.project_id),
                Cell::text(&c.user_id),
                Cell::text(&c.external_user_id),
                Cell::text(&c.cardholder_id),
                Cell::text(&c.product_code),
                Cell::text(&c.subprovider_code),
                Cell::text(&c.card_currency),
                Cell::text(&c.status),
                Cell::int(c.created_at),
                Cell::int(c.updated_at),
            ]
        })
        .collect();
    inserts.add(
        "INSERT INTO cards (id, project_id, user_id, external_user_id, cardholder_id, product_code, \
         subprovider_code, card_currency, status, created_at, updated_at)",
        rows,
    );
}

pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<CardRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM cards WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// What never changes about a card once it is written: its product, and where it lives
/// at its provider once the provider issued it (written once, when the card becomes
/// active). Its status is not here: it changes.
#[derive(Clone, Debug)]
pub struct CardFacts {
    pub product_code: String,
    pub subprovider_code: String,
    pub provider_card_id: Option<String>,
}

/// Card facts remembered in process memory. A remembered answer cannot go stale, in
/// this process or across processes sharing the database: the facts never change, a
/// card is never re-issued under its id, and ids are never made twice. Every top-up
/// read its card before it queued (for its product) and again when its order completed
/// (for the provider card), a query each. Bounded: when full the cache starts over,
/// which costs reads, not correctness.
mod facts {
    use super::CardFacts;
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex, MutexGuard};

    /// Far above the cards one process works on in a burst.
    const MAX_ENTRIES: usize = 100_000;

    type Cache = HashMap<(String, String), CardFacts>;
    static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

    fn cache() -> MutexGuard<'static, Cache> {
        // A panic while holding the lock leaves a plain map in a consistent state.
        CACHE.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn get(project_id: &str, id: &str) -> Option<CardFacts> {
        cache()
            .get(&(project_id.to_owned(), id.to_owned()))
            .cloned()
    }

    pub(super) fn put(project_id: &str, id: &str, facts: CardFacts) {
        let mut cache = cache();
        if cache.len() >= MAX_ENTRIES {
            cache.clear();
        }
        cache.insert((project_id.to_owned(), id.to_owned()), facts);
    }
}

/// The card's facts if this process read them before (no query).
pub fn remembered(project_id: &str, id: &str) -> Option<CardFacts> {
    facts::get(project_id, id)
}

/// Remembers the facts of a card read from the database.
pub fn remember(card: &CardRecord) {
    facts::put(
        &card.project_id,
        &card.id,
        CardFacts {
            product_code: card.product_code.clone(),
            subprovider_code: card.subprovider_code.clone(),
            provider_card_id: card.provider_card_id.clone(),
        },
    );
}

/// Where a card lives at its provider: (subprovider, provider card id), once the
/// provider issued it; remembered (`CardFacts`) once known, and then answered without
/// taking a connection from the pool.
pub async fn provider_card(
    store: &crate::Store,
    project_id: &str,
    id: &str,
) -> Result<Option<(String, String)>, StoreError> {
    if let Some(CardFacts {
        subprovider_code,
        provider_card_id: Some(provider_card_id),
        ..
    }) = facts::get(project_id, id)
    {
        return Ok(Some((subprovider_code, provider_card_id)));
    }
    let mut conn = store.conn().await?;
    let Some(card) = get(&mut conn, project_id, id).await? else {
        return Ok(None);
    };
    remember(&card);
    Ok(card
        .provider_card_id
        .map(|provider_card_id| (card.subprovider_code, provider_card_id)))
}

/// The status of each of the project's `ids` that exists.
pub async fn statuses(
    conn: &mut crate::writer::BatchConn<'_>,
    project_id: &str,
    ids: &[&str],
) -> Result<std::collections::HashMap<String, String>, StoreError> {
    let mut found = conn
        .together(&[Part::Keys(statuses_lookup(project_id, ids.to_vec()))])
        .await?;
    statuses_of(found.pop().unwrap_or_default())
}

/// `statuses` as a lookup to run with others; its rows go to `statuses_of`.
pub fn statuses_lookup<'a>(project_id: &'a str, ids: Vec<&'a str>) -> crate::writer::Lookup<'a> {
    crate::writer::Lookup::project_rows("cards", "id, status", project_id, ids)
}

/// Each card's status, by id, from `statuses_lookup`'s rows.
pub fn statuses_of(
    rows: Vec<crate::writer::Row>,
) -> Result<std::collections::HashMap<String, String>, StoreError> {
    use crate::writer::RowRead;
    let mut statuses = std::collections::HashMap::with_capacity(rows.len());
    for row in rows {
        statuses.insert(row.text("id")?, row.text("status")?);
    }
    Ok(statuses)
}

/// A card as a network message finds it under its lock.
#[derive(Debug, Clone)]
pub struct LockedCard {
    pub card: CardRecord,
    pub available: Amount,
    /// The project's `controls_revision` (rules and decision endpoint), read with it.
    pub controls_revision: i64,
}

/// A card with its available funds and its project's controls revision, its accounts
/// locked until the caller's transaction ends on PostgreSQL (funds, then hold: as
/// `ledger::lock_card_accounts`). One query instead of `get`, the lock and the
/// revision: on SQLite every statement is a hand-over to the connection's thread.
/// `None` when the card or its accounts do not exist.
pub async fn get_locking_funds(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<LockedCard>, StoreError> {
    let lock = if conn.backend_name() == "PostgreSQL" {
        " FOR UPDATE OF accounts"
    } else {
        ""
    };
    let sql = format!(
        "SELECT {}, projects.controls_revision AS controls_revision, cards.* \
         FROM accounts JOIN cards ON cards.id = accounts.card_id \
         JOIN projects ON projects.id = cards.project_id \
         WHERE accounts.project_id = $1 AND accounts.card_id = $2 AND cards.project_id = $1 \
         ORDER BY accounts.kind{lock}",
        crate::ledger::FUNDS_COLUMNS
    );
    let rows = sqlx::query(&sql)
        .bind(project_id)
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let card = from_row(first)?;
    let controls_revision = first.try_get("controls_revision")?;
    let (available, _) = crate::ledger::funds_of(project_id, id, &rows)?;
    Ok(Some(LockedCard {
        card,
        available,
        controls_revision,
    }))
}

/// The project's controls revision alone (for a card without accounts).
pub async fn controls_revision(
    conn: &mut BatchConn<'_>,
    project_id: &str,
) -> Result<i64, StoreError> {
    conn.row(
        "SELECT controls_revision FROM projects WHERE id = $1",
        &[project_id.into()],
    )
    .await?
    .ok_or(StoreError::NotFound("project"))?
    .int("controls_revision")
}

/// Replaces a card's limits and their time zone.
pub async fn set_limits(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
    limits: Option<&str>,
    timezone: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE cards SET limits = $1, limits_timezone = $2, updated_at = $3 \
         WHERE project_id = $4 AND id = $5",
    )
    .bind(limits)
    .bind(timezone)
    .bind(now)
    .bind(project_id)
    .bind(card_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Records the provider's card on the issue order's success.
#[derive(Clone, Copy)]
pub struct Issued<'a> {
    pub provider_card_id: &'a str,
    pub label: &'a str,
    /// None when the provider keeps the card number (Lithic: read when asked).
    pub secrets_enc: Option<&'a str>,
    pub expiry_month: i64,
    pub expiry_year: i64,
    pub now: i64,
}

/// Records the provider's cards (each by project and card id), as a part of a batch's
/// statement (`BatchConn::together`): one `UPDATE … RETURNING id` per card.
pub fn issued_part<'a>(issued: &[(&'a str, &'a str, Issued<'a>)]) -> Part<'a> {
    let sql = "UPDATE cards SET status = 'active', provider_card_id = $1, label = $2, \
               secrets_enc = $3, expiry_month = $4, expiry_year = $5, issued_at = $6, \
               activated_at = $6, updated_at = $6 WHERE project_id = $7 AND id = $8 RETURNING id";
    Part::Writes(
        issued
            .iter()
            .map(|(project_id, card_id, i)| {
                let params = vec![
                    i.provider_card_id.into(),
                    i.label.into(),
                    i.secrets_enc.into(),
                    i.expiry_month.into(),
                    i.expiry_year.into(),
                    i.now.into(),
                    (*project_id).into(),
                    (*card_id).into(),
                ];
                (sql.to_owned(), params)
            })
            .collect(),
    )
}

/// The card a provider knows by its own id (an ASA request or an event names only that);
/// any project's, since the provider's ids are its own and unique.
pub async fn by_provider_card(
    conn: &mut Conn,
    subprovider_code: &str,
    provider_card_id: &str,
) -> Result<Option<CardRecord>, StoreError> {
    let row = sqlx::query(
        "SELECT * FROM cards WHERE subprovider_code = $1 AND provider_card_id = $2 LIMIT 1",
    )
    .bind(subprovider_code)
    .bind(provider_card_id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Moves a card from `from` to `to` only if it is still in `from`; false when another
/// request changed it first. `stamp_column` records when (frozen_at, …).
pub async fn transition(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
    from: &str,
    to: &str,
    stamp_column: Option<&'static str>,
    now: i64,
) -> Result<bool, StoreError> {
    let stamp = stamp_column
        .map(|c| format!(", {c} = $1"))
        .unwrap_or_default();
    let sql = format!(
        "UPDATE cards SET status = $2, updated_at = $1{stamp} WHERE project_id = $3 AND id = $4 AND status = $5"
    );
    let done = sqlx::query(&sql)
        .bind(now)
        .bind(to)
        .bind(project_id)
        .bind(card_id)
        .bind(from)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn find(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    filter: &CardFilter,
    page: &PageRequest,
) -> Result<(Vec<CardRecord>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.texts("id", &filter.card_ids);
    f.texts("external_user_id", &filter.external_user_ids);
    f.texts("user_id", &filter.user_ids);
    f.texts("status", &filter.statuses);
    f.texts("product_code", &filter.product_codes);
    let sort = match page.sort_by {
        "card_id" => ("id", true),
        "user_id" => ("user_id", true),
        "status" => ("status", true),
        "product_code" => ("product_code", true),
        "updated_at" => ("updated_at", false),
        "issued_at" => ("issued_at", false),
        "activated_at" => ("activated_at", false),
        "frozen_at" => ("frozen_at", false),
        "closed_at" => ("closed_at", false),
        _ => ("created_at", false),
    };
    let (rows, total) = find_page(conn, backend, f, Source::table("cards"), sort, page).await?;
    Ok((rows.iter().map(from_row).collect::<Result<_, _>>()?, total))
}
