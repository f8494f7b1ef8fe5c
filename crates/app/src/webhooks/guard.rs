//! The SSRF guard of production mode (CONTRACT §6): a subscription URL may not point at
//! loopback, private, link-local, unique-local or unspecified addresses. It is checked
//! when subscribing and again at connect time by a resolver that drops such addresses,
//! so a name that resolves differently later (DNS rebinding) still cannot reach them.
//! The sandbox allows every address so local receivers work. The networks the operator
//! names in `ISSUING_WEBHOOK_ALLOWED_NETWORKS` are allowed in production too (CONTRACT
//! §6), for receivers on the operator's own network; decision webhooks are to use the
//! same guard.

use issuing_domain::webhooks::{AllowedNetworks, Host, WebhookUrl};
use issuing_wire::ApiError;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::time::Duration;

/// Bound on a name lookup when subscribing.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks a URL when a production project subscribes it: its host must be, or resolve
/// only to, public addresses or addresses of the allowed networks.
pub async fn check_subscription(
    url: &WebhookUrl,
    allowed: &AllowedNetworks,
) -> Result<(), ApiError> {
    let refused = || {
        ApiError::validation(
            "url must not point at a loopback, private, link-local or unspecified address",
        )
    };
    match url.host() {
        Host::Ip(ip) if allowed.permits(ip) => Ok(()),
        Host::Ip(_) => Err(refused()),
        Host::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), url.port()));
            let addrs: Vec<SocketAddr> = tokio::time::timeout(LOOKUP_TIMEOUT, lookup)
                .await
                .map_err(|_| ApiError::validation("url host could not be resolved in time"))?
                .map_err(|_| ApiError::validation("url host does not resolve"))?
                .collect();
            if addrs.is_empty() {
                return Err(ApiError::validation("url host does not resolve"));
            }
            if addrs.iter().all(|a| allowed.permits(a.ip())) {
                Ok(())
            } else {
                Err(refused())
            }
        }
    }
}

/// The connect-time half for literal IP hosts, which never reach a resolver.
pub fn check_literal(url: &reqwest::Url, allowed: &AllowedNetworks) -> Result<(), String> {
    match url.host() {
        Some(url::Host::Ipv4(ip)) if !allowed.permits(ip.into()) => {
            Err(format!("refused to connect to non-public address {ip}"))
        }
        Some(url::Host::Ipv6(ip)) if !allowed.permits(ip.into()) => {
            Err(format!("refused to connect to non-public address {ip}"))
        }
        _ => Ok(()),
    }
}

/// A resolver that only ever hands public addresses (and those of the allowed
/// networks) to the connector.
#[derive(Debug, Clone, Default)]
pub struct PublicOnlyResolver {
    pub allowed: AllowedNetworks,
}

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allowed = self.allowed.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| allowed.permits(a.ip()))
                .collect();
            if public.is_empty() {
                let e: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host} resolves to no public address").into();
                return Err(e);
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}
