//! Several lookups of a batch in one round trip.
//!
//! On PostgreSQL a statement that runs in well under 0.1 ms costs a batch writer
//! 0.25–1 ms on a loaded machine: the round trip wakes the database's process and then
//! the writer's task (docs/benchmarks.md, issue 21's fifth round). A batch's lookups
//! that depend on nothing read in the batch (its idempotency keys, the statuses of its
//! cards and cardholders) go as one statement instead: each lookup a subquery, its rows
//! tagged with its place and carried as JSON. On SQLite every lookup runs as it would
//! alone: on the writer's thread a statement costs microseconds.

use super::conn::{BatchConn, Param, Row};
use crate::StoreError;

/// The rows of `table` (`columns`) whose `key` is each of `keys`, among those `scope`
/// matches (`$1`…`$n` bound to `scope_params`): `BatchConn::rows_by_keys`, unlocked,
/// to be run with others by `lookups_together`.
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

impl BatchConn<'_> {
    /// Each lookup's rows, in the lookups' order; one round trip on PostgreSQL for all
    /// of them (none for a lookup of no keys).
    pub async fn lookups_together(
        &mut self,
        lookups: &[Lookup<'_>],
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        let asked: Vec<usize> = (0..lookups.len())
            .filter(|i| !lookups[*i].keys.is_empty())
            .collect();
        if self.backend() != crate::Backend::Postgres || asked.len() < 2 {
            let mut found = Vec::with_capacity(lookups.len());
            for l in lookups {
                found.push(
                    self.rows_by_keys(
                        l.table,
                        l.columns,
                        l.key,
                        l.scope,
                        &l.scope_params,
                        &l.keys,
                        false,
                    )
                    .await?,
                );
            }
            return Ok(found);
        }
        let lists: Vec<String> = lookups
            .iter()
            .map(|l| crate::query::json_texts(l.keys.iter().copied()))
            .collect();
        let mut params: Vec<Param<'_>> = Vec::new();
        let mut parts = Vec::with_capacity(asked.len());
        for i in &asked {
            let l = &lookups[*i];
            let n = l.scope_params.len() + 1;
            let sql = crate::query::rows_of_list(
                crate::Backend::Postgres,
                l.table,
                l.columns,
                l.key,
                l.scope,
                n,
                false,
            );
            parts.push(format!(
                "SELECT {i} AS part, to_jsonb(q{i})::text AS row FROM ({}) AS q{i}",
                crate::query::shifted(&sql, params.len())
            ));
            params.extend(l.scope_params.iter().copied());
            params.push(Param::Text(Some(&lists[*i])));
        }
        let rows = self.rows(&parts.join(" UNION ALL "), &params).await?;
        let mut found: Vec<Vec<Row>> = lookups.iter().map(|_| Vec::new()).collect();
        for r in rows {
            use super::conn::RowRead;
            let part = usize::try_from(r.int("part")?)
                .ok()
                .and_then(|p| found.get_mut(p))
                .ok_or_else(|| StoreError::Corrupt("a lookup's row out of place".into()))?;
            part.push(Row::from_json(&r.text("row")?)?);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
