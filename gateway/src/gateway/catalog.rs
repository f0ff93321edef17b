//! `catalog/list` (§7.13): each engine's own identity and capabilities, the endpoints the
//! registry exposes, the engines that are unavailable, each engine's health (its circuit
//! breaker: `_meta.health`) and the collections' shards; of a caller limited to some
//! collections, only what it reaches (`grants`).

use rcp_client::breaker::BreakerHealth;
use rcp_client::registry::Transport;
use rcp_server::access::Scope;
use rcp_server::{Catalog, HandlerResult, RequestContext};
use rcp_wire::Meta;
use rcp_wire::capabilities::CatalogCapability;
use rcp_wire::catalog::{CatalogEntry, CatalogListResult, Endpoint};
use serde_json::{Value, json};

use super::startup::Gateway;

impl Catalog for Gateway {
    fn capability(&self) -> CatalogCapability {
        CatalogCapability { engines: Some(self.pool.entries().len() as u64), ..Default::default() }
    }

    async fn list(&self, ctx: RequestContext) -> HandlerResult<CatalogListResult> {
        let grant = ctx.grant();
        let reached = |index: usize| self.reaches_entry(grant, Scope::Read, index);
        let clients = self.pool.connect_all().await;
        let mut engines = Vec::new();
        let mut unavailable = Vec::new();
        let entries = self.pool.entries().iter().zip(clients).enumerate().filter(|(i, _)| reached(*i));
        for (_, (entry, client)) in entries {
            match client.ok().and_then(|c| c.server_info().cloned()) {
                Some(info) => engines.push(CatalogEntry {
                    id: entry.spec.id.clone(),
                    server: info.server,
                    capabilities: info.capabilities,
                    endpoint: entry.expose.then(|| endpoint(&entry.spec.transport)),
                }),
                None => unavailable.push(entry.spec.id.clone()),
            }
        }
        let mut meta = Meta::new();
        meta.insert("unavailable".into(), json!(unavailable));
        let health: Meta = self
            .pool
            .entries()
            .iter()
            .zip(self.pool.health())
            .enumerate()
            .filter(|(i, _)| reached(*i))
            .map(|(_, (entry, h))| (entry.spec.id.clone(), health_json(&h)))
            .collect();
        meta.insert("health".into(), Value::Object(health));
        let collections: Meta = self
            .granted_collections(grant, Scope::Read)
            .map(|c| {
                let ids: Vec<&str> = c.shards.iter().map(|i| self.pool.entries()[*i].spec.id.as_str()).collect();
                (c.name.clone(), json!(ids))
            })
            .collect();
        meta.insert("collections".into(), Value::Object(collections));
        Ok(CatalogListResult { engines, meta: Some(meta) })
    }
}

/// One engine's breaker as `_meta.health.<id>`: `state` (closed, open, half-open),
/// `consecutiveFailures`, `failuresTotal`, `connectsTotal`, and while backing off `retryInMs`;
/// `lastError` once something failed.
fn health_json(h: &BreakerHealth) -> Value {
    let mut v = json!({
        "state": h.state.as_str(),
        "consecutiveFailures": h.consecutive_failures,
        "failuresTotal": h.failures_total,
        "connectsTotal": h.connects_total,
    });
    if let Some(retry) = h.retry_in {
        v["retryInMs"] = json!(retry.as_millis() as u64);
    }
    if let Some(e) = &h.last_error {
        v["lastError"] = json!(e);
    }
    v
}

fn endpoint(transport: &Transport) -> Endpoint {
    match transport {
        Transport::Stdio { command } => {
            Endpoint { transport: "stdio".into(), url: None, command: Some(command.clone()) }
        }
        Transport::Http { url } => Endpoint { transport: "http".into(), url: Some(url.clone()), command: None },
    }
}
