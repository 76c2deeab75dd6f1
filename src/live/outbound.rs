//! The one way this node calls a URL someone else gave it (design rule 17):
//! autotune's health checks, which GET a room's `health_url` and keep how
//! long the origin took and what it said ([`Outbound::probe`]), and the
//! notifications, which POST an event to a room's webhook or a visitor's
//! push endpoint ([`Outbound::send`]). Both are one [`Call`] down one path.
//!
//! Such a URL is an attack path into the node's own network, so every call
//! is guarded:
//! - only http and https URLs with a host and no user info;
//! - only public addresses: a name is resolved here, and if any address it
//!   resolves to is loopback, private, link-local (the clouds' metadata
//!   service, 169.254.169.254), shared, documentation, multicast or
//!   otherwise special, the call fails without connecting; an address
//!   written in the URL is checked the same way. The operator may allow
//!   networks of their own (`--outbound-allow-networks`);
//! - the connection goes to an address checked, never to a second
//!   lookup's (which a name's owner could point elsewhere in between);
//! - one request on one connection: no redirect is followed (a 3xx is an
//!   answer like any other), no proxy is used, nothing is pooled, the
//!   answer's head is bounded and its body is never read: the status is
//!   the answer (a webhook's verdict, a push service's, a health check's),
//!   and a body read would only give a slow or huge answer a hold on the
//!   caller's time. The connection is closed once the head is in;
//! - the whole call (lookup, connect, TLS, sending the request, the
//!   answer's head) is bounded by the caller's timeout.
//!
//! A failure ([`CallFailure`]) names the host or address, never the URL's
//! path or query, which may hold a credential (a webhook's token); the
//! request's body is never logged here.
//!
//! By hand over hyper's HTTP/1 connection and tokio-rustls, because each
//! of those steps has to be ours: a client library resolves and connects
//! for itself (reqwest would, and its rustls features bring ring or leave
//! the workspace's other clients without a provider: Cargo.toml). Also by
//! hand, the address table ([`is_public`]: std's `is_global` is unstable),
//! which lists what is global, so a range it does not name is refused.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::Method;
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::{Host, Position, Url};

/// The most bytes of an answer's head read before the call gives up on
/// it (hyper's least is 8 KiB): a status needs little.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The headers a [`Call`] may not set: this client writes them itself
/// (the host the URL names, one request per connection, the body's length).
const OWN_HEADERS: [&str; 4] = ["host", "connection", "content-length", "transfer-encoding"];

/// Which private or special networks the node may call all the same (an
/// origin on the same private network, a test's loopback origin).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Networks allowed although not public (`--outbound-allow-networks`);
    /// none by default.
    pub allow_networks: Vec<IpNet>,
}

/// The guarded HTTP client: built once at start-up, cheap to clone (the
/// clones share the policy and the TLS config).
#[derive(Clone)]
pub struct Outbound {
    guard: Arc<Guard>,
    tls: tokio_rustls::TlsConnector,
}

/// One request to make: `Host`, `Connection: close` and the body's length
/// are the client's; any other header is the caller's (`User-Agent`
/// included: none is sent unless named here). Its `Debug` shows the
/// method, the host, the headers' names and the body's length only.
#[derive(Clone)]
pub struct Call<'a> {
    pub method: Method,
    pub url: &'a str,
    /// Names and values, sent in this order.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Bytes,
}

impl<'a> Call<'a> {
    /// A GET with no body.
    pub fn get(url: &'a str, headers: &'a [(&'a str, &'a str)]) -> Self {
        Call {
            method: Method::GET,
            url,
            headers,
            body: Bytes::new(),
        }
    }

    /// A POST of `body`.
    pub fn post(url: &'a str, headers: &'a [(&'a str, &'a str)], body: Bytes) -> Self {
        Call {
            method: Method::POST,
            url,
            headers,
            body,
        }
    }
}

/// The body may hold a visitor's contact, a header a credential, the URL's
/// path or query a receiver's token.
impl fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = Url::parse(self.url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned));
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Call")
            .field("method", &self.method)
            .field("host", &host)
            .field("headers", &names)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// One call's result: how long until the answer's status (or the failure),
/// and the status, whatever it is (a 3xx included: it is not followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub latency_ms: u64,
    pub outcome: Result<u16, CallFailure>,
}

/// Why a call got no status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// Not an http or https URL with a host and no user info.
    #[error("the URL cannot be called: {0}")]
    Url(String),
    /// Its host is, or resolves to, an address this node may not call (or
    /// to none): nothing was connected to.
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("connecting failed: {0}")]
    Connect(String),
    #[error("TLS failed: {0}")]
    Tls(String),
    /// The caller's request cannot be written (a header this client sets
    /// itself, a name or value HTTP does not allow): nothing was sent.
    #[error("the request cannot be made: {0}")]
    Request(String),
    /// The exchange failed after connecting: the connection cut, an answer
    /// that is not HTTP/1 or whose head is too long.
    #[error("HTTP failed: {0}")]
    Http(String),
    /// No status within the caller's timeout.
    #[error("no answer within the timeout")]
    Timeout,
}

/// One probe's result: how long until the answer's status (or the
/// failure), and what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub latency_ms: u64,
    pub outcome: ProbeOutcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The origin answered with this HTTP status (a 3xx included: it is
    /// not followed).
    Status(u16),
    /// No status within the timeout.
    Timeout,
    /// No status at all: a URL that cannot be called, an address refused,
    /// a name that does not resolve, a connection refused or cut, bad TLS,
    /// an answer that is not HTTP/1.
    Failed,
}

const HEALTH_CHECK_AGENT: &str = concat!("waitroom/", env!("CARGO_PKG_VERSION"), " (health check)");

impl Outbound {
    pub fn new(policy: OutboundPolicy) -> Outbound {
        Outbound {
            guard: Arc::new(Guard {
                allow: policy.allow_networks,
            }),
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls_config())),
        }
    }

    /// Makes `call` and waits for the status of the answer, at most
    /// `timeout` for everything; the answer's body is never read.
    pub async fn send(&self, call: Call<'_>, timeout: Duration) -> Sent {
        let started = Instant::now();
        let outcome = match tokio::time::timeout(timeout, self.answer(&call)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(CallFailure::Timeout),
        };
        Sent {
            latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            outcome,
        }
    }

    /// GETs `url` and waits for the status of the answer, at most `timeout`
    /// for everything. Never an error: whatever goes wrong is a sample too
    /// ([`ProbeOutcome`]).
    pub async fn probe(&self, url: &str, timeout: Duration) -> Probe {
        let headers = [("user-agent", HEALTH_CHECK_AGENT)];
        let Sent {
            latency_ms,
            outcome,
        } = self.send(Call::get(url, &headers), timeout).await;
        let outcome = match outcome {
            Ok(status) => ProbeOutcome::Status(status),
            Err(CallFailure::Timeout) => ProbeOutcome::Timeout,
            Err(why) => {
                tracing::debug!(url, %why, "health check failed");
                ProbeOutcome::Failed
            }
        };
        Probe {
            latency_ms,
            outcome,
        }
    }

    /// The answer's status: the URL checked, its addresses checked, a
    /// connection to one of them (TLS for https), the one request on it.
    async fn answer(&self, call: &Call<'_>) -> Result<u16, CallFailure> {
        let url = callable(call.url).map_err(CallFailure::Url)?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| CallFailure::Url("no port".into()))?;
        let (addresses, server_name) = match url.host() {
            Some(Host::Ipv4(address)) => self.written(address.into())?,
            Some(Host::Ipv6(address)) => self.written(address.into())?,
            Some(Host::Domain(name)) => {
                let checked = self.guard.resolve(name).await?;
                let server_name = ServerName::try_from(name.to_owned())
                    .map_err(|error| CallFailure::Url(format!("{name}: {error}")))?;
                (checked, server_name)
            }
            None => return Err(CallFailure::Url("no host".into())),
        };
        let stream = connect(&addresses, port)
            .await
            .map_err(CallFailure::Connect)?;
        if url.scheme() == "https" {
            let stream = self
                .tls
                .connect(server_name, stream)
                .await
                .map_err(|error| CallFailure::Tls(full_error(&error)))?;
            exchange(stream, &url, call).await
        } else {
            exchange(stream, &url, call).await
        }
    }

    /// An address written in the URL, if it may be called, as the one
    /// address to connect to and the name TLS checks.
    fn written(&self, address: IpAddr) -> Result<(Vec<IpAddr>, ServerName<'static>), CallFailure> {
        self.guard.check(address)?;
        Ok((vec![address], ServerName::IpAddress(address.into())))
    }
}

/// `raw` as a URL this client calls: http or https, a host, no user info
/// (which would be sent to whatever the name resolves to). Its words name
/// no part of the URL but its scheme.
fn callable(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|error| format!("not a URL ({error})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{} is not http or https", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("it carries a user or password".into());
    }
    Ok(url)
}

/// A connection to the first of `addresses` that takes one.
async fn connect(addresses: &[IpAddr], port: u16) -> Result<TcpStream, String> {
    let mut failure = String::from("no address");
    for &address in addresses {
        match TcpStream::connect(SocketAddr::new(address, port)).await {
            Ok(stream) => return Ok(stream),
            Err(error) => failure = format!("{address}: {error}"),
        }
    }
    Err(failure)
}

/// `call` as the request to write: its target (path and query), the
/// client's own headers, then the caller's.
fn request(url: &Url, call: &Call<'_>) -> Result<hyper::Request<Full<Bytes>>, CallFailure> {
    let host = url.host_str().unwrap_or_default();
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let mut builder = hyper::Request::builder()
        .method(call.method.clone())
        .uri(&url[Position::BeforePath..Position::AfterQuery])
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONNECTION, "close");
    for &(name, value) in call.headers {
        if OWN_HEADERS.iter().any(|own| own.eq_ignore_ascii_case(name)) {
            return Err(CallFailure::Request(format!(
                "{name} is the client's to set"
            )));
        }
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(call.body.clone()))
        .map_err(|error| CallFailure::Request(error.to_string()))
}

/// `call` on `stream`, closed once the answer's head is in: its status.
async fn exchange<S>(stream: S, url: &Url, call: &Call<'_>) -> Result<u16, CallFailure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let request = request(url, call)?;
    let http = |error: hyper::Error| CallFailure::Http(full_error(&error));
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .handshake::<_, Full<Bytes>>(TokioIo::new(stream))
        .await
        .map_err(http)?;
    // The connection is driven here, not in a task of its own: it writes
    // the request, reads the answer's head, and ends (and closes) when this
    // returns, the answer's body unread. It may end by itself once the
    // answer is in (a short body, `Connection: close`): the answer is then
    // waiting, or the request failed with the reason.
    let answer = sender.send_request(request);
    tokio::pin!(answer);
    let response = tokio::select! {
        biased;
        answer = &mut answer => answer,
        _ = connection => answer.await,
    };
    response
        .map(|response| response.status().as_u16())
        .map_err(http)
}

/// An error with its causes (hyper's own message is only the outermost).
fn full_error(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

/// rustls on aws-lc-rs (the provider the rest of the node uses) with the
/// system's roots, as the Redis client trusts them.
fn tls_config() -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        tracing::warn!(
            errors = ?found.errors,
            "no system root certificates found: https health checks, webhooks and pushes will fail"
        );
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports rustls's default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// Which addresses the node may connect to.
#[derive(Debug)]
struct Guard {
    allow: Vec<IpNet>,
}

/// Why an address, or a name's, may not be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{address} is not a public address (allow its network with --outbound-allow-networks)")]
    NotPublic { address: IpAddr },
    #[error(
        "{name} resolves to {address}, not a public address (allow its network with --outbound-allow-networks)"
    )]
    ResolvesToNotPublic { name: String, address: IpAddr },
    #[error("{name} resolves to no address")]
    NoAddress { name: String },
}

impl Guard {
    fn check(&self, address: IpAddr) -> Result<(), Refused> {
        let canonical = address.to_canonical();
        let allowed = is_public(address)
            || self
                .allow
                .iter()
                .any(|network| network.contains(&address) || network.contains(&canonical));
        if allowed {
            Ok(())
        } else {
            Err(Refused::NotPublic { address })
        }
    }

    /// Every address `name` resolves to, if all of them may be called; one
    /// that may not refuses the name (its owner chooses which a client
    /// tries, so one bad address is as bad as all).
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, Refused> {
        let addresses: Vec<IpAddr> = tokio::net::lookup_host((name, 0))
            .await
            .map_err(|_| Refused::NoAddress { name: name.into() })?
            .map(|address| address.ip())
            .collect();
        if addresses.is_empty() {
            return Err(Refused::NoAddress { name: name.into() });
        }
        for &address in &addresses {
            self.check(address)
                .map_err(|_| Refused::ResolvesToNotPublic {
                    name: name.into(),
                    address,
                })?;
        }
        Ok(addresses)
    }
}

/// Whether `address` is a public one: neither loopback, private, link-local,
/// shared (carrier NAT), documentation, benchmarking, multicast, broadcast,
/// unspecified nor reserved. An IPv4 address written as IPv6 (mapped, or
/// through the well-known NAT64 prefix) is judged as the IPv4 it reaches.
pub fn is_public(address: IpAddr) -> bool {
    match address.to_canonical() {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

/// IPv4's special-purpose ranges (IANA's registry), all refused.
const SPECIAL_V4: [([u8; 4], u8); 15] = [
    ([0, 0, 0, 0], 8),       // "this network", 0.0.0.0 included
    ([10, 0, 0, 0], 8),      // private (RFC 1918)
    ([100, 64, 0, 0], 10),   // shared: carrier-grade NAT (RFC 6598)
    ([127, 0, 0, 0], 8),     // loopback
    ([169, 254, 0, 0], 16),  // link-local, the clouds' metadata service included
    ([172, 16, 0, 0], 12),   // private
    ([192, 0, 0, 0], 24),    // IETF protocol assignments
    ([192, 0, 2, 0], 24),    // documentation (TEST-NET-1)
    ([192, 88, 99, 0], 24),  // 6to4 relays (deprecated)
    ([192, 168, 0, 0], 16),  // private
    ([198, 18, 0, 0], 15),   // benchmarking
    ([198, 51, 100, 0], 24), // documentation (TEST-NET-2)
    ([203, 0, 113, 0], 24),  // documentation (TEST-NET-3)
    ([224, 0, 0, 0], 4),     // multicast
    ([240, 0, 0, 0], 4),     // reserved, the broadcast address included
];

fn is_public_v4(address: Ipv4Addr) -> bool {
    let bits = u32::from(address);
    !SPECIAL_V4.iter().any(|&(network, length)| {
        let shift = 32 - u32::from(length);
        bits >> shift == u32::from(Ipv4Addr::from(network)) >> shift
    })
}

/// Global unicast: IPv6's only public range. Everything outside it
/// (unspecified, loopback, IPv4-compatible, unique-local fc00::/7,
/// link-local fe80::/10, multicast ff00::/8, discard, …) is refused.
const GLOBAL_UNICAST_V6: (u16, u8) = (0x2000, 3);
/// The ranges inside global unicast that are not public, by their first
/// 32 bits.
const SPECIAL_V6: [(u32, u8); 4] = [
    (0x2001_0000, 23), // IETF protocol assignments (Teredo, benchmarking, ORCHID)
    (0x2001_0db8, 32), // documentation
    (0x2002_0000, 16), // 6to4: reaches any IPv4 address, private ones too
    (0x3fff_0000, 20), // documentation (RFC 9637)
];
/// The well-known NAT64 prefix 64:ff9b::/96: its last 32 bits are the IPv4
/// address a NAT64 gateway connects to.
const NAT64_V6: u128 = 0x0064_ff9b_u128 << 96;

fn is_public_v6(address: Ipv6Addr) -> bool {
    let bits = u128::from(address);
    if bits >> 32 == NAT64_V6 >> 32 {
        return is_public_v4(Ipv4Addr::from(bits as u32));
    }
    let (global, global_length) = GLOBAL_UNICAST_V6;
    let first = address.segments()[0];
    let in_global = first >> (16 - global_length) == global >> (16 - global_length);
    let top = (bits >> 96) as u32;
    in_global
        && !SPECIAL_V6.iter().any(|&(network, length)| {
            let shift = 32 - u32::from(length);
            top >> shift == network >> shift
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn guard(allow: &[&str]) -> Guard {
        Guard {
            allow: allow.iter().map(|n| n.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for special in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "169.254.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.7",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "100::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001::1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "3fff::1",
        ] {
            assert!(!is_public(ip(special)), "{special}");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.3.1",
            "192.169.0.1",
            "198.20.0.1",
            "223.255.255.255",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2001:4860:4860::8888",
            "2606:4700:4700::1111",
            "2a00:1450::1",
        ] {
            assert!(is_public(ip(public)), "{public}");
        }
    }

    #[test]
    fn allowed_networks_let_their_addresses_through_and_no_others() {
        let none = guard(&[]);
        assert!(none.check(ip("127.0.0.1")).is_err());
        assert!(none.check(ip("93.184.215.14")).is_ok());
        let loopback = guard(&["127.0.0.0/8", "10.1.0.0/16"]);
        assert!(loopback.check(ip("127.0.0.1")).is_ok());
        assert!(loopback.check(ip("::ffff:127.0.0.1")).is_ok());
        assert!(loopback.check(ip("10.1.2.3")).is_ok());
        assert!(loopback.check(ip("10.2.0.1")).is_err());
        assert!(loopback.check(ip("169.254.169.254")).is_err());
        assert!(loopback.check(ip("::1")).is_err());
    }

    #[tokio::test]
    async fn a_name_with_any_address_refused_is_refused() {
        let error = guard(&[]).resolve("localhost").await.unwrap_err();
        assert!(
            matches!(error, Refused::ResolvesToNotPublic { .. }),
            "{error}"
        );
        let allowed = guard(&["127.0.0.0/8", "::1/128"])
            .resolve("localhost")
            .await
            .unwrap();
        assert!(allowed.iter().all(IpAddr::is_loopback), "{allowed:?}");
        let error = guard(&[]).resolve("nothing.invalid").await.unwrap_err();
        assert!(matches!(error, Refused::NoAddress { .. }), "{error}");
    }

    #[tokio::test]
    async fn addresses_written_in_the_url_are_checked_however_written() {
        let outbound = Outbound::new(OutboundPolicy::default());
        for url in [
            "http://127.0.0.1:9/",
            "http://2130706433:9/",
            "http://0x7f.1:9/",
            "http://127.0.0.1.:9/",
            "http://[::1]:9/",
            "http://[::ffff:127.0.0.1]:9/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://0.0.0.0:9/",
        ] {
            let error = outbound.answer(&Call::get(url, &[])).await.unwrap_err();
            assert!(
                matches!(error, CallFailure::Refused(Refused::NotPublic { .. })),
                "{url}: {error}"
            );
            assert!(
                error.to_string().contains("not a public address"),
                "{error}"
            );
        }
    }

    #[test]
    fn the_clients_own_headers_and_malformed_ones_are_refused() {
        for headers in [
            &[("Host", "elsewhere.example")][..],
            &[("connection", "keep-alive")],
            &[("Content-Length", "1")],
            &[("transfer-encoding", "chunked")],
            &[("x-split", "a\r\nInjected: yes")],
            &[("bad name", "x")],
        ] {
            let call = Call::get("http://127.0.0.1:9/", headers);
            let url = callable(call.url).unwrap();
            let error = request(&url, &call).unwrap_err();
            assert!(
                matches!(error, CallFailure::Request(_)),
                "{headers:?}: {error}"
            );
        }
    }

    #[test]
    fn the_request_names_the_host_and_port_and_sends_the_path_and_query() {
        let headers = [("content-type", "application/json")];
        for (url, host, target) in [
            (
                "http://hooks.example/in?key=1",
                "hooks.example",
                "/in?key=1",
            ),
            ("https://hooks.example:8443/", "hooks.example:8443", "/"),
            ("http://[2001:db8::1]:8080/x", "[2001:db8::1]:8080", "/x"),
        ] {
            let call = Call::post(url, &headers, Bytes::from_static(b"{}"));
            let request = request(&callable(url).unwrap(), &call).unwrap();
            assert_eq!(request.method(), Method::POST);
            assert_eq!(request.uri(), target);
            assert_eq!(request.headers()["host"], host);
            assert_eq!(request.headers()["connection"], "close");
            assert_eq!(request.headers()["content-type"], "application/json");
        }
    }

    #[test]
    fn a_calls_debug_form_shows_no_body_no_header_value_and_no_path() {
        let headers = [("authorization", "vapid t=token-8d1f")];
        let call = Call::post(
            "https://push.example/send/token-8d1f?key=token-8d1f",
            &headers,
            Bytes::from_static(b"{\"contact\":\"+15550100\"}"),
        );
        let shown = format!("{call:?}");
        assert!(shown.contains("push.example"), "{shown}");
        assert!(shown.contains("authorization"), "{shown}");
        assert!(!shown.contains("token-8d1f"), "{shown}");
        assert!(!shown.contains("15550100"), "{shown}");
    }

    #[test]
    fn failures_to_parse_name_no_part_of_the_url() {
        for url in [
            "ftp://hooks.example/secret-token",
            "http://user:secret-token@hooks.example/",
            "secret-token",
        ] {
            let error = callable(url).unwrap_err();
            assert!(!error.contains("secret-token"), "{url}: {error}");
        }
    }

    #[tokio::test]
    async fn a_url_that_cannot_be_called_fails_without_a_request() {
        let outbound = Outbound::new(OutboundPolicy {
            allow_networks: vec!["127.0.0.0/8".parse().unwrap()],
        });
        for url in [
            "ftp://127.0.0.1/",
            "http://user:pw@127.0.0.1:9/",
            "nonsense",
        ] {
            let probe = outbound.probe(url, Duration::from_secs(5)).await;
            assert_eq!(probe.outcome, ProbeOutcome::Failed, "{url}");
        }
    }
}
