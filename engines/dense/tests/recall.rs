//! HNSW recall against exact search on real vectors: the 1,400 Cranfield abstracts and 225
//! queries embedded with the engine's model (`RCP_CRANFIELD` overrides the collection
//! directory). Vectors are cached under the target directory, keyed by the corpus hash and the
//! model identity, so only the first run embeds.

mod common;

use std::path::PathBuf;

use rcp_corpus::read_jsonl;
use rcp_dense::ann::{self, Backend, HnswParams};
use rcp_dense::embedder::{Embedder, EmbedderOptions};
use rcp_dense::model::{self, DIMENSION, IDENTITY};
use rcp_dense::passage;
use rcp_dense::store::{Plan, PlannerOptions, Store, StoreOptions, stored};
use rcp_dense::wal::Origin;

const MAX_LENGTH: usize = 64;

/// Embeds `texts`, or reads the cached vectors for them.
fn cached(name: &str, texts: &[String], embedder: &mut Option<Embedder>) -> Vec<f32> {
    let key = model::sha256_hex(format!("{IDENTITY}\n{MAX_LENGTH}\n{}", texts.join("\n")).as_bytes());
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("dense-{name}-{}.f32", &key[..16]));
    if let Ok(bytes) = std::fs::read(&path)
        && bytes.len() == texts.len() * DIMENSION * 4
    {
        return rcp_dense::wal::f32s(&bytes);
    }
    let embedder = embedder.get_or_insert_with(|| {
        let files = model::locate(&common::model_dir()).expect("model provisioned");
        // 64 tokens (the engine uses 256) keep the first, uncached run of this debug-build test
        // short; the vectors are still the model's vectors of real abstracts.
        Embedder::load(&files, EmbedderOptions { max_length: MAX_LENGTH, ..EmbedderOptions::default() })
            .expect("model loads")
    });
    let mut out = Vec::with_capacity(texts.len() * DIMENSION);
    for v in embedder.embed(texts).expect("embed") {
        out.extend(v);
    }
    let bytes: Vec<u8> = out.iter().flat_map(|x| x.to_le_bytes()).collect();
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    out
}

/// Mean recall@10 of the store's search (graph, tombstones, over-fetch) against an exact
/// scan of the live documents.
fn recall_at_10(store: &Store, docs: &[f32], probes: &[f32], live: &dyn Fn(usize) -> bool) -> f64 {
    let table = store.read();
    let ef = HnswParams::default().ef_search;
    let mut found = 0;
    let mut total = 0;
    for q in probes.chunks_exact(DIMENSION) {
        let truth: Vec<usize> = ann::exact(docs, DIMENSION, q, 10, None, live).iter().map(|s| s.slot).collect();
        let (got, path) = table.search(q, 10, ef, None, &PlannerOptions::without_full_scan());
        assert!(matches!(path.ran, Plan::Hnsw { .. }), "{path:?}");
        let got: Vec<String> = got.iter().map(|s| table.doc(s.slot).unwrap().id.clone()).collect();
        found += truth.iter().filter(|s| got.contains(&s.to_string())).count();
        total += truth.len();
    }
    found as f64 / total as f64
}

#[test]
fn hnsw_recall_at_10_on_cranfield_vectors() {
    let Some(dir) = rcp_testkit::cranfield() else { return };
    let corpus: Vec<String> = read_jsonl(dir.join("corpus.jsonl"))
        .unwrap_or_else(|e| panic!("Cranfield corpus (set RCP_CRANFIELD): {e}"))
        .map(|d| passage(&d.unwrap()))
        .collect();
    let queries: Vec<String> = read_jsonl(dir.join("queries.jsonl")).unwrap().map(|d| d.unwrap().text).collect();
    assert_eq!(corpus.len(), 1400);
    let mut embedder = None;
    let docs = cached("cranfield-corpus", &corpus, &mut embedder);
    let qs = cached("cranfield-queries", &queries, &mut embedder);
    for v in docs.chunks_exact(DIMENSION) {
        let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "unit vectors");
    }

    // Every backend, through the engine's store.
    for &backend in Backend::ALL {
        // The engine's store (ids are row numbers), searched through the graph at any size.
        let store = Store::in_memory(StoreOptions {
            ann: Some(backend),
            planner: PlannerOptions::without_full_scan(),
            ..StoreOptions::default()
        });
        let rows = docs
            .chunks_exact(DIMENSION)
            .enumerate()
            .map(|(i, v)| (stored(i.to_string(), String::new(), Default::default(), Origin::Corpus), v.to_vec()));
        store.upsert(rows.collect()).unwrap();

        // Queries and documents both, so the graph is searched with a few thousand probes.
        let probes: Vec<f32> = qs.iter().chain(docs.iter().take(500 * DIMENSION)).copied().collect();
        let r = recall_at_10(&store, &docs, &probes, &|_| true);
        eprintln!("{backend}: recall@10 (ef=64): {r:.4}");
        assert!(r >= 0.98, "{backend}: recall@10 {r} < 0.98");

        // With a fifth of the documents deleted (tombstones, below the compaction threshold) the
        // over-fetching search still meets recall over the rest.
        let gone: Vec<String> = (0..1400).filter(|i| i % 5 == 0).map(|i: usize| i.to_string()).collect();
        assert_eq!(store.delete(gone).unwrap(), 280);
        assert_eq!(store.read().tombstones(), 280);
        let r = recall_at_10(&store, &docs, &qs, &|s| !s.is_multiple_of(5));
        eprintln!("{backend}: recall@10 with tombstones: {r:.4}");
        assert!(r >= 0.98, "{backend}: recall@10 with tombstones {r} < 0.98");
    }
}
