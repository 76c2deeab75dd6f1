//! The address a request came from, the block of addresses it counts in,
//! and that block's join budget.

use actix_web::HttpRequest;

use super::part;
use crate::http::state::ClientRules;
use crate::words::join_limit::{self, ClientAddress, ClientBlock, JoinLimit};

/// The address a request came from: the peer, or the client a trusted
/// proxy names (see `client_address`), or unknown where that proxy's
/// header cannot be read.
pub fn client_address(req: &HttpRequest) -> ClientAddress {
    let Some(peer) = req.peer_addr().map(|address| address.ip()) else {
        // A request without a peer (one a test built) is nobody in particular.
        return ClientAddress::Unknown;
    };
    let forwarded_for: Vec<&[u8]> = req
        .headers()
        .get_all("x-forwarded-for")
        .map(|value| value.as_bytes())
        .collect();
    part::<ClientRules>(req)
        .trusted_proxies
        .client(peer, &forwarded_for)
}

/// The block of addresses a request's client counts in, for the join and
/// login limits: its IPv4 address, or its IPv6 network of
/// `--join-rate-ipv6-prefix` bits (see `words::join_limit::client_block`).
pub fn client_block(req: &HttpRequest) -> ClientBlock {
    join_limit::client_block(client_address(req), part::<ClientRules>(req).ipv6_prefix)
}

/// The code-guess budget of a request's client, unless
/// `--code-guesses-per-ip 0` turned it off.
pub fn code_guesses(req: &HttpRequest) -> Option<JoinLimit> {
    let per_minute = part::<ClientRules>(req).code_guesses_per_ip?;
    Some(JoinLimit {
        client: client_block(req).to_string(),
        per_minute,
    })
}

/// The join budget of a request's client, when `--join-rate-per-ip` sets one.
pub fn join_limit(req: &HttpRequest) -> Option<JoinLimit> {
    let per_minute = part::<ClientRules>(req).join_rate_per_ip?;
    Some(JoinLimit {
        client: client_block(req).to_string(),
        per_minute,
    })
}
