//! Lists of addresses and networks (`10.0.0.7`, `10.0.0.0/8`,
//! `2001:db8::/32`): a room's `bypass_networks`, whose clients are admitted
//! at once (api.md, "Bypass networks"), and the node's `--trusted-proxies`.
//! Read strictly: an entry that is neither is refused by name.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most entries a room's `bypass_networks` may hold: the join checks
/// them all, in the join's own atomic step.
pub const MAX_BYPASS_NETWORKS: usize = 100;

/// One entry: an address (a network of one) or a network.
pub fn parse_network(entry: &str) -> Result<IpNet, String> {
    let entry = entry.trim();
    IpNet::from_str(entry)
        .or_else(|_| IpAddr::from_str(entry).map(IpNet::from))
        .map_err(|_| {
            format!(
                "{entry:?} is neither an IP address nor a network like 10.0.0.0/8 or 2001:db8::/32"
            )
        })
}

/// A room's `bypass_networks`, as given (an address stays an address when
/// shown again; a network keeps the host bits it was written with).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks(Vec<IpNet>);

impl Networks {
    /// Every entry read, or the first that is not an address or a network.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        if entries.len() > MAX_BYPASS_NETWORKS {
            return Err(format!(
                "bypass_networks holds at most {MAX_BYPASS_NETWORKS} entries"
            ));
        }
        entries
            .iter()
            .map(|entry| {
                parse_network(entry.as_ref()).map_err(|why| format!("bypass_networks: {why}"))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &IpNet> {
        self.0.iter()
    }

    /// The entries as the list shows them: `10.0.0.7` for an address given
    /// alone, `10.0.0.0/8` for a network.
    pub fn shown(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|net| Shown(net).to_string())
    }

    /// Whether `address` is one of the entries or in one of the networks
    /// (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.iter().any(|net| net.contains(&address))
    }
}

/// An entry as the list shows it (see [`Networks::shown`]).
struct Shown<'a>(&'a IpNet);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.prefix_len() == self.0.max_prefix_len() {
            write!(f, "{}", self.0.addr())
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl Serialize for Networks {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.shown())
    }
}

impl<'de> Deserialize<'de> for Networks {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = Vec::<String>::deserialize(deserializer)?;
        Self::parse(&entries).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn addresses_and_networks_of_both_families_match() {
        let networks =
            Networks::parse(&["10.0.0.7", "192.168.4.0/22", "2001:db8::/32", "::1"]).unwrap();
        for inside in [
            "10.0.0.7",
            "192.168.7.255",
            "2001:db8:1::9",
            "::1",
            "::ffff:10.0.0.7",
        ] {
            assert!(networks.contains(ip(inside)), "{inside}");
        }
        for outside in ["10.0.0.8", "192.168.8.0", "2001:db9::1", "::2", "127.0.0.1"] {
            assert!(!networks.contains(ip(outside)), "{outside}");
        }
        assert!(!Networks::default().contains(ip("10.0.0.7")));
    }

    #[test]
    fn a_list_shows_as_it_was_given_and_reads_back() {
        let networks = Networks::parse(&["10.0.0.7", " 10.1.2.3/8", "2001:db8::/32"]).unwrap();
        let shown = serde_json::to_value(&networks).unwrap();
        assert_eq!(
            shown,
            serde_json::json!(["10.0.0.7", "10.1.2.3/8", "2001:db8::/32"])
        );
        assert_eq!(serde_json::from_value::<Networks>(shown).unwrap(), networks);
    }

    #[test]
    fn a_bad_entry_is_refused_by_name() {
        for bad in [
            "10.0.0.300",
            "10.0.0.0/33",
            "2001:db8::/129",
            "localhost",
            "",
        ] {
            let why = Networks::parse(&["10.0.0.1", bad]).unwrap_err();
            assert!(why.contains(&format!("{:?}", bad.trim())), "{why}");
            assert!(why.starts_with("bypass_networks"), "{why}");
        }
        let too_many: Vec<String> = (0..=MAX_BYPASS_NETWORKS)
            .map(|n| format!("10.0.{n}.0/24"))
            .collect();
        assert!(Networks::parse(&too_many).unwrap_err().contains("at most"));
    }
}
