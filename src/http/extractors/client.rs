//! The address a request came from, the block of addresses it counts in,
//! and that block's join budget.

use std::net::IpAddr;

use actix_web::HttpRequest;
use ipnet::IpNet;

use super::part;
use crate::http::state::ClientRules;
use crate::words::join_limit::{self, JoinLimit};

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
    part::<ClientRules>(req)
        .trusted_proxies
        .client(peer, &forwarded_for)
}

/// The block of addresses a request's client counts in, for the join and
/// login limits: its IPv4 address, or its IPv6 network of
/// `--join-rate-ipv6-prefix` bits (see `words::join_limit::client_block`).
pub fn client_block(req: &HttpRequest) -> IpNet {
    join_limit::client_block(client_address(req), part::<ClientRules>(req).ipv6_prefix)
}

/// The join budget of a request's client, when `--join-rate-per-ip` sets one.
pub fn join_limit(req: &HttpRequest) -> Option<JoinLimit> {
    let per_minute = part::<ClientRules>(req).join_rate_per_ip?;
    Some(JoinLimit {
        client: client_block(req).to_string(),
        per_minute,
    })
}
