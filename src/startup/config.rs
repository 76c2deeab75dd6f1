//! Settings: every flag is also an environment variable (api.md, "Running").

use clap::{Parser, ValueEnum};
use ipnet::IpNet;

use crate::http::client_address::parse_trusted_proxy;
use crate::store::redis::RedisOptions;
use crate::words::join_limit::{DEFAULT_CODE_GUESSES_PER_IP, DEFAULT_IPV6_PREFIX, IPV6_PREFIXES};
use crate::words::networks::parse_network;
use crate::words::push::{PushHost, parse_push_host};
use crate::words::return_url::PublicUrl;

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

    /// How many days a closed room's report stays readable
    /// (`GET /api/admin/rooms/{room}/report`); on the memory store, until
    /// the node stops if that is sooner.
    #[arg(long, env = "WAITROOM_REPORT_KEEP_DAYS", default_value_t = crate::words::report::DEFAULT_REPORT_KEEP_DAYS, value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub report_keep_days: u64,

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

    /// How often a socket that was sent nothing is pinged, in milliseconds;
    /// one that answers none of three pings in a row is closed (1001).
    #[arg(long, env = "WAITROOM_SOCKET_PING_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub socket_ping_ms: u64,

    /// Joins that create a new place, per minute per client address in a
    /// room (a minute's worth may come at once); past it, 429 `rate_limited`.
    /// Off unless set: many real visitors share one address behind carrier
    /// NAT. Give every node the same value; on Redis the limit is shared.
    #[arg(long, env = "WAITROOM_JOIN_RATE_PER_IP", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub join_rate_per_ip: Option<u32>,

    /// Places of one client address that may wait to be notified at once
    /// (api.md, "Step away"): past them, 409 `too_many_notifications`. A
    /// request also spends one of the address's joins (`--join-rate-per-ip`).
    #[arg(long, env = "WAITROOM_NOTIFY_PER_IP", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub notify_per_ip: u32,

    /// How long a node may be silent on a notification it took before
    /// another node takes it over (it died), in seconds. Every node
    /// renews its hold before each retry, so a live node keeps its own.
    #[arg(long, env = "WAITROOM_NOTIFY_TAKEOVER_S", default_value_t = 60, value_parser = clap::value_parser!(u64).range(2..=3_600))]
    pub notify_takeover_s: u64,

    /// Wrong priority codes (unknown or used up) per minute per client
    /// address in a room (a minute's worth may come at once); past it a
    /// join with a code, right or wrong, is 429 `rate_limited`. On by
    /// default: nobody who holds a code needs ten wrong ones a minute. 0
    /// turns it off. Give every node the same value; on Redis it is shared.
    #[arg(long, env = "WAITROOM_CODE_GUESSES_PER_IP", default_value_t = DEFAULT_CODE_GUESSES_PER_IP, value_parser = clap::value_parser!(u32).range(0..=60_000))]
    pub code_guesses_per_ip: u32,

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

    /// Private or special networks the node may call all the same when it
    /// checks an origin's health (a room's `autotune.health_url`),
    /// comma-separated addresses or networks (`10.0.0.0/8,192.0.2.7`).
    /// Absent, only public addresses are called: never loopback, private,
    /// link-local (the cloud metadata service), shared or reserved ones,
    /// whether written in the URL or resolved from its name.
    #[arg(long, env = "WAITROOM_OUTBOUND_ALLOW_NETWORKS", value_name = "NETWORKS", value_delimiter = ',', value_parser = parse_network)]
    pub outbound_allow_networks: Vec<IpNet>,

    // Forward auth (`/api/gate`, docs/src/proxies/).
    /// The waiting room's public base URL (`https://queue.example`, a path
    /// prefix allowed): `/api/gate`'s redirects to a room's page are built
    /// on it, and a room whose `target_url` is a path is on its origin.
    /// Absent, the gate builds them on the forwarded host.
    #[arg(long, env = "WAITROOM_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<PublicUrl>,

    /// A TOML file of `[[room]]` tables (api.md "Rooms from a file") every
    /// node applies at start, before it serves: a missing room is created,
    /// a room present gets the fields its table names, a table applied
    /// before is not applied again. A bad file stops the start, naming
    /// the line and field.
    #[arg(long, env = "WAITROOM_ROOMS", value_name = "FILE")]
    pub rooms: Option<std::path::PathBuf>,

    /// A directory holding the operator's own waiting page: `room.html`
    /// for every room, `room-{room}.html` for one (docs/src/branding.md
    /// lists the variables). Read once at start; a template that fails to
    /// load or render gives way to the built-in page, with a warning.
    #[arg(long, env = "WAITROOM_TEMPLATES_DIR", value_name = "DIR")]
    pub templates_dir: Option<std::path::PathBuf>,

    // --- Who else may call: origin tokens and CORS (issue 29, items 7 and 8).
    /// A token the protected site (the origin) uses to revoke passes
    /// (`POST /api/admin/rooms/{room}/passes/revoke`) and to call
    /// `/api/verify`, and for nothing else; at least 32 characters. Give
    /// the flag once per token (the variable: comma-separated), so a token
    /// can be rotated by adding the new one before removing the old.
    #[arg(
        long = "origin-token",
        env = "WAITROOM_ORIGIN_TOKEN",
        value_name = "TOKEN",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub origin_tokens: Vec<String>,

    /// Origins whose pages may call the visitor API from a browser, with
    /// their cookies (CORS), comma-separated, each exactly as a browser
    /// sends it (`https://shop.example.com`, `http://localhost:3000`); the
    /// admin API never answers CORS. Absent: no CORS headers at all.
    #[arg(
        long = "cors-origins",
        env = "WAITROOM_CORS_ORIGINS",
        value_name = "ORIGINS",
        value_delimiter = ',',
        value_parser = parse_cors_origin
    )]
    pub cors_origins: Vec<String>,

    /// Hosts whose push services may receive web pushes (api.md, "Step
    /// away: notifications"), comma-separated or the flag repeated: a name
    /// admits itself and its subdomains (whole labels), an address itself.
    /// A subscription on any other host is refused (400). Push endpoints
    /// are https on the default port; plain http only on a loopback host
    /// named here (a test's push service, reached only if
    /// `--outbound-allow-networks` allows it too).
    #[arg(
        long = "push-hosts",
        env = "WAITROOM_PUSH_HOSTS",
        value_name = "HOSTS",
        value_delimiter = ',',
        default_value = crate::words::push::DEFAULT_PUSH_HOSTS,
        value_parser = parse_push_host
    )]
    pub push_hosts: Vec<PushHost>,
}

/// One origin for `--cors-origins`: `scheme://host[:port]`, http or https,
/// written as the browser's `Origin` header writes it (lowercase host, no
/// default port, no path or trailing slash), since CORS compares origins as
/// exact strings: anything else would be a setting that never matches.
pub fn parse_cors_origin(given: &str) -> Result<String, String> {
    let given = given.trim();
    let url =
        url::Url::parse(given).map_err(|error| format!("{given:?} is not an origin: {error}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{given:?}: an origin is http:// or https://"));
    }
    let origin = url.origin().ascii_serialization();
    if origin != given {
        return Err(format!(
            "{given:?} is not written as a browser sends its origin; write {origin:?} \
             (scheme, host and port only: no path, no trailing slash, no default port)"
        ));
    }
    Ok(origin)
}

fn parse_public_url(raw: &str) -> Result<PublicUrl, String> {
    PublicUrl::parse(raw)
}

/// The shortest admin token accepted: guessing one must be hopeless.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

/// The shortest origin token accepted: as for the admin token.
pub const MIN_ORIGIN_TOKEN_CHARS: usize = MIN_ADMIN_TOKEN_CHARS;

impl Settings {
    /// How the Redis store connects and when a write is acknowledged.
    pub fn redis_options(&self) -> RedisOptions {
        RedisOptions {
            report_keep_days: self.report_keep_days,
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

    fn cors_origins(args: &[&str]) -> Result<Vec<String>, String> {
        let args = ["waitroom"].iter().chain(args);
        Settings::try_parse_from(args)
            .map(|settings| settings.cors_origins)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn code_guesses_are_ten_a_minute_unless_set_and_zero_turns_them_off() {
        let code_guesses = |args: &[&str]| {
            Settings::try_parse_from(["waitroom"].iter().chain(args))
                .map(|settings| settings.code_guesses_per_ip)
                .map_err(|error| error.to_string())
        };
        assert_eq!(code_guesses(&[]), Ok(10));
        assert_eq!(code_guesses(&["--code-guesses-per-ip", "0"]), Ok(0));
        assert_eq!(code_guesses(&["--code-guesses-per-ip", "30"]), Ok(30));
        for refused in ["-1", "60001", "ten"] {
            let flag = format!("--code-guesses-per-ip={refused}");
            let answer = code_guesses(&[&flag]);
            assert!(
                answer
                    .as_ref()
                    .is_err_and(|error| error.contains("--code-guesses-per-ip")),
                "{refused}: {answer:?}"
            );
        }
    }

    #[test]
    fn cors_origins_are_exact_origins_or_the_start_fails() {
        assert_eq!(cors_origins(&[]), Ok(vec![]));
        assert_eq!(
            cors_origins(&[
                "--cors-origins",
                "https://shop.example.com,http://127.0.0.1:3000"
            ]),
            Ok(vec![
                "https://shop.example.com".to_string(),
                "http://127.0.0.1:3000".to_string()
            ])
        );
        for refused in [
            "*",
            "null",
            "shop.example.com",
            "https://shop.example.com/",
            "https://shop.example.com/app",
            "https://Shop.example.com",
            "https://shop.example.com:443",
            "ftp://shop.example.com",
        ] {
            let error = cors_origins(&["--cors-origins", refused]).unwrap_err();
            assert!(error.contains("--cors-origins"), "{refused}: {error}");
        }
    }

    #[test]
    fn outbound_allow_networks_are_none_unless_given_and_read_as_networks() {
        let allowed = |args: &[&str]| {
            Settings::try_parse_from(["waitroom"].iter().chain(args))
                .map(|settings| settings.outbound_allow_networks)
                .map_err(|error| error.to_string())
        };
        assert_eq!(allowed(&[]), Ok(vec![]));
        assert_eq!(
            allowed(&["--outbound-allow-networks", "127.0.0.0/8,10.0.0.7,fd00::/8"]),
            Ok(vec![
                "127.0.0.0/8".parse().unwrap(),
                "10.0.0.7/32".parse().unwrap(),
                "fd00::/8".parse().unwrap(),
            ])
        );
        let error = allowed(&["--outbound-allow-networks", "localhost"]).unwrap_err();
        assert!(error.contains("--outbound-allow-networks"), "{error}");
    }

    #[test]
    fn push_hosts_default_to_the_browsers_push_services_and_read_as_hosts() {
        use crate::words::push::{PushHosts, check_endpoint};
        let hosts = |args: &[&str]| {
            Settings::try_parse_from(["waitroom"].iter().chain(args))
                .map(|settings| PushHosts::new(settings.push_hosts))
                .map_err(|error| error.to_string())
        };
        assert_eq!(hosts(&[]), Ok(PushHosts::default()));
        let given = hosts(&[
            "--push-hosts",
            "push.example.com,127.0.0.1",
            "--push-hosts",
            "localhost",
        ])
        .unwrap();
        assert!(check_endpoint(&given, "https://a.push.example.com/x").is_ok());
        assert!(check_endpoint(&given, "http://127.0.0.1:9/x").is_ok());
        assert!(check_endpoint(&given, "http://localhost:9/x").is_ok());
        assert!(check_endpoint(&given, "https://fcm.googleapis.com/x").is_err());
        let error = hosts(&["--push-hosts", "https://push.example.com"]).unwrap_err();
        assert!(error.contains("--push-hosts"), "{error}");
    }

    #[test]
    fn origin_tokens_repeat_on_the_command_line() {
        let settings =
            Settings::try_parse_from(["waitroom", "--origin-token", "a", "--origin-token", "b"])
                .unwrap();
        assert_eq!(settings.origin_tokens, ["a", "b"]);
    }

    #[test]
    fn the_public_url_is_checked_at_start() {
        let parse = |url: &str| Settings::try_parse_from(["waitroom", "--public-url", url]);
        assert_eq!(
            parse("https://queue.example/").unwrap().public_url,
            Some(PublicUrl::parse("https://queue.example").unwrap())
        );
        let error = parse("queue.example").unwrap_err().to_string();
        assert!(error.contains("--public-url"), "{error}");
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
