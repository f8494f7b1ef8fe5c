//! What every console page shares: rendering, errors, the frame around the content,
//! and how values are shown (money, times, masked card numbers, keyset cursors).

use askama::Template;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use issuing_store::console::{Cursor, TransferRow};
use issuing_store::StoreError;
use issuing_wire::Amount;

/// Longest filter value read from a query string.
const MAX_QUERY_LEN: usize = 200;

#[derive(Debug)]
pub(crate) enum ConsoleError {
    NotFound,
    Forbidden(&'static str),
    BadRequest(String),
    /// The database does not answer (a failover under way): 503, try again shortly.
    Unavailable,
    Internal,
}

impl From<StoreError> for ConsoleError {
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            tracing::warn!(error = %e, "console: the database is unavailable");
            return ConsoleError::Unavailable;
        }
        tracing::error!(error = %e, "console: storage error");
        ConsoleError::Internal
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, title, message) = match &self {
            ConsoleError::NotFound => (
                StatusCode::NOT_FOUND,
                "Not found",
                "There is nothing here, or it is not yours to see.",
            ),
            ConsoleError::Forbidden(why) => (StatusCode::FORBIDDEN, "Forbidden", *why),
            ConsoleError::BadRequest(why) => (StatusCode::BAD_REQUEST, "Bad request", why.as_str()),
            ConsoleError::Unavailable => {
                let mut page = render_status(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &ErrorPage {
                        title: "Database unavailable",
                        message: "The database does not answer (a failover may be under way); \
                                  try again in a few seconds.",
                    },
                );
                page.headers_mut().insert(
                    header::RETRY_AFTER,
                    issuing_wire::ErrorSlug::ServiceUnavailable
                        .retry_after_secs()
                        .unwrap_or(2)
                        .into(),
                );
                return page;
            }
            ConsoleError::Internal => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The server could not answer; the cause is in its log.",
            ),
        };
        render_status(status, &ErrorPage { title, message })
    }
}

pub(crate) type PageResult = Result<Response, ConsoleError>;

pub(crate) fn render_status<T: Template>(status: StatusCode, page: &T) -> Response {
    match page.render() {
        Ok(html) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            Html(html),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "console: template failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "template error").into_response()
        }
    }
}

pub(crate) fn render<T: Template>(page: &T) -> PageResult {
    Ok(render_status(StatusCode::OK, page))
}

/// The frame of a signed-in page: who is signed in, what they may do, the navigation
/// and the message of the last action.
pub(crate) struct Ctx {
    pub email: String,
    pub role: &'static str,
    pub csrf: String,
    pub flash: Option<String>,
    pub flash_error: bool,
    /// Operators and admins act; viewers read.
    pub can_act: bool,
    pub is_admin: bool,
    pub sandbox: bool,
    /// The navigation entry to highlight.
    pub nav: &'static str,
}

impl Ctx {
    pub fn here(&self, entry: &str) -> &'static str {
        if self.nav == entry {
            "here"
        } else {
            ""
        }
    }
}

pub(crate) fn money(micros: i64) -> String {
    Amount::from_micros(micros).to_string()
}

/// UTC, to the second.
pub(crate) fn time(micros: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_micros(micros)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

pub(crate) fn opt_time(micros: Option<i64>) -> String {
    micros.map(time).unwrap_or_else(|| "—".to_owned())
}

pub(crate) fn opt(text: Option<&str>) -> String {
    text.filter(|s| !s.is_empty()).unwrap_or("—").to_owned()
}

/// A ledger transfer as the order and dispute pages list it (`transfer_rows.html`).
pub(crate) struct TransferView {
    pub id: String,
    pub kind: String,
    pub amount: String,
    pub reference: String,
    pub created_at: String,
}

pub(crate) fn transfer_view(t: TransferRow) -> TransferView {
    TransferView {
        amount: money(t.amount),
        reference: opt(t.reference.as_deref()),
        created_at: time(t.created_at),
        id: t.id,
        kind: t.kind,
    }
}

/// A card number as the console shows it: never more than its last 4 digits (PCI DSS
/// allows at most the first 6 and last 4).
pub(crate) fn masked_pan(last4: Option<&str>) -> String {
    match last4 {
        Some(l) if l.len() == 4 && l.bytes().all(|b| b.is_ascii_digit()) => {
            format!("•••• •••• •••• {l}")
        }
        _ => "—".to_owned(),
    }
}

/// The badge class of a status word.
pub(crate) fn badge(status: &str) -> &'static str {
    match status {
        "active" | "completed" | "succeeded" | "approved" | "ok" | "won" => "good",
        "failed" | "declined" | "closed" | "suspended" | "disabled" | "error" | "lost" => "bad",
        "frozen" | "pending" | "in_progress" | "created" | "processing" | "submitted"
        | "representment" | "prearbitration" | "arbitration" => "warn",
        _ => "",
    }
}

/// The options of a `<select>`: each value and whether it is the chosen one.
pub(crate) fn options(values: &[&'static str], chosen: Option<&str>) -> Vec<(&'static str, bool)> {
    values.iter().map(|v| (*v, Some(*v) == chosen)).collect()
}

/// A filter from the query string: trimmed, empty as absent, bounded.
pub(crate) fn filter(value: &Option<String>) -> Result<Option<String>, ConsoleError> {
    match value.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) if v.len() > MAX_QUERY_LEN || v.chars().any(char::is_control) => Err(
            ConsoleError::BadRequest("A filter is too long or holds control characters.".into()),
        ),
        Some(v) => Ok(Some(v.to_owned())),
    }
}

/// `before=<micros>.<id>`: where the next page of a newest-first list starts.
pub(crate) fn cursor(value: &Option<String>) -> Result<Option<Cursor>, ConsoleError> {
    let Some(text) = filter(value)? else {
        return Ok(None);
    };
    let bad = || ConsoleError::BadRequest("The page cursor is not valid.".into());
    let (at, id) = text.split_once('.').ok_or_else(bad)?;
    let at = at.parse::<i64>().map_err(|_| bad())?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(bad());
    }
    Ok(Some(Cursor {
        at,
        id: id.to_owned(),
    }))
}

/// Splits rows fetched with one more than a page into the page and, when there is more,
/// the cursor of the next page.
pub(crate) fn split_page<T>(
    mut rows: Vec<T>,
    page: i64,
    key: impl Fn(&T) -> (i64, &str),
) -> (Vec<T>, Option<String>) {
    let page = usize::try_from(page).unwrap_or(0);
    if rows.len() <= page {
        return (rows, None);
    }
    rows.truncate(page);
    let next = rows.last().map(|r| {
        let (at, id) = key(r);
        format!("{at}.{id}")
    });
    (rows, next)
}

/// A link to `path` with these query parameters (empty ones left out).
pub(crate) fn link(path: &str, params: &[(&str, Option<&str>)]) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    let mut any = false;
    for (k, v) in params {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            q.append_pair(k, v);
            any = true;
        }
    }
    if any {
        format!("{path}?{}", q.finish())
    } else {
        path.to_owned()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn masks_card_numbers_to_the_last_four() {
        assert_eq!(masked_pan(Some("4242")), "•••• •••• •••• 4242");
        assert_eq!(masked_pan(Some("4242424242424242")), "—");
        assert_eq!(masked_pan(None), "—");
    }

    #[test]
    fn reads_cursors() {
        let c = cursor(&Some("1700000000000000.6740a1c2e1f0a9b3c4d5e6f7".into()))
            .unwrap()
            .unwrap();
        assert_eq!(c.at, 1_700_000_000_000_000);
        assert!(cursor(&Some("x.y".into())).is_err());
        assert!(cursor(&Some("1.a'b".into())).is_err());
        assert!(cursor(&None).unwrap().is_none());
    }

    #[test]
    fn pages_split_with_a_cursor() {
        let rows = vec![(3, "c"), (2, "b"), (1, "a")];
        let (page, next) = split_page(rows.clone(), 2, |r| (r.0, r.1));
        assert_eq!(page, vec![(3, "c"), (2, "b")]);
        assert_eq!(next.as_deref(), Some("2.b"));
        let (page, next) = split_page(rows, 3, |r| (r.0, r.1));
        assert_eq!((page.len(), next), (3, None));
        assert_eq!(
            link("/console/cards", &[("q", Some("42 1")), ("x", None)]),
            "/console/cards?q=42+1"
        );
    }
}
