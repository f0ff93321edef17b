//! Command-line flags every RCP client binary shares (feature `args`): flatten them into a
//! clap parser so `rcpctl`, the gateway and the inspector spell TLS trust the same way.

use std::path::PathBuf;

use clap::Args;

use crate::transport::tls::{ClientCert, TlsOptions};

/// The environment variable naming a CA certificate file when `--ca-cert` is not given.
pub const CA_CERT_ENV: &str = "RCP_CA_CERT";

/// TLS trust and client certificate for `https://` engines (§15): flatten with
/// `#[command(flatten)]`, then [`TlsArgs::options`] into [`crate::ClientOptions::tls`].
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsArgs {
    /// HTTPS: trust the CA certificate(s) of this PEM file beside the system's roots (for
    /// engines whose certificates a private CA signed). Default: $RCP_CA_CERT when set.
    #[arg(long, value_name = "FILE", global = true)]
    pub ca_cert: Option<PathBuf>,
    /// HTTPS: present this client certificate (PEM, a chain allowed) to engines that require
    /// one (mutual TLS). Needs --client-key.
    #[arg(long, value_name = "FILE", global = true, requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// HTTPS: the private key of --client-cert (PEM).
    #[arg(long, value_name = "FILE", global = true, requires = "client_cert")]
    pub client_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS options these flags ask for; without `--ca-cert`, the file `$RCP_CA_CERT` names
    /// (an empty variable counts as unset).
    pub fn options(&self) -> TlsOptions {
        self.options_with(std::env::var_os(CA_CERT_ENV))
    }

    /// [`TlsArgs::options`] with the environment's value given.
    fn options_with(&self, env_ca: Option<std::ffi::OsString>) -> TlsOptions {
        let ca_cert = self.ca_cert.clone().or_else(|| env_ca.filter(|v| !v.is_empty()).map(PathBuf::from));
        let client_cert = match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => Some(ClientCert { cert: cert.clone(), key: key.clone() }),
            _ => None,
        };
        TlsOptions { ca_cert, client_cert }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tls: TlsArgs,
    }

    #[test]
    fn the_flag_wins_over_the_variable_and_an_empty_variable_is_unset() {
        let cli = Cli::try_parse_from(["t", "--ca-cert", "flag.pem"]).expect("parse");
        assert_eq!(cli.tls.options_with(Some("env.pem".into())).ca_cert, Some(PathBuf::from("flag.pem")));
        let cli = Cli::try_parse_from(["t"]).expect("parse");
        assert_eq!(cli.tls.options_with(Some("env.pem".into())).ca_cert, Some(PathBuf::from("env.pem")));
        assert_eq!(cli.tls.options_with(Some("".into())).ca_cert, None);
    }

    #[test]
    fn a_client_certificate_needs_its_key() {
        assert!(Cli::try_parse_from(["t", "--client-cert", "c.pem"]).is_err());
        assert!(Cli::try_parse_from(["t", "--client-key", "k.pem"]).is_err());
        let cli = Cli::try_parse_from(["t", "--client-cert", "c.pem", "--client-key", "k.pem"]).expect("parse");
        let cert = cli.tls.options().client_cert.expect("client certificate");
        assert_eq!((cert.cert, cert.key), (PathBuf::from("c.pem"), PathBuf::from("k.pem")));
    }
}
