//! Cranfield embedded by the dense engine's model into an in-memory store: what the graph and
//! memory benchmarks (`graph_cost`, `memory_cranfield`) both start from.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use rcp_corpus::{CorpusDoc, read_jsonl};
use rcp_dense::embedder::{Embedder, EmbedderOptions};
use rcp_dense::model;
use rcp_dense::store::{Store, StoreOptions, stored};
use rcp_dense::wal::{Origin, StoredDoc};

use crate::quality::{Collection, cranfield_dir};

/// The collection, its abstracts stored with their vectors, and its queries' vectors.
#[derive(Debug)]
pub struct Embedded {
    /// The loaded model (for embedding more text later).
    pub embedder: Embedder,
    /// Cranfield's queries and judgements.
    pub collection: Collection,
    /// The abstracts, stored with their vectors.
    pub store: Arc<Store>,
    /// Abstracts stored.
    pub documents: usize,
    /// One vector per query, in the collection's order.
    pub queries: Vec<Vec<f32>>,
}

/// Loads the model (`model_dir`, else the default directory) and embeds Cranfield.
pub fn cranfield(model_dir: Option<PathBuf>) -> anyhow::Result<Embedded> {
    let dir = model_dir.unwrap_or_else(model::default_dir);
    let files = model::locate(&dir).context("no model (rcp-dense fetch-model provisions it)")?;
    let embedder = Embedder::load(&files, EmbedderOptions::default()).context("load the model")?;
    let collection = Collection::load(&cranfield_dir()).context("load the Cranfield collection")?;
    let docs: Vec<_> = read_jsonl(&collection.corpus)
        .and_then(|docs| docs.collect::<Result<_, _>>())
        .context("read the Cranfield corpus")?;
    let texts: Vec<String> = docs.iter().map(rcp_dense::passage).collect();
    eprintln!("embedding {} Cranfield abstracts ...", texts.len());
    let vectors = embedder.embed(&texts).context("embed the abstracts")?;
    let query_texts: Vec<&str> = collection.queries.iter().map(|(_, q)| q.as_str()).collect();
    let queries = embedder.embed(&query_texts).context("embed the queries")?;
    let store = Arc::new(Store::in_memory(StoreOptions::default()));
    store.upsert(rows(&docs, vectors)).context("store the Cranfield vectors")?;
    Ok(Embedded { embedder, collection, store, documents: docs.len(), queries })
}

/// Corpus documents paired with their vectors as the store's rows (origin: corpus).
pub fn rows(docs: &[CorpusDoc], vectors: Vec<Vec<f32>>) -> Vec<(StoredDoc, Vec<f32>)> {
    docs.iter()
        .zip(vectors)
        .map(|(d, v)| (stored(d.id.clone().unwrap_or_default(), d.text.clone(), d.meta.clone(), Origin::Corpus), v))
        .collect()
}
