//! The SQL text both backends share, built for a statement that stays prepared: a
//! list of keys as one JSON parameter, rows as JSON cells, numbered placeholders.

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

    pub(crate) fn json(&self) -> serde_json::Value {
        match self {
            Cell::Text(text) => text.as_deref().map_or(serde_json::Value::Null, Into::into),
            Cell::Int(int) => int.map_or(serde_json::Value::Null, Into::into),
        }
    }
}

/// A query for the rows of `table` whose `key` is one of a list of texts bound as one
/// JSON parameter (`$n`, an array of strings), in the list's order, among those that
/// match `scope` (which may use other parameters); `key` must identify one row within
/// the scope. `lock` locks them (PostgreSQL), in that order. One SQL text for any length,
/// so the statement stays prepared, and one bound value: a batch writer's `IN` list of
/// 64 placeholders cost a fresh statement (and on PostgreSQL a round trip to prepare it)
/// per batch size.
///
/// PostgreSQL looks each item up by index (`LATERAL … LIMIT 1`, which the planner may not
/// flatten): the generic plan of a plain `IN`/`= ANY` list estimated a project's rows at
/// one and filtered all of them instead (6 ms for one project's 7,500 idempotency keys).
pub fn rows_of_list(
    backend: crate::Backend,
    table: &str,
    columns: &str,
    key: &str,
    scope: &str,
    n: usize,
    lock: bool,
) -> String {
    match backend {
        crate::Backend::Postgres => {
            let lock = if lock { " FOR UPDATE" } else { "" };
            format!(
                "SELECT found.* FROM jsonb_array_elements_text(${n}::jsonb) WITH ORDINALITY \
                 AS list (item, place) CROSS JOIN LATERAL (SELECT {columns} FROM {table} \
                 WHERE {scope} AND {key} = list.item LIMIT 1{lock}) AS found ORDER BY list.place"
            )
        }
        crate::Backend::Sqlite => {
            // Qualified: `json_each` has columns of its own (`id`, `key`, …).
            let outer = if key.contains('.') {
                key.to_owned()
            } else {
                format!("{table}.{key}")
            };
            format!(
                "SELECT {columns} FROM {table} WHERE {scope} AND {key} IN (SELECT value FROM json_each(${n})) \
                 ORDER BY (SELECT key FROM json_each(${n}) WHERE value = {outer})"
            )
        }
    }
}

/// `n` placeholders numbered from `first`, comma-separated: `$5, $6, $7`.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `sql` with every `$N` outside quotes made `$(N + by)`, to follow `by` parameters of
/// the statement it joins.
pub(crate) fn shifted(sql: &str, by: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        out.push(c);
        if c != '$' || quoted {
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(n) => out.push_str(&(n + by).to_string()),
            Err(_) => out.push_str(&digits),
        }
    }
    out
}

/// The JSON value `rows_of_list` takes.
pub fn json_texts<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    serde_json::Value::from(items.into_iter().collect::<Vec<_>>()).to_string()
}

#[cfg(test)]
mod tests {
    use super::{placeholders, shifted};

    #[test]
    fn placeholders_count_from_their_first() {
        assert_eq!(placeholders(5, 3), "$5, $6, $7");
        assert_eq!(placeholders(1, 1), "$1");
    }

    #[test]
    fn placeholders_shift_outside_quotes() {
        assert_eq!(
            shifted("a = $1 AND b = '$2' AND c = $10 AND d = $", 3),
            "a = $4 AND b = '$2' AND c = $13 AND d = $"
        );
        assert_eq!(shifted("$1", 0), "$1");
    }
}
