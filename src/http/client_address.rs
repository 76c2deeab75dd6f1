//! Who a request comes from: the peer address, or, when the peer is a proxy
//! the operator trusts (`--trusted-proxies`), the address that proxy wrote
//! into `X-Forwarded-For`. Anything a client writes there itself is ignored
//! unless a trusted proxy vouches for the hop; what a trusted proxy wrote
//! that cannot be read makes the client unknown.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;

pub use crate::words::join_limit::ClientAddress;

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    fn trusts(&self, address: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&address))
    }

    /// The client behind `peer`: walking `X-Forwarded-For` from its right
    /// end (the entry the nearest proxy added), the first address that is
    /// not a trusted proxy. The headers are read as bytes, entry by entry,
    /// so bytes that are not text elsewhere in them (a client's own part,
    /// left of what the proxies added) cost nothing. An entry the walk must
    /// read that is not an address makes the client unknown: never the
    /// proxy itself, which may hold a bypass or a budget of its own.
    pub fn client(&self, peer: IpAddr, forwarded_for: &[&[u8]]) -> ClientAddress {
        // An IPv4 peer of a dual-stack listener comes IPv4-mapped; it is
        // the IPv4 address that the trusted networks name.
        let mut client = peer.to_canonical();
        let hops = forwarded_for
            .iter()
            .flat_map(|header| header.split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .rev();
        for hop in hops {
            if !self.trusts(client) {
                break;
            }
            match parse_hop(hop) {
                Some(address) => client = address,
                None => return ClientAddress::Unknown,
            }
        }
        ClientAddress::Known(client)
    }
}

/// One `X-Forwarded-For` entry: an address, perhaps with a port.
fn parse_hop(hop: &[u8]) -> Option<IpAddr> {
    let hop = std::str::from_utf8(hop).ok()?;
    IpAddr::from_str(hop)
        .ok()
        .or_else(|| SocketAddr::from_str(hop).ok().map(|s| s.ip()))
        .map(|address| address.to_canonical())
}

/// One `--trusted-proxies` entry: an address (`10.0.0.7`) or a network
/// (`10.0.0.0/8`, `2001:db8::/32`), read as a room's `bypass_networks` are.
pub use crate::words::networks::parse_network as parse_trusted_proxy;

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> ClientAddress {
        ClientAddress::Known(text.parse().unwrap())
    }

    fn peer(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn proxies(entries: &[&str]) -> TrustedProxies {
        TrustedProxies::new(
            entries
                .iter()
                .map(|e| parse_trusted_proxy(e).unwrap())
                .collect(),
        )
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client_whatever_the_header_says() {
        let none = TrustedProxies::default();
        assert_eq!(
            none.client(peer("198.51.100.9"), &[b"203.0.113.1"]),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn a_trusted_proxy_names_the_client_it_saw() {
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"6.6.6.6, 203.0.113.7"]),
            ip("203.0.113.7"),
            "the client's own claim (6.6.6.6) is left of what the proxy added"
        );
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"203.0.113.7, 10.9.9.9"]),
            ip("203.0.113.7"),
            "a chain of trusted proxies is walked through"
        );
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"203.0.113.7", b"10.9.9.9"]),
            ip("203.0.113.7"),
            "several headers read as one list"
        );
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"[2001:db8::1]:443"]),
            ip("2001:db8::1")
        );
    }

    #[test]
    fn ipv4_mapped_addresses_are_read_as_ipv4() {
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client(peer("::ffff:10.1.2.3"), &[b"::ffff:203.0.113.7"]),
            ip("203.0.113.7"),
            "a mapped peer is the trusted proxy, and the client it names is IPv4"
        );
        assert_eq!(
            TrustedProxies::default().client(peer("::ffff:198.51.100.9"), &[]),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn a_peer_that_is_not_trusted_cannot_name_anyone() {
        let lb = proxies(&["10.0.0.7"]);
        assert_eq!(
            lb.client(peer("10.0.0.8"), &[b"203.0.113.7"]),
            ip("10.0.0.8")
        );
    }

    #[test]
    fn what_a_trusted_proxy_wrote_that_cannot_be_read_is_an_unknown_client() {
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"203.0.113.7, nonsense"]),
            ClientAddress::Unknown,
            "never the proxy itself"
        );
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"203.0.113.7, \xff"]),
            ClientAddress::Unknown
        );
        assert_eq!(lb.client(peer("10.1.2.3"), &[b""]), ClientAddress::Unknown);
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[]),
            ip("10.1.2.3"),
            "no header: the request is the proxy's own"
        );
        assert_eq!(
            TrustedProxies::default().client(peer("198.51.100.9"), &[b"\xff"]),
            ip("198.51.100.9"),
            "from a peer nobody trusts, the header is never read"
        );
    }

    #[test]
    fn bytes_that_are_not_text_left_of_the_client_are_never_read() {
        // What nginx's `$proxy_add_x_forwarded_for` makes of a client's
        // own `X-Forwarded-For: \xff`: its bytes, then the client it saw.
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"\xff, 203.0.113.7"]),
            ip("203.0.113.7")
        );
        assert_eq!(
            lb.client(peer("10.1.2.3"), &[b"\xff", b"203.0.113.7"]),
            ip("203.0.113.7"),
            "a header of its own, then the proxy's"
        );
    }

    #[test]
    fn entries_are_addresses_or_networks() {
        assert!(parse_trusted_proxy("10.0.0.0/8").is_ok());
        assert!(parse_trusted_proxy("::1").is_ok());
        assert!(parse_trusted_proxy(" 192.0.2.1 ").is_ok());
        let refused = parse_trusted_proxy("10.0.0.0/33").unwrap_err();
        assert!(refused.contains("10.0.0.0/33"), "{refused}");
        assert!(parse_trusted_proxy("proxy.example").is_err());
    }
}
