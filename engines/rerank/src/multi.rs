//! The `multiVector` capability (`embed/multi`, §7.5) served by ColBERT: one token matrix per
//! input, rows of [`DIMENSION`] unit vectors (`similarity: "cosine"`). `kind: "query"` gets
//! the query layout ([`QUERY_LENGTH`](crate::colbert::QUERY_LENGTH) rows, `[MASK]`-augmented); `"document"` or no `kind`
//! the document layout. The framework validates `kind`, the inputs and the encoding, and
//! checks every row's width.

use std::sync::Arc;

use rcp_server::{EmbedRequest, HandlerResult, Lane, MultiVector, RequestContext};
use rcp_wire::capabilities::MultiVectorCapability;

use crate::colbert::{Colbert, Kind};
use crate::engine::encoder_error;
use crate::matrices::DIMENSION;

/// `multiVector.similarity`: rows are unit vectors, so cosine and dot product agree.
///
/// Only the `json` encoding is offered: the schema's `embed/multi` result carries numbers only.
pub const SIMILARITY: &str = "cosine";

/// The `embed/multi` handler.
#[derive(Debug)]
pub struct MultiVectorEngine {
    colbert: Arc<Colbert>,
    identity: String,
}

impl MultiVectorEngine {
    /// Token matrices from `colbert`, advertised as `identity`.
    pub fn new(colbert: Arc<Colbert>, identity: String) -> Self {
        Self { colbert, identity }
    }
}

/// The side of late interaction a request's `kind` names (validated by the framework):
/// documents unless it says `query`.
fn kind(request: &EmbedRequest) -> Kind {
    match request.kind.as_deref() {
        Some("query") => Kind::Query,
        _ => Kind::Document,
    }
}

impl MultiVector for MultiVectorEngine {
    fn capability(&self) -> MultiVectorCapability {
        MultiVectorCapability {
            dimension: DIMENSION as u32,
            identity: self.identity.clone(),
            similarity: Some(SIMILARITY.to_owned()),
            ..Default::default()
        }
    }

    async fn embed_multi(&self, request: EmbedRequest, ctx: RequestContext) -> HandlerResult<Vec<Vec<Vec<f32>>>> {
        let kind = kind(&request);
        let texts: Vec<String> = request.inputs.iter().map(|i| i.text().to_owned()).collect();
        let colbert = Arc::clone(&self.colbert);
        let task_ctx = ctx.clone();
        let matrices =
            ctx.run_cpu(Lane::Read, move || colbert.encode(&texts, kind, &|| task_ctx.is_cancelled())).await?;
        Ok(matrices.map_err(encoder_error)?.iter().map(|m| m.to_rows()).collect())
    }
}
