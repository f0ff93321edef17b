//! The bridge's own RCP session on its gateway: the gateway's server ([`Gateway::builder`])
//! built once, connected in process ([`Server::connect`]) and `initialize`d once. Every tool
//! sends its call through it (`search` and `fetch` a `retrieve`, `list_engines` a
//! `catalog/list`, the capability tools their method), so the framework's rules (an advertised
//! method, op or filter, `k` clamped to `maxK` with a note, the funnel's `candidateK`,
//! `k`/`hops`/`n`/`topN` bounds, rewards in `[-1,1]`, the default rerank method, the result's
//! finishing, notes) apply before the gateway's handler runs, exactly as for an RCP client of
//! `rcp-gateway serve`, and none of them is restated here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rcp_server::Server;
use rcp_server::transport::Connection;
use rcp_wire::lifecycle::PeerInfo;
use rcp_wire::{PROTOCOL_VERSION, RcpError};
use serde_json::{Value, json};

use crate::gateway::Gateway;

/// One in-process RCP session on a gateway's server.
pub(super) struct Session {
    /// Kept for as long as the session: the connection dispatches to this server.
    _server: Server,
    connection: Connection,
    next_id: AtomicU64,
}

impl Session {
    /// Builds the gateway's server and runs `initialize` on a new session of it.
    pub(super) async fn open(gateway: &Arc<Gateway>) -> Result<Self, RcpError> {
        let server = gateway.builder().build();
        // Progress and log notifications: the bridge asks for neither.
        let connection = server.connect(|_| {});
        let session = Self { _server: server, connection, next_id: AtomicU64::new(0) };
        let client = PeerInfo::new("rcp-gateway-mcp", env!("CARGO_PKG_VERSION"));
        session.call("initialize", json!({"protocolVersion": PROTOCOL_VERSION, "client": client})).await.map_err(
            |mut e| {
                e.message = format!("the bridge's session on the gateway: {}", e.message);
                e
            },
        )?;
        Ok(session)
    }

    /// Sends one request and returns its result, or the RCP error it was answered with.
    pub(super) async fn call(&self, method: &str, params: Value) -> Result<Value, RcpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let bytes = serde_json::to_vec(&frame).map_err(|e| RcpError::internal(e.to_string()))?;
        let answer = self
            .connection
            .handle(&bytes)
            .await
            .ok_or_else(|| RcpError::internal(format!("the gateway did not answer '{method}'")))?;
        let mut answer: Value = serde_json::from_slice(&answer)
            .map_err(|e| RcpError::internal(format!("the gateway's answer to '{method}' is not JSON: {e}")))?;
        if let Some(error) = answer.get_mut("error").map(Value::take) {
            return Err(serde_json::from_value(error.clone())
                .unwrap_or_else(|_| RcpError::internal(format!("the gateway answered '{method}' with {error}"))));
        }
        Ok(answer.get_mut("result").map(Value::take).unwrap_or(Value::Null))
    }
}
