//! `dense_restart`: how fast the dense engine comes back with a saved index, beside hnswlib
//! loading its own saved index (issue #31).
//!
//! The workload: `--n` clustered 384-d unit vectors (the `ann_bench` generator, seeded) and
//! 1,000 queries from the same clusters. Two data directories are built with the store's own
//! write path (bulk load, snapshot, a first open that builds and saves the graph):
//!
//! * `index`: documents with ids only — the index part, what hnswlib holds: vectors and graph;
//! * `docs`: the same vectors with `--text-bytes` of text and two declared filter fields
//!   (`year:int`, `lang:keyword`) per document — a served corpus.
//!
//! Then, `--rounds` times, interleaved, each in a fresh process on a warm page cache:
//!
//! * **index part, ours**: `Store::open` of `index` and one search (ef 64), then the 1,000
//!   queries; RSS is the process's growth over its state before the open;
//! * **index part, hnswlib** (with `--hnswlib-python`): `load_index` and one `knn_query`
//!   (ef 64), then the 1,000 queries; RSS as ours, over the interpreter with numpy loaded;
//! * **restart to first answer**: `rcp-dense serve --data-dir docs` spawned, `initialize` and
//!   one text `retrieve` answered (the model loads beside the store).
//!
//! Figures are medians over the rounds.
//!
//! ```sh
//! cargo build --release -p rcp-dense -p rcp-bench --bin rcp-dense --bin dense_restart
//! target/release/dense_restart --hnswlib-python /tmp/venv/bin/python     # 100k
//! target/release/dense_restart --n 5000 --rounds 1                        # smoke run
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::scratch::{Cleanup, sibling};
use rcp_bench::stdio::StdioServer;
use rcp_bench::synthetic::{Rng, clustered};
use rcp_dense::ann::{HnswParams, Precision};
use rcp_dense::model::DIMENSION;
use rcp_dense::store::{HnswOverride, PlannerOptions, Store, StoreOptions, stored};
use rcp_dense::wal::{Origin, f32s};
use rcp_wire::Meta;
use rcp_wire::filter::FieldType;
use serde_json::{Value, json};

const K: usize = 10;
const EF: usize = 64;

#[derive(Debug, Parser)]
#[command(about = "Restart of rcp-dense with a saved index: load time and RSS beside hnswlib, time to first answer")]
struct Args {
    /// Documents.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// Queries run after the first one (RSS once the searches have touched the index).
    #[arg(long, default_value_t = 1_000)]
    queries: usize,
    /// Bytes of text per document in the served corpus.
    #[arg(long, default_value_t = 600)]
    text_bytes: usize,
    /// Measurements of each kind, interleaved; figures are medians.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Element type of the graph's vectors.
    #[arg(long, default_value = "f16")]
    precision: Precision,
    /// A python with hnswlib and numpy: load hnswlib's saved index beside ours.
    #[arg(long, value_name = "PATH")]
    hnswlib_python: Option<PathBuf>,
    /// Skip the served restart (which needs the model, `rcp-dense fetch-model`).
    #[arg(long)]
    no_serve: bool,
    /// Keep the data directories here instead of a temporary directory (reused when present).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Internal: open this data directory, answer the queries, print JSON.
    #[arg(long, hide = true, value_name = "DIR")]
    child_open: Option<PathBuf>,
    /// Internal: the queries file of a child run.
    #[arg(long, hide = true)]
    queries_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match (&args.child_open, &args.queries_file) {
        (Some(dir), Some(q)) => child_open(dir, q, &args).map(|v| println!("{v}")),
        _ => run(&args),
    };
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), result)
}

fn rss_mb() -> f64 {
    rcp_bench::proc::status(std::process::id()).rss_kb as f64 / 1024.0
}

/// The file-backed part of this process's resident set, in MB.
fn rss_file_mb() -> f64 {
    rcp_bench::proc::status(std::process::id()).rss_file_kb as f64 / 1024.0
}

fn options(precision: Precision) -> StoreOptions {
    StoreOptions {
        hnsw: HnswOverride { precision: Some(precision), ..HnswOverride::default() },
        planner: PlannerOptions::without_full_scan(),
        ..StoreOptions::default()
    }
}

/// The child: open the store, answer one query (timed), then the rest (for the RSS after).
fn child_open(dir: &Path, queries: &Path, args: &Args) -> anyhow::Result<Value> {
    let queries = f32s(&std::fs::read(queries).with_context(|| format!("read {}", queries.display()))?);
    let (before, file_before) = (rss_mb(), rss_file_mb());
    let t = Instant::now();
    let (store, _) = Store::open(dir, options(args.precision)).with_context(|| format!("open {}", dir.display()))?;
    let open_s = t.elapsed().as_secs_f64();
    let planner = PlannerOptions::without_full_scan();
    let mut rows = queries.chunks_exact(DIMENSION);
    let first = rows.next().context("no query")?;
    let (hits, _) = store.read().search(first, K, EF, None, &planner);
    let first_s = t.elapsed().as_secs_f64();
    if hits.len() != K {
        bail!("the first query got {} hits", hits.len());
    }
    let rss_first = rss_mb() - before;
    for q in rows {
        std::hint::black_box(store.read().search(q, K, EF, None, &planner));
    }
    Ok(json!({
        "open_s": open_s,
        "first_s": first_s,
        "rss_first_mb": rss_first,
        "rss_after_mb": rss_mb() - before,
        "rss_after_file_mb": rss_file_mb() - file_before,
    }))
}

const HNSWLIB_BUILD: &str = r#"
import sys
import numpy as np
import hnswlib
d, n, m, efc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = np.fromfile(d + "/data.f32", dtype="<f4").reshape(n, 384)
index = hnswlib.Index(space="ip", dim=384)
index.init_index(max_elements=n, ef_construction=efc, M=m)
index.add_items(data, np.arange(n))
index.save_index(d + "/hnswlib.bin")
"#;

const HNSWLIB_LOAD: &str = r#"
import json, sys, time
import numpy as np
import hnswlib
d, n, ef, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
queries = np.fromfile(d + "/queries.f32", dtype="<f4").reshape(-1, 384)
def rss(field="VmRSS:"):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024.0
before, file_before = rss(), rss("RssFile:")
t = time.perf_counter()
index = hnswlib.Index(space="ip", dim=384)
index.load_index(d + "/hnswlib.bin", max_elements=n)
load = time.perf_counter() - t
index.set_ef(ef)
index.set_num_threads(1)
labels, _ = index.knn_query(queries[:1], k=k, num_threads=1)
first = time.perf_counter() - t
rss_first = rss() - before
for q in queries[1:]:
    index.knn_query(q.reshape(1, -1), k=k, num_threads=1)
print(json.dumps({"open_s": load, "first_s": first, "rss_first_mb": rss_first, "rss_after_mb": rss() - before,
                  "rss_after_file_mb": rss("RssFile:") - file_before}))
"#;

/// A few words to make texts of.
const WORDS: [&str; 16] = [
    "boundary",
    "layer",
    "flow",
    "pressure",
    "wing",
    "shock",
    "heat",
    "transfer",
    "supersonic",
    "laminar",
    "turbulent",
    "nozzle",
    "vortex",
    "stagnation",
    "compressible",
    "theory",
];

/// A data directory of `data`'s vectors, built through the store's own write path: bulk load
/// without a graph, snapshot, then one open that builds and saves the graph.
fn build_store(dir: &Path, data: &[f32], text_bytes: usize, precision: Precision) -> anyhow::Result<()> {
    if dir.join("manifest.json").exists() {
        return Ok(());
    }
    let mut rng = Rng(0x7e47_0000_0000_0031);
    {
        let (store, _) = Store::open(dir, StoreOptions { defer_graph: true, ..options(precision) })
            .with_context(|| format!("create {}", dir.display()))?;
        if text_bytes > 0 {
            store.set_fields(
                [("year".to_owned(), FieldType::Int), ("lang".to_owned(), FieldType::Keyword)].into_iter().collect(),
            )?;
        }
        for (b, rows) in data.chunks(10_000 * DIMENSION).enumerate() {
            let docs = rows
                .chunks_exact(DIMENSION)
                .enumerate()
                .map(|(i, v)| {
                    let id = format!("d{}", b * 10_000 + i);
                    let mut text = String::with_capacity(text_bytes + 16);
                    let mut meta = Meta::new();
                    if text_bytes > 0 {
                        while text.len() < text_bytes {
                            text.push_str(WORDS[(rng.uniform() * WORDS.len() as f64) as usize % WORDS.len()]);
                            text.push(' ');
                        }
                        meta.insert("year".into(), json!(1950 + (rng.uniform() * 70.0) as i64));
                        meta.insert("lang".into(), json!(["en", "de", "fr"][(rng.uniform() * 3.0) as usize % 3]));
                    }
                    (stored(id, text, meta, Origin::Corpus), v.to_vec())
                })
                .collect();
            store.upsert(docs).context("bulk load")?;
        }
        store.snapshot().context("snapshot")?;
    }
    let (_store, report) = Store::open(dir, options(precision)).context("first open (builds the graph)")?;
    eprintln!("  {}: graph {:?}", dir.display(), report.graph);
    Ok(())
}

fn child(cmd: &mut Command) -> anyhow::Result<Value> {
    let out = cmd.stderr(Stdio::piped()).output().with_context(|| format!("run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{:?} failed: {}", cmd, String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("child output {line:?}"))
}

/// Spawns `rcp-dense serve` on `dir`; seconds until `initialize` is answered and until one
/// text retrieve is.
fn serve_once(dir: &Path) -> anyhow::Result<Value> {
    let mut cmd = Command::new(sibling("rcp-dense"));
    cmd.arg("serve").arg("--data-dir").arg(dir).stderr(Stdio::null());
    let t = Instant::now();
    let mut server = StdioServer::spawn(cmd).context("spawn rcp-dense serve")?;
    let ready_s = t.elapsed().as_secs_f64();
    let result = server.call("retrieve", json!({"query": "pressure distribution on a supersonic wing", "k": K}))?;
    let first_s = t.elapsed().as_secs_f64();
    let hits = result["hits"].as_array().map_or(0, Vec::len);
    if hits != K {
        bail!("the first retrieve answered {hits} hits");
    }
    let rss_mb = rcp_bench::proc::status(server.pid()).rss_kb as f64 / 1024.0;
    server.shutdown()?;
    Ok(json!({"ready_s": ready_s, "first_s": first_s, "rss_mb": rss_mb}))
}

fn median(results: &[Value], key: &str) -> f64 {
    let mut xs: Vec<f64> = results.iter().filter_map(|r| r[key].as_f64()).collect();
    xs.sort_by(f64::total_cmp);
    if xs.is_empty() { f64::NAN } else { xs[xs.len() / 2] }
}

fn run(args: &Args) -> anyhow::Result<()> {
    let (work, _cleanup) = match &args.work_dir {
        Some(d) => (d.clone(), None),
        None => {
            let d = std::env::temp_dir().join(format!("dense_restart-{}", std::process::id()));
            (d.clone(), Some(Cleanup(d)))
        }
    };
    std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    let n = args.n;
    eprintln!("workload: {n} clustered {DIMENSION}-d unit vectors, graph vectors {}", args.precision.name());
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let centroids: Vec<Vec<f32>> = (0..2000).map(|_| rng.unit(DIMENSION)).collect();
    let data = clustered(&mut rng, &centroids, n, 0.08);
    let queries = clustered(&mut rng, &centroids, args.queries.max(1), 0.08);
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    std::fs::write(work.join("queries.f32"), bytes(&queries)).context("write the queries")?;
    let (index_dir, docs_dir) = (work.join("index"), work.join("docs"));
    eprintln!("building the data directories (ids only; {} bytes of text per document) ...", args.text_bytes);
    build_store(&index_dir, &data, 0, args.precision)?;
    if !args.no_serve {
        build_store(&docs_dir, &data, args.text_bytes, args.precision)?;
    }
    let (load_py, build_py) = (work.join("hnswlib_load.py"), work.join("hnswlib_build.py"));
    if let Some(py) = &args.hnswlib_python
        && !work.join("hnswlib.bin").exists()
    {
        eprintln!("building hnswlib's index ...");
        std::fs::write(work.join("data.f32"), bytes(&data)).context("write the vectors")?;
        std::fs::write(&build_py, HNSWLIB_BUILD).context("write the build script")?;
        let p = HnswParams::default();
        let status = Command::new(py)
            .arg(&build_py)
            .arg(&work)
            .arg(n.to_string())
            .arg(p.m.to_string())
            .arg(p.ef_construction.to_string())
            .status()
            .context("run hnswlib's build")?;
        if !status.success() {
            bail!("hnswlib's build failed");
        }
    }
    drop(data);
    std::fs::write(&load_py, HNSWLIB_LOAD).context("write the load script")?;
    let exe = std::env::current_exe().context("locate this executable")?;
    let (mut ours, mut theirs, mut served) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=args.rounds.max(1) {
        eprintln!("round {round}/{} ...", args.rounds.max(1));
        let mut cmd = Command::new(&exe);
        cmd.arg("--child-open").arg(&index_dir).arg("--queries-file").arg(work.join("queries.f32"));
        cmd.arg("--precision").arg(args.precision.name());
        ours.push(child(&mut cmd)?);
        if let Some(py) = &args.hnswlib_python {
            let mut cmd = Command::new(py);
            cmd.arg(&load_py).arg(&work).arg(n.to_string()).arg(EF.to_string()).arg(K.to_string());
            theirs.push(child(&mut cmd)?);
        }
        if !args.no_serve {
            served.push(serve_once(&docs_dir)?);
        }
    }
    report(args, &ours, &theirs, &served);
    Ok(())
}

fn report(args: &Args, ours: &[Value], theirs: &[Value], served: &[Value]) {
    println!(
        "\n## Restart with {} documents ({} graph vectors), median of {} rounds, warm page cache",
        args.n,
        args.precision.name(),
        args.rounds.max(1)
    );
    println!(
        "| index part | load | first answer | RSS after load + 1 query | RSS after {} more | of which file-backed |",
        args.queries
    );
    println!("|---|---|---|---|---|---|");
    let row = |label: &str, r: &[Value]| {
        println!(
            "| {label} | {:.3} s | {:.3} s | {:.0} MB | {:.0} MB | {:.0} MB |",
            median(r, "open_s"),
            median(r, "first_s"),
            median(r, "rss_first_mb"),
            median(r, "rss_after_mb"),
            median(r, "rss_after_file_mb")
        );
    };
    row("rcp-dense store (vectors + graph + ids)", ours);
    if !theirs.is_empty() {
        row("hnswlib load_index", theirs);
        println!(
            "\nours / hnswlib: load {:.2}x, first answer {:.2}x, RSS {:.2}x after one query, {:.2}x after {} \
             ({:.2}x counting anonymous memory only)",
            median(ours, "open_s") / median(theirs, "open_s"),
            median(ours, "first_s") / median(theirs, "first_s"),
            median(ours, "rss_first_mb") / median(theirs, "rss_first_mb"),
            median(ours, "rss_after_mb") / median(theirs, "rss_after_mb"),
            args.queries,
            (median(ours, "rss_after_mb") - median(ours, "rss_after_file_mb"))
                / (median(theirs, "rss_after_mb") - median(theirs, "rss_after_file_mb")),
        );
    }
    if !served.is_empty() {
        println!(
            "\n`rcp-dense serve` with {} bytes of text and 2 filter fields per document, model included: \
             initialize answered after {:.3} s, first text retrieve after {:.3} s, RSS {:.0} MB",
            args.text_bytes,
            median(served, "ready_s"),
            median(served, "first_s"),
            median(served, "rss_mb")
        );
    }
    println!(
        "\ncommand: target/release/dense_restart --n {} --rounds {} --precision {}{}",
        args.n,
        args.rounds.max(1),
        args.precision.name(),
        if theirs.is_empty() { "" } else { " --hnswlib-python PYTHON" }
    );
}
