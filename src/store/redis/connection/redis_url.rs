//! What a Redis URL names (one server, a Sentinel's master, a Cluster;
//! TLS and credentials), and the URL as logs may show it.

/// How the node reaches Redis, beyond the URL.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// How long a closed room's report is kept (`--report-keep-days`).
    pub report_keep_days: u64,
    /// PEM file of the certificate authority that signed the servers'
    /// certificates (`rediss://`), instead of the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// Replicas that must have each write before it is answered (`WAIT`);
    /// 0 answers once the master has it.
    pub wait_replicas: u32,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            report_keep_days: crate::words::report::DEFAULT_REPORT_KEEP_DAYS,
            ca_file: None,
            wait_replicas: 0,
        }
    }
}

/// What a `redis://`, `rediss://`, `redis+cluster://` or
/// `redis+sentinel://` URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RedisUrl {
    pub tls: bool,
    pub topology: Topology,
    /// The credentials of the Redis servers (not of the Sentinels).
    pub username: Option<String>,
    pub password: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Topology {
    /// One server: the URL as redis-rs reads it.
    Server(String),
    /// `host:port` of each seed node.
    Cluster(Vec<(String, u16)>),
    Sentinel {
        sentinels: Vec<(String, u16)>,
        master: String,
        /// The Sentinels' own credentials (`sentinel_username`,
        /// `sentinel_password` in the query).
        username: Option<String>,
        password: Option<String>,
    },
}

impl RedisUrl {
    pub fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| "it is not a URL (no \"://\")".to_owned())?;
        let (tls, kind) = match scheme {
            "redis" => (false, ""),
            "rediss" => (true, ""),
            "redis+cluster" => (false, "cluster"),
            "rediss+cluster" => (true, "cluster"),
            "redis+sentinel" => (false, "sentinel"),
            "rediss+sentinel" => (true, "sentinel"),
            other => {
                return Err(format!(
                    "unknown scheme {other:?}: use redis, rediss, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel"
                ));
            }
        };
        let (authority, path_and_query) = split_authority(rest);
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = userinfo.map(credentials).unwrap_or_default();
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let topology = match kind {
            "" => Topology::Server(url.to_owned()),
            "cluster" => Topology::Cluster(host_ports(hosts, 6379)?),
            _ => {
                let master = path.trim_matches('/');
                if master.is_empty() || master.contains('/') {
                    return Err(
                        "a Sentinel URL names its master: redis+sentinel://HOST:PORT[,HOST:PORT…]/MASTER_NAME".into(),
                    );
                }
                let parameter = |name: &str| {
                    url::form_urlencoded::parse(query.as_bytes())
                        .find(|(key, _)| key == name)
                        .map(|(_, value)| value.into_owned())
                };
                Topology::Sentinel {
                    sentinels: host_ports(hosts, 26379)?,
                    master: decode(master),
                    username: parameter("sentinel_username"),
                    password: parameter("sentinel_password"),
                }
            }
        };
        Ok(Self {
            tls,
            topology,
            username,
            password,
        })
    }

    /// The URL of one node of this deployment, as redis-rs reads it.
    pub(super) fn node_url(&self, host: &str, port: u16) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{host}:{port}/?protocol=resp3")
    }
}

/// `url` with its passwords (the servers' in the userinfo, the Sentinels'
/// in the query) replaced by `***`: what a log or an error may show.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path_and_query) = split_authority(rest);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{hosts}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let path_and_query = match path_and_query.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.ends_with("password") => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => path_and_query.to_owned(),
    };
    format!("{scheme}://{authority}{path_and_query}")
}

/// What follows `scheme://`, as the authority and the path with its query.
/// The authority ends at the first `/` or `?` after its `@`, if it has one
/// (before any `?`): a password left unencoded may hold a `/` (base64 keys
/// do), and must never be taken for the path, where it would be shown.
fn split_authority(rest: &str) -> (&str, &str) {
    let before_query = rest.find('?').unwrap_or(rest.len());
    let hosts_from = rest[..before_query].rfind('@').map_or(0, |at| at + 1);
    match rest[hosts_from..].find(['/', '?']) {
        Some(at) => rest.split_at(hosts_from + at),
        None => (rest, ""),
    }
}

/// `user:password` (either part may be empty), percent-decoded.
fn credentials(userinfo: &str) -> (Option<String>, Option<String>) {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let some = |s: &str| (!s.is_empty()).then(|| decode(s));
    (some(user), some(password))
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// `a:1,b:2` (the port defaulting to `default_port`).
fn host_ports(hosts: &str, default_port: u16) -> Result<Vec<(String, u16)>, String> {
    hosts
        .split(',')
        .map(|host| {
            let (name, port) = match host.rsplit_once(':') {
                Some((name, port)) if !name.ends_with(':') => (
                    name,
                    port.parse().map_err(|_| format!("bad port in {host:?}"))?,
                ),
                _ => (host, default_port),
            };
            let name = name.trim_start_matches('[').trim_end_matches(']');
            if name.is_empty() {
                return Err(format!("no host in {hosts:?}"));
            }
            Ok((name.to_owned(), port))
        })
        .collect()
}

pub(super) fn with_resp3(url: &str) -> String {
    if url.contains("protocol=") {
        url.to_string()
    } else if url.contains('?') {
        format!("{url}&protocol=resp3")
    } else {
        format!("{url}?protocol=resp3")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_urls_shown() {
        assert_eq!(
            redacted("rediss://app:p%40ss@h:6380/0"),
            "rediss://app:***@h:6380/0"
        );
        assert_eq!(redacted("redis://:secret@h"), "redis://:***@h");
        assert_eq!(
            redacted("redis+sentinel://:a@s1,s2/m?sentinel_username=u&sentinel_password=b"),
            "redis+sentinel://:***@s1,s2/m?sentinel_username=u&sentinel_password=***"
        );
        assert_eq!(redacted("redis://h:6379/"), "redis://h:6379/");
        // An unencoded `/` in a password (base64 keys have them).
        assert_eq!(
            redacted("rediss://:ab/c+d=@h:6380/0"),
            "rediss://:***@h:6380/0"
        );
        assert_eq!(
            redacted("redis+cluster://:ab/cd@h1,h2/"),
            "redis+cluster://:***@h1,h2/"
        );
    }

    #[test]
    fn urls_name_their_topology_tls_and_credentials() {
        let url = RedisUrl::parse("redis://127.0.0.1:6379/").unwrap();
        assert_eq!(
            url.topology,
            Topology::Server("redis://127.0.0.1:6379/".into())
        );
        assert!(!url.tls);

        let url = RedisUrl::parse("rediss+cluster://app:p%40ss@a:7000,b:7001/").unwrap();
        assert!(url.tls);
        assert_eq!(
            url.topology,
            Topology::Cluster(vec![("a".into(), 7000), ("b".into(), 7001)])
        );
        assert_eq!(url.username.as_deref(), Some("app"));
        assert_eq!(url.password.as_deref(), Some("p@ss"));

        let url = RedisUrl::parse(
            "redis+sentinel://:secret@s1:26379,s2/mymaster?sentinel_password=watch%20it",
        )
        .unwrap();
        assert_eq!(
            url.topology,
            Topology::Sentinel {
                sentinels: vec![("s1".into(), 26379), ("s2".into(), 26379)],
                master: "mymaster".into(),
                username: None,
                password: Some("watch it".into()),
            }
        );
        assert_eq!(url.username, None);
        assert_eq!(url.password.as_deref(), Some("secret"));
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, says) in [
            ("http://x", "unknown scheme"),
            ("localhost:6379", "not a URL"),
            ("redis+sentinel://s1:26379/", "names its master"),
            ("redis+cluster://a:x/", "bad port"),
            ("redis+cluster://:1/", "no host"),
        ] {
            let error = RedisUrl::parse(url).unwrap_err();
            assert!(error.contains(says), "{url}: {error}");
        }
    }
}
