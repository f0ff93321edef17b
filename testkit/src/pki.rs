//! A throw-away public-key infrastructure for TLS tests: a CA, certificates it signs (for
//! `127.0.0.1`, expired, for another host, for a client) and a CA nobody trusts, written as
//! PEM files to a directory removed on drop.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    date_time_ymd,
};

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The certificate (for a leaf: the leaf then the CA, a chain).
    pub cert: PathBuf,
    /// Its private key (PKCS#8).
    pub key: PathBuf,
}

/// A test CA and the certificates it signed, in a temporary directory.
#[derive(Debug)]
pub struct TestPki {
    dir: PathBuf,
    /// The CA certificate clients trust (`--ca-cert`, `--tls-client-ca`).
    pub ca: PathBuf,
    /// A server certificate for `127.0.0.1` and `localhost`, valid now.
    pub server: CertFiles,
    /// A server certificate for `127.0.0.1` that expired in 2001.
    pub expired: CertFiles,
    /// A server certificate valid now but only for `rcp.invalid`.
    pub wrong_host: CertFiles,
    /// A client certificate (mutual TLS) signed by the CA.
    pub client: CertFiles,
    /// A client certificate signed by a CA the server does not trust.
    pub stranger: CertFiles,
}

/// Panics with what failed: this is a test harness.
fn must<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("test PKI: {what}: {e}"))
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = must("CA params", CertificateParams::new(Vec::<String>::new()));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

fn leaf_params(names: &[&str], client: bool) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = must("leaf params", CertificateParams::new(names));
    params.distinguished_name.push(DnType::CommonName, "rcp test");
    params.extended_key_usages =
        vec![if client { ExtendedKeyUsagePurpose::ClientAuth } else { ExtendedKeyUsagePurpose::ServerAuth }];
    params
}

impl TestPki {
    /// Makes the CA and the certificates, under a fresh directory of the system's temp dir
    /// named after `label`.
    pub fn new(label: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rcp-pki-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        must("create dir", std::fs::create_dir_all(&dir));
        let ca_key = must("CA key", KeyPair::generate());
        let params = ca_params("RCP test CA");
        let ca_cert = must("CA cert", params.self_signed(&ca_key));
        let ca_pem = ca_cert.pem();
        let issuer = Issuer::new(params, ca_key);
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            must("write PEM", std::fs::write(&path, text));
            path
        };
        let ca = write("ca.pem", &ca_pem);
        let leaf = |name: &str, params: CertificateParams, issuer: &Issuer<'_, KeyPair>, chain: &str| {
            let key = must("leaf key", KeyPair::generate());
            let cert = must("leaf cert", params.signed_by(&key, issuer));
            CertFiles {
                cert: write(&format!("{name}.pem"), &format!("{}{chain}", cert.pem())),
                key: write(&format!("{name}-key.pem"), &key.serialize_pem()),
            }
        };
        let server = leaf("server", leaf_params(&["127.0.0.1", "localhost"], false), &issuer, &ca_pem);
        let mut old = leaf_params(&["127.0.0.1", "localhost"], false);
        old.not_before = date_time_ymd(2000, 1, 1);
        old.not_after = date_time_ymd(2001, 1, 1);
        let expired = leaf("expired", old, &issuer, &ca_pem);
        let wrong_host = leaf("wrong-host", leaf_params(&["rcp.invalid"], false), &issuer, &ca_pem);
        let client = leaf("client", leaf_params(&["rcp-test-client"], true), &issuer, &ca_pem);
        let other_key = must("other CA key", KeyPair::generate());
        let other = Issuer::new(ca_params("Untrusted test CA"), other_key);
        let stranger = leaf("stranger", leaf_params(&["rcp-test-client"], true), &other, "");
        Self { dir, ca, server, expired, wrong_host, client, stranger }
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
