//! The gateway's registry: an `rcp.json` (§16.1) read once by rcp-client's loader
//! ([`rcp_client::registry::load_entries`]), which hands each entry to the gateway for the keys
//! only an aggregator needs.
//!
//! Extra per-entry keys (all optional):
//! - `collection`: the collection the entry is a shard of (default: its own `id`). Shards of
//!   one collection are merged by score, collections are fused with each other (§16.3).
//! - `expose`: list the entry's `endpoint` in `catalog/list` (§7.13; default `false`).
//! - `rerank`: the entry is the gateway's reranker, not a collection: `true`, or
//!   `{"method": "cross-encoder"}` to pick one of its `rerank.methods` (default its first).
//!   The fused list of every `retrieve` is reranked by it (§7.7 funnel) unless the request
//!   says `rerank: false`. At most one entry reranks.
//!
//! `headers` and `tokenEnv` are `rcp_client::Registry` keys: they live in [`EngineSpec`], and
//! the client sends them when it connects.

use std::path::Path;

use rcp_client::registry::{self, Corpora, EngineSpec, Entries, RawEntry, RegistryError};
use serde_json::Value;

/// One engine of the gateway's registry.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayEntry {
    /// The `rcp_client` view of the entry: id, transport, weight, `required`.
    pub spec: EngineSpec,
    /// The collection this engine is a shard of (its own id when not named).
    pub collection: String,
    /// Whether `catalog/list` shows the endpoint (§7.13).
    pub expose: bool,
    /// `Some` when the entry is the gateway's reranker rather than a collection.
    pub rerank: Option<RerankEntry>,
}

/// The `rerank` key of the reranking entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RerankEntry {
    /// The method asked of the engine (`None`: its default, the first it advertises).
    pub method: Option<String>,
}

/// A parsed, validated gateway registry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GatewayRegistry {
    /// Engines in file order.
    pub engines: Vec<GatewayEntry>,
    /// Whether the collections hold one corpus or different ones (the top-level `corpora`
    /// key, [`Corpora`]): with `"distinct"`, every id the gateway returns is
    /// `<collection>:<id>`. Collection names may not contain `:` then.
    pub corpora: Corpora,
}

impl GatewayRegistry {
    /// Loads an `rcp.json` with rcp-client's loader, reading the gateway's keys of each entry
    /// in the same pass; relative program paths resolve against its directory.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, RegistryError> {
        let path = path.as_ref();
        Self::from_entries(registry::load_entries(path, gateway_keys)?, Some(path))
    }

    /// Parses registry JSON; `base` resolves relative program paths.
    pub fn parse(text: &str, base: Option<&Path>) -> Result<Self, RegistryError> {
        Self::from_entries(registry::parse_entries(text, base, gateway_keys)?, None)
    }

    /// The registry of `entries`; a second reranking entry is refused, naming the first.
    fn from_entries(entries: Entries<GatewayKeys>, path: Option<&Path>) -> Result<Self, RegistryError> {
        let corpora = entries.corpora;
        let engines: Vec<GatewayEntry> = entries
            .engines
            .into_iter()
            .map(|(spec, GatewayKeys { collection, expose, rerank })| GatewayEntry { spec, collection, expose, rerank })
            .collect();
        let mut rerankers = engines.iter().enumerate().filter(|(_, e)| e.rerank.is_some());
        if let (Some((_, first)), Some((index, second))) = (rerankers.next(), rerankers.next()) {
            return Err(RegistryError::Entry {
                path: path.map(Path::to_path_buf),
                index,
                id: Some(second.spec.id.clone()),
                detail: format!("at most one entry may have 'rerank'; '{}' already does", first.spec.id),
            });
        }
        if corpora == Corpora::Distinct
            && let Some((index, e)) = engines.iter().enumerate().find(|(_, e)| e.collection.contains(':'))
        {
            return Err(RegistryError::Entry {
                path: path.map(Path::to_path_buf),
                index,
                id: Some(e.spec.id.clone()),
                detail: format!(
                    "'collection' may not contain ':' when \"corpora\" is \"distinct\": '{}'",
                    e.collection
                ),
            });
        }
        Ok(Self { engines, corpora })
    }

    /// The index of the reranking entry, if the registry names one.
    pub fn reranker(&self) -> Option<usize> {
        self.engines.iter().position(|e| e.rerank.is_some())
    }

    /// These engines reaching `https://` ones with `tls` ([`rcp_client::ClientOptions::tls`]:
    /// `--ca-cert`, `--client-cert`) wherever their entry sets nothing of its own (`caCert`),
    /// as [`EngineSpec::tls_or`] decides.
    pub fn with_tls(mut self, tls: &rcp_client::TlsOptions) -> Self {
        for engine in &mut self.engines {
            engine.spec.tls = engine.spec.tls_or(tls);
        }
        self
    }

    /// A registry of one engine (what `rcp-gateway mcp --stdio CMD | --http URL` bridges).
    pub fn single(spec: EngineSpec) -> Self {
        let collection = spec.id.clone();
        Self { engines: vec![GatewayEntry { spec, collection, expose: false, rerank: None }], corpora: Corpora::Shared }
    }

    /// Collection names in first-appearance order (the reranking entry is none).
    pub fn collections(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.engines.iter().filter(|e| e.rerank.is_none()) {
            if !out.contains(&e.collection) {
                out.push(e.collection.clone());
            }
        }
        out
    }
}

/// The keys only the gateway reads from an entry.
struct GatewayKeys {
    collection: String,
    expose: bool,
    rerank: Option<RerankEntry>,
}

/// Reads `collection`, `expose` and `rerank` from one entry the client's loader has validated.
fn gateway_keys(spec: &EngineSpec, raw: &RawEntry) -> Result<GatewayKeys, String> {
    let collection = match raw.get("collection") {
        None | Some(Value::Null) => spec.id.clone(),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(other) => return Err(format!("'collection' must be a non-empty string, got {other}")),
    };
    let expose = match raw.get("expose") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(format!("'expose' must be a boolean, got {other}")),
    };
    let rerank = match raw.get("rerank") {
        None | Some(Value::Null | Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(RerankEntry::default()),
        Some(Value::Object(o)) => match o.get("method") {
            None | Some(Value::Null) => Some(RerankEntry::default()),
            Some(Value::String(m)) if !m.trim().is_empty() => Some(RerankEntry { method: Some(m.clone()) }),
            Some(other) => return Err(format!("'rerank.method' must be a non-empty string, got {other}")),
        },
        Some(other) => return Err(format!("'rerank' must be a boolean or {{\"method\": ...}}, got {other}")),
    };
    Ok(GatewayKeys { collection, expose, rerank })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_gateway_keys_and_defaults_collection_to_id() {
        let r = GatewayRegistry::parse(
            r#"{"engines":[
                {"id":"s0","command":["e"],"collection":"docs","expose":true},
                {"id":"s1","command":["e"],"collection":"docs","tokenEnv":"TOK"},
                {"id":"web","url":"http://127.0.0.1:1/rcp","headers":{"x-tenant":"t1"}}]}"#,
            None,
        )
        .unwrap();
        assert_eq!(r.collections(), vec!["docs", "web"]);
        assert!(r.engines[0].expose && !r.engines[1].expose);
        assert_eq!(r.engines[1].spec.token_env.as_deref(), Some("TOK"));
        assert_eq!(r.engines[2].collection, "web");
        assert_eq!(r.engines[2].spec.headers, vec![("x-tenant".to_owned(), "t1".to_owned())]);
        assert_eq!(r.reranker(), None);
    }

    #[test]
    fn the_reranking_entry_is_no_collection() {
        let r = GatewayRegistry::parse(
            r#"{"engines":[
                {"id":"bm25","command":["e"]},
                {"id":"ce","command":["r"],"rerank":{"method":"colbert"}},
                {"id":"dense","command":["e"]}]}"#,
            None,
        )
        .unwrap();
        assert_eq!(r.collections(), vec!["bm25", "dense"]);
        assert_eq!(r.reranker(), Some(1));
        assert_eq!(r.engines[1].rerank, Some(RerankEntry { method: Some("colbert".into()) }));
    }

    #[test]
    fn bad_gateway_keys_are_named() {
        let cases = [
            (r#"{"engines":[{"id":"a","command":["x"],"collection":3}]}"#, "'collection' must be"),
            (r#"{"engines":[{"id":"a","command":["x"],"expose":"yes"}]}"#, "'expose' must be a boolean"),
            (r#"{"engines":[{"id":"a","command":["x"],"headers":{"h":1}}]}"#, "'headers.h' must be a string"),
            (r#"{"engines":[{"id":"a","command":["x"],"rerank":"yes"}]}"#, "'rerank' must be a boolean"),
            (r#"{"engines":[{"id":"a","command":["x"],"rerank":{"method":3}}]}"#, "'rerank.method' must be"),
            (
                r#"{"engines":[{"id":"a","command":["x"],"rerank":true},{"id":"b","command":["x"],"rerank":{}}]}"#,
                "engines[1] ('b'): at most one entry may have 'rerank'; 'a' already does",
            ),
        ];
        for (text, expected) in cases {
            let e = GatewayRegistry::parse(text, None).unwrap_err().to_string();
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
