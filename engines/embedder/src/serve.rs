//! What an RCP engine serving this model needs from the framework side: the `embed`
//! capability (§7.3) the model supports and encoding on the server's CPU executor.

use std::sync::Arc;

use rcp_server::{HandlerResult, Lane, RequestContext};
use rcp_wire::RcpError;
use rcp_wire::capabilities::EmbedCapability;

use crate::embedder::Embedder;
use crate::model::{DIMENSION, IDENTITY};

/// The `embed` capability of this model: 384-d unit vectors, JSON or base64 f32 (§7.3.1).
pub fn capability(batch_limit: u32) -> EmbedCapability {
    EmbedCapability {
        dimension: DIMENSION as u32,
        identity: IDENTITY.to_owned(),
        batch_limit: Some(batch_limit),
        normalized: Some(true),
        encodings: Some(vec!["json".into(), "f32-base64".into()]),
        ..Default::default()
    }
}

/// Embeds `texts` on the server's CPU executor (in `lane`), `batch` inputs per encoder run,
/// reporting progress under `stage` when there is more than one run and stopping between runs
/// once the request is cancelled (§9, §7.14).
pub async fn embed_on_executor(
    embedder: Arc<Embedder>,
    batch: usize,
    texts: Vec<String>,
    ctx: &RequestContext,
    stage: &'static str,
    lane: Lane,
) -> HandlerResult<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let batch = batch.max(1);
    let task_ctx = ctx.clone();
    ctx.run_cpu(lane, move || {
        let total = texts.len();
        let mut out = Vec::with_capacity(total);
        for part in texts.chunks(batch) {
            if task_ctx.is_cancelled() {
                return Err(RcpError::cancelled(Some("stopped between encoder batches")));
            }
            out.extend(embedder.embed(part).map_err(|e| RcpError::backend_unavailable(e.to_string()))?);
            if total > batch {
                task_ctx.progress(out.len() as f64 / total as f64, stage, format!("embedded {}/{total}", out.len()));
            }
        }
        Ok(out)
    })
    .await?
}
