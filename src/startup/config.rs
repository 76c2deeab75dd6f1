//! Settings: every flag is also an environment variable (api.md, "Running").

use clap::{Parser, ValueEnum};
use ipnet::IpNet;

use crate::http::client_address::parse_trusted_proxy;
use crate::store::redis::RedisOptions;
use crate::words::join_limit::{DEFAULT_IPV6_PREFIX, IPV6_PREFIXES};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// What the binary does instead of serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Subcommand)]
pub enum Mode {
    /// Ask the node at `--listen` for `/healthz` and exit 0 if it answers
    /// 200, 1 otherwise (a container's HEALTHCHECK, where no curl is).
    Healthcheck,
}

#[derive(Debug, Clone, Parser)]
#[command(name = "waitroom", version, about = "A real-time virtual waiting room")]
pub struct Settings {
    #[command(subcommand)]
    pub mode: Option<Mode>,

    /// Address to listen on.
    #[arg(long, env = "WAITROOM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// Redis URL for a shared store across nodes; absent, the embedded memory store.
    #[arg(long, env = "WAITROOM_REDIS_URL")]
    pub redis_url: Option<String>,

    /// PEM file of the certificate authority that signed the Redis servers'
    /// certificates (`rediss://`), instead of the system's roots.
    #[arg(long, env = "WAITROOM_REDIS_CA_FILE", value_name = "FILE")]
    pub redis_ca_file: Option<std::path::PathBuf>,

    /// Replicas that must have each write before it is answered (Redis
    /// `WAIT`, 1 s at most; past it the answer is 503 and nothing was
    /// acknowledged): a failover then loses nothing any client was told.
    #[arg(long, env = "WAITROOM_REDIS_WAIT_REPLICAS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=16))]
    pub redis_wait_replicas: u32,

    /// Token operators use for the admin page and API, at least 32 characters;
    /// absent, one is generated into a file only this user can read, whose
    /// path is logged.
    #[arg(long, env = "WAITROOM_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,

    /// Secret every signing key derives from; share it across nodes. Absent,
    /// one is generated at start (tickets and passes then die with the process).
    #[arg(long, env = "WAITROOM_SECRET", hide_env_values = true)]
    pub secret: Option<String>,

    /// During a key rotation, the secret the deployment used before
    /// `--secret`: what it signed (passes, tickets, operator sessions,
    /// challenges) still verifies until it expires; everything new is
    /// signed with `--secret`, and the JWKS lists both public keys.
    #[arg(
        long,
        env = "WAITROOM_PREVIOUS_SECRET",
        hide_env_values = true,
        requires = "secret"
    )]
    pub previous_secret: Option<String>,

    /// Create room `demo` (2 visitors per 5 s tick) with simulated visitors, so a line forms.
    #[arg(long, env = "WAITROOM_DEMO_ROOM")]
    pub demo_room: bool,

    /// Make the demo room a scheduled drop opening this many seconds after
    /// start: a countdown, a pre-queue and the draw (needs --demo-room).
    #[arg(
        long,
        env = "WAITROOM_DEMO_OPENS_IN",
        value_name = "SECONDS",
        requires = "demo_room"
    )]
    pub demo_opens_in: Option<u64>,

    /// Where the demo room sends admitted visitors (default: its own seat
    /// sale, `/rooms/demo/sale`): a path on this site or an absolute
    /// http(s) URL, say a page guarded by a proxy's `auth_request`.
    #[arg(
        long,
        env = "WAITROOM_DEMO_TARGET",
        value_name = "URL",
        requires = "demo_room"
    )]
    pub demo_target: Option<String>,

    /// Log format.
    #[arg(long, env = "WAITROOM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Visitor WebSockets this node accepts before answering 503 (default:
    /// the open-files limit less 500, kept for health checks and polling).
    #[arg(long, env = "WAITROOM_MAX_SOCKETS")]
    pub max_sockets: Option<usize>,

    /// HTTP worker threads (default: one per core).
    #[arg(long, env = "WAITROOM_WORKERS")]
    pub workers: Option<usize>,

    /// Serve `/metrics` on this address only (not on `--listen`), so it can
    /// be kept off the public port.
    #[arg(long, env = "WAITROOM_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,

    /// The server is reached over HTTPS (say, through a proxy that ends
    /// TLS): every cookie it sets carries `Secure`.
    #[arg(long, env = "WAITROOM_SECURE_COOKIES")]
    pub secure_cookies: bool,

    /// How long a request body may take to arrive, in milliseconds (the
    /// headers get 5 s); a slower one is answered 408 and its connection closed.
    #[arg(long, env = "WAITROOM_BODY_TIMEOUT_MS", default_value_t = 10_000)]
    pub body_timeout_ms: u64,

    /// How long an answer may wait for its client to read any of it, in
    /// milliseconds; a client that reads nothing for that long (a stalled
    /// reader of a long `/draw/entries`, say) is disconnected.
    #[arg(long, env = "WAITROOM_WRITE_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..))]
    pub write_timeout_ms: u64,

    /// Joins that create a new place, per minute per client address in a
    /// room (a minute's worth may come at once); past it, 429 `rate_limited`.
    /// Off unless set: many real visitors share one address behind carrier
    /// NAT. Give every node the same value; on Redis the limit is shared.
    #[arg(long, env = "WAITROOM_JOIN_RATE_PER_IP", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub join_rate_per_ip: Option<u32>,

    /// Seconds a node keeps serving after SIGTERM or SIGINT, with `/readyz`
    /// answering 503 so that a load balancer takes it out, before it stops
    /// accepting connections, tells every socket to reconnect (close 1012)
    /// and finishes the requests in flight.
    #[arg(long, env = "WAITROOM_DRAIN_S", default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub drain_s: u64,
    /// The IPv6 network whose addresses share one join budget (and one
    /// admin login limit), as a prefix length from 32 to 128: a subscriber
    /// picks from a whole /64 or more. IPv4 addresses count one by one.
    #[arg(
        long,
        env = "WAITROOM_JOIN_RATE_IPV6_PREFIX",
        default_value_t = DEFAULT_IPV6_PREFIX,
        value_parser = clap::value_parser!(u8).range(*IPV6_PREFIXES.start() as i64..=*IPV6_PREFIXES.end() as i64)
    )]
    pub join_rate_ipv6_prefix: u8,

    /// Proxies whose `X-Forwarded-For` names the client, comma-separated
    /// addresses or networks (`10.0.0.0/8,192.0.2.7`); absent, the client
    /// is the peer address, whatever the header says.
    #[arg(long, env = "WAITROOM_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_trusted_proxy)]
    pub trusted_proxies: Vec<IpNet>,
}

/// The shortest admin token accepted: guessing one must be hopeless.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

impl Settings {
    /// How the Redis store connects and when a write is acknowledged.
    pub fn redis_options(&self) -> RedisOptions {
        RedisOptions {
            ca_file: self.redis_ca_file.clone(),
            wait_replicas: self.redis_wait_replicas,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv6_prefix(args: &[&str]) -> Result<u8, String> {
        let args = ["waitroom"].iter().chain(args);
        Settings::try_parse_from(args)
            .map(|settings| settings.join_rate_ipv6_prefix)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn the_ipv6_prefix_is_64_unless_set_within_32_to_128() {
        assert_eq!(ipv6_prefix(&[]), Ok(64));
        for set in ["32", "48", "128"] {
            assert_eq!(
                ipv6_prefix(&["--join-rate-ipv6-prefix", set]),
                Ok(set.parse().unwrap())
            );
        }
        for refused in ["31", "129", "0", "-1", "/64", "x"] {
            let flag = format!("--join-rate-ipv6-prefix={refused}");
            let error = ipv6_prefix(&[&flag]).unwrap_err();
            assert!(
                error.contains("--join-rate-ipv6-prefix"),
                "{refused}: {error}"
            );
        }
    }
}
