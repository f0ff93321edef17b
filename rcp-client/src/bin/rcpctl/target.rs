//! Which engine a command talks to (`--stdio`, `--http` or `--registry`) and how it
//! authenticates (`--header`, `--token-env`, and for HTTPS `--ca-cert`, `--client-cert`).

use std::path::PathBuf;

use clap::Args;
use rcp_client::registry::{bearer_from_env, parse_header};
use rcp_client::{Client, ClientError, ClientOptions, ConnectError, Registry, Selector};
use rcp_wire::capabilities::Capability;

/// One engine, or a registry to pick one from.
#[derive(Args, Debug, Clone)]
#[group(required = true, multiple = false)]
pub(crate) struct Target {
    /// Spawn this command and talk over its stdio (split on whitespace).
    #[arg(long, value_name = "COMMAND")]
    pub stdio: Option<String>,
    /// Talk to this HTTP base URL (e.g. http://127.0.0.1:8080/rcp).
    #[arg(long, value_name = "URL")]
    pub http: Option<String>,
    /// An rcp.json registry: the highest-priority live engine able to serve the command; for
    /// graph, memory, feedback, transform, embed and rerank, the registry's engines as one
    /// federation (fanned out and merged, or routed to one engine).
    #[arg(long, value_name = "RCP_JSON")]
    pub registry: Option<PathBuf>,
}

/// HTTP authentication, for `--http` and every HTTP engine of a registry, and the deadline of
/// each request.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct Auth {
    /// An HTTP header sent on every request, 'Name: value' (repeatable).
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'", global = true)]
    pub headers: Vec<String>,
    /// Send the bearer token held in this environment variable (`Authorization: Bearer ...`);
    /// the token never appears on the command line.
    #[arg(long, value_name = "VAR", global = true)]
    pub token_env: Option<String>,
    /// How long each request may take, in milliseconds (sent as `_meta.deadlineMs`); e.g. for
    /// `eval` against an engine that reranks 100 candidates per query on a slow machine.
    #[arg(long, value_name = "MS", global = true, default_value_t = 30_000)]
    pub timeout_ms: u64,
    /// TLS trust and client certificate for `https://` engines.
    #[command(flatten)]
    pub tls: rcp_client::args::TlsArgs,
}

impl Auth {
    /// Client options carrying the headers.
    pub(crate) fn options(&self) -> Result<ClientOptions, String> {
        let mut http_headers = Vec::with_capacity(self.headers.len() + 1);
        for h in &self.headers {
            http_headers.push(parse_header(h)?);
        }
        if let Some(var) = &self.token_env {
            http_headers.push(bearer_from_env(var).map_err(|e| format!("--token-env: {e}"))?);
        }
        Ok(ClientOptions {
            http_headers,
            request_timeout: Some(std::time::Duration::from_millis(self.timeout_ms.max(1))),
            tls: self.tls.options(),
            ..ClientOptions::default()
        })
    }
}

/// Connects to the target; with a registry, to the best live engine advertising `needs`.
pub(crate) async fn connect(
    t: &Target,
    auth: &Auth,
    needs: Option<Capability>,
) -> Result<Client, Box<dyn std::error::Error>> {
    let options = auth.options()?;
    let client = match (&t.stdio, &t.http, &t.registry) {
        (Some(cmd), _, _) => {
            Client::connect_stdio(&cmd.split_whitespace().map(str::to_owned).collect::<Vec<_>>(), options).await?
        }
        (None, Some(url), _) => {
            check_url(url)?;
            Client::connect_http(url, options).await?
        }
        (None, None, Some(path)) => {
            let selector = Selector::new(Registry::load(path)?, options);
            let (client, skipped) = selector.select_noting_skips(needs).await?;
            // Say which engine of the registry serves the command, and which were passed over.
            eprintln!("rcp: engine '{}' of {} answers", client.label(), path.display());
            for s in skipped {
                eprintln!("rcp: skipped {s}");
            }
            client
        }
        (None, None, None) => {
            return Err(ClientError::from(ConnectError::Unavailable(
                "give --stdio COMMAND, --http URL or --registry RCP_JSON".into(),
            ))
            .into());
        }
    };
    Ok(client)
}

/// Refuses an `--http` URL without a scheme before any I/O, suggesting the base URL servers
/// built on rcp-server use (`http://HOST:PORT/rcp`).
fn check_url(url: &str) -> Result<(), String> {
    let trimmed = url.trim();
    if trimmed.contains("://") {
        return Ok(());
    }
    let suggestion = if trimmed.contains('/') { format!("http://{trimmed}") } else { format!("http://{trimmed}/rcp") };
    Err(format!("--http '{trimmed}': no scheme: add http:// (e.g. {suggestion})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_and_bad_ones_are_named() {
        let auth = Auth {
            headers: vec!["X-Team: ir".into(), "Accept-Language:en".into()],
            token_env: None,
            timeout_ms: 30_000,
            tls: Default::default(),
        };
        let o = auth.options().unwrap();
        assert_eq!(o.http_headers, vec![("X-Team".into(), "ir".into()), ("Accept-Language".into(), "en".into())]);
        let bad = Auth { headers: vec!["Bearer abc".into()], token_env: None, timeout_ms: 1, tls: Default::default() };
        assert!(bad.options().unwrap_err().contains("expected 'Name: value'"));
        let unset = Auth {
            headers: vec![],
            token_env: Some("RCP_CLI_TEST_NO_SUCH_VAR".into()),
            timeout_ms: 1,
            tls: Default::default(),
        };
        assert!(unset.options().unwrap_err().contains("RCP_CLI_TEST_NO_SUCH_VAR is not set"));
    }

    #[test]
    fn a_url_without_scheme_gets_the_base_url_to_try() {
        assert!(check_url("localhost:8080").unwrap_err().contains("(e.g. http://localhost:8080/rcp)"));
        assert!(check_url("127.0.0.1:8080/rcp").unwrap_err().contains("(e.g. http://127.0.0.1:8080/rcp)"));
        assert!(check_url("http://localhost:8080/rcp").is_ok());
    }
}
