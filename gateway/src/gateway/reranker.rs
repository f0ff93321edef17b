//! The registry's reranking entry (its `rerank` key) as found at start-up: which engine, which
//! method, and the capability the gateway advertises for it.

use rcp_client::Client;
use rcp_wire::capabilities::RerankCapability;

/// The reranking entry as found at start-up.
#[derive(Debug, Clone)]
pub(super) struct Reranker {
    /// Its index in the registry (and the pool).
    pub(super) index: usize,
    /// The method the registry picked, else the engine's first.
    pub(super) method: String,
    /// The engine's own `rerank` capability, advertised by the gateway as its own.
    pub(super) capability: RerankCapability,
}

impl Reranker {
    /// The reranker of entry `index`, if its engine advertises `rerank` with `method` (or any
    /// method, when none is named); why not otherwise.
    pub(super) fn of(index: usize, method: Option<&str>, client: &Client) -> Result<Self, String> {
        let Some(capability) = client.capabilities().rerank else {
            return Err("does not advertise rerank".into());
        };
        let method = match method {
            Some(m) if capability.methods.iter().any(|x| x == m) => m.to_owned(),
            Some(m) => return Err(format!("does not offer method '{m}' (offers {:?})", capability.methods)),
            None => capability.methods.first().cloned().ok_or("advertises no rerank method")?,
        };
        Ok(Self { index, method, capability })
    }
}
