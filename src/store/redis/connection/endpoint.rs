//! Where to connect and how: the URL, its TLS roots, and the bounds every
//! connection keeps (its response timeout; the connections of writes that
//! wait for replicas).

use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, ProtocolVersion, PushInfo, RedisError, TlsCertificates, TlsMode};
use tokio::sync::mpsc;

use super::redis_url::{RedisUrl, Topology};

/// A request that takes longer than this counts as the store being down.
pub(in crate::store::redis) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections for writes that wait for replicas, per node: `WAIT` answers
/// after a round trip to a replica, and what is sent behind it on the same
/// connection waits, so waited writes go out over several, apart from reads.
pub(super) const DURABLE_CONNECTIONS: usize = 4;

/// Where to connect and how: the URL and its TLS roots.
pub(super) struct Endpoint {
    pub(super) url: RedisUrl,
    pub(super) certificates: Option<TlsCertificates>,
    /// Connections of their own for writes that wait for replicas (none
    /// without `--redis-wait-replicas`): `WAIT` holds the connection it
    /// runs on, so every read and mark sent behind it would wait too.
    pub(super) durable_connections: usize,
}

impl Endpoint {
    /// A client for one server at `url` (given in full: credentials, TLS).
    pub(super) fn client(&self, url: &str) -> Result<redis::Client, RedisError> {
        match &self.certificates {
            Some(certificates) => redis::Client::build_with_tls(url, certificates.clone()),
            None => redis::Client::open(url),
        }
    }

    /// A client for one node, with the URL's credentials.
    pub(super) fn node_client(&self, host: &str, port: u16) -> Result<redis::Client, RedisError> {
        let info = redis::IntoConnectionInfo::into_connection_info(self.url.node_url(host, port))?;
        let mut settings = info.redis_settings().clone();
        if let Some(username) = &self.url.username {
            settings = settings.set_username(username);
        }
        if let Some(password) = &self.url.password {
            settings = settings.set_password(password);
        }
        let info = info.set_redis_settings(settings);
        match &self.certificates {
            Some(certificates) => redis::Client::build_with_tls(info, certificates.clone()),
            None => redis::Client::open(info),
        }
    }

    pub(super) fn sentinel(&self) -> Option<Result<SentinelClient, RedisError>> {
        let Topology::Sentinel {
            sentinels,
            master,
            username,
            password,
        } = &self.url.topology
        else {
            return None;
        };
        let addresses = sentinels.iter().map(|(host, port)| {
            if self.url.tls {
                ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host.clone(), *port)
            }
        });
        let build = || {
            let mut builder =
                SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)?
                    .set_client_to_redis_protocol(ProtocolVersion::RESP3);
            if self.url.tls {
                builder = builder
                    .set_client_to_redis_tls_mode(TlsMode::Secure)
                    .set_client_to_sentinel_tls_mode(TlsMode::Secure);
            }
            if let Some(certificates) = &self.certificates {
                builder = builder
                    .set_client_to_redis_certificates(certificates.clone())
                    .set_client_to_sentinel_certificates(certificates.clone());
            }
            if let Some(username) = &self.url.username {
                builder = builder.set_client_to_redis_username(username);
            }
            if let Some(password) = &self.url.password {
                builder = builder.set_client_to_redis_password(password);
            }
            if let Some(username) = username {
                builder = builder.set_client_to_sentinel_username(username);
            }
            if let Some(password) = password {
                builder = builder.set_client_to_sentinel_password(password);
            }
            builder.build()
        };
        Some(build())
    }

    pub(super) fn cluster_client(
        &self,
        seeds: &[(String, u16)],
        pushes: Option<mpsc::UnboundedSender<PushInfo>>,
    ) -> Result<ClusterClient, RedisError> {
        let urls: Vec<String> = seeds
            .iter()
            .map(|(host, port)| self.url.node_url(host, *port))
            .collect();
        let mut builder = ClusterClientBuilder::new(urls)
            .use_protocol(ProtocolVersion::RESP3)
            .response_timeout(RESPONSE_TIMEOUT)
            .connection_timeout(RESPONSE_TIMEOUT);
        if self.url.tls {
            builder = builder.tls(TlsMode::Secure);
        }
        if let Some(certificates) = &self.certificates {
            builder = builder.certs(certificates.clone());
        }
        if let Some(username) = &self.url.username {
            builder = builder.username(username);
        }
        if let Some(password) = &self.url.password {
            builder = builder.password(password);
        }
        if let Some(pushes) = pushes {
            builder = builder.push_sender(pushes);
        }
        builder.build()
    }
}

pub(super) fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_connection_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500))
}
