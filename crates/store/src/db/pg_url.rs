//! PostgreSQL connection URLs as libpq writes them, several hosts included:
//! `postgres://user@h1:5432,h2:5433/db?target_session_attrs=read-write` (the form
//! `pg_autoctl show uri` prints). sqlx connects to one host only, so the URL is parsed
//! here into its hosts, and each host gets a one-host URL sqlx understands
//! (`PgUrl::host_urls`); `db/hosts.rs` picks the one to use.
//!
//! What libpq allows and is taken here: hosts in the authority, comma-separated, each
//! with or without a port; IPv6 addresses in brackets; percent-encoded parts; the query
//! parameters `host`, `port` (one port for every host, or one per host) and
//! `target_session_attrs` (`any`, `read-write`, `primary`). Every other parameter is
//! passed on to each host's URL as written.

use std::fmt;

/// PostgreSQL's port when a URL names none.
pub const DEFAULT_PORT: u16 = 5432;

/// Which server a connection may settle on (libpq's `target_session_attrs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetSession {
    /// The first host that accepts a connection (libpq's default).
    Any,
    /// The first host whose sessions accept writes (`read-write`; `primary` is taken
    /// the same way: a standby never accepts writes).
    ReadWrite,
}

/// One host of a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgHost {
    /// A name, an IP address (IPv6 without its brackets), or a Unix socket's directory.
    pub host: String,
    pub port: u16,
}

impl fmt::Display for PgHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed `postgres://` / `postgresql://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgUrl {
    pub user: Option<String>,
    pub password: Option<String>,
    /// In the order given; empty when the URL names none (libpq's local default).
    pub hosts: Vec<PgHost>,
    pub dbname: Option<String>,
    pub target: TargetSession,
    /// The other query parameters, decoded, in order.
    pub params: Vec<(String, String)>,
}

/// Why a URL was refused; it never holds the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError(pub String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse(why: impl Into<String>) -> UrlError {
    UrlError(why.into())
}

impl PgUrl {
    pub fn parse(url: &str) -> Result<PgUrl, UrlError> {
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| refuse("a PostgreSQL URL starts with postgres:// or postgresql://"))?;
        let rest = rest.split('#').next().unwrap_or(rest);
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (rest, None),
        };
        // The password may hold '@' only encoded, but the last '@' is the separator
        // whatever it holds.
        let (userinfo, hostlist) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            Some(info) => match info.split_once(':') {
                Some((u, p)) => (non_empty(decode(u)?), Some(decode(p)?)),
                None => (non_empty(decode(info)?), None),
            },
            None => (None, None),
        };
        let dbname = match path {
            Some(p) => non_empty(decode(p)?),
            None => None,
        };

        // Hosts from the authority: (host, explicit port).
        let mut hosts: Vec<(String, Option<u16>)> = Vec::new();
        if !hostlist.is_empty() {
            for spec in hostlist.split(',') {
                hosts.push(host_spec(spec)?);
            }
        }

        let mut target = TargetSession::Any;
        let mut ports: Option<Vec<u16>> = None;
        let mut params = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (k, v) = (decode(k)?, decode(v)?);
            match k.as_str() {
                "target_session_attrs" => {
                    target = match v.as_str() {
                        "any" => TargetSession::Any,
                        "read-write" | "primary" => TargetSession::ReadWrite,
                        other => {
                            return Err(refuse(format!(
                                "target_session_attrs={other} is not supported \
                                 (any, read-write or primary)"
                            )))
                        }
                    }
                }
                // libpq: the parameter replaces the authority's hosts.
                "host" => {
                    hosts = v
                        .split(',')
                        .map(|h| (h.to_owned(), None))
                        .collect::<Vec<_>>();
                }
                "port" => {
                    ports = Some(v.split(',').map(port).collect::<Result<Vec<_>, _>>()?);
                }
                _ => params.push((k, v)),
            }
        }

        // A port given with the host wins; otherwise the `port` list (one for all, or
        // one per host), otherwise the default.
        let ports = ports.unwrap_or_default();
        if ports.len() > 1 && ports.len() != hosts.len() {
            return Err(refuse(format!(
                "could not match {} port numbers to {} hosts",
                ports.len(),
                hosts.len()
            )));
        }
        let hosts = hosts
            .into_iter()
            .enumerate()
            .map(|(i, (host, explicit))| {
                if host.is_empty() {
                    return Err(refuse("a host in the list is empty"));
                }
                let port = explicit
                    .or_else(|| ports.get(i).or(ports.first()).copied())
                    .unwrap_or(DEFAULT_PORT);
                Ok(PgHost { host, port })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PgUrl {
            user,
            password,
            hosts,
            dbname,
            target,
            params,
        })
    }

    /// One URL per host that sqlx's one-host parser reads as this URL meant for that
    /// host: the host and port travel as query parameters, which holds IPv6 addresses
    /// and socket directories alike. The authority's `localhost` is only a placeholder
    /// the `host` parameter replaces.
    pub fn host_urls(&self) -> Vec<String> {
        self.hosts.iter().map(|h| self.url_for(h)).collect()
    }

    fn url_for(&self, host: &PgHost) -> String {
        let mut url = String::from("postgres://");
        if let Some(user) = &self.user {
            url.push_str(&encode(user));
            if let Some(password) = &self.password {
                url.push(':');
                url.push_str(&encode(password));
            }
            url.push('@');
        }
        url.push_str("localhost/");
        if let Some(db) = &self.dbname {
            url.push_str(&encode(db));
        }
        url.push_str("?host=");
        url.push_str(&encode(&host.host));
        url.push_str("&port=");
        url.push_str(&host.port.to_string());
        for (k, v) in &self.params {
            url.push('&');
            url.push_str(&encode(k));
            url.push('=');
            url.push_str(&encode(v));
        }
        url
    }

    /// The hosts, for logs and errors (no credentials).
    pub fn host_list(&self) -> String {
        self.hosts
            .iter()
            .map(|h| h.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, percent-decoded.
fn host_spec(spec: &str) -> Result<(String, Option<u16>), UrlError> {
    let (host, port_text) = if let Some(inner) = spec.strip_prefix('[') {
        let (addr, after) = inner
            .split_once(']')
            .ok_or_else(|| refuse(format!("unclosed '[' in host \"{spec}\"")))?;
        match after {
            "" => (addr.to_owned(), None),
            _ => match after.strip_prefix(':') {
                Some(p) => (addr.to_owned(), Some(p)),
                None => return Err(refuse(format!("unexpected text after ']' in \"{spec}\""))),
            },
        }
    } else {
        match spec.split_once(':') {
            Some((h, p)) => (decode(h)?, Some(p)),
            None => (decode(spec)?, None),
        }
    };
    let port = match port_text {
        Some("") | None => None,
        Some(p) => Some(port(p)?),
    };
    Ok((host, port))
}

fn port(text: &str) -> Result<u16, UrlError> {
    match text.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(refuse(format!("invalid port number: \"{text}\""))),
    }
}

/// Percent-decoding as libpq does it: `%XX` only (a '+' stays a '+').
fn decode(text: &str) -> Result<String, UrlError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| refuse("invalid percent-encoded token in the URL"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| refuse("the URL decodes to text that is not UTF-8"))
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str, p: u16) -> PgHost {
        PgHost {
            host: h.into(),
            port: p,
        }
    }

    #[test]
    fn several_hosts_with_their_ports() {
        let u = PgUrl::parse(
            "postgres://app:s%40cret@db1:5432,db2:6543/issuing?target_session_attrs=read-write",
        )
        .unwrap();
        assert_eq!(u.user.as_deref(), Some("app"));
        assert_eq!(u.password.as_deref(), Some("s@cret"));
        assert_eq!(u.hosts, [host("db1", 5432), host("db2", 6543)]);
        assert_eq!(u.dbname.as_deref(), Some("issuing"));
        assert_eq!(u.target, TargetSession::ReadWrite);
        assert!(u.params.is_empty());
    }

    #[test]
    fn one_host_and_the_defaults() {
        let u = PgUrl::parse("postgresql://postgres@127.0.0.1/postgres").unwrap();
        assert_eq!(u.hosts, [host("127.0.0.1", 5432)]);
        assert_eq!(u.target, TargetSession::Any);
        assert_eq!(u.password, None);
        let u = PgUrl::parse("postgres://h").unwrap();
        assert_eq!((u.user, u.dbname), (None, None));
        assert_eq!(u.hosts, [host("h", 5432)]);
    }

    #[test]
    fn hosts_without_ports_take_the_port_list() {
        let u = PgUrl::parse("postgres://a,b:7000,c/db?port=6000").unwrap();
        assert_eq!(u.hosts, [host("a", 6000), host("b", 7000), host("c", 6000)]);
        let u = PgUrl::parse("postgres://a,b/db?port=6001,6002").unwrap();
        assert_eq!(u.hosts, [host("a", 6001), host("b", 6002)]);
        let refused = PgUrl::parse("postgres://a,b,c/db?port=1,2").unwrap_err();
        assert!(refused.0.contains("3 hosts"), "{refused}");
    }

    #[test]
    fn ipv6_in_brackets() {
        let u = PgUrl::parse("postgres://u@[::1]:5433,[fe80::2],10.0.0.3:5434/db").unwrap();
        assert_eq!(
            u.hosts,
            [
                host("::1", 5433),
                host("fe80::2", 5432),
                host("10.0.0.3", 5434)
            ]
        );
        assert_eq!(u.host_list(), "[::1]:5433,[fe80::2]:5432,10.0.0.3:5434");
        assert!(PgUrl::parse("postgres://[::1/db").is_err());
        assert!(PgUrl::parse("postgres://[::1]x/db").is_err());
    }

    #[test]
    fn the_host_parameter_and_encoded_sockets() {
        let u =
            PgUrl::parse("postgres:///db?host=%2Fvar%2Frun%2Fpostgresql&sslmode=disable").unwrap();
        assert_eq!(u.hosts, [host("/var/run/postgresql", 5432)]);
        assert_eq!(u.params, [("sslmode".to_owned(), "disable".to_owned())]);
        let u = PgUrl::parse("postgres://ignored/db?host=x,y&port=1,2").unwrap();
        assert_eq!(u.hosts, [host("x", 1), host("y", 2)]);
    }

    #[test]
    fn bad_urls_are_refused_with_a_reason() {
        for (url, why) in [
            ("mysql://h/db", "starts with"),
            ("postgres://h:99999/db", "invalid port number"),
            ("postgres://h:abc/db", "invalid port number"),
            ("postgres://a,,b/db", "empty"),
            (
                "postgres://h/db?target_session_attrs=standby",
                "not supported",
            ),
            ("postgres://u:%zz@h/db", "percent"),
        ] {
            let e = PgUrl::parse(url).unwrap_err();
            assert!(e.0.contains(why), "{url}: {e}");
            assert!(!e.0.contains("%zz"), "no password in {e}");
        }
    }

    #[test]
    fn each_host_gets_a_url_sqlx_reads() {
        let u = PgUrl::parse(
            "postgres://a%20b:p%3Aw@db1:5432,[::1]:6000/my%20db?target_session_attrs=any&application_name=x%26y",
        )
        .unwrap();
        let urls = u.host_urls();
        assert_eq!(
            urls,
            [
                "postgres://a%20b:p%3Aw@localhost/my%20db?host=db1&port=5432&application_name=x%26y",
                "postgres://a%20b:p%3Aw@localhost/my%20db?host=%3A%3A1&port=6000&application_name=x%26y",
            ]
        );
        // Read back by sqlx as meant.
        let o: sqlx::postgres::PgConnectOptions = urls[1].parse().unwrap();
        assert_eq!(o.get_host(), "::1");
        assert_eq!(o.get_port(), 6000);
        assert_eq!(o.get_username(), "a b");
        assert_eq!(o.get_database(), Some("my db"));
    }
}
