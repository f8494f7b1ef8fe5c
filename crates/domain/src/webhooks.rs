//! Webhook subscriptions and events: which event types exist and in which of the two
//! payload forms each travels, what a subscription URL may be, and which addresses a
//! production server may never connect to (SSRF).

use issuing_wire::ApiError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// CONTRACT §6: at most this many characters in a subscription URL.
pub const MAX_URL_LEN: usize = 2048;
/// CONTRACT §6: at most this many active subscriptions per project.
pub const MAX_ACTIVE_SUBSCRIPTIONS: i64 = 10;
/// Long enough for a label, short enough to list comfortably.
pub const MAX_TITLE_LEN: usize = 256;

/// The two payload forms of spec §Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadForm {
    /// `{event_type, project_id, delivery_id, data}`.
    Envelope,
    /// `{type, delivery_id, ...fields}`.
    Typed,
}

/// Every event type the service emits, with its form.
pub const EVENT_TYPES: &[(&str, PayloadForm)] = &[
    ("card.created", PayloadForm::Envelope),
    ("card.topup", PayloadForm::Envelope),
    ("card.freeze", PayloadForm::Envelope),
    ("card.unfreeze", PayloadForm::Envelope),
    ("card.close", PayloadForm::Envelope),
    ("card.details_viewed", PayloadForm::Envelope),
    ("dispute.updated", PayloadForm::Envelope),
    ("report.ready", PayloadForm::Envelope),
    ("card_transaction", PayloadForm::Typed),
    ("card_otp", PayloadForm::Typed),
    ("card_3ds", PayloadForm::Typed),
];

/// The payload form of an event type; None for a type the service does not know.
pub fn form_of(event_type: &str) -> Option<PayloadForm> {
    EVENT_TYPES
        .iter()
        .find(|(name, _)| *name == event_type)
        .map(|(_, form)| *form)
}

/// A subscription's event-type filter: empty means every type.
pub fn parse_event_types(raw: &[String]) -> Result<Vec<String>, ApiError> {
    let mut out: Vec<String> = Vec::new();
    for t in raw {
        if form_of(t).is_none() {
            let known: Vec<&str> = EVENT_TYPES.iter().map(|(n, _)| *n).collect();
            return Err(ApiError::validation(format!(
                "unknown event type {t:?}; known types: {}",
                known.join(", ")
            )));
        }
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    Ok(out)
}

/// Whether a subscription with this filter receives events of `event_type`.
pub fn wants(filter: &[String], event_type: &str) -> bool {
    filter.is_empty() || filter.iter().any(|t| t == event_type)
}

/// A subscription URL: absolute http or https, with a host, at most `MAX_URL_LEN`
/// characters, no credentials in it (they would be stored and shown in lists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl(url::Url);

/// Where a URL's host points, as far as can be told without resolving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    Name(String),
}

impl WebhookUrl {
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(ApiError::validation("url is required"));
        }
        if raw.chars().count() > MAX_URL_LEN {
            return Err(ApiError::validation(format!(
                "url must be at most {MAX_URL_LEN} characters"
            )));
        }
        let url = url::Url::parse(raw)
            .map_err(|e| ApiError::validation(format!("url is not an absolute URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ApiError::validation("url must use http or https"));
        }
        if url.host().is_none() {
            return Err(ApiError::validation("url must name a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ApiError::validation("url must not hold credentials"));
        }
        Ok(WebhookUrl(url))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn host(&self) -> Host {
        match self.0.host() {
            Some(url::Host::Ipv4(ip)) => Host::Ip(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Host::Ip(IpAddr::V6(ip)),
            Some(url::Host::Domain(d)) => Host::Name(d.to_owned()),
            None => Host::Name(String::new()),
        }
    }

    pub fn port(&self) -> u16 {
        self.0.port_or_known_default().unwrap_or(80)
    }
}

/// Whether a production server may connect to `ip`: false for loopback, private,
/// link-local, unique-local, unspecified, and the other non-global ranges an attacker
/// could use to reach the service's own network. IPv4 addresses embedded in IPv6
/// (mapped, NAT64, 6to4) are judged by the IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let blocked = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240; // reserved
    !blocked
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    let embedded_v4 = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) reach the IPv4 address they embed.
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return is_public_v4(embedded_v4(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return is_public_v4(embedded_v4(s[1], s[2]));
    }
    let blocked = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site local (deprecated) fec0::/10
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0..6] == [0, 0, 0, 0, 0, 0]); // IPv4-compatible (deprecated)
    !blocked
}

/// Networks a production server may reach although they are not public
/// (`ISSUING_WEBHOOK_ALLOWED_NETWORKS`, CONTRACT §6): receivers on the operator's own
/// network. Empty by default. An IPv4 address embedded in IPv6 (mapped) is judged as the
/// IPv4 address, as `is_public` does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedNetworks(Vec<Cidr>);

/// One network: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// More networks than any operator lists; each connection checks them all.
const MAX_ALLOWED_NETWORKS: usize = 64;

impl Cidr {
    /// `10.0.0.0/8`, `fd00::/8`, or a single address (`127.0.0.1` = `/32`).
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?} is not an address or network (e.g. 10.0.0.0/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { addr, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl AllowedNetworks {
    /// A comma-separated list; empty text allows nothing.
    pub fn parse(text: &str) -> Result<AllowedNetworks, String> {
        let nets = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Cidr::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if nets.len() > MAX_ALLOWED_NETWORKS {
            return Err(format!("at most {MAX_ALLOWED_NETWORKS} networks"));
        }
        Ok(AllowedNetworks(nets))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a production server may connect to `ip`: public, or in an allowed network.
    pub fn permits(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.contains(ip)
    }
}

impl std::fmt::Display for AllowedNetworks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let all: Vec<String> = self.0.iter().map(Cidr::to_string).collect();
        f.write_str(&all.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
        ] {
            assert!(!is_public(ip(s)), "{s} must be blocked");
        }
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip(s)), "{s} must be allowed");
        }
    }

    #[test]
    fn allowed_networks() {
        let none = AllowedNetworks::default();
        assert!(!none.permits(ip("127.0.0.1")));
        assert!(none.permits(ip("8.8.8.8")));
        let nets =
            AllowedNetworks::parse(" 127.0.0.0/8, 10.1.0.0/16,fd00::/8, 192.168.5.7 ").unwrap();
        for allowed in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.200.3",
            "fd12::1",
            "192.168.5.7",
            "::ffff:127.0.0.1",
            "8.8.8.8",
        ] {
            assert!(nets.permits(ip(allowed)), "{allowed}");
        }
        for refused in [
            "10.2.0.1",
            "192.168.5.8",
            "::1",
            "fe80::1",
            "169.254.169.254",
        ] {
            assert!(!nets.permits(ip(refused)), "{refused}");
        }
        assert_eq!(
            nets.to_string(),
            "127.0.0.0/8,10.1.0.0/16,fd00::/8,192.168.5.7/32"
        );
        let all = AllowedNetworks::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("10.0.0.1")) && !all.contains(ip("fd00::1")));
        assert!(AllowedNetworks::parse("").unwrap().is_empty());
        for bad in ["10.0.0.0/33", "nope", "10.0.0.0/x", "::/129"] {
            assert!(AllowedNetworks::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls() {
        assert!(WebhookUrl::parse("https://example.com/hook").is_ok());
        assert!(WebhookUrl::parse("http://127.0.0.1:9000/").is_ok());
        for bad in [
            "",
            "example.com/hook",
            "ftp://example.com/",
            "https://user:pw@example.com/",
            "/relative",
        ] {
            assert!(WebhookUrl::parse(bad).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(WebhookUrl::parse(&long).is_err());
        let u = WebhookUrl::parse("http://[::1]:8080/x").unwrap();
        assert_eq!(u.host(), Host::Ip(ip("::1")));
        assert_eq!(u.port(), 8080);
        let u = WebhookUrl::parse("https://Example.com/x").unwrap();
        assert_eq!(u.host(), Host::Name("example.com".into()));
        assert_eq!(u.port(), 443);
    }

    #[test]
    fn event_types() {
        assert_eq!(form_of("card.created"), Some(PayloadForm::Envelope));
        assert_eq!(form_of("card_3ds"), Some(PayloadForm::Typed));
        assert!(parse_event_types(&["card.nope".into()]).is_err());
        let f = parse_event_types(&["card.freeze".into(), "card.freeze".into()]).unwrap();
        assert_eq!(f, vec!["card.freeze".to_string()]);
        assert!(wants(&[], "card.topup"));
        assert!(wants(&f, "card.freeze"));
        assert!(!wants(&f, "card.topup"));
    }
}
