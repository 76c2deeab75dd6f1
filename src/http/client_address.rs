//! Who a request comes from: the peer address, or, when the peer is a proxy
//! the operator trusts (`--trusted-proxies`), the address that proxy wrote
//! into `X-Forwarded-For`. Anything a client writes there itself is ignored
//! unless a trusted proxy vouches for the hop.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;

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
    /// not a trusted proxy. An entry that is not an address stops the walk
    /// at the last trusted hop, so garbage never picks the client.
    pub fn client(&self, peer: IpAddr, forwarded_for: &[&str]) -> IpAddr {
        // An IPv4 peer of a dual-stack listener comes IPv4-mapped; it is
        // the IPv4 address that the trusted networks name.
        let mut client = peer.to_canonical();
        let hops = forwarded_for
            .iter()
            .flat_map(|header| header.split(','))
            .map(str::trim)
            .rev();
        for hop in hops {
            if !self.trusts(client) {
                break;
            }
            match parse_hop(hop) {
                Some(address) => client = address,
                None => break,
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, perhaps with a port.
fn parse_hop(hop: &str) -> Option<IpAddr> {
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

    fn ip(text: &str) -> IpAddr {
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
            none.client(ip("198.51.100.9"), &["203.0.113.1"]),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn a_trusted_proxy_names_the_client_it_saw() {
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client(ip("10.1.2.3"), &["6.6.6.6, 203.0.113.7"]),
            ip("203.0.113.7"),
            "the client's own claim (6.6.6.6) is left of what the proxy added"
        );
        assert_eq!(
            lb.client(ip("10.1.2.3"), &["203.0.113.7, 10.9.9.9"]),
            ip("203.0.113.7"),
            "a chain of trusted proxies is walked through"
        );
        assert_eq!(
            lb.client(ip("10.1.2.3"), &["203.0.113.7", "10.9.9.9"]),
            ip("203.0.113.7"),
            "several headers read as one list"
        );
        assert_eq!(
            lb.client(ip("10.1.2.3"), &["[2001:db8::1]:443"]),
            ip("2001:db8::1")
        );
    }

    #[test]
    fn ipv4_mapped_addresses_are_read_as_ipv4() {
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client(ip("::ffff:10.1.2.3"), &["::ffff:203.0.113.7"]),
            ip("203.0.113.7"),
            "a mapped peer is the trusted proxy, and the client it names is IPv4"
        );
        assert_eq!(
            TrustedProxies::default().client(ip("::ffff:198.51.100.9"), &[]),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn a_peer_that_is_not_trusted_cannot_name_anyone() {
        let lb = proxies(&["10.0.0.7"]);
        assert_eq!(lb.client(ip("10.0.0.8"), &["203.0.113.7"]), ip("10.0.0.8"));
    }

    #[test]
    fn garbage_stops_at_the_last_trusted_hop() {
        let lb = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            lb.client(ip("10.1.2.3"), &["203.0.113.7, nonsense"]),
            ip("10.1.2.3")
        );
        assert_eq!(lb.client(ip("10.1.2.3"), &[]), ip("10.1.2.3"));
        assert_eq!(lb.client(ip("10.1.2.3"), &[""]), ip("10.1.2.3"));
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
