//! Dynamic discovery (§16.1): a registry built from one aggregator's `catalog/list`, following
//! the endpoints it exposes, bounded by the hop budget (§16.2).
//!
//! The rule, one of two outcomes per aggregator:
//! - when every engine it lists has an endpoint this client may follow, those engines are
//!   federated directly (one hop fewer, each engine's own scores), an endpoint that is itself an
//!   aggregator discovered in turn while the hop budget lasts;
//! - otherwise the aggregator itself is the one engine (asking it beside engines it also fans
//!   out to would count their documents twice in fusion), and a note says why.
//!
//! An `http` endpoint is always followed; a `stdio` endpoint (a program to run) only when the
//! aggregator was itself reached over stdio, i.e. started from this host's own configuration:
//! a remote server never makes this client run a program it names.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use rcp_wire::capabilities::Capability;
use rcp_wire::catalog::{CatalogEntry, Endpoint};
use rcp_wire::request::CatalogList;

use crate::client::ClientOptions;
use crate::error::ClientError;
use crate::registry::{EngineSpec, Registry, Transport};
use crate::selector::connect;

/// The most engines one discovery gathers: a peer's `catalog/list` is not trusted to be small.
pub const MAX_DISCOVERED: usize = 256;

/// A registry found by [`discover`], with what the discovery decided and why.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The engines to federate.
    pub registry: Registry,
    /// One line per aggregator that was queried through rather than around, or endpoint not
    /// followed, saying why.
    pub notes: Vec<String>,
}

/// The registry of the engines reachable from `aggregator` (§16.1 dynamic discovery), at most
/// `depth` aggregators deep (§16.2's hop budget; 3 is the RECOMMENDED default). An engine that
/// does not advertise `catalog` is returned as it is.
pub async fn discover(aggregator: EngineSpec, options: &ClientOptions, depth: u32) -> Result<Discovered, ClientError> {
    let mut found = Discovered { registry: Registry::default(), notes: Vec::new() };
    let mut seen = HashSet::new();
    walk(aggregator, options, depth, &mut found, &mut seen).await?;
    Ok(found)
}

type Walk<'a> = Pin<Box<dyn Future<Output = Result<(), ClientError>> + Send + 'a>>;

fn walk<'a>(
    spec: EngineSpec,
    options: &'a ClientOptions,
    depth: u32,
    found: &'a mut Discovered,
    seen: &'a mut HashSet<String>,
) -> Walk<'a> {
    Box::pin(async move {
        if !seen.insert(place(&spec.transport)) {
            return Ok(());
        }
        if depth == 0 {
            found.registry.engines.push(spec);
            return Ok(());
        }
        let client = connect(&spec, options).await?;
        if !client.supports(Capability::Catalog) {
            found.registry.engines.push(spec);
            return Ok(());
        }
        let list = client.request::<CatalogList>(&Default::default()).await?;
        let local = matches!(spec.transport, Transport::Stdio { .. });
        let followed: Vec<Option<EngineSpec>> = list.engines.iter().map(|e| followable(e, local)).collect();
        if list.engines.is_empty() || followed.iter().any(Option::is_none) {
            let missing: Vec<&str> =
                list.engines.iter().zip(&followed).filter(|(_, f)| f.is_none()).map(|(e, _)| e.id.as_str()).collect();
            found.notes.push(format!(
                "'{}': queried as one engine; engines without an endpoint this client follows: {}",
                spec.id,
                if missing.is_empty() { "(it lists none)".to_owned() } else { missing.join(", ") }
            ));
            found.registry.engines.push(spec);
            return Ok(());
        }
        for (entry, next) in list.engines.iter().zip(followed.into_iter().flatten()) {
            if found.registry.engines.len() >= MAX_DISCOVERED {
                found.notes.push(format!("'{}': stopped at {MAX_DISCOVERED} engines", spec.id));
                break;
            }
            let id = unique_id(&found.registry, format!("{}/{}", spec.id, entry.id));
            let next = EngineSpec { id, ..next };
            if entry.capabilities.catalog.is_none() {
                if seen.insert(place(&next.transport)) {
                    found.registry.engines.push(next);
                }
                continue;
            }
            // A nested aggregator that cannot be listed is asked as one engine.
            let fallback = next.clone();
            if let Err(e) = walk(next, options, depth - 1, found, seen).await {
                found.notes.push(format!("'{}': not listed ({e}); queried as one engine", fallback.id));
                found.registry.engines.push(fallback);
            }
        }
        Ok(())
    })
}

/// `id`, or `id#2`, `id#3`, ... when the registry already names an engine `id` (a peer's list
/// may repeat an id, and `a` listing `b/c` meets `a/b` listing `c`).
fn unique_id(registry: &Registry, id: String) -> String {
    let taken = |candidate: &str| registry.engines.iter().any(|e| e.id == candidate);
    if !taken(&id) {
        return id;
    }
    (2..).map(|n| format!("{id}#{n}")).find(|c| !taken(c)).unwrap_or(id)
}

/// Where an engine is, to reach each place once.
fn place(t: &Transport) -> String {
    match t {
        Transport::Http { url } => format!("http {url}"),
        Transport::Stdio { command } => format!("stdio {}", command.join("\u{1f}")),
    }
}

/// The spec of a catalog entry's endpoint, when this client follows it.
fn followable(entry: &CatalogEntry, local: bool) -> Option<EngineSpec> {
    let Endpoint { transport, url, command } = entry.endpoint.as_ref()?;
    let transport = match (transport.as_str(), url, command) {
        ("http", Some(url), _) => Transport::Http { url: url.clone() },
        ("stdio", _, Some(command)) if local && !command.is_empty() => Transport::Stdio { command: command.clone() },
        _ => return None,
    };
    Some(EngineSpec::new(entry.id.clone(), transport))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_unique_and_remote_programs_are_not_run() {
        let mut registry = Registry::default();
        let spec = |id: &str| EngineSpec::new(id, Transport::Http { url: format!("http://h/{id}") });
        registry.engines.push(spec("a/b/c"));
        assert_eq!(unique_id(&registry, "a/b/c".into()), "a/b/c#2");
        registry.engines.push(spec("a/b/c#2"));
        assert_eq!(unique_id(&registry, "a/b/c".into()), "a/b/c#3");
        assert_eq!(unique_id(&registry, "x".into()), "x");

        let entry = |endpoint: Endpoint| CatalogEntry {
            id: "e".into(),
            server: serde_json::from_value(serde_json::json!({"name": "e", "version": "0"})).expect("peer"),
            capabilities: Default::default(),
            endpoint: Some(endpoint),
        };
        let stdio = entry(Endpoint { transport: "stdio".into(), url: None, command: Some(vec!["rm".into()]) });
        assert!(followable(&stdio, false).is_none(), "a remote aggregator never makes us run a program");
        assert!(followable(&stdio, true).is_some(), "a local one, started from our own configuration, may");
        let http = entry(Endpoint { transport: "http".into(), url: Some("http://h/rcp".into()), command: None });
        assert!(followable(&http, false).is_some());
    }
}
