//! A tiny builder for the find endpoints' dynamic filters. Column names only ever come
//! from the code's own whitelists; every value is a bound parameter.

pub(crate) use crate::db::sql::placeholders;
pub use crate::db::sql::{json_texts, rows_of_list, Cell};
use crate::writer::{BatchConn, Param, Row};
use crate::Backend;
use issuing_wire::PageRequest;
use sqlx::any::AnyArguments;
use sqlx::any::AnyRow;
use sqlx::query::Query;
use sqlx::{Any, Row as _};

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

/// The rows (`columns`) of the project's `table` whose ids are `ids`, in their order,
/// locked if `lock` (PostgreSQL): `rows_of_list` for the common case.
pub async fn project_rows_by_id(
    conn: &mut BatchConn<'_>,
    table: &str,
    columns: &str,
    project_id: &str,
    ids: &[&str],
    lock: bool,
) -> Result<Vec<Row>, crate::StoreError> {
    conn.rows_by_keys(
        table,
        columns,
        "id",
        "project_id = $1",
        &[project_id.into()],
        ids,
        lock,
    )
    .await
}

/// Rows for several tables, written together by `write`: one statement per table with
/// one parameter each, the rows as a JSON array of arrays that the database takes apart
/// in order (`json_each` on SQLite, `jsonb_array_elements` on PostgreSQL). A batch
/// writer's inserts cost one hand-over to SQLite's connection thread in all (the
/// statements go as one multi-statement query) and one round trip to PostgreSQL (one
/// statement of data-modifying CTEs), whatever the number of rows. One parameter per
/// table, because binding is what a statement of many rows costs through sqlx (SQLite
/// finds each `$N` by name: 10% of a batch writer's profile with a thousand of them).
#[derive(Debug, Default)]
pub struct Inserts {
    /// `INSERT INTO t (c1, …, cN)` and its rows of N cells, in the order to write them
    /// (a table before the tables whose foreign keys point at it).
    tables: Vec<(&'static str, Vec<Vec<Cell>>)>,
    /// PostgreSQL channels to NOTIFY from the same statement (sent at commit): a
    /// wake-up costs no round trip of its own.
    notify: Vec<&'static str>,
}

impl Inserts {
    /// Adds rows under `head`, `INSERT INTO t (c1, …, cN)`; every row holds N cells in
    /// that order. Rows added right after rows of the same `head` join them: each card's
    /// accounts are added on their own, and on PostgreSQL a statement per call made a
    /// batch of card issues one insert of some forty parts, planned afresh for each
    /// batch size. Only the last table is joined, so the order of tables holds.
    pub fn add(&mut self, head: &'static str, mut rows: Vec<Vec<Cell>>) {
        if rows.is_empty() {
            return;
        }
        assert!(
            rows.iter()
                .all(|r| !r.is_empty() && r.len() == rows[0].len()),
            "every row has the same cells"
        );
        match self.tables.last_mut() {
            Some((last, earlier))
                if *last == head && earlier.first().map(Vec::len) == Some(rows[0].len()) =>
            {
                earlier.append(&mut rows);
            }
            _ => self.tables.push((head, rows)),
        }
    }

    /// Sends NOTIFY on `channel` with the rows (PostgreSQL; nothing on SQLite, whose
    /// writer wakes its own process's workers).
    pub(crate) fn notify(&mut self, channel: &'static str) {
        if !self.notify.contains(&channel) {
            self.notify.push(channel);
        }
    }

    /// Writes every table's rows, in the order they were added. On the SQLite writer's
    /// own connection a cached statement per table runs once per row (a statement costs
    /// microseconds there); through sqlx each table is one statement with its rows as one
    /// JSON parameter, and all of them one query.
    pub async fn write(self, conn: &mut BatchConn<'_>) -> Result<(), crate::StoreError> {
        let postgres = conn.backend() == crate::Backend::Postgres;
        if self.tables.is_empty() && (self.notify.is_empty() || !postgres) {
            return Ok(());
        }
        if let BatchConn::Sqlite(_) = conn {
            for (head, rows) in &self.tables {
                let width = rows.first().map_or(0, Vec::len);
                let sql = format!("{head} VALUES ({})", placeholders(1, width));
                for row in rows {
                    let params: Vec<Param<'_>> = row.iter().map(Param::from).collect();
                    conn.execute(&sql, &params).await?;
                }
            }
            return Ok(());
        }
        let mut statements = Vec::with_capacity(self.tables.len());
        for (i, (head, rows)) in self.tables.iter().enumerate() {
            let param = i + 1;
            let first = rows.first().map(Vec::as_slice).unwrap_or_default();
            let select = if postgres {
                let columns: Vec<String> = first
                    .iter()
                    .enumerate()
                    .map(|(c, cell)| match cell {
                        Cell::Text(_) => format!("row ->> {c}"),
                        Cell::Int(_) => format!("(row ->> {c})::bigint"),
                    })
                    .collect();
                format!(
                    "SELECT {} FROM jsonb_array_elements(${param}::jsonb) WITH ORDINALITY \
                     AS rows (row, n) ORDER BY n",
                    columns.join(", ")
                )
            } else {
                let columns: Vec<String> =
                    (0..first.len()).map(|c| format!("value ->> {c}")).collect();
                format!(
                    "SELECT {} FROM json_each(${param}) ORDER BY key",
                    columns.join(", ")
                )
            };
            statements.push(if postgres {
                format!("w{i} AS ({head} {select} RETURNING 1)")
            } else {
                format!("{head} {select}")
            });
        }
        let sql = if postgres {
            // The channels follow the tables' parameters.
            let tail = if self.notify.is_empty() {
                "SELECT 1".to_owned()
            } else {
                let calls: Vec<String> = (0..self.notify.len())
                    .map(|i| format!("pg_notify(${}, '')", self.tables.len() + i + 1))
                    .collect();
                format!("SELECT {}", calls.join(", "))
            };
            if statements.is_empty() {
                tail
            } else {
                format!("WITH {} {tail}", statements.join(", "))
            }
        } else {
            statements.join(";\n")
        };
        let json: Vec<String> = self
            .tables
            .iter()
            .map(|(_, rows)| {
                let rows: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|row| row.iter().map(Cell::json).collect())
                    .collect();
                serde_json::Value::from(rows).to_string()
            })
            .collect();
        let mut params: Vec<Param<'_>> = json.iter().map(Param::from).collect();
        if postgres {
            params.extend(self.notify.iter().map(|c| Param::from(*c)));
        }
        conn.execute(&sql, &params).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Cell, Inserts};

    /// Rows added right after rows of the same statement join them; a table added in
    /// between keeps its place.
    #[test]
    fn consecutive_rows_of_a_table_go_together() {
        let (a, b) = ("INSERT INTO a (x)", "INSERT INTO b (x)");
        let row = |v: i64| vec![Cell::int(v)];
        let mut inserts = Inserts::default();
        inserts.add(a, vec![row(1)]);
        inserts.add(a, vec![row(2), row(3)]);
        inserts.add(b, vec![row(4)]);
        inserts.add(a, vec![row(5)]);
        let shape: Vec<(&str, usize)> = inserts.tables.iter().map(|(h, r)| (*h, r.len())).collect();
        assert_eq!(shape, [(a, 3), (b, 1), (a, 1)]);
    }
}
