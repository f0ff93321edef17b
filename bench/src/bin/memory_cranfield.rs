//! `memory_cranfield`: does the dense engine's memory (§7.17) lead `retrieve` and `graph` to
//! better documents than the query alone?
//!
//! Cranfield (1,400 abstracts, 225 queries, graded qrels): the memory is built over the
//! document graph (k = 10) exactly as `memory/build` builds it, then for every query
//! `memory/recall` gives `n` clues and the runs below are scored (nDCG@10, Recall@100):
//!
//! - `retrieve`: the query alone (HNSW, candidateK 100);
//! - `retrieve + clue queries (RRF)`: the query's list fused (§16.3 RRF, `rrfK` 60) with one
//!   `retrieve` per clue query, each list weighted by its clue's weight — what a client
//!   fanning the clues out over `retrieve` does;
//! - `clue queries only (RRF)`: the same without the query's own list;
//! - `graph local from clue seeds`: `graph op:"local"` (personalised PageRank) seeded with the
//!   clues' `seedIds` (each clue's community members nearest the query);
//! - `recall draft hits`: the `hits` recall itself returns (those seeds, by cosine), at most
//!   3 per clue, so Recall@100 is bounded by 3 × clues documents.
//!
//! ```sh
//! cargo run --release -p rcp-bench --bin memory_cranfield
//! cargo run --release -p rcp-bench --bin memory_cranfield -- --clues 1
//! ```

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::evaluate;
use rcp_dense::graph::ops::Op;
use rcp_dense::graph::{GraphIndex, GraphOptions};
use rcp_dense::memory::Digest;
use rcp_dense::store::{Store, Table};
use rcp_wire::Hit;
use rcp_wire::fusion::{EngineList, FusionMethod, fuse};
use rcp_wire::graph::GraphParams;

#[derive(Debug, Parser)]
#[command(about = "Dense engine's memory: Cranfield nDCG@10 of retrieve vs retrieve steered by recalled clues")]
struct Args {
    /// Model directory [default: $RCP_MODEL_DIR or the user cache].
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Clues recalled per query (`memory/recall` `n`).
    #[arg(long, default_value_t = 3)]
    clues: usize,
    /// Neighbours per node of the document graph.
    #[arg(long, default_value_t = GraphOptions::default().k)]
    k: usize,
}

/// Ranked list depth (candidateK of a default `retrieve`).
const DEPTH: usize = 100;

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

/// The ids of the `DEPTH` nearest documents to `q`.
fn search(table: &Table, store: &Store, q: &[f32]) -> Vec<String> {
    let (top, _) = table.search(q, DEPTH, DEPTH, None, &store.options().planner);
    top.iter().filter_map(|s| table.doc(s.slot)).map(|d| d.id.clone()).collect()
}

/// RRF of weighted ranked id lists, as a federating client would fuse them.
fn rrf(lists: Vec<(Vec<String>, f64)>) -> anyhow::Result<Vec<String>> {
    let lists: Vec<EngineList> = lists
        .into_iter()
        .enumerate()
        .map(|(i, (ids, w))| {
            let n = ids.len() as f64;
            let hits = ids.into_iter().enumerate().map(|(r, id)| Hit::new(id.as_str(), n - r as f64)).collect();
            EngineList::new(format!("list-{i:02}"), hits).with_weight(w)
        })
        .collect();
    let fused = fuse(&lists, &FusionMethod::rrf(), DEPTH).context("fuse")?;
    Ok(fused.into_iter().map(|h| h.id.to_string().trim_matches('"').to_owned()).collect())
}

fn run(args: &Args) -> anyhow::Result<()> {
    let rcp_bench::embedded::Embedded { embedder, collection: c, store, documents, queries } =
        rcp_bench::embedded::cranfield(args.model_dir.clone())?;
    let options = GraphOptions { k: args.k, max_degree: args.k * 2 + 4, ..GraphOptions::default() };
    let (index, _) = GraphIndex::open(Arc::clone(&store), None, options).context("build the graph")?;
    let t = Instant::now();
    let memory = Digest::build(&index.read(), &index.communities(), store.write_position().0);
    println!(
        "memory: {} entries (Louvain level {}), {} tokens, built in {:.2} s",
        memory.entries.len(),
        memory.level,
        memory.tokens(),
        t.elapsed().as_secs_f64()
    );

    let mut runs: [(&str, HashMap<String, Vec<String>>); 5] = [
        ("retrieve", HashMap::new()),
        ("retrieve + clue queries (RRF)", HashMap::new()),
        ("clue queries only (RRF)", HashMap::new()),
        ("graph local from clue seeds", HashMap::new()),
        ("recall draft hits", HashMap::new()),
    ];
    for ((qid, text), q) in c.queries.iter().zip(&queries) {
        let recalled = memory.recall_in(&store.read(), text, q, args.clues);
        runs[4].1.insert(qid.clone(), recalled.entry_points.iter().map(|(id, _)| id.clone()).collect());
        let clues = recalled.clues;
        let clue_texts: Vec<&str> = clues.iter().filter_map(|c| c.query.as_deref()).collect();
        let clue_vecs = embedder.embed(&clue_texts).context("embed the clue queries")?;
        let weights = clues.iter().filter(|c| c.query.is_some()).map(|c| c.weight.unwrap_or(1.0));
        let table = store.read();
        let plain = search(&table, &store, q);
        let clue_lists: Vec<(Vec<String>, f64)> =
            clue_vecs.iter().zip(weights).map(|(v, w)| (search(&table, &store, v), w)).collect();
        drop(table);
        let mut with_query = vec![(plain.clone(), 1.0)];
        with_query.extend(clue_lists.iter().cloned());
        runs[1].1.insert(qid.clone(), rrf(with_query)?);
        runs[2].1.insert(qid.clone(), if clue_lists.is_empty() { plain.clone() } else { rrf(clue_lists)? });
        runs[0].1.insert(qid.clone(), plain);
        let mut seen = HashSet::new();
        let seeds: Vec<String> = clues
            .iter()
            .flat_map(|c| c.seed_ids.clone().unwrap_or_default())
            .filter(|s| seen.insert(s.clone()))
            .collect();
        let params = GraphParams { op: "local".into(), seed_ids: Some(seeds), ..Default::default() };
        let local = Op { index: &index, params: &params, k: DEPTH, query: None, ef: 64, source: "bench" }.run()?;
        let ids = local.hits.unwrap_or_default().into_iter().map(|h| h.id.to_string().trim_matches('"').to_owned());
        runs[3].1.insert(qid.clone(), ids.collect());
    }
    println!("\n## Cranfield ({} docs, {} queries), {} clues per query", documents, c.queries.len(), args.clues);
    println!("| run | nDCG@10 | Recall@100 |");
    println!("|---|---|---|");
    for (label, ranking) in &runs {
        let s = evaluate(&c, ranking);
        println!("| {label} | {:.4} | {:.4} |", s.ndcg10, s.recall100);
    }
    println!("\ncommand: cargo run --release -p rcp-bench --bin memory_cranfield -- --clues {}", args.clues);
    Ok(())
}
