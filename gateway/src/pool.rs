//! Connections to the registry's engines: opened lazily, one per engine, replaced when the
//! transport dies, and retried no more often than `reconnect_after` when connecting fails.
//!
//! Each entry connects with its own options (headers, bearer token from `tokenEnv`), which is
//! why the gateway keeps its own pool rather than `rcp_client::Federation`'s, whose
//! `ClientOptions` are shared by every engine.

use std::time::{Duration, Instant};

use rcp_client::registry::Transport;
use rcp_client::{Client, ClientError, ClientOptions, ConnectError, EngineSpec};
use rcp_protocol::lifecycle::PeerInfo;
use tokio::sync::Mutex;

use crate::registry::GatewayEntry;

/// The environment variable through which a gateway tells the stdio engines it spawns which
/// gateways are above them, so a registry cycle of stdio gateways stops spawning at start-up.
pub const PATH_ENV: &str = "RCP_GATEWAY_PATH";

/// Options of the pool.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Deadline for spawning/connecting one engine and its `initialize`.
    pub connect_timeout: Duration,
    /// After a failed connection, calls fail fast for this long before the next attempt.
    pub reconnect_after: Duration,
    /// The identity the gateway sends in `initialize.client`.
    pub client: PeerInfo,
    /// Gateways above this one and this one (joined into [`PATH_ENV`] for stdio children).
    pub ancestry: Vec<String>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("engines", &self.entries.len()).finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Slot {
    client: Option<Client>,
    failed: Option<(Instant, ClientError)>,
}

/// One lazily connected client per registry entry.
pub struct Pool {
    entries: Vec<GatewayEntry>,
    slots: Vec<Mutex<Slot>>,
    options: PoolOptions,
}

impl Pool {
    /// A pool over `entries`; nothing connects yet.
    pub fn new(entries: Vec<GatewayEntry>, options: PoolOptions) -> Self {
        let slots = entries.iter().map(|_| Mutex::new(Slot::default())).collect();
        Self { entries, slots, options }
    }

    /// The registry entries, in file order.
    pub fn entries(&self) -> &[GatewayEntry] {
        &self.entries
    }

    /// The live client of entry `index`, connecting (or reconnecting a dead one) if needed.
    pub async fn client(&self, index: usize) -> Result<Client, ClientError> {
        let (Some(entry), Some(slot)) = (self.entries.get(index), self.slots.get(index)) else {
            return Err(ClientError::Connect(ConnectError::Unavailable(format!("no engine #{index}"))));
        };
        let mut slot = slot.lock().await;
        if let Some(c) = &slot.client {
            if c.closed_reason().is_none() {
                return Ok(c.clone());
            }
            tracing::info!(engine = %entry.spec.id, "transport closed; reconnecting");
            slot.client = None;
        }
        if let Some((at, e)) = &slot.failed
            && at.elapsed() < self.options.reconnect_after
        {
            return Err(e.clone());
        }
        let connected = tokio::time::timeout(self.options.connect_timeout, self.connect(entry))
            .await
            .unwrap_or_else(|_| Err(ClientError::Timeout(self.options.connect_timeout.as_millis() as u64)));
        match connected {
            Ok(c) => {
                slot.failed = None;
                slot.client = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                slot.failed = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    /// Connects every engine concurrently; returns each outcome in registry order.
    pub async fn connect_all(&self) -> Vec<Result<Client, ClientError>> {
        futures::future::join_all((0..self.entries.len()).map(|i| self.client(i))).await
    }

    async fn connect(&self, entry: &GatewayEntry) -> Result<Client, ClientError> {
        // `selector::connect` adds the entry's own `headers` and `tokenEnv` bearer token.
        let options = ClientOptions {
            client: self.options.client.clone(),
            connect_timeout: self.options.connect_timeout,
            // Each call sets its own deadline.
            request_timeout: None,
            http_headers: Vec::new(),
            label: entry.spec.id.clone(),
            ..ClientOptions::default()
        };
        let spec = self.spawn_spec(&entry.spec);
        rcp_client::selector::connect(&spec, &options).await
    }

    /// A stdio command runs under `env RCP_GATEWAY_PATH=...` so that a gateway it starts knows
    /// its ancestry (the client offers no way to set a child's environment).
    fn spawn_spec(&self, spec: &EngineSpec) -> EngineSpec {
        let mut spec = spec.clone();
        if let Transport::Stdio { command } = &mut spec.transport {
            let mut wrapped = vec!["env".to_owned(), format!("{PATH_ENV}={}", self.options.ancestry.join(","))];
            wrapped.append(command);
            *command = wrapped;
        }
        spec
    }
}
