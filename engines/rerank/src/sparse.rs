//! The `sparseEmbed` capability (`embed/sparse`, §7.4) served by SPLADE-tiny: one sparse
//! vector over the 30,522 word pieces of `bert-base-uncased` per text (`vocabulary`
//! advertised), `indices` ascending with positive `values`.
//!
//! - `kind` is accepted (`query` or `document`, checked by the framework) and changes nothing:
//!   SPLADE-tiny encodes queries and documents alike.
//! - A text with no word piece (empty or whitespace only) gets an empty vector.
//! - Texts are cut at [`MAX_LENGTH`](rcp_embedder::splade::MAX_LENGTH) tokens.
//! - At most [`SparseEngine::batch_limit`] texts per call, advertised as `x-rcp-batchLimit`
//!   (the schema's `sparseEmbed` has no `batchLimit`); more are refused with -32602 before
//!   any text is encoded.

use std::sync::Arc;

use rcp_embedder::splade::{Splade, SpladeError};
use rcp_server::{EmbedRequest, HandlerResult, Lane, RequestContext, SparseEmbed};
use rcp_wire::RcpError;
use rcp_wire::capabilities::SparseEmbedCapability;
use rcp_wire::embed::SparseVector;

/// The extension key carrying the most texts per call (§6.2 vendor extension).
pub const BATCH_LIMIT_KEY: &str = "x-rcp-batchLimit";

/// The `embed/sparse` handler.
#[derive(Debug)]
pub struct SparseEngine {
    splade: Arc<Splade>,
    identity: String,
    batch_limit: u32,
}

impl SparseEngine {
    /// Sparse vectors from `splade`, advertised as `identity`, at most `batch_limit` texts per
    /// call.
    pub fn new(splade: Arc<Splade>, identity: String, batch_limit: u32) -> Self {
        Self { splade, identity, batch_limit: batch_limit.max(1) }
    }

    /// The most texts one call may carry.
    pub fn batch_limit(&self) -> u32 {
        self.batch_limit
    }
}

impl SparseEmbed for SparseEngine {
    fn capability(&self) -> SparseEmbedCapability {
        let mut cap = SparseEmbedCapability {
            identity: self.identity.clone(),
            vocabulary: Some(self.splade.vocabulary() as u64),
            ..Default::default()
        };
        cap.extra.insert(BATCH_LIMIT_KEY.into(), self.batch_limit.into());
        cap
    }

    async fn embed_sparse(&self, request: EmbedRequest, ctx: RequestContext) -> HandlerResult<Vec<SparseVector>> {
        let n = request.inputs.len();
        if n > self.batch_limit as usize {
            return Err(RcpError::invalid_params(
                "texts",
                format!("{n} texts exceed the limit of {} per call ({BATCH_LIMIT_KEY})", self.batch_limit),
            )
            .with_limit(u64::from(self.batch_limit)));
        }
        let texts: Vec<String> = request.inputs.iter().map(|i| i.text().to_owned()).collect();
        let splade = Arc::clone(&self.splade);
        let task_ctx = ctx.clone();
        let vectors = ctx.run_cpu(Lane::Read, move || splade.encode_all(&texts, &|| task_ctx.is_cancelled())).await?;
        let vectors = vectors.map_err(|e| match e {
            SpladeError::Cancelled => RcpError::cancelled(Some("stopped between texts")),
            e => RcpError::backend_unavailable(e.to_string()),
        })?;
        Ok(vectors.into_iter().map(|v| SparseVector { indices: v.indices, values: v.values }).collect())
    }
}
