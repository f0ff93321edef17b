//! HTTPS (§15): the HTTP transport behind rustls (the `ring` provider), with a certificate and
//! key that can be re-read while the server runs, and optionally client certificates (mTLS).
//!
//! A port served with TLS speaks nothing else: a plaintext request fails the handshake and its
//! connection is closed. Each new connection takes the configuration in force when it is
//! accepted, so [`ServerTls::reload`] changes the certificate for the next connections without
//! touching open ones; a reload that fails leaves the previous configuration in force.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The PEM files of a TLS server: its certificate (a chain, leaf first), its private key, and
/// optionally the CA that client certificates must be signed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, PEM, leaf first (`--tls-cert`).
    pub cert: PathBuf,
    /// The server's private key, PEM: PKCS#8, PKCS#1 or SEC1 (`--tls-key`).
    pub key: PathBuf,
    /// When set, every client must present a certificate signed by a CA of this PEM file
    /// (`--tls-client-ca`); a client without one fails the handshake.
    pub client_ca: Option<PathBuf>,
}

/// Why a TLS configuration could not be made from its files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing of the kind expected.
    #[error("cannot read the {what} {}: {source}", path.display())]
    Pem {
        /// Which file (`TLS certificate`, `TLS key`, `client CA`).
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
    /// rustls refused the certificate, the key or the pair (for instance a key that does not
    /// match the certificate).
    #[error("the TLS certificate and key make no TLS configuration: {0}")]
    Config(#[source] rustls::Error),
    /// The client CA file cannot verify client certificates.
    #[error("the client CA {} cannot verify client certificates: {source}", path.display())]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
}

/// A server's TLS configuration, shared by every clone: [`ServerTls::reload`] on one clone (the
/// one the `serve` command keeps for SIGHUP) takes effect for the next connections of the
/// listener it was given to.
#[derive(Clone)]
pub struct ServerTls {
    files: Arc<TlsFiles>,
    current: Arc<RwLock<Arc<ServerConfig>>>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls").field("files", &self.files).finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads `files` and makes the configuration; any error stops here.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let config = server_config(&files)?;
        Ok(Self { files: Arc::new(files), current: Arc::new(RwLock::new(Arc::new(config))) })
    }

    /// Re-reads the files. On success the next connections use them; on failure nothing
    /// changes and the error says why.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = Arc::new(server_config(&self.files)?);
        match self.current.write() {
            Ok(mut current) => *current = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
        Ok(())
    }

    /// The files this configuration is read from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// An acceptor with the configuration in force now.
    pub(super) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let config = match self.current.read() {
            Ok(current) => Arc::clone(&current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        };
        tokio_rustls::TlsAcceptor::from(config)
    }
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

/// A rustls server configuration from `files`, HTTP/1.1 over TLS 1.2 or 1.3.
fn server_config(files: &TlsFiles) -> Result<ServerConfig, TlsError> {
    let chain = certificates("TLS certificate", &files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|source| TlsError::Pem {
        what: "TLS key",
        path: files.key.clone(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let builder = match &files.client_ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates("client CA", path)? {
                roots.add(cert).map_err(TlsError::Config)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|source| TlsError::ClientCa { path: path.clone(), source })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_empty_files_are_named() {
        let dir = std::env::temp_dir().join(format!("rcp-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        let files = TlsFiles { cert: dir.join("absent.pem"), key: empty.clone(), client_ca: None };
        let err = ServerTls::load(files).expect_err("absent");
        assert!(err.to_string().contains("absent.pem"), "{err}");
        let files = TlsFiles { cert: empty.clone(), key: empty.clone(), client_ca: None };
        let err = ServerTls::load(files).expect_err("empty");
        assert!(err.to_string().contains("holds no PEM certificate"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
