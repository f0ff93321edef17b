//! TLS for the HTTP transport (§15): which servers an `https://` connection trusts (the
//! system's roots plus an optional CA of the caller's) and the client certificate it may
//! present (mutual TLS). rustls with the `ring` provider, configured per client: nothing is
//! installed process-wide.

use std::path::PathBuf;

/// TLS settings of HTTP connections ([`crate::ClientOptions::tls`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// A CA certificate file (PEM, one or more certificates) trusted beside the system's roots
    /// (`--ca-cert`, `RCP_CA_CERT`): for engines whose certificates a private CA signed.
    pub ca_cert: Option<PathBuf>,
    /// A certificate and key this client presents when the server asks for one (mutual TLS:
    /// `--client-cert`, `--client-key`).
    pub client_cert: Option<ClientCert>,
}

/// A client certificate for mutual TLS, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why a [`TlsOptions`] could not be applied: the cause of [`crate::ConnectError::Tls`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read, or holds nothing of the kind expected.
    #[cfg(feature = "tls")]
    #[error("cannot read the {what} {}: {source}", path.display())]
    Pem {
        /// Which file (`CA certificate`, `client certificate`, `client key`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// A certificate file holds no certificate.
    #[error("the {what} {} holds no PEM certificate", path.display())]
    NoCertificate {
        /// Which file.
        what: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// rustls refused a certificate or the client certificate and key.
    #[cfg(feature = "tls")]
    #[error("TLS configuration: {0}")]
    Config(#[source] rustls::Error),
    /// This build of rcp-client has no TLS (its `tls` feature is off).
    #[error("{0} needs TLS, which this build does not include (rcp-client's `tls` feature)")]
    Unsupported(String),
}

impl TlsOptions {
    /// A reqwest client builder that trusts the system's roots and these options' CA and
    /// presents their client certificate: what rcp-client's HTTP transport starts from.
    ///
    /// With the `tls` feature, reqwest's rustls backend is compiled without a default crypto
    /// provider (so that nothing needs aws-lc, and nothing is installed process-wide), and a
    /// reqwest client built without a TLS configuration panics. A program that links
    /// rcp-client with `tls` and builds reqwest clients of its own must build them from this.
    pub fn http_client_builder(&self) -> Result<reqwest::ClientBuilder, TlsError> {
        http_client_builder(self, true)
    }
}

/// A reqwest client builder configured with `options` (with the system's roots when
/// `system_roots`); without the `tls` feature, a plain builder, or an error when `options`
/// ask for something.
pub(crate) fn http_client_builder(
    options: &TlsOptions,
    system_roots: bool,
) -> Result<reqwest::ClientBuilder, TlsError> {
    let builder = reqwest::Client::builder();
    #[cfg(feature = "tls")]
    return Ok(builder.tls_backend_preconfigured(config::client_config(options, system_roots)?));
    #[cfg(not(feature = "tls"))]
    {
        let _ = system_roots;
        if options != &TlsOptions::default() {
            return Err(TlsError::Unsupported("a CA or client certificate".into()));
        }
        Ok(builder)
    }
}

#[cfg(feature = "tls")]
mod config {
    use std::path::Path;
    use std::sync::{Arc, OnceLock};

    use rustls::{ClientConfig, RootCertStore};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    use super::{TlsError, TlsOptions};

    /// The system's root certificates, read once per process (a gateway connects to many
    /// engines); a store that cannot be read is logged, and its certificates that could be
    /// read are kept.
    fn native_roots() -> &'static [CertificateDer<'static>] {
        static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
        ROOTS.get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::debug!(error = %e, "system root certificates: not all could be read");
            }
            found.certs
        })
    }

    /// The certificates of a PEM file, at least one.
    fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let pem = |source| TlsError::Pem { what, path: path.to_owned(), source };
        let certs = CertificateDer::pem_file_iter(path).map_err(pem)?.collect::<Result<Vec<_>, _>>().map_err(pem)?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate { what, path: path.to_owned() });
        }
        Ok(certs)
    }

    /// The rustls configuration of `options`: the system's roots when `system_roots` (an
    /// `https://` server), the extra CA, the client certificate.
    pub(super) fn client_config(options: &TlsOptions, system_roots: bool) -> Result<ClientConfig, TlsError> {
        let mut roots = RootCertStore::empty();
        if system_roots {
            roots.add_parsable_certificates(native_roots().iter().cloned());
        }
        if let Some(path) = &options.ca_cert {
            for cert in certificates("CA certificate", path)? {
                roots.add(cert).map_err(TlsError::Config)?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_root_certificates(roots);
        let config = match &options.client_cert {
            Some(client) => {
                let chain = certificates("client certificate", &client.cert)?;
                let key = PrivateKeyDer::from_pem_file(&client.key).map_err(|source| TlsError::Pem {
                    what: "client key",
                    path: client.key.clone(),
                    source,
                })?;
                builder.with_client_auth_cert(chain, key).map_err(TlsError::Config)?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(config)
    }
}
