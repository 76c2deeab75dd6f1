//! Certificates a test makes for itself, and how a test's Redis is secured
//! the way a managed Redis is: TLS, a password, an ACL user.
//!
//! The certificates come from `rcgen` at run time (a certificate authority
//! and a server certificate it signs, for `localhost` and `127.0.0.1`), so
//! no key is committed and none expires under the tests.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
};

/// A certificate authority and a server certificate it signed, as PEM
/// files in a directory removed when dropped.
pub struct TestCertificates {
    dir: PathBuf,
    /// The authority's certificate: what a client trusts (`--redis-ca-file`).
    pub ca_file: PathBuf,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl TestCertificates {
    pub fn make() -> Self {
        // Names of their own: OpenSSL (redis-cli, Redis's own replication
        // and bus links) takes a certificate whose subject is its issuer's
        // for self-signed, and refuses it.
        let mut authority = CertificateParams::default();
        authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        authority
            .distinguished_name
            .push(DnType::CommonName, "waitroom test authority");
        let authority = CertifiedIssuer::self_signed(authority, KeyPair::generate().unwrap())
            .expect("a certificate authority");
        let key = KeyPair::generate().unwrap();
        let mut server =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        server.distinguished_name = DistinguishedName::new();
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let server = server
            .signed_by(&key, &authority)
            .expect("a server certificate");
        let dir = std::env::temp_dir().join(format!(
            "waitroom-tls-{}-{}",
            std::process::id(),
            crate::ports::free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        Self {
            ca_file: write("ca.pem", authority.pem()),
            cert_file: write("server.pem", server.pem()),
            key_file: write("server.key", key.serialize_pem()),
            dir,
        }
    }
}

impl Drop for TestCertificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a test's Redis servers (and Sentinels) are reached. The servers'
/// plain port stays open for the test kit's own checks, with the password;
/// what the node is given (`tls_url` and the like) uses TLS and the user.
#[derive(Clone, Default)]
pub struct Secured {
    /// Served over TLS too (on a port of its own), replication and the
    /// Cluster's bus included.
    pub tls: Option<Arc<TestCertificates>>,
    /// The default user's password (`requirepass`, and `masterauth` for
    /// the replicas).
    pub password: Option<String>,
    /// An ACL user besides the default one, allowed everything: (name, password).
    pub user: Option<(String, String)>,
}

impl Secured {
    /// `redis-server` arguments for this, given its TLS port.
    pub(crate) fn server_args(&self, tls_port: Option<u16>) -> Vec<String> {
        let mut args = Vec::new();
        if let (Some(certificates), Some(port)) = (&self.tls, tls_port) {
            args.extend(["--tls-port".to_owned(), port.to_string()]);
            args.extend(certificates.server_args());
        }
        if let Some(password) = &self.password {
            args.extend(["--requirepass", password, "--masterauth", password].map(String::from));
        }
        if let Some((name, password)) = &self.user {
            args.extend(
                [
                    "--user",
                    name,
                    "on",
                    &format!(">{password}"),
                    "~*",
                    "&*",
                    "+@all",
                ]
                .map(String::from),
            );
        }
        args
    }

    /// `user:password@`, `:password@` or nothing: what a client URL carries.
    pub fn userinfo(&self) -> String {
        match (&self.user, &self.password) {
            (Some((name, password)), _) => format!("{name}:{password}@"),
            (None, Some(password)) => format!(":{password}@"),
            (None, None) => String::new(),
        }
    }
}

impl TestCertificates {
    /// The server side of TLS: its certificate, and clients need none.
    pub(crate) fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert-file".to_owned(),
            self.cert_file.display().to_string(),
            "--tls-key-file".to_owned(),
            self.key_file.display().to_string(),
            "--tls-ca-cert-file".to_owned(),
            self.ca_file.display().to_string(),
            "--tls-auth-clients".to_owned(),
            "no".to_owned(),
        ]
    }
}
