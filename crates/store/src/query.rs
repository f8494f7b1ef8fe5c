//! A tiny builder for the find endpoints' dynamic filters. Column names only ever come
//! from the code's own whitelists; every value is a bound parameter.

use crate::Backend;
use issuing_wire::PageRequest;
use sqlx::any::AnyArguments;
use sqlx::any::AnyRow;
use sqlx::query::Query;
use sqlx::{Any, Row};

#[derive(Debug, Clone)]
pub enum Arg {
    Text(String),
    Int(i64),
}

#[derive(Debug, Default)]
pub struct Filter {
    clauses: Vec<String>,
    args: Vec<Arg>,
}

impl Filter {
    /// Every filter starts scoped to one project: no find can cross projects.
    pub fn for_project(project_column: &str, project_id: &str) -> Self {
        let mut f = Filter::default();
        f.eq(project_column, Arg::Text(project_id.to_owned()));
        f
    }

    fn placeholder(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }

    pub fn eq(&mut self, column: &str, arg: Arg) {
        let p = self.placeholder(arg);
        self.clauses.push(format!("{column} = {p}"));
    }

    /// `column = value` with the value hidden from PostgreSQL's planner (a scalar
    /// subquery), so the plan is the one for a typical value. For a value that owns a
    /// large, old share of the table (a card with 100,000 of 1,000,000 transactions, all
    /// from its first days), the planner's own choice walks a newer-first index of every
    /// row and filters: 270 ms for the console's card page against 0.1 ms through the
    /// `(card_id, created_at, id)` index (docs/benchmarks.md). SQLite still searches the
    /// index by the value.
    pub fn eq_planned_as_typical(&mut self, column: &str, arg: Arg) {
        let p = self.placeholder(arg);
        self.clauses.push(format!("{column} = (SELECT {p})"));
    }

    pub fn any_of(&mut self, column: &str, args: Vec<Arg>) {
        if args.is_empty() {
            return;
        }
        let ps: Vec<String> = args.into_iter().map(|a| self.placeholder(a)).collect();
        self.clauses
            .push(format!("{column} IN ({})", ps.join(", ")));
    }

    pub fn texts(&mut self, column: &str, values: &[String]) {
        self.any_of(column, values.iter().cloned().map(Arg::Text).collect());
    }

    /// A bound value for SQL the caller writes itself (a `LIMIT`); its placeholder.
    pub fn push(&mut self, arg: Arg) -> String {
        self.placeholder(arg)
    }

    pub fn less_than(&mut self, column: &str, arg: Arg) {
        let p = self.placeholder(arg);
        self.clauses.push(format!("{column} < {p}"));
    }

    /// Keyset paging, newest first: rows strictly before (`at`, `id`) in the order
    /// `at_column DESC, id_column DESC`, which an index on both columns serves.
    pub fn before(&mut self, at_column: &str, id_column: &str, at: i64, id: &str) {
        let a = self.placeholder(Arg::Int(at));
        let b = self.placeholder(Arg::Text(id.to_owned()));
        self.clauses
            .push(format!("({at_column}, {id_column}) < ({a}, {b})"));
    }

    /// Rows where any of `columns` equals `value` (one bound value).
    pub fn any_column(&mut self, columns: &[&str], value: &str) {
        let p = self.placeholder(Arg::Text(value.to_owned()));
        let ors: Vec<String> = columns.iter().map(|c| format!("{c} = {p}")).collect();
        self.clauses.push(format!("({})", ors.join(" OR ")));
    }

    /// Matches no row (a scope that names no project).
    pub fn nothing(&mut self) {
        self.clauses.push("1 = 0".to_owned());
    }

    pub fn at_least(&mut self, column: &str, value: Option<i64>) {
        if let Some(v) = value {
            let p = self.placeholder(Arg::Int(v));
            self.clauses.push(format!("{column} >= {p}"));
        }
    }

    pub fn at_most(&mut self, column: &str, value: Option<i64>) {
        if let Some(v) = value {
            let p = self.placeholder(Arg::Int(v));
            self.clauses.push(format!("{column} <= {p}"));
        }
    }

    pub fn where_sql(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }

    /// `ORDER BY … LIMIT … OFFSET …` for a page. Missing values sort last in both
    /// directions and text compares bytewise, so both backends order rows the same way;
    /// the id breaks ties so pages never overlap.
    pub fn page_sql(
        &mut self,
        backend: Backend,
        sort_column: &str,
        is_text: bool,
        id_column: &str,
        page: &PageRequest,
    ) -> String {
        let dir = page.sort_dir.sql();
        let collate = match (backend, is_text) {
            (Backend::Postgres, true) => " COLLATE \"C\"",
            _ => "",
        };
        let limit = self.placeholder(Arg::Int(page.limit));
        let offset = self.placeholder(Arg::Int(page.skip));
        format!(
            " ORDER BY CASE WHEN {sort_column} IS NULL THEN 1 ELSE 0 END, \
             {sort_column}{collate} {dir}, {id_column} {dir} LIMIT {limit} OFFSET {offset}"
        )
    }

    pub fn bind<'q>(&'q self, sql: &'q str) -> Query<'q, Any, AnyArguments<'q>> {
        let mut q = sqlx::query(sql);
        for arg in &self.args {
            q = match arg {
                Arg::Text(s) => q.bind(s.as_str()),
                Arg::Int(i) => q.bind(*i),
            };
        }
        q
    }
}

/// The rows a find reads: `select` columns `from` a table or join, with `id` breaking
/// ties in the sort.
pub struct Source<'a> {
    pub select: &'a str,
    pub from: &'a str,
    pub id: &'a str,
}

impl<'a> Source<'a> {
    /// Every column of one table whose key is `id`.
    pub fn table(name: &'a str) -> Self {
        Source {
            select: "*",
            from: name,
            id: "id",
        }
    }
}

/// Runs a find: the total count of matching rows and one page of them sorted by
/// `sort` (column, is-text).
pub async fn find_page(
    conn: &mut crate::Conn,
    backend: Backend,
    mut f: Filter,
    src: Source<'_>,
    sort: (&str, bool),
    page: &PageRequest,
) -> Result<(Vec<AnyRow>, i64), crate::StoreError> {
    let Source {
        select,
        from,
        id: id_column,
    } = src;
    let where_sql = f.where_sql();
    let count_sql = format!("SELECT COUNT(*) AS n FROM {from}{where_sql}");
    let total: i64 = f
        .bind(&count_sql)
        .fetch_one(&mut *conn)
        .await?
        .try_get("n")?;
    let page_sql = f.page_sql(backend, sort.0, sort.1, id_column, page);
    let sql = format!("SELECT {select} FROM {from}{where_sql}{page_sql}");
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    Ok((rows, total))
}

/// SQLite's and PostgreSQL's limits on a statement's parameters are 32,766 and 65,535;
/// a multi-row insert stays well under both.
const MAX_PARAMS: usize = 16_000;

/// One value of a row `insert_rows` writes.
#[derive(Debug, Clone)]
pub enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
}

impl Cell {
    pub fn text(value: impl Into<String>) -> Cell {
        Cell::Text(Some(value.into()))
    }

    pub fn int(value: i64) -> Cell {
        Cell::Int(Some(value))
    }
}

/// Inserts `rows` with as few statements as the parameter limit allows: `head` is
/// `INSERT INTO t (c1, …, cN)` and every row holds N cells in that order. The SQL text
/// varies with the number of rows, so it is not kept prepared (a batch writer would
/// otherwise fill the connection's statement cache with one entry per batch size).
pub async fn insert_rows(
    conn: &mut crate::Conn,
    head: &str,
    rows: &[Vec<Cell>],
) -> Result<(), crate::StoreError> {
    let Some(columns) = rows.first().map(Vec::len) else {
        return Ok(());
    };
    assert!(
        columns > 0 && columns <= MAX_PARAMS && rows.iter().all(|r| r.len() == columns),
        "every row has the same cells, and one row fits a statement"
    );
    for chunk in rows.chunks(MAX_PARAMS / columns) {
        let sql = format!("{head} VALUES {}", values_sql(chunk.len(), columns));
        let mut query = sqlx::query(&sql).persistent(false);
        for cell in chunk.iter().flatten() {
            query = match cell {
                Cell::Text(text) => query.bind(text.as_deref()),
                Cell::Int(int) => query.bind(*int),
            };
        }
        query
            .execute(&mut *conn)
            .await
            .map_err(crate::StoreError::from_write)?;
    }
    Ok(())
}

/// `($1, …, $N), ($N+1, …), …` for `rows` rows of `columns` values.
fn values_sql(rows: usize, columns: usize) -> String {
    let mut sql = String::with_capacity(rows * columns * 5);
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..columns {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("${}", row * columns + column + 1));
        }
        sql.push(')');
    }
    sql
}

#[cfg(test)]
mod tests {
    #[test]
    fn values_number_every_row_after_the_last() {
        assert_eq!(super::values_sql(2, 3), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(super::values_sql(1, 1), "($1)");
    }
}
