//! The console's static files, embedded in the binary (`crates/console/assets/`):
//! nothing is fetched at build or run time.

use super::view::ConsoleError;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};

/// htmx 2.0.11 (`npm pack htmx.org@2.0.11`, `dist/htmx.min.js`); its SHA-256 is pinned
/// in `assets/README.md` and checked by a test below.
const HTMX: &[u8] = include_bytes!("../assets/htmx.min.js");
const SCRIPT: &[u8] = include_bytes!("../assets/console.js");
const STYLE: &[u8] = include_bytes!("../assets/console.css");
const FAVICON: &[u8] = include_bytes!("../assets/favicon.svg");

pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "htmx.min.js" => (HTMX, "text/javascript; charset=utf-8"),
        "console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "console.css" => (STYLE, "text/css; charset=utf-8"),
        "favicon.svg" => (FAVICON, "image/svg+xml"),
        _ => return ConsoleError::NotFound.into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// The console is for operators, never for search engines.
pub(crate) async fn robots() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "User-agent: *\nDisallow: /\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    const HTMX_SHA256: &str = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717";

    #[test]
    fn htmx_is_the_pinned_release() {
        let hex: String = Sha256::digest(HTMX)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, HTMX_SHA256);
        let readme = include_str!("../assets/README.md");
        assert!(readme.contains(HTMX_SHA256) && readme.contains("htmx.org@2.0.11"));
    }

    #[test]
    fn own_script_uses_no_eval() {
        let script = std::str::from_utf8(SCRIPT).unwrap_or_default();
        assert!(!script.contains("eval(") && !script.contains("new Function"));
    }
}
