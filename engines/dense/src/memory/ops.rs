//! `memory/build` and `memory/recall` (§7.17) of the dense engine.
//!
//! - `memory/build` without `documents` builds (or, when the index changed, rebuilds) the live
//!   index's memory, `memoryId` [`INDEX_MEMORY`]; with `documents` it embeds them into a
//!   scratch store, links their own k-nearest-neighbour graph and builds a memory over that
//!   (a new `inline-N` id, or the inline `memoryId` given, replaced).
//! - `memory/recall` answers from the memory named by `memoryId` (absent: the live index's,
//!   built first if it was never built or is stale): clues, and as draft `hits` the documents
//!   the clues name as entry points, scored by cosine to the query (`scores.dense`).
//!   `sessionId` is a hint this engine does not use (§7.7.3).
//! - Only the `global` scope is advertised; the framework refuses `session` with -32005.

use std::collections::HashSet;
use std::sync::Arc;

use rcp_server::{HandlerResult, Lane, Memory, RequestContext};
use rcp_wire::RcpError;
use rcp_wire::capabilities::MemoryCapability;
use rcp_wire::memory::{MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};

use super::{Digest, INDEX_MEMORY, MAX_INLINE_DOCS, MemoryIndex};
use crate::DenseEngine;
use crate::engine::stored_hit;
use crate::graph::GraphIndex;
use crate::store::{Store, stored};
use crate::wal::Origin;

/// Clues answered when the request has no `n`.
pub const DEFAULT_CLUES: usize = 5;
/// Most clues one recall answers (a larger `n` is clamped).
pub const MAX_CLUES: usize = 64;

/// The `memory` capability of the dense engine: its memories plus the engine (for the
/// encoder and the store's options).
#[derive(Debug, Clone)]
pub struct DenseMemory {
    engine: Arc<DenseEngine>,
    memories: Arc<MemoryIndex>,
}

impl DenseMemory {
    /// The capability over `memories`, embedding with `engine`.
    pub fn new(engine: Arc<DenseEngine>, memories: Arc<MemoryIndex>) -> Self {
        Self { engine, memories }
    }

    /// The live index's memory, built on the CPU executor when missing or stale.
    async fn index_memory(&self, ctx: &RequestContext) -> HandlerResult<Arc<Digest>> {
        let memories = Arc::clone(&self.memories);
        ctx.run_cpu(Lane::Read, move || memories.index_memory())
            .await?
            .map_err(|e| RcpError::internal(format!("memory not saved: {e}")))
    }

    /// A memory over inline documents: embedded, linked into their own graph, described; with
    /// the scratch store holding them.
    async fn inline_memory(
        &self,
        docs: Vec<(String, String)>,
        ctx: &RequestContext,
    ) -> HandlerResult<(Digest, Arc<Store>)> {
        let texts = docs.iter().map(|(_, t)| t.clone()).collect();
        let vectors = self.engine.embed_texts(texts, ctx, "memory", Lane::Write).await?;
        let options = self.engine.store().options();
        let graph_options = *self.memories.graph().options();
        ctx.run_cpu(Lane::Write, move || {
            let store = Arc::new(Store::in_memory(options));
            let rows = docs
                .into_iter()
                .zip(vectors)
                .map(|((id, text), v)| (stored(id, text, Default::default(), Origin::Client), v))
                .collect();
            store.upsert(rows).map_err(|e| RcpError::internal(format!("scratch store: {e}")))?;
            let (graph, _) = GraphIndex::open(Arc::clone(&store), None, graph_options)
                .map_err(|e| RcpError::internal(format!("scratch graph: {e}")))?;
            Ok::<_, RcpError>((Digest::build(&graph.read(), &graph.communities(), 0), store))
        })
        .await?
    }
}

/// The inline documents as (id, text), ids defaulting to `doc-{i}`; refused when empty, too
/// many, or an id repeats.
fn inline_documents(docs: &[rcp_wire::index::Document]) -> HandlerResult<Vec<(String, String)>> {
    if docs.is_empty() {
        return Err(RcpError::invalid_params(
            "documents",
            "empty; give at least one document, or omit documents to build over the live index",
        ));
    }
    if docs.len() > MAX_INLINE_DOCS {
        return Err(RcpError::invalid_params(
            "documents",
            format!("{} documents; at most {MAX_INLINE_DOCS} per memory/build", docs.len()),
        ));
    }
    let mut seen = HashSet::new();
    docs.iter()
        .enumerate()
        .map(|(i, d)| {
            let id = d.id.clone().unwrap_or_else(|| format!("doc-{i}"));
            if !seen.insert(id.clone()) {
                return Err(RcpError::invalid_params(format!("documents[{i}].id"), format!("'{id}' repeats")));
            }
            Ok((id, d.text.clone()))
        })
        .collect()
}

impl DenseMemory {
    /// `memory/build` with `scope: "session"`: a memory over the inline `documents` (or, without
    /// them, over the live index as it is now) that only this session recalls or updates, and
    /// that ends with it. Updating one names its `memoryId` (one of this session's).
    async fn build_session(&self, params: MemoryBuildParams, ctx: &RequestContext) -> HandlerResult<MemoryBuildResult> {
        let session = ctx.session().clone();
        let not_found = |id: &str| RcpError::not_found(format!("memoryId '{id}' (not a memory of this session)"));
        if let Some(id) = params.memory_id.as_deref()
            && self.memories.inline(id, &session).is_none()
        {
            return Err(not_found(id));
        }
        let (digest, store) = match params.documents.as_deref() {
            Some(docs) => {
                let (digest, store) = self.inline_memory(inline_documents(docs)?, ctx).await?;
                (digest, store)
            }
            None => {
                let digest = self.index_memory(ctx).await?;
                (Digest::clone(&digest), Arc::clone(self.memories.graph().store()))
            }
        };
        let asked = params.memory_id.clone().unwrap_or_default();
        let (id, digest) = self
            .memories
            .keep_inline(params.memory_id, digest, store, Some(session))
            .ok_or_else(|| not_found(&asked))?;
        Ok(MemoryBuildResult { memory_id: id, tokens: Some(digest.tokens()), ..Default::default() })
    }
}

impl Memory for DenseMemory {
    fn capability(&self) -> MemoryCapability {
        MemoryCapability { scopes: vec!["global".into(), "session".into()], clues: Some(true), ..Default::default() }
    }

    async fn build(&self, params: MemoryBuildParams, ctx: RequestContext) -> HandlerResult<MemoryBuildResult> {
        // The framework checked `scope` is one advertised; a session memory is its session's.
        if params.scope.as_deref() == Some("session") {
            return self.build_session(params, &ctx).await;
        }
        let (id, digest) = match (params.documents.as_deref(), params.memory_id.as_deref()) {
            (None, None | Some(INDEX_MEMORY)) => (INDEX_MEMORY.to_owned(), self.index_memory(&ctx).await?),
            (Some(_), Some(INDEX_MEMORY)) => {
                return Err(RcpError::invalid_params(
                    "memoryId",
                    format!(
                        "memory '{INDEX_MEMORY}' is built over the live index, not inline documents; \
                         omit memoryId to build a new memory"
                    ),
                ));
            }
            (_, Some(other)) if self.memories.inline(other, ctx.session()).is_none() => {
                return Err(RcpError::not_found(format!("memoryId '{other}'")));
            }
            (None, Some(other)) => {
                return Err(RcpError::invalid_params(
                    "documents",
                    format!("memory '{other}' was built from inline documents; send them again to update it"),
                ));
            }
            (Some(docs), id) => {
                let docs = inline_documents(docs)?;
                let (digest, store) = self.inline_memory(docs, &ctx).await?;
                let asked = id.unwrap_or_default().to_owned();
                self.memories
                    .keep_inline(id.map(str::to_owned), digest, store, None)
                    .ok_or_else(|| RcpError::not_found(format!("memoryId '{asked}'")))?
            }
        };
        Ok(MemoryBuildResult { memory_id: id, tokens: Some(digest.tokens()), ..Default::default() })
    }

    async fn recall(&self, params: MemoryRecallParams, ctx: RequestContext) -> HandlerResult<MemoryRecallResult> {
        let query = params.query.trim();
        if query.is_empty() {
            return Err(RcpError::invalid_params("query", "empty; recall needs a query"));
        }
        let n = match params.n {
            Some(0) => return Err(RcpError::invalid_params("n", "0; at least 1 clue")),
            Some(n) => (n as usize).min(MAX_CLUES),
            None => DEFAULT_CLUES,
        };
        let (digest, store) = match params.memory_id.as_deref() {
            None | Some(INDEX_MEMORY) => (self.index_memory(&ctx).await?, Arc::clone(self.memories.graph().store())),
            Some(id) => self
                .memories
                .inline(id, ctx.session())
                .ok_or_else(|| RcpError::not_found(format!("memoryId '{id}'")))?,
        };
        let vector = self.engine.embed_query(query, &ctx).await?;
        let (query, source) = (query.to_owned(), self.engine.source().to_owned());
        ctx.run_cpu(Lane::Read, move || {
            let table = store.read();
            let recalled = digest.recall_in(&table, &query, &vector, n);
            let hits = recalled
                .entry_points
                .iter()
                .filter_map(|(id, cos)| table.get(id).map(|doc| stored_hit(doc, f64::from(*cos), &source)))
                .collect();
            MemoryRecallResult { clues: recalled.clues, hits: Some(hits), ..Default::default() }
        })
        .await
    }
}
