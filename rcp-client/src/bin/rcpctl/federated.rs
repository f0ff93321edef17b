//! `--registry` for the commands that go through the federation core (`rcp_client::Federation`):
//! `graph` and `memory recall` fanned out to every capable engine and merged; `memory build`,
//! `transform`, `embed` and `rerank` routed to one engine (`--engine ID`, else by priority);
//! `feedback` routed back by the core. What happened on the way (which engines served, which
//! were skipped or failed) goes to stderr; stdout keeps the result.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcp_client::{Client, Federation, FederationOptions, Registry};
use rcp_wire::Meta;
use serde_json::{Value, json};

use crate::target::Auth;

/// A federation over a registry, connected, with what it connected (to shut down at the end).
pub(crate) struct Fed {
    pub fed: Federation,
    pub path: PathBuf,
    clients: Vec<Client>,
}

/// Opens the registry at `path` as one federation and connects its engines, naming on stderr
/// each engine that could not be reached (the core then routes around it).
pub(crate) async fn open(path: &Path, auth: &Auth) -> Result<Fed, Box<dyn std::error::Error>> {
    let options = FederationOptions {
        client: auth.options()?,
        engine_timeout: Duration::from_millis(auth.timeout_ms.max(1)),
        ..FederationOptions::default()
    };
    let fed = Federation::new(Registry::load(path)?, options);
    let mut clients = Vec::new();
    for (id, c) in fed.connect().await {
        match c {
            Ok(c) => clients.push(c),
            Err(e) => eprintln!("rcp: engine '{id}' of {} is unavailable: {e}", path.display()),
        }
    }
    Ok(Fed { fed, path: path.to_owned(), clients })
}

impl Fed {
    /// Shuts down every engine the federation connected, concurrently.
    pub(crate) async fn close(self) {
        futures::future::join_all(self.clients.iter().map(Client::shutdown)).await;
    }

    /// Reports a routed call's notes (the engine that served, any failover) on stderr.
    pub(crate) fn served(&self, notes: &[String]) {
        for n in notes {
            eprintln!("rcp: {n} ({})", self.path.display());
        }
    }

    /// Reports a fanned-out call on stderr: the engines whose answers were merged (the
    /// answer's `_meta.engines`), then the core's notes (engines skipped or failed).
    pub(crate) fn merged(&self, meta: Option<&Meta>, notes: &[String]) {
        let engines: Vec<String> = meta
            .and_then(|m| m.get("engines"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(|id| format!("'{id}'")).collect())
            .unwrap_or_default();
        if !engines.is_empty() {
            let what = if engines.len() == 1 { "engine" } else { "engines" };
            eprintln!("rcp: merged the answers of {what} {} of {}", engines.join(", "), self.path.display());
        }
        for n in notes {
            eprintln!("rcp: {n}");
        }
    }
}

/// The `_meta` of a routed call: `{"engine": ID}` when `--engine` names one.
pub(crate) fn engine_meta(engine: Option<&str>) -> Option<Meta> {
    engine.map(|id| {
        let mut m = Meta::new();
        m.insert(rcp_client::federation::route::META_ENGINE.into(), json!(id));
        m
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_meta_names_the_engine_only_when_asked() {
        assert_eq!(engine_meta(None), None);
        assert_eq!(serde_json::to_value(engine_meta(Some("dense"))).unwrap(), json!({"engine": "dense"}));
    }
}
