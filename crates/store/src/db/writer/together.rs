//! Several lookups (and writes) of a batch in one round trip.
//!
//! On PostgreSQL a statement that runs in well under 0.1 ms costs a batch writer
//! 0.25–1 ms on a loaded machine: the round trip wakes the database's process and then
//! the writer's task (docs/benchmarks.md, issue 21's fifth round). A batch's lookups
//! that depend on nothing read in the batch (its idempotency keys, the statuses of its
//! cards and cardholders, its accounts locked, its project's webhook subscriptions, and
//! the saves of the orders it completes) go as one statement instead: each part a
//! subquery (writes: data-modifying CTEs), its rows tagged with its place and carried as
//! JSON. On SQLite every part runs as it would alone: on the writer's thread a statement
//! costs microseconds.

use super::conn::{BatchConn, Param, Row};
use crate::StoreError;

/// The rows of `table` (`columns`) whose `key` is each of `keys`, among those `scope`
/// matches (`$1`…`$n` bound to `scope_params`): `BatchConn::rows_by_keys`, to be run
/// with others by `together` (as `Part::Keys`, or `Part::Locked`).
#[derive(Debug, Clone)]
pub struct Lookup<'a> {
    pub table: &'static str,
    pub columns: &'static str,
    pub key: &'static str,
    pub scope: &'static str,
    pub scope_params: Vec<Param<'a>>,
    pub keys: Vec<&'a str>,
}

impl<'a> Lookup<'a> {
    /// The project's rows of `table` whose ids are `ids`.
    pub fn project_rows(
        table: &'static str,
        columns: &'static str,
        project_id: &'a str,
        ids: Vec<&'a str>,
    ) -> Lookup<'a> {
        Lookup {
            table,
            columns,
            key: "id",
            scope: "project_id = $1",
            scope_params: vec![project_id.into()],
            keys: ids,
        }
    }
}

/// One part of a statement that `BatchConn::together` runs with others; its rows come
/// back as its own.
#[derive(Debug, Clone)]
pub enum Part<'a> {
    /// The rows of a lookup (none asked for no keys).
    Keys(Lookup<'a>),
    /// The rows of a lookup, each locked as the list reaches it (PostgreSQL), so in the
    /// list's order.
    Locked(Lookup<'a>),
    /// A query of its own (`$1`… bound to `params`).
    Select { sql: String, params: Vec<Param<'a>> },
    /// Writes, each a statement with `RETURNING` (`$1`… bound to its parameters); the
    /// part's rows are every statement's returned rows. On PostgreSQL each is a
    /// data-modifying CTE of the one statement (run once, to completion, whatever reads
    /// it); on SQLite each runs alone.
    Writes(Vec<(String, Vec<Param<'a>>)>),
}

impl Part<'_> {
    /// The statements the part takes run alone (none: nothing to run).
    fn statements(&self) -> usize {
        match self {
            Part::Keys(l) | Part::Locked(l) => usize::from(!l.keys.is_empty()),
            Part::Select { .. } => 1,
            Part::Writes(w) => w.len(),
        }
    }
}

impl BatchConn<'_> {
    /// Each part's rows, in the parts' order; one round trip on PostgreSQL for all of
    /// them. There the reads run in their order (a row locked by an earlier part is held
    /// when a later one runs), the writes once each, to completion, in no promised order
    /// against the reads (another transaction that takes the same rows the other way
    /// round ends in PostgreSQL's deadlock error, and a batch writer then reruns its
    /// items one by one), and all of it on one snapshot, so no part may read what a
    /// `Writes` part writes (on SQLite, where each part runs alone, it would). On the
    /// SQLite writer's thread a statement costs microseconds.
    pub async fn together(&mut self, parts: &[Part<'_>]) -> Result<Vec<Vec<Row>>, StoreError> {
        let asked: Vec<usize> = (0..parts.len())
            .filter(|i| parts[*i].statements() > 0)
            .collect();
        let statements: usize = parts.iter().map(Part::statements).sum();
        if self.backend() != crate::Backend::Postgres || statements < 2 {
            let mut found = Vec::with_capacity(parts.len());
            for part in parts {
                found.push(self.alone(part).await?);
            }
            return Ok(found);
        }
        // Each lookup's keys as the JSON list `rows_of_list` takes (bound by reference).
        let lists: Vec<String> = parts
            .iter()
            .map(|p| match p {
                Part::Keys(l) | Part::Locked(l) => {
                    crate::db::sql::json_texts(l.keys.iter().copied())
                }
                Part::Select { .. } | Part::Writes(_) => String::new(),
            })
            .collect();
        let mut params: Vec<Param<'_>> = Vec::new();
        let (mut writes, mut selects) = (Vec::new(), Vec::with_capacity(asked.len()));
        for i in &asked {
            let sql = match &parts[*i] {
                Part::Keys(l) | Part::Locked(l) => {
                    let lock = matches!(parts[*i], Part::Locked(_));
                    let sql = crate::db::sql::rows_of_list(
                        crate::Backend::Postgres,
                        l.table,
                        l.columns,
                        l.key,
                        l.scope,
                        l.scope_params.len() + 1,
                        lock,
                    );
                    let sql = crate::db::sql::shifted(&sql, params.len());
                    params.extend(l.scope_params.iter().copied());
                    params.push(Param::Text(Some(&lists[*i])));
                    sql
                }
                Part::Select { sql, params: own } => {
                    let sql = crate::db::sql::shifted(sql, params.len());
                    params.extend(own.iter().copied());
                    sql
                }
                Part::Writes(statements) => {
                    let mut reads = Vec::with_capacity(statements.len());
                    for (j, (sql, own)) in statements.iter().enumerate() {
                        let name = format!("w{i}_{j}");
                        let sql = crate::db::sql::shifted(sql, params.len());
                        writes.push(format!("{name} AS ({sql})"));
                        params.extend(own.iter().copied());
                        reads.push(format!("SELECT * FROM {name}"));
                    }
                    reads.join(" UNION ALL ")
                }
            };
            selects.push(format!(
                "SELECT {i} AS part, to_jsonb(q{i})::text AS row FROM ({sql}) AS q{i}"
            ));
        }
        let head = if writes.is_empty() {
            String::new()
        } else {
            format!("WITH {} ", writes.join(", "))
        };
        let rows = self
            .rows(&format!("{head}{}", selects.join(" UNION ALL ")), &params)
            .await?;
        let mut found: Vec<Vec<Row>> = parts.iter().map(|_| Vec::new()).collect();
        for r in rows {
            use super::conn::RowRead;
            let part = usize::try_from(r.int("part")?)
                .ok()
                .and_then(|p| found.get_mut(p))
                .ok_or_else(|| StoreError::Corrupt("a part's row out of place".into()))?;
            part.push(Row::from_json(&r.text("row")?)?);
        }
        Ok(found)
    }

    /// One part's rows, in a statement (or, for writes, statements) of its own.
    async fn alone(&mut self, part: &Part<'_>) -> Result<Vec<Row>, StoreError> {
        match part {
            Part::Keys(l) | Part::Locked(l) => {
                let lock = matches!(part, Part::Locked(_));
                self.rows_by_keys(
                    l.table,
                    l.columns,
                    l.key,
                    l.scope,
                    &l.scope_params,
                    &l.keys,
                    lock,
                )
                .await
            }
            Part::Select { sql, params } => self.rows(sql, params).await,
            Part::Writes(statements) => {
                let mut found = Vec::new();
                for (sql, params) in statements {
                    found.extend(self.rows(sql, params).await?);
                }
                Ok(found)
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::conn::RowRead;
    use super::*;

    /// Every kind of part on both backends: each part's rows come back in its place and
    /// in its order, another project's rows never, and the writes stand.
    pub(crate) async fn parts_come_back_in_place(store: &crate::Store) {
        let mut conn = store.conn().await.unwrap();
        for sql in [
            "CREATE TABLE together_test (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, n BIGINT NOT NULL)",
            "INSERT INTO together_test (id, project_id, n) VALUES ('a', 'p', 1), ('b', 'p', 2), ('c', 'p', 3), ('d', 'q', 4)",
        ] {
            sqlx::query(sql).execute(&mut *conn).await.unwrap();
        }
        drop(conn);
        let (found, durable) = store
            .write_batch(|mut conn| {
                Box::pin(async move {
                    let add = "UPDATE together_test SET n = n + 10 WHERE id = $1 AND project_id = $2 RETURNING id, n";
                    let of_p = |ids: Vec<&'static str>| Lookup::project_rows("together_test", "id, n", "p", ids);
                    let parts = [
                        Part::Writes(vec![
                            (add.to_owned(), vec!["a".into(), "p".into()]),
                            (add.to_owned(), vec!["d".into(), "p".into()]),
                        ]),
                        Part::Keys(of_p(vec!["c", "d", "b"])),
                        Part::Locked(of_p(vec!["b"])),
                        Part::Keys(of_p(Vec::new())),
                        Part::Select {
                            sql: "SELECT id FROM together_test WHERE project_id = $1 AND n > $2 ORDER BY id".to_owned(),
                            params: vec!["q".into(), 0.into()],
                        },
                    ];
                    conn.together(&parts).await
                })
            })
            .await
            .unwrap();
        durable.wait().await.unwrap();
        let ids = |rows: &Vec<Row>| -> Vec<String> {
            rows.iter().map(|r| r.text("id").unwrap()).collect()
        };
        assert_eq!(found.len(), 5);
        assert_eq!(ids(&found[0]), ["a"], "only the project's row is written");
        assert_eq!(found[0][0].int("n").unwrap(), 11);
        assert_eq!(
            ids(&found[1]),
            ["c", "b"],
            "in the list's order, within the project"
        );
        assert_eq!(ids(&found[2]), ["b"]);
        assert!(found[3].is_empty());
        assert_eq!(ids(&found[4]), ["d"]);
        let mut conn = store.conn().await.unwrap();
        let n: Vec<i64> = sqlx::query_scalar("SELECT n FROM together_test ORDER BY id")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        assert_eq!(n, [11, 2, 3, 4]);
        sqlx::query("DROP TABLE together_test")
            .execute(&mut *conn)
            .await
            .unwrap();
    }

    #[test]
    fn a_row_comes_back_from_its_json() {
        use super::super::conn::RowRead;
        let row = Row::from_json(r#"{"id": "c_1", "n": 42, "gone": null, "on": true}"#)
            .expect("an object");
        assert_eq!(row.text("id").ok().as_deref(), Some("c_1"));
        assert_eq!(row.int("n").ok(), Some(42));
        assert_eq!(row.opt_text("gone").ok(), Some(None));
        assert_eq!(row.int("on").ok(), Some(1));
        assert!(Row::from_json("[1]").is_err());
    }
}
