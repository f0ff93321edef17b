//! `dense_filtered`: filtered dense search at 0.1%, 1%, 10% and 50% selectivity, each plan of
//! the dense store's filter planner forced in turn and the planner's own choice, beside an
//! unfiltered search, in one run.
//!
//! The collection is semi-synthetic: 100,000 vectors, each `normalize(a + b/2 + noise)` for two
//! random Cranfield abstracts `a`, `b` embedded with the engine's model (so the vectors keep
//! the model's geometry at a realistic scale), with four keyword fields that say `in` for
//! 0.1%, 1%, 10% and 50% of the documents (drawn independently of the vectors). The queries
//! are Cranfield's 225, embedded one at a time as `retrieve` does. Each search asks for
//! `candidateK` 100 with `ef` 100, as a default `retrieve`; recall@10 is measured against the
//! exact filtered top 10 computed beside it. Latencies are single-threaded, search only, and
//! with the query's own embedding time added (`+embed`), p50 / p99 over the queries of every
//! pass.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin dense_filtered && target/release/dense_filtered
//! ```

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir, percentile};
use rcp_bench::synthetic::Rng;
use rcp_corpus::read_jsonl;
use rcp_dense::ann::Scored;
use rcp_dense::embedder::{Embedder, EmbedderOptions, normalize};
use rcp_dense::model::{self, DIMENSION};
use rcp_dense::store::{Plan, PlannerOptions, Store, StoreOptions, Table, stored};
use rcp_dense::wal::Origin;
use rcp_wire::Meta;
use rcp_wire::filter::{FieldType, Filter};
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "Dense engine: filtered search by plan at 0.1%, 1%, 10% and 50% selectivity")]
struct Args {
    /// Documents in the semi-synthetic collection.
    #[arg(long, default_value_t = 100_000)]
    docs: usize,
    /// Passes over the queries (latencies pooled).
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// Gaussian noise per dimension added before normalising.
    #[arg(long, default_value_t = 0.02)]
    noise: f32,
    /// The planner's `scan_factor` (scan the matches while matches² ≤ factor · ef · live).
    #[arg(long, default_value_t = PlannerOptions::default().scan_factor)]
    scan_factor: f64,
    /// The planner's `post_filter_from` (post-filter a plain walk from this selectivity on).
    #[arg(long, default_value_t = PlannerOptions::default().post_filter_from)]
    post_filter_from: f64,
}

/// The selectivities measured, with their field names.
const LEVELS: [(&str, f64); 4] = [("p0_1", 0.001), ("p1", 0.01), ("p10", 0.10), ("p50", 0.50)];
/// `candidateK` and `ef` of a default `retrieve`.
const CANDIDATES: usize = 100;
const K: usize = 10;

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

/// One search's results and the plan that produced them.
type Searched = (Vec<Scored>, Plan);

/// How one configuration did over every query and pass.
struct Measured {
    recall: f64,
    search_ms: Vec<f64>,
    total_ms: Vec<f64>,
    plans: Vec<&'static str>,
}

fn run(args: &Args) -> anyhow::Result<()> {
    let files = model::locate(&model::default_dir()).context("no model (rcp-dense fetch-model provisions it)")?;
    let embedder = Embedder::load(&files, EmbedderOptions::default()).context("load the model")?;
    let c = Collection::load(&cranfield_dir()).context("load Cranfield")?;
    let docs: Vec<_> = read_jsonl(&c.corpus).and_then(|d| d.collect::<Result<_, _>>()).context("read the corpus")?;
    let texts: Vec<String> = docs.iter().map(rcp_dense::passage).collect();
    eprintln!("embedding {} abstracts ...", texts.len());
    let base = embedder.embed(&texts).context("embed the abstracts")?;

    // Queries one at a time, as `retrieve` embeds them; the time is kept per query.
    let mut queries = Vec::new();
    let mut embed_ms = Vec::new();
    for (_, q) in &c.queries {
        let t = Instant::now();
        let v = embedder.embed(&[q.as_str()]).context("embed a query")?;
        embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
        queries.extend(v.into_iter().next().context("no query vector")?);
    }

    eprintln!("building {} semi-synthetic documents ...", args.docs);
    let planner = PlannerOptions {
        full_scan_threshold: 0,
        scan_factor: args.scan_factor,
        post_filter_from: args.post_filter_from,
    };
    let store = Store::in_memory(StoreOptions { planner, ..StoreOptions::default() });
    store.set_fields(LEVELS.iter().map(|(f, _)| ((*f).to_owned(), FieldType::Keyword)).collect())?;
    let t = Instant::now();
    store.upsert(semi_synthetic(&base, args.docs, args.noise)).context("index")?;
    eprintln!("indexed in {:.1} s", t.elapsed().as_secs_f64());
    let table = store.read();

    println!(
        "\n## Filtered search, {} docs, {} queries x {} passes, candidateK {CANDIDATES}",
        args.docs,
        c.queries.len(),
        args.passes
    );
    println!(
        "planner: scan while matches² ≤ {} · ef · live, post-filter from {:.0}% | query embedding p50 {:.2} ms",
        planner.scan_factor,
        planner.post_filter_from * 100.0,
        percentile(&mut embed_ms.clone(), 50.0)
    );
    println!("\n| filter | matches | plan | recall@10 | p50 ms | p99 ms | p50 ms +embed | p99 ms +embed |");
    println!("|---|---|---|---|---|---|---|---|");
    let auto = |f: Option<&Filter>, q: &[f32]| {
        let (found, route) = table.search(q, CANDIDATES, CANDIDATES, f, &planner);
        (found, route.ran)
    };
    let truth = exact_truth(&table, &queries, None);
    let none = measure(&queries, &embed_ms, &truth, args.passes, &|q| auto(None, q));
    print_row("none", table.live(), "planner: hnsw", &none);
    let mut p50s = Vec::new();
    for (field, _) in LEVELS {
        let filter = Filter::eq(field, "in");
        let matches = table.meta_index().candidates(&filter).map_or(0, |c| c.len());
        let truth = exact_truth(&table, &queries, Some(&filter));
        let chosen = measure(&queries, &embed_ms, &truth, args.passes, &|q| auto(Some(&filter), q));
        let mut plans = chosen.plans.clone();
        plans.sort_unstable();
        plans.dedup();
        print_row(field, matches, &format!("planner: {}", plans.join(", ")), &chosen);
        let widened = (CANDIDATES as f64 * table.live() as f64 / matches.max(1) as f64) as usize;
        let forced = [
            Plan::MatchScan { candidates: matches },
            Plan::FilteredWalk { ef: CANDIDATES },
            Plan::PostFilter { ef: widened },
            Plan::FullScan,
        ];
        for plan in forced {
            if matches!(plan, Plan::PostFilter { ef } if ef > 20_000) {
                continue; // a beam of most of the collection: not a plan anyone would run
            }
            let m = measure(&queries, &embed_ms, &truth, args.passes, &|q| {
                let candidates = table.meta_index().candidates(&filter);
                (table.run(plan, q, CANDIDATES, Some(&filter), candidates.as_ref()), plan)
            });
            print_row(field, matches, &plan.describe(), &m);
            p50s.push((field, matches, plan.name(), percentile(&mut m.search_ms.clone(), 50.0)));
        }
    }
    print_calibration(&p50s, table.live());
    Ok(())
}

/// `n` documents: `normalize(a + b/2 + noise)` of two random abstracts, with the keyword
/// fields of [`LEVELS`] set to `in` at their rates.
fn semi_synthetic(base: &[Vec<f32>], n: usize, noise: f32) -> Vec<(rcp_dense::wal::StoredDoc, Vec<f32>)> {
    let mut rng = Rng(0x5EED_F11E);
    let pick = |rng: &mut Rng| &base[(rng.uniform() * base.len() as f64) as usize % base.len()];
    (0..n)
        .map(|i| {
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let mut v: Vec<f32> = a.iter().zip(b).map(|(x, y)| x + 0.5 * y + noise * rng.gauss()).collect();
            normalize(&mut v);
            let mut meta = Meta::new();
            for (field, rate) in LEVELS {
                meta.insert(field.to_owned(), json!(if rng.uniform() < rate { "in" } else { "out" }));
            }
            (stored(format!("s{i}"), String::new(), meta, Origin::Corpus), v)
        })
        .collect()
}

/// The exact top 10 of every query among the documents `filter` accepts.
fn exact_truth(table: &Table, queries: &[f32], filter: Option<&Filter>) -> Vec<Vec<usize>> {
    let keep = |s: usize| table.doc(s).is_some_and(|d| filter.is_none_or(|f| f.matches(&d.meta)));
    queries
        .chunks_exact(DIMENSION)
        .map(|q| table.vectors().exact(q, K, None, &keep).iter().map(|s| s.slot).collect())
        .collect()
}

/// Runs `search` over every query `passes` times: recall@10 against `truth`, latencies with
/// and without the query's embedding time, and the plan that ran.
fn measure(
    queries: &[f32],
    embed_ms: &[f64],
    truth: &[Vec<usize>],
    passes: usize,
    search: &dyn Fn(&[f32]) -> Searched,
) -> Measured {
    let mut m = Measured { recall: 0.0, search_ms: Vec::new(), total_ms: Vec::new(), plans: Vec::new() };
    let (mut hit, mut total) = (0usize, 0usize);
    for _ in 0..passes.max(1) {
        for ((q, want), embed) in queries.chunks_exact(DIMENSION).zip(truth).zip(embed_ms) {
            let t = Instant::now();
            let (found, plan) = search(q);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            m.search_ms.push(ms);
            m.total_ms.push(ms + embed);
            m.plans.push(plan.name());
            hit += found.iter().take(K).filter(|s| want.contains(&s.slot)).count();
            total += want.len();
        }
    }
    m.recall = hit as f64 / total.max(1) as f64;
    m
}

/// The planner's `scan_factor` each selectivity implies: the scan costs `a · m`, the walk
/// `b · ef · live / m`, so they cost the same at `m² = (b / a) · ef · live`, and `b / a` is
/// `walk · m² / (scan · ef · live)` from the two measured p50s.
fn print_calibration(p50s: &[(&str, usize, &str, f64)], live: usize) {
    let p50 = |field: &str, name: &str| p50s.iter().find(|r| r.0 == field && r.2 == name).map(|r| (r.1, r.3));
    println!("\n| filter | scan p50 / walk p50 | implied scan_factor |");
    println!("|---|---|---|");
    for (field, _) in LEVELS {
        let scan = p50(field, Plan::MatchScan { candidates: 0 }.name());
        let walk = p50(field, Plan::FilteredWalk { ef: 0 }.name());
        if let (Some((m, scan)), Some((_, walk))) = (scan, walk) {
            let factor = walk * (m as f64).powi(2) / (scan * CANDIDATES as f64 * live as f64);
            println!("| {field} | {:.3} | {factor:.1} |", scan / walk);
        }
    }
}

fn print_row(filter: &str, matches: usize, plan: &str, m: &Measured) {
    let (mut s, mut t) = (m.search_ms.clone(), m.total_ms.clone());
    println!(
        "| {filter} | {matches} | {plan} | {:.4} | {:.3} | {:.3} | {:.2} | {:.2} |",
        m.recall,
        percentile(&mut s, 50.0),
        percentile(&mut s, 99.0),
        percentile(&mut t, 50.0),
        percentile(&mut t, 99.0),
    );
}
