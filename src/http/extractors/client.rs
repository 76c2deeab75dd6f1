//! The address a request came from, and the block of addresses it counts in.

use std::net::IpAddr;

use actix_web::HttpRequest;
use ipnet::IpNet;

use super::state;
use crate::words::join_limit;

/// The address a request came from: the peer, or the client a trusted
/// proxy names (see `client_address`).
pub fn client_address(req: &HttpRequest) -> IpAddr {
    let peer = req
        .peer_addr()
        .map(|address| address.ip())
        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let forwarded_for: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|value| value.to_str().ok())
        .collect();
    state(req).trusted_proxies.client(peer, &forwarded_for)
}

/// The block of addresses a request's client counts in, for the join and
/// login limits: its IPv4 address, or its IPv6 network of
/// `--join-rate-ipv6-prefix` bits (see `words::join_limit::client_block`).
pub fn client_block(req: &HttpRequest) -> IpNet {
    join_limit::client_block(client_address(req), state(req).join_rate_ipv6_prefix)
}
