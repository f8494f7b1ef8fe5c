//! Card details without PCI scope (CONTRACT §16): `cards/reveal/create` in the
//! envelope, and the page its `url` names, `GET /reveal/{token}`, served plain beside
//! `/api/v2` for the cardholder's browser (the project frames it). What a session is
//! and when a GET may use it is the core's (`issuing_app::flows::reveal`); this file
//! shapes the answers: the page's HTML (no script) and its headers.

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use issuing_app::flows::reveal::{self, Shown, View};
use issuing_app::App;
use issuing_wire::api::{CardsRevealCreate, RevealSession};

pub(crate) async fn create(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<CardsRevealCreate>,
) -> ApiResult<RevealSession> {
    Ok(reply(reveal::create(&state, &caller.project_id, &r).await?))
}

/// `/reveal/{token}`: only a GET may use a session; HEAD (which axum would otherwise
/// answer by running the GET) and every other method are 405 and leave it unused.
pub(crate) fn page_route() -> MethodRouter<App> {
    get(page).head(only_get).fallback(only_get)
}

async fn only_get() -> Response {
    let mut res = (
        StatusCode::METHOD_NOT_ALLOWED,
        "Only GET opens a reveal page.\n",
    )
        .into_response();
    let h = res.headers_mut();
    h.insert(header::ALLOW, HeaderValue::from_static("GET"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

async fn page(State(app): State<App>, Path(token): Path<String>, headers: HeaderMap) -> Response {
    // A header that is not text names no origin: it counts as another one.
    let header = |name: header::HeaderName| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_owned())
    };
    let (origin, referer) = (header(header::ORIGIN), header(header::REFERER));
    match reveal::view(&app, &token, origin.as_deref(), referer.as_deref()).await {
        Ok(View::Shown(shown)) => answer(StatusCode::OK, &shown.target_origin, &details(&shown)),
        Ok(View::Gone { target_origin }) => answer(
            StatusCode::GONE,
            &target_origin,
            &notice("This link has been used or has expired. Ask for the card details again."),
        ),
        Ok(View::Forbidden) => answer(
            StatusCode::FORBIDDEN,
            "'none'",
            &notice("This page may only be shown inside the page it was made for."),
        ),
        Ok(View::NotFound) => answer(
            StatusCode::NOT_FOUND,
            "'none'",
            &notice("There is no such card details page."),
        ),
        Err(e) => {
            if e.slug == issuing_wire::ErrorSlug::InternalError {
                tracing::error!("reveal page: {}", e.message);
            }
            let status =
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            answer(
                status,
                "'none'",
                &notice("The card details cannot be shown now. Ask for them again."),
            )
        }
    }
}

/// CONTRACT §16's headers: framed only by `frame_ancestors`, no script, nothing cached
/// or sniffed, no referrer.
fn answer(status: StatusCode, frame_ancestors: &str, html: &str) -> Response {
    let csp =
        format!("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors {frame_ancestors}");
    let mut res = (status, html.to_owned()).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // The origin is canonical (`scheme://host[:port]`, checked when the session was
    // made), so it is always a valid header value; 'none' otherwise.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_str(&csp).unwrap_or_else(|_| {
            HeaderValue::from_static(
                "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
            )
        }),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}

/// A plain, legible card face: number grouped by four, expiry and CVV, each easy to
/// select and copy. Light and dark with the cardholder's setting.
const STYLE: &str = "\
:root{color-scheme:light dark}\
body{margin:0;padding:8px;font:16px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;background:transparent}\
.card{box-sizing:border-box;max-width:360px;padding:16px 20px;border-radius:12px;background:#1f2937;color:#f9fafb}\
.label{font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:#d1d5db}\
.pan{font:600 22px/1.3 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;letter-spacing:.06em;margin:2px 0 12px;user-select:all;white-space:nowrap}\
.row{display:flex;gap:32px}\
.value{font:600 18px/1.3 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;user-select:all}\
.notice{max-width:360px;margin:0;padding:12px 16px;border-radius:8px;background:#f3f4f6;color:#111827}\
@media (prefers-color-scheme:dark){.notice{background:#374151;color:#f9fafb}}";

fn document(body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\"><meta name=\"robots\" content=\"noindex\">\
         <title>Card details</title><style>{STYLE}</style></head>\n<body>{body}</body></html>\n"
    )
}

fn details(s: &Shown) -> String {
    document(&format!(
        "<div class=\"card\"><div class=\"label\">Card number</div>\
         <div class=\"pan\" id=\"pan\">{}</div><div class=\"row\">\
         <div><div class=\"label\">Expires</div><div class=\"value\" id=\"exp\">{}</div></div>\
         <div><div class=\"label\">CVV</div><div class=\"value\" id=\"cvv\">{}</div></div>\
         </div></div>",
        escape(&s.pan),
        escape(&s.exp),
        escape(&s.cvv)
    ))
}

fn notice(text: &str) -> String {
    document(&format!("<p class=\"notice\">{}</p>", escape(text)))
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_hold_no_script_and_escape_what_they_show() {
        let shown = Shown {
            target_origin: "https://example.com".into(),
            pan: "4111 1111 <b>".into(),
            exp: "06/31".into(),
            cvv: "123".into(),
        };
        let html = details(&shown);
        assert!(
            html.contains("id=\"pan\">4111 1111 &lt;b&gt;</div>"),
            "{html}"
        );
        assert!(html.contains("id=\"exp\">06/31<") && html.contains("id=\"cvv\">123<"));
        assert!(!html.to_ascii_lowercase().contains("<script"));
        assert!(!notice("x").to_ascii_lowercase().contains("<script"));
    }
}
