//! The socket of one connection, with one duty hyper does not have: an automatic
//! answer hyper writes for a malformed request (a status line with `content-length: 0`)
//! gets the standard error object as its body, like every other answer of the service.
//!
//! Reads are not timed here: hyper may read while a request is being handled (to notice
//! a closed connection), so a read timeout would cut slow requests. Silence is bounded
//! by hyper's head timeout instead (`mod.rs`).

use issuing_wire::{ApiError, ErrorSlug};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub(crate) struct Guarded {
    inner: TcpStream,
    /// A rewritten error answer still being written, and how many bytes of the
    /// caller's buffer it stands for.
    pending: Option<(Vec<u8>, usize)>,
}

impl Guarded {
    pub(crate) fn new(inner: TcpStream) -> Self {
        Guarded {
            inner,
            pending: None,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

/// The standard error body for a status hyper answers by itself.
fn error_for(status: u16) -> Option<ApiError> {
    let (slug, message) = match status {
        400 => (ErrorSlug::InvalidRequest, "Malformed HTTP request"),
        413 => (ErrorSlug::PayloadTooLarge, "Request body too large"),
        414 => (ErrorSlug::UriTooLong, "Request URI too long"),
        431 => (ErrorSlug::HeadersTooLarge, "Request headers too large"),
        _ => return None,
    };
    Some(ApiError::new(slug, message))
}

/// If `head` is one of hyper's automatic error answers (a bodiless 4xx head), the same
/// answer with a JSON error body.
fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?;
    let status: u16 = rest.get(..3)?.parse().ok()?;
    let end = text.find("\r\n\r\n")?;
    if end + 4 != text.len() {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    if !lower.contains("\r\ncontent-length: 0\r\n") || lower.contains("\r\ncontent-type:") {
        return None;
    }
    let body = error_for(status)?.body().to_string();
    let head = text[..end].replacen(
        "\r\ncontent-length: 0",
        &format!(
            "\r\ncontent-type: application/json\r\ncontent-length: {}",
            body.len()
        ),
        1,
    );
    Some(format!("{head}\r\n\r\n{body}").into_bytes())
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            match rewrite(buf) {
                Some(bytes) => self.pending = Some((bytes, buf.len())),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        // Write the whole rewritten answer before reporting the original as written.
        loop {
            let this = &mut *self;
            let Some((bytes, stands_for)) = this.pending.as_mut() else {
                return Poll::Ready(Ok(buf.len()));
            };
            if bytes.is_empty() {
                let n = *stands_for;
                this.pending = None;
                return Poll::Ready(Ok(n));
            }
            match Pin::new(&mut this.inner).poll_write(cx, bytes) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => {
                    bytes.drain(..n);
                }
                Poll::Ready(Err(e)) => {
                    this.pending = None;
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rewrites_only_bodiless_error_heads() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let out = String::from_utf8(rewrite(head).unwrap()).unwrap();
        let (h, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(h.contains("content-type: application/json"));
        assert!(h.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error_slug"], "headers_too_large");
        assert_eq!(v["success"], false);
        // Our own answers (a body, a content type) pass untouched.
        assert!(rewrite(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n").is_none());
        assert!(rewrite(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(rewrite(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}").is_none());
    }
}
