//! [`Selector`]: pick the best live engine that can do a job (§16).
//!
//! Lazy: nothing connects until a `select*` call, and then engines are tried in priority order
//! (higher first) and the search stops at the first one that is live (answers `ping` within
//! the probe timeout) and has what is asked for. Connections are cached and re-probed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rcp_wire::capabilities::Capability;
use tokio::sync::Mutex;

use crate::client::{Client, ClientOptions};
use crate::error::{ClientError, ConnectError};
use crate::registry::{EngineSpec, Registry, Transport};

/// How long a cached or new connection has to answer the liveness probe (`ping`).
const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);

/// Picks engines from a registry.
pub struct Selector {
    registry: Registry,
    options: ClientOptions,
    clients: Mutex<HashMap<String, Client>>,
    connects: AtomicUsize,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selector").field("options", &self.options).finish_non_exhaustive()
    }
}

impl Selector {
    /// A selector over `registry`; no connection is made yet.
    pub fn new(registry: Registry, options: ClientOptions) -> Self {
        Self { registry, options, clients: Mutex::new(HashMap::new()), connects: AtomicUsize::new(0) }
    }

    /// How many connections this selector has opened (spawns, for stdio engines).
    pub fn connections_opened(&self) -> usize {
        self.connects.load(Ordering::Relaxed)
    }

    /// The engine with this id, connected and live.
    pub async fn select(&self, id: &str) -> Result<Client, ClientError> {
        let spec = self.registry.get(id).ok_or_else(|| {
            let known: Vec<&str> = self.registry.engines.iter().map(|e| e.id.as_str()).collect();
            ClientError::Connect(ConnectError::Unavailable(format!(
                "unknown engine id '{id}'; the registry has: {}",
                known.join(", ")
            )))
        })?;
        self.live(spec).await
    }

    /// The highest-priority live engine.
    pub async fn select_primary(&self) -> Result<Client, ClientError> {
        self.select_noting_skips(None).await.map(|(c, _)| c)
    }

    /// The highest-priority live engine advertising `cap`.
    pub async fn select_capable(&self, cap: Capability) -> Result<Client, ClientError> {
        self.select_noting_skips(Some(cap)).await.map(|(c, _)| c)
    }

    /// As [`Selector::select_capable`] (or [`Selector::select_primary`] without `cap`), with
    /// the engines of higher priority passed over on the way, each as `"ID: why"` (down, or
    /// lacking the capability), for a caller that tells its user which engine answered.
    pub async fn select_noting_skips(&self, cap: Option<Capability>) -> Result<(Client, Vec<String>), ClientError> {
        match cap {
            Some(cap) => self.first_live(|c| c.supports(cap), &format!("an engine advertising '{cap}'")).await,
            None => self.first_live(|_| true, "any engine").await,
        }
    }

    async fn first_live(
        &self,
        wanted: impl Fn(&Client) -> bool,
        what: &str,
    ) -> Result<(Client, Vec<String>), ClientError> {
        let mut tried = Vec::new();
        for spec in self.registry.by_priority() {
            match self.live(spec).await {
                Ok(c) if wanted(&c) => return Ok((c, tried)),
                Ok(_) => tried.push(format!("{}: lacks the capability", spec.id)),
                Err(e) => tried.push(format!("{}: {e}", spec.id)),
            }
        }
        Err(ClientError::Connect(ConnectError::Unavailable(format!(
            "no live engine found for {what} ({})",
            tried.join("; ")
        ))))
    }

    async fn live(&self, spec: &EngineSpec) -> Result<Client, ClientError> {
        let mut clients = self.clients.lock().await;
        if let Some(c) = clients.get(&spec.id) {
            if c.ping(PROBE_TIMEOUT).await.is_ok() {
                return Ok(c.clone());
            }
            clients.remove(&spec.id);
        }
        let c = connect(spec, &self.options).await;
        self.connects.fetch_add(1, Ordering::Relaxed);
        let c = c?;
        c.ping(PROBE_TIMEOUT).await?;
        clients.insert(spec.id.clone(), c.clone());
        Ok(c)
    }
}

/// Connects to a registry entry. An HTTP engine gets the options' `http_headers`, then its own
/// `headers` and the bearer token of its `tokenEnv` (an unset variable fails the connection,
/// naming it), and its own TLS settings ([`EngineSpec::tls`]) in place of the options'.
pub async fn connect(spec: &EngineSpec, options: &ClientOptions) -> Result<Client, ClientError> {
    let mut options = ClientOptions { label: spec.id.clone(), ..options.clone() };
    match &spec.transport {
        Transport::Stdio { command } => Client::connect_stdio(command, options).await,
        Transport::Http { url } => {
            let own = spec.http_headers().map_err(|source| ConnectError::Token { engine: spec.id.clone(), source })?;
            options.http_headers.extend(own);
            options.tls = spec.tls_or(&options.tls);
            Client::connect_http(url, options).await
        }
    }
}
