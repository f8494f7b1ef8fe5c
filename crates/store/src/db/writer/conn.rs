//! The connection a batch writer's transaction runs on, and the rows it reads.
//!
//! A batch writer's SQL is the same on both backends (`$N` placeholders), and runs on
//! either of two drivers: sqlx (PostgreSQL, or a pooled SQLite connection) or rusqlite
//! on the SQLite writer's own thread (`sqlite.rs`). Through sqlx every SQLite statement
//! is a hand-over to the connection's worker thread, about a hundred times what SQLite
//! itself takes for a small statement; on the writer's thread a cached statement costs
//! a few microseconds, so a batch there can afford a statement per row.

use crate::db::sql::Cell;
use crate::{Backend, StoreError};
use sqlx::any::{AnyRow, AnyTypeInfoKind};
use sqlx::{AnyConnection, Row as _, ValueRef as _};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// A value bound to a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Param::Text(v.as_deref())
    }
}

impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Param::Int(Some(v))
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(v: Option<i64>) -> Self {
        Param::Int(v)
    }
}

impl<'a> From<&'a Cell> for Param<'a> {
    fn from(c: &'a Cell) -> Self {
        match c {
            Cell::Text(t) => Param::Text(t.as_deref()),
            Cell::Int(i) => Param::Int(*i),
        }
    }
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Param::Text(Some(t)) => ValueRef::Text(t.as_bytes()),
            Param::Int(Some(i)) => ValueRef::Integer(i),
            Param::Text(None) | Param::Int(None) => ValueRef::Null,
        }))
    }
}

/// Where a batch writer's statements go.
pub enum BatchConn<'c> {
    /// The SQLite writer's own connection, on its thread, inside its transaction.
    Sqlite(&'c mut rusqlite::Connection),
    /// A sqlx connection: PostgreSQL, or SQLite outside the writer's thread.
    Sqlx(&'c mut AnyConnection),
}

impl<'c> From<&'c mut AnyConnection> for BatchConn<'c> {
    fn from(c: &'c mut AnyConnection) -> Self {
        BatchConn::Sqlx(c)
    }
}

/// A sqlx connection as a `BatchConn`, for the functions batch writers share with the
/// rest of the code: `f(&mut conn.as_batch(), …)`.
pub trait AsBatch {
    fn as_batch(&mut self) -> BatchConn<'_>;
}

impl AsBatch for AnyConnection {
    fn as_batch(&mut self) -> BatchConn<'_> {
        BatchConn::Sqlx(self)
    }
}

impl BatchConn<'_> {
    /// The same connection, borrowed again.
    pub fn reborrow(&mut self) -> BatchConn<'_> {
        match self {
            BatchConn::Sqlite(c) => BatchConn::Sqlite(c),
            BatchConn::Sqlx(c) => BatchConn::Sqlx(c),
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            BatchConn::Sqlite(_) => Backend::Sqlite,
            BatchConn::Sqlx(c) => Backend::of(c),
        }
    }

    /// Every row `sql` answers.
    pub async fn rows(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        match self {
            BatchConn::Sqlite(c) => sqlite_rows(c, sql, params),
            BatchConn::Sqlx(c) => {
                let rows = bind(sqlx::query(sql), params).fetch_all(&mut **c).await?;
                rows_of_any(&rows)
            }
        }
    }

    /// The rows of `table` (`columns`) whose `key` is each of `keys`, in the keys' order,
    /// among those `scope` matches; `scope` may use `$1`…`$n`, bound to `scope_params`,
    /// and `key` must identify one row within it. `lock` locks them (PostgreSQL), in
    /// that order.
    ///
    /// On the SQLite writer's thread a cached single-key statement runs per key (a few
    /// µs each, and an index lookup whatever SQLite's planner would make of a list);
    /// through sqlx the list is one JSON parameter of one statement (`rows_of_list`),
    /// so a batch costs one hand-over or round trip.
    #[allow(clippy::too_many_arguments)]
    pub async fn rows_by_keys(
        &mut self,
        table: &str,
        columns: &str,
        key: &str,
        scope: &str,
        scope_params: &[Param<'_>],
        keys: &[&str],
        lock: bool,
    ) -> Result<Vec<Row>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let n = scope_params.len() + 1;
        match self {
            BatchConn::Sqlite(_) => {
                let sql = format!("SELECT {columns} FROM {table} WHERE {scope} AND {key} = ${n}");
                let mut params = scope_params.to_vec();
                params.push(Param::Text(None));
                let mut found = Vec::with_capacity(keys.len());
                for k in keys {
                    params[n - 1] = Param::Text(Some(k));
                    found.extend(self.rows(&sql, &params).await?);
                }
                Ok(found)
            }
            BatchConn::Sqlx(_) => {
                let sql = crate::db::sql::rows_of_list(
                    self.backend(),
                    table,
                    columns,
                    key,
                    scope,
                    n,
                    lock,
                );
                let list = crate::db::sql::json_texts(keys.iter().copied());
                let mut params = scope_params.to_vec();
                params.push(Param::Text(Some(&list)));
                self.rows(&sql, &params).await
            }
        }
    }

    /// The first row `sql` answers, if any.
    pub async fn row(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Option<Row>, StoreError> {
        Ok(self.rows(sql, params).await?.into_iter().next())
    }

    /// This transaction's COMMIT returns without waiting for its log flush (PostgreSQL:
    /// `synchronous_commit = off` for this transaction alone; on SQLite a batch's COMMIT
    /// never waits, its `Durable` does). Only for writes a crash may lose harmlessly,
    /// such as a worker's claim: the log is flushed in order, so any later durable
    /// commit makes this one durable too.
    pub async fn commit_without_flush(&mut self) -> Result<(), StoreError> {
        match self {
            BatchConn::Sqlite(_) => Ok(()),
            BatchConn::Sqlx(_) => self
                .execute("SET LOCAL synchronous_commit = off", &[])
                .await
                .map(drop),
        }
    }

    /// Runs one statement; answers the rows it changed. A unique violation is
    /// `StoreError::Conflict`.
    pub async fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        match self {
            BatchConn::Sqlite(c) => {
                let (text, _) = known(sql);
                let mut statement = c.prepare_cached(&text).map_err(sqlite_error)?;
                bind_sqlite(&mut statement, params)?;
                let changed = statement.raw_execute().map_err(sqlite_error)?;
                Ok(u64::try_from(changed).unwrap_or(u64::MAX))
            }
            BatchConn::Sqlx(c) => Ok(bind(sqlx::query(sql), params)
                .execute(&mut **c)
                .await
                .map_err(StoreError::from_write)?
                .rows_affected()),
        }
    }
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

fn bind<'q>(mut query: AnyQuery<'q>, params: &[Param<'q>]) -> AnyQuery<'q> {
    for p in params {
        query = match *p {
            Param::Text(t) => query.bind(t),
            Param::Int(i) => query.bind(i),
        };
    }
    query
}

/// What the writer's thread keeps per statement it ran: its text with SQLite's
/// placeholders (`numbered`), and the columns it answers once read. Both would
/// otherwise be built again for every statement a batch runs, a few percent of the
/// writer thread's time. The columns stay right because the schema does not change
/// under a running writer: migrations run before it starts, and one process serves a
/// SQLite file.
struct Known {
    text: Rc<str>,
    columns: Option<Arc<[String]>>,
}

/// Statement texts kept; the writers run far fewer (the cache starts over beyond it).
const KNOWN_LIMIT: usize = 1024;

thread_local! {
    static KNOWN: RefCell<HashMap<String, Known>> = RefCell::new(HashMap::new());
}

/// `sql` with SQLite's placeholders, and its columns if a query of it ran before.
fn known(sql: &str) -> (Rc<str>, Option<Arc<[String]>>) {
    KNOWN.with(|known| {
        let mut known = known.borrow_mut();
        if let Some(k) = known.get(sql) {
            return (k.text.clone(), k.columns.clone());
        }
        if known.len() >= KNOWN_LIMIT {
            known.clear();
        }
        let text: Rc<str> = numbered(sql).into();
        known.insert(
            sql.to_owned(),
            Known {
                text: text.clone(),
                columns: None,
            },
        );
        (text, None)
    })
}

fn remember_columns(sql: &str, columns: &Arc<[String]>) {
    KNOWN.with(|known| {
        if let Some(k) = known.borrow_mut().get_mut(sql) {
            k.columns = Some(columns.clone());
        }
    });
}

/// `$N` placeholders as SQLite's numbered `?N`, which rusqlite binds by number (SQLite
/// reads `$N` as a name, numbered in order of first appearance, not by `N`). Text in
/// single quotes is left alone.
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c == '$' && !quoted && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

fn bind_sqlite(
    statement: &mut rusqlite::CachedStatement<'_>,
    params: &[Param<'_>],
) -> Result<(), StoreError> {
    for (i, p) in params.iter().enumerate() {
        statement
            .raw_bind_parameter(i + 1, p)
            .map_err(sqlite_error)?;
    }
    Ok(())
}

fn sqlite_rows(
    conn: &mut rusqlite::Connection,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<Row>, StoreError> {
    use rusqlite::types::ValueRef;
    let (text, columns) = known(sql);
    let mut statement = conn.prepare_cached(&text).map_err(sqlite_error)?;
    bind_sqlite(&mut statement, params)?;
    let columns = match columns {
        Some(columns) => columns,
        None => {
            let columns: Arc<[String]> = statement
                .column_names()
                .into_iter()
                .map(str::to_owned)
                .collect();
            remember_columns(sql, &columns);
            columns
        }
    };
    let mut rows = statement.raw_query();
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sqlite_error)? {
        let mut cells = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            cells.push(match r.get_ref(i).map_err(sqlite_error)? {
                ValueRef::Null => Cell::Text(None),
                ValueRef::Integer(v) => Cell::Int(Some(v)),
                ValueRef::Text(t) => Cell::Text(Some(
                    std::str::from_utf8(t)
                        .map_err(|e| StoreError::Corrupt(format!("text that is not UTF-8: {e}")))?
                        .to_owned(),
                )),
                ValueRef::Real(v) => Cell::Int(Some(whole(v)?)),
                ValueRef::Blob(_) => {
                    return Err(StoreError::Corrupt(format!(
                        "a blob in column {}",
                        columns[i]
                    )))
                }
            });
        }
        out.push(Row {
            columns: columns.clone(),
            cells,
        });
    }
    Ok(out)
}

/// A REAL that holds an integer (SQLite answers some aggregates as REAL).
fn whole(v: f64) -> Result<i64, StoreError> {
    // Within ±2^53 a double holds every integer exactly; money is far inside it.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if v.fract() == 0.0 && v.abs() <= EXACT {
        #[allow(clippy::cast_possible_truncation)]
        Ok(v as i64)
    } else {
        Err(StoreError::Corrupt(format!("a fractional number {v}")))
    }
}

/// rusqlite's errors as the store's: a unique or primary key violation is `Conflict`.
pub(crate) fn sqlite_error(e: rusqlite::Error) -> StoreError {
    use rusqlite::ffi::{SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE};
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            StoreError::Conflict
        }
        _ => StoreError::Sqlite(e),
    }
}

fn rows_of_any(rows: &[AnyRow]) -> Result<Vec<Row>, StoreError> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let columns: Arc<[String]> = first
        .columns()
        .iter()
        .map(|c| sqlx::Column::name(c).to_owned())
        .collect();
    rows.iter()
        .map(|r| {
            let cells = (0..columns.len())
                .map(|i| {
                    let raw = r.try_get_raw(i)?;
                    if raw.is_null() {
                        return Ok(Cell::Text(None));
                    }
                    let kind = raw.type_info().kind();
                    Ok(match kind {
                        AnyTypeInfoKind::Text => Cell::Text(Some(r.try_get(i)?)),
                        AnyTypeInfoKind::Bool => {
                            Cell::Int(Some(i64::from(r.try_get::<bool, _>(i)?)))
                        }
                        AnyTypeInfoKind::Real | AnyTypeInfoKind::Double => {
                            Cell::Int(Some(whole(r.try_get::<f64, _>(i)?)?))
                        }
                        _ => Cell::Int(Some(r.try_get(i)?)),
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Row {
                columns: columns.clone(),
                cells,
            })
        })
        .collect()
}

/// A row a batch writer read, by column name.
#[derive(Debug, Clone)]
pub struct Row {
    columns: Arc<[String]>,
    cells: Vec<Cell>,
}

impl Row {
    /// A row from a JSON object (PostgreSQL's `to_jsonb` of a row): numbers and booleans
    /// as integers, strings as text, nulls as NULL.
    pub(crate) fn from_json(text: &str) -> Result<Row, StoreError> {
        let corrupt = |why: &str| StoreError::Corrupt(format!("a row as JSON: {why}"));
        let serde_json::Value::Object(object) =
            serde_json::from_str(text).map_err(|e| corrupt(&e.to_string()))?
        else {
            return Err(corrupt("not an object"));
        };
        let mut columns = Vec::with_capacity(object.len());
        let mut cells = Vec::with_capacity(object.len());
        for (column, value) in object {
            cells.push(match value {
                serde_json::Value::Null => Cell::Text(None),
                serde_json::Value::String(s) => Cell::Text(Some(s)),
                serde_json::Value::Bool(b) => Cell::Int(Some(i64::from(b))),
                serde_json::Value::Number(n) => match n.as_i64() {
                    Some(i) => Cell::Int(Some(i)),
                    None => Cell::Int(Some(whole(n.as_f64().unwrap_or(f64::NAN))?)),
                },
                other => return Err(corrupt(&format!("{column} holds {other}"))),
            });
            columns.push(column);
        }
        Ok(Row {
            columns: columns.into(),
            cells,
        })
    }

    fn cell(&self, column: &str) -> Result<&Cell, StoreError> {
        self.columns
            .iter()
            .position(|c| c == column)
            .and_then(|i| self.cells.get(i))
            .ok_or_else(|| StoreError::Corrupt(format!("no column {column}")))
    }
}

/// Reading a row's columns by name, from sqlx's rows and from a batch writer's alike, so
/// one function turns either into a record.
pub trait RowRead {
    fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError>;
    fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError>;

    fn int(&self, column: &str) -> Result<i64, StoreError> {
        self.opt_int(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("{column} is NULL")))
    }

    fn text(&self, column: &str) -> Result<String, StoreError> {
        self.opt_text(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("{column} is NULL")))
    }
}

impl RowRead for Row {
    fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        match self.cell(column)? {
            Cell::Int(v) => Ok(*v),
            Cell::Text(None) => Ok(None),
            Cell::Text(Some(_)) => Err(StoreError::Corrupt(format!("{column} is not a number"))),
        }
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        match self.cell(column)? {
            Cell::Text(v) => Ok(v.clone()),
            Cell::Int(None) => Ok(None),
            Cell::Int(Some(_)) => Err(StoreError::Corrupt(format!("{column} is not text"))),
        }
    }
}

impl RowRead for AnyRow {
    fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(column)?)
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(column)?)
    }

    fn int(&self, column: &str) -> Result<i64, StoreError> {
        Ok(self.try_get(column)?)
    }

    fn text(&self, column: &str) -> Result<String, StoreError> {
        Ok(self.try_get(column)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_quotes() {
        assert_eq!(
            numbered("SELECT $12, '$1', x FROM t WHERE a = $2 AND b = '$'"),
            "SELECT ?12, '$1', x FROM t WHERE a = ?2 AND b = '$'"
        );
        assert_eq!(whole(3.0).ok(), Some(3));
        assert!(whole(3.5).is_err());
    }

    #[test]
    fn a_statement_is_numbered_once_and_keeps_its_columns() {
        let sql = "SELECT $2 AS b, $1 AS a";
        let (text, columns) = known(sql);
        assert_eq!(&*text, "SELECT ?2 AS b, ?1 AS a");
        assert!(columns.is_none());
        let read: Arc<[String]> = vec!["b".to_owned(), "a".to_owned()].into();
        remember_columns(sql, &read);
        let (again, columns) = known(sql);
        assert!(Rc::ptr_eq(&text, &again));
        assert_eq!(columns.as_deref(), Some(&read[..]));
    }
}
