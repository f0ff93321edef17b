//! HTTPS targets (§15): the CA the suite trusts beside the system's roots and the client
//! certificate it presents, turned once per run into the rustls configuration every HTTP
//! connection of the run uses (rustls with the `ring` provider; nothing installed
//! process-wide). The suite keeps its own few lines for this rather than depending on the
//! client crate it may be certifying.

use std::path::PathBuf;

/// TLS settings for an `https://` target ([`crate::Config::tls`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpTls {
    /// A CA certificate file (PEM) trusted beside the system's roots (`--ca-cert`,
    /// `RCP_CA_CERT`).
    pub ca_cert: Option<PathBuf>,
    /// A client certificate (PEM chain) and its key, for a server requiring mutual TLS
    /// (`--client-cert`, `--client-key`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// How the run's HTTP clients are built: with the `tls` feature, from one rustls configuration.
#[derive(Clone, Default)]
pub(crate) struct HttpSetup {
    #[cfg(feature = "tls")]
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl HttpSetup {
    /// The setup of `tls`; an unreadable file is an error naming it.
    pub(crate) fn new(tls: &HttpTls) -> Result<Self, String> {
        #[cfg(feature = "tls")]
        return Ok(Self { tls: Some(std::sync::Arc::new(config::client_config(tls)?)) });
        #[cfg(not(feature = "tls"))]
        {
            if tls != &HttpTls::default() {
                return Err("--ca-cert/--client-cert need rcp-conformance's `tls` feature".into());
            }
            Ok(Self {})
        }
    }

    /// A reqwest client builder with this setup's TLS configuration.
    pub(crate) fn builder(&self) -> reqwest::ClientBuilder {
        let builder = reqwest::Client::builder();
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return builder.tls_backend_preconfigured(rustls::ClientConfig::clone(tls));
        }
        builder
    }
}

#[cfg(feature = "tls")]
mod config {
    use std::path::Path;
    use std::sync::Arc;

    use rustls::{ClientConfig, RootCertStore};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    use super::HttpTls;

    /// The certificates of a PEM file, at least one.
    fn certificates(what: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
        let bad = |e: rustls_pki_types::pem::Error| format!("cannot read the {what} {}: {e}", path.display());
        let certs = CertificateDer::pem_file_iter(path).map_err(bad)?.collect::<Result<Vec<_>, _>>().map_err(bad)?;
        if certs.is_empty() {
            return Err(format!("the {what} {} holds no PEM certificate", path.display()));
        }
        Ok(certs)
    }

    /// The system's roots, the CA of `tls`, its client certificate.
    pub(super) fn client_config(tls: &HttpTls) -> Result<ClientConfig, String> {
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        if let Some(path) = &tls.ca_cert {
            for cert in certificates("CA certificate", path)? {
                roots.add(cert).map_err(|e| format!("the CA certificate {}: {e}", path.display()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots);
        match &tls.client_cert {
            Some((cert, key)) => {
                let chain = certificates("client certificate", cert)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("cannot read the client key {}: {e}", key.display()))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| format!("the client certificate: {e}"))
            }
            None => Ok(builder.with_no_client_auth()),
        }
    }
}
