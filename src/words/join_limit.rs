//! The per-address join limit (`--join-rate-per-ip`): how many joins that
//! create a new place one client address may make per minute in a room.
//!
//! The rule is GCRA (the generic cell rate algorithm, as in the `governor`
//! crate): each address has a theoretical arrival time (TAT) that every
//! allowed join pushes one emission interval (a minute ÷ the rate) further;
//! a join is allowed while the TAT is less than a minute's worth of burst
//! ahead of now. It is written here by hand because it must run inside the
//! join's own atomic step on the store's clock, in the memory store and in
//! `lua/join.lua` alike (which mirrors this function), so that a refused
//! join changes nothing and limits hold across nodes; a limiter crate keeps
//! its state in the process.
//!
//! A budget belongs to a block of addresses, not to the address's text
//! ([`client_block`]): an IPv4 address counts the same however it is
//! written, and an IPv6 address counts with its network, since one
//! subscriber is given a whole /64 (or more) to pick addresses from.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::clock::Millis;
use super::constants::JOIN_LIMIT_WINDOW_MS;

/// The IPv6 prefix length one budget covers unless set
/// (`--join-rate-ipv6-prefix`): a /64 is the smallest network a
/// subscriber is given.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;
/// Wrong codes a client block may try per minute in a room unless set
/// (`--code-guesses-per-ip`): a visitor with a code types it once or twice;
/// ten a minute slows a guesser to a crawl and troubles nobody else.
pub const DEFAULT_CODE_GUESSES_PER_IP: u32 = 10;
/// The prefix lengths that may be set: a shorter one than /32 would put
/// whole providers in one budget.
pub const IPV6_PREFIXES: RangeInclusive<u8> = 32..=128;

/// Who a request comes from, as far as it can be read: an address, or
/// nobody known (a trusted proxy named the client in a form that cannot be
/// read). An unknown client is never inside a network (a bypass) and all
/// unknown clients share one budget, so a header nobody can read never
/// borrows a trusted address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientAddress {
    Known(IpAddr),
    Unknown,
}

impl ClientAddress {
    /// The address, when one is known.
    pub fn known(self) -> Option<IpAddr> {
        match self {
            Self::Known(address) => Some(address),
            Self::Unknown => None,
        }
    }
}

impl std::fmt::Display for ClientAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Known(address) => address.fmt(f),
            Self::Unknown => f.write_str("unknown"),
        }
    }
}

/// The block of addresses whose joins (and login attempts) share a budget
/// (see [`client_block`]); every unknown client is the one block `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientBlock {
    Net(IpNet),
    Unknown,
}

impl std::fmt::Display for ClientBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Net(net) => net.fmt(f),
            Self::Unknown => f.write_str("unknown"),
        }
    }
}

/// The block of addresses whose joins share a budget: an IPv4 address alone
/// (also when it comes IPv4-mapped, `::ffff:203.0.113.7`, as a dual-stack
/// listener sees it); an IPv6 address's network of `ipv6_prefix` bits
/// (clamped to [`IPV6_PREFIXES`]); one block for every unknown client.
pub fn client_block(client: ClientAddress, ipv6_prefix: u8) -> ClientBlock {
    let ClientAddress::Known(address) = client else {
        return ClientBlock::Unknown;
    };
    ClientBlock::Net(match address.to_canonical() {
        IpAddr::V4(v4) => Ipv4Net::from(v4).into(),
        IpAddr::V6(v6) => {
            let prefix = ipv6_prefix.clamp(*IPV6_PREFIXES.start(), *IPV6_PREFIXES.end());
            Ipv6Net::new_assert(v6, prefix).trunc().into()
        }
    })
}

/// A limit on one join: who the client is and how many new places a minute
/// they may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinLimit {
    /// The client's block of addresses ([`client_block`]), as text
    /// (`203.0.113.7/32`, `2001:db8::/64`).
    pub client: String,
    pub per_minute: u32,
}

/// What the limit says about one join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gcra {
    /// Allowed; store `tat` for the address until then.
    Allowed { tat: Millis },
    /// Refused; the next join would be allowed in this many seconds.
    Refused { retry_after_s: u64 },
}

/// Decides a join at `now` for an address whose stored TAT is `tat` (none
/// if it has none, or it has passed).
pub fn decide(tat: Option<Millis>, now: Millis, per_minute: u32) -> Gcra {
    let per_minute = Millis::from(per_minute.max(1));
    let interval = JOIN_LIMIT_WINDOW_MS.div_ceil(per_minute);
    // A minute's worth at once, then one per interval.
    let burst = interval * (per_minute - 1);
    let tat = tat.unwrap_or(now).max(now);
    if tat - now > burst {
        let wait_ms = tat - now - burst;
        return Gcra::Refused {
            retry_after_s: wait_ms.div_ceil(1000).max(1),
        };
    }
    Gcra::Allowed {
        tat: tat + interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(joins_at: &[Millis], per_minute: u32) -> Vec<Gcra> {
        let mut tat = None;
        joins_at
            .iter()
            .map(|&now| {
                let decision = decide(tat, now, per_minute);
                if let Gcra::Allowed { tat: next } = decision {
                    tat = Some(next);
                }
                decision
            })
            .collect()
    }

    #[test]
    fn a_minutes_worth_at_once_then_one_per_interval() {
        let decisions = run(&[0, 0, 0, 0, 19_999, 20_000, 20_000], 3);
        let allowed: Vec<bool> = decisions
            .iter()
            .map(|d| matches!(d, Gcra::Allowed { .. }))
            .collect();
        assert_eq!(allowed, [true, true, true, false, false, true, false]);
        assert_eq!(decisions[3], Gcra::Refused { retry_after_s: 20 });
        assert_eq!(decisions[4], Gcra::Refused { retry_after_s: 1 });
    }

    #[test]
    fn a_quiet_address_starts_fresh() {
        let decisions = run(&[0, 0, 0, 10 * 60_000, 10 * 60_000, 10 * 60_000], 3);
        assert!(decisions.iter().all(|d| matches!(d, Gcra::Allowed { .. })));
    }

    #[test]
    fn never_more_than_the_rate_in_any_minute_after_the_first_burst() {
        // One attempt every 100 ms for ten minutes at 30 a minute.
        let times: Vec<Millis> = (0..6_000).map(|i| i * 100).collect();
        let decisions = run(&times, 30);
        let allowed: Vec<Millis> = times
            .iter()
            .zip(&decisions)
            .filter(|(_, d)| matches!(d, Gcra::Allowed { .. }))
            .map(|(t, _)| *t)
            .collect();
        for window in allowed.windows(61) {
            assert!(
                window[60] - window[0] >= 60_000,
                "61 joins within a minute: {window:?}"
            );
        }
        assert!(
            (30 + 9 * 30..=30 + 10 * 30).contains(&allowed.len()),
            "{}",
            allowed.len()
        );
    }

    fn block(address: &str, ipv6_prefix: u8) -> String {
        client_block(ClientAddress::Known(address.parse().unwrap()), ipv6_prefix).to_string()
    }

    #[test]
    fn every_unknown_client_is_one_block() {
        assert_eq!(
            client_block(ClientAddress::Unknown, 64),
            ClientBlock::Unknown
        );
        assert_eq!(
            client_block(ClientAddress::Unknown, 64).to_string(),
            "unknown"
        );
    }

    #[test]
    fn an_ipv4_address_is_one_block_however_it_is_written() {
        assert_eq!(block("203.0.113.7", 64), "203.0.113.7/32");
        assert_eq!(block("::ffff:203.0.113.7", 64), "203.0.113.7/32");
        assert_eq!(block("::ffff:cb00:7107", 64), "203.0.113.7/32");
    }

    #[test]
    fn an_ipv6_address_counts_with_its_network() {
        assert_eq!(block("2001:db8:1:2::1", 64), "2001:db8:1:2::/64");
        assert_eq!(
            block("2001:db8:1:2:ffff:ffff:ffff:ffff", 64),
            "2001:db8:1:2::/64"
        );
        assert_ne!(block("2001:db8:1:3::1", 64), block("2001:db8:1:2::1", 64));
        assert_eq!(block("2001:db8:1:2::1", 48), block("2001:db8:1:3::1", 48));
        assert_eq!(block("2001:db8:1:2::1", 128), "2001:db8:1:2::1/128");
        // Out of range, clamped rather than trusted.
        assert_eq!(block("2001:db8:1:2::1", 0), "2001:db8::/32");
    }

    #[test]
    fn a_rate_of_one_allows_one_a_minute() {
        let decisions = run(&[0, 59_999, 60_000], 1);
        assert!(matches!(decisions[0], Gcra::Allowed { .. }));
        assert_eq!(decisions[1], Gcra::Refused { retry_after_s: 1 });
        assert!(matches!(decisions[2], Gcra::Allowed { .. }));
    }
}
