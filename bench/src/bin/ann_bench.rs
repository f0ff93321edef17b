//! `ann_bench`: the dense engine's ANN backends on one synthetic workload, optionally beside
//! hnswlib (issue #16).
//!
//! The workload: `--n` clustered 384-d unit vectors (2,000 random centroids, Gaussian spread
//! 0.08) and `--queries` queries from the same clusters, seeded; exact top-10 ground truth by
//! the batched exact scan. Each backend runs in its own child process (so its RSS is its own)
//! and reports: build time (every core), RSS after the build (the `f32` vectors included, as
//! the engine holds them), recall@10 and single-thread queries/s at each `--ef` (the beam of
//! `ef` rescored with the exact cosine and cut to 10, as the engine serves a query), and save /
//! load time of the graph. rcp-hnsw and usearch run once per `--precisions` entry. Then the store-level restart:
//! a data directory holding the `--n` documents is opened twice; the first open builds (and
//! saves) the graph, the second is a restart, timed up to its first answered query (backends
//! that save their graph; hnsw_rs rebuilds on every open, so its restart is its build time).
//!
//! With `--builds N` every index is built N times (interleaved across backends) and the figures
//! are the means, with the recall range; a parallel build's recall varies by about ±0.005 at
//! `ef` 64, for hnswlib as for ours.
//!
//! With `--hnswlib-python PATH` (a python with `hnswlib` and `numpy`, e.g. a throwaway venv
//! outside the repository), hnswlib runs on the same vectors in the same run, and with
//! `--faiss-python PATH` (`faiss-cpu` and `numpy`) faiss's `IndexHNSWFlat` does; the
//! equal-recall table (recall@10 0.95, 0.99, 0.995, 0.999) shows our figures as ratios of
//! theirs.
//!
//! With `--svg FILE` the run also draws what it measured, as ann-benchmarks plots it: recall@10
//! (x) against single-thread queries/s (y, log scale), one curve per backend and precision
//! (hnswlib and faiss included when they ran), one point per `--ef`.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin ann_bench
//! target/release/ann_bench --hnswlib-python /tmp/venv/bin/python --faiss-python /tmp/venv/bin/python
//! target/release/ann_bench --n 5000 --queries 100 --svg /tmp/ann.svg     # smoke run
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use rcp_bench::synthetic::{Rng, clustered};
use rcp_dense::ann::{self, AnnIndex, Backend, HnswParams, Precision, by_score, dot};
use rcp_dense::model::DIMENSION;
use rcp_dense::store::{PlannerOptions, Store, StoreOptions, stored};
use rcp_dense::wal::{Origin, f32s};
use serde_json::{Value, json};

const K: usize = 10;

#[derive(Debug, Parser)]
#[command(about = "ANN backends of rcp-dense: build, memory, recall/speed per ef, restart; hnswlib beside")]
struct Args {
    /// Vectors in the collection.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// Queries.
    #[arg(long, default_value_t = 1_000)]
    queries: usize,
    /// Beam widths measured.
    #[arg(long, value_delimiter = ',', default_value = "24,32,48,64,96,128,192,256")]
    ef: Vec<usize>,
    /// HNSW links per node (M).
    #[arg(long, default_value_t = HnswParams::default().m)]
    m: usize,
    /// Beam width while building.
    #[arg(long, default_value_t = HnswParams::default().ef_construction)]
    ef_construction: usize,
    /// Backends to measure.
    #[arg(long, value_delimiter = ',', default_value = "rcp-hnsw,usearch,hnsw-rs")]
    backends: Vec<Backend>,
    /// Element types of the graph's vectors measured (rcp-hnsw and usearch; hnsw_rs is always f32).
    #[arg(long, value_delimiter = ',', default_value = "f16,f32")]
    precisions: Vec<Precision>,
    /// Internal: the precision of a child run.
    #[arg(long, hide = true, default_value = "f16")]
    precision: Precision,
    /// A python with hnswlib and numpy: run hnswlib on the same vectors.
    #[arg(long, value_name = "PATH")]
    hnswlib_python: Option<PathBuf>,
    /// A python with faiss (`faiss-cpu`) and numpy: run faiss's `IndexHNSWFlat` on the same
    /// vectors.
    #[arg(long, value_name = "PATH")]
    faiss_python: Option<PathBuf>,
    /// Builds of each index, interleaved across backends; figures are their means.
    #[arg(long, default_value_t = 1)]
    builds: usize,
    /// Skip the store-level restart measurement.
    #[arg(long)]
    no_restart: bool,
    /// Gaussian spread around the centroids.
    #[arg(long, default_value_t = 0.08)]
    spread: f32,
    /// Also draw the measured rows into this SVG file: recall@10 (x) against single-thread
    /// queries/s (y, log scale), one curve per backend and precision, one point per `--ef`.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Internal: run one backend over the workload in this directory and print JSON.
    #[arg(long, hide = true, value_name = "BACKEND")]
    child: Option<Backend>,
    /// Internal: run the store restart for one backend and print JSON.
    #[arg(long, hide = true, value_name = "BACKEND")]
    child_restart: Option<Backend>,
    /// Internal: the workload directory.
    #[arg(long, hide = true)]
    dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match (args.child, args.child_restart, &args.dir) {
        (Some(b), _, Some(dir)) => run_backend(&args, b, dir).map(|v| println!("{v}")),
        (_, Some(b), Some(dir)) => run_restart(&args, b, dir).map(|v| println!("{v}")),
        _ => run(&args),
    };
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), result)
}

fn write_f32(path: &Path, v: &[f32]) -> anyhow::Result<()> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).with_context(|| format!("write {}", path.display()))
}

fn read_f32(path: &Path) -> anyhow::Result<Vec<f32>> {
    std::fs::read(path).map(|b| f32s(&b)).with_context(|| format!("read {}", path.display()))
}

/// The workload as the children read it.
struct Workload {
    data: Vec<f32>,
    queries: Vec<f32>,
    truth: Vec<Vec<u32>>,
}

fn load_workload(dir: &Path) -> anyhow::Result<Workload> {
    let data = read_f32(&dir.join("data.f32"))?;
    let queries = read_f32(&dir.join("queries.f32"))?;
    let truth_path = dir.join("truth.u32");
    let truth_bytes = std::fs::read(&truth_path).with_context(|| format!("read {}", truth_path.display()))?;
    let truth: Vec<u32> = truth_bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok(Workload { data, queries, truth: truth.chunks(K).map(<[u32]>::to_vec).collect() })
}

/// Resident set size of this process, in MB.
fn rss_mb() -> f64 {
    rcp_bench::proc::status(std::process::id()).rss_kb as f64 / 1024.0
}

fn recall(found: &[Vec<usize>], truth: &[Vec<u32>]) -> f64 {
    let hits: usize =
        found.iter().zip(truth).map(|(f, t)| f.iter().filter(|s| t.contains(&(**s as u32))).count()).sum();
    hits as f64 / (truth.len() * K) as f64
}

fn params(args: &Args) -> HnswParams {
    HnswParams { m: args.m, ef_construction: args.ef_construction, precision: args.precision, ..HnswParams::default() }
}

fn label(backend: Backend, precision: Precision) -> String {
    match backend {
        Backend::HnswRs => backend.name().to_owned(),
        _ => format!("{backend} ({})", precision.name()),
    }
}

/// The top `K` as the engine serves them: the whole beam of `ef` is fetched and rescored with
/// the exact cosine of the `f32` vectors (`Table::search`).
fn served(index: &dyn AnnIndex, data: &[f32], q: &[f32], ef: usize) -> Vec<usize> {
    let beam = ef.max(K);
    let mut found = index.search(q, beam, beam, None);
    for s in &mut found {
        s.score = dot(q, &data[s.slot * DIMENSION..(s.slot + 1) * DIMENSION]);
    }
    found.sort_by(by_score);
    found.iter().take(K).map(|s| s.slot).collect()
}

/// One backend: build, RSS, recall/speed per ef, save/load.
fn run_backend(args: &Args, backend: Backend, dir: &Path) -> anyhow::Result<Value> {
    let w = load_workload(dir)?;
    let params = params(args);
    let t = Instant::now();
    let index = ann::build(backend, params, &w.data, DIMENSION, |_| true)
        .with_context(|| format!("build {}", label(backend, params.precision)))?;
    let build_s = t.elapsed().as_secs_f64();
    let rss = rss_mb();
    let mut efs = Vec::new();
    for &ef in &args.ef {
        let t = Instant::now();
        let found: Vec<Vec<usize>> =
            w.queries.chunks_exact(DIMENSION).map(|q| served(index.as_ref(), &w.data, q, ef)).collect();
        let secs = t.elapsed().as_secs_f64();
        efs.push(json!({"ef": ef, "recall": recall(&found, &w.truth), "qps": w.truth.len() as f64 / secs}));
    }
    let saved = save_and_load(index.as_ref(), params, dir, w.data.len() / DIMENSION)?;
    let (save_s, load_s, graph_mb) = (saved.map(|s| s.save_s), saved.map(|s| s.load_s), saved.map(|s| s.graph_mb));
    Ok(json!({
        "backend": label(backend, params.precision), "build_s": build_s, "rss_mb": rss, "ef": efs,
        "save_s": save_s, "load_s": load_s, "graph_mb": graph_mb,
    }))
}

/// Seconds to save and to load a graph, and its size.
#[derive(Debug, Clone, Copy)]
struct SaveLoad {
    save_s: f64,
    load_s: f64,
    graph_mb: f64,
}

fn save_and_load(index: &dyn AnnIndex, params: HnswParams, dir: &Path, n: usize) -> anyhow::Result<Option<SaveLoad>> {
    if !index.backend().persists() {
        return Ok(None);
    }
    let path = dir.join(format!("graph-{}", index.backend()));
    let t = Instant::now();
    index.save(&path).with_context(|| format!("save the graph to {}", path.display()))?;
    let save_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let loaded = ann::load(index.backend(), params, DIMENSION, n, &path)
        .with_context(|| format!("load the graph from {}", path.display()))?;
    let load_s = t.elapsed().as_secs_f64();
    let mb = std::fs::metadata(&path).map_or(0.0, |m| m.len() as f64 / 1e6);
    drop(loaded);
    let _ = std::fs::remove_file(&path);
    Ok(Some(SaveLoad { save_s, load_s, graph_mb: mb }))
}

/// The store restart: bulk load, first open (builds and saves the graph), then a restart
/// timed until its first query is answered.
fn run_restart(args: &Args, backend: Backend, dir: &Path) -> anyhow::Result<Value> {
    let data = read_f32(&dir.join("data.f32"))?;
    let queries = read_f32(&dir.join("queries.f32"))?;
    let store_dir = dir.join(format!("store-{backend}"));
    let _ = std::fs::remove_dir_all(&store_dir);
    let hnsw = rcp_dense::store::HnswOverride {
        m: Some(args.m),
        ef_construction: Some(args.ef_construction),
        ef_search: None,
        precision: Some(args.precision),
    };
    let base = StoreOptions {
        ann: Some(backend),
        hnsw,
        planner: PlannerOptions::without_full_scan(),
        ..StoreOptions::default()
    };
    {
        let (store, _) = Store::open(&store_dir, StoreOptions { defer_graph: true, ..base })
            .with_context(|| format!("open the store in {}", store_dir.display()))?;
        for (b, rows) in data.chunks(10_000 * DIMENSION).enumerate() {
            let docs = rows
                .chunks_exact(DIMENSION)
                .enumerate()
                .map(|(i, v)| {
                    let id = format!("d{}", b * 10_000 + i);
                    (stored(id, String::new(), Default::default(), Origin::Corpus), v.to_vec())
                })
                .collect();
            store.upsert(docs).context("bulk load the store")?;
        }
        store.snapshot().context("snapshot the store")?;
    }
    drop(data);
    let q = queries.get(..DIMENSION).context("no query")?;
    let mut opens = Vec::new();
    for _ in 0..2 {
        let t = Instant::now();
        let (store, report) =
            Store::open(&store_dir, base).with_context(|| format!("reopen the store in {}", store_dir.display()))?;
        let open_s = t.elapsed().as_secs_f64();
        let (hits, _) = store.read().search(q, K, 64, None, &PlannerOptions::without_full_scan());
        let first_query_s = t.elapsed().as_secs_f64();
        if hits.len() != K {
            bail!("restart answered {} hits", hits.len());
        }
        opens.push(json!({
            "open_s": open_s, "first_query_s": first_query_s, "rss_mb": rss_mb(),
            "graph": format!("{:?}", report.graph),
        }));
    }
    let _ = std::fs::remove_dir_all(&store_dir);
    Ok(json!({"backend": label(backend, args.precision), "first_open": opens[0], "restart": opens[1]}))
}

const HNSWLIB_SCRIPT: &str = r#"
import json, resource, sys, time
import numpy as np
import hnswlib
d, n, nq, k, m, efc = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
efs = [int(x) for x in sys.argv[8].split(",")]
data = np.fromfile(d + "/data.f32", dtype="<f4").reshape(n, 384)
queries = np.fromfile(d + "/queries.f32", dtype="<f4").reshape(nq, 384)
truth = np.fromfile(d + "/truth.u32", dtype="<u4").reshape(nq, k)
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
t = time.perf_counter()
index = hnswlib.Index(space="ip", dim=384)
index.init_index(max_elements=n, ef_construction=efc, M=m)
index.set_num_threads(2)
index.add_items(data, np.arange(n))
build = time.perf_counter() - t
mem = rss()
index.set_num_threads(1)
out = []
for ef in efs:
    index.set_ef(ef)
    t = time.perf_counter()
    labels, _ = index.knn_query(queries, k=k, num_threads=1)
    secs = time.perf_counter() - t
    hits = sum(len(set(labels[i].tolist()) & set(truth[i].tolist())) for i in range(nq))
    out.append({"ef": ef, "recall": hits / (nq * k), "qps": nq / secs})
t = time.perf_counter()
index.save_index(d + "/hnswlib.bin")
save = time.perf_counter() - t
t = time.perf_counter()
loaded = hnswlib.Index(space="ip", dim=384)
try:
    loaded.load_index(d + "/hnswlib.bin", max_elements=n)
    load = time.perf_counter() - t
except RuntimeError as e:  # seen with hnswlib 0.8.0 at 100k: "Index seems to be corrupted"
    print("hnswlib could not load its own saved index: %s" % e, file=sys.stderr)
    load = None
# numpy's exact search, batched (one BLAS matrix product, then a partial sort per query), on
# the first 100 queries as ours; BLAS uses every core unless told otherwise.
def numpy_exact():
    q = queries[:100]
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        scores = q @ data.T
        np.argpartition(-scores, k, axis=1)[:, :k]
        best = max(best, len(q) / (time.perf_counter() - t))
    return best
exact_qps = numpy_exact()
print(json.dumps({"backend": "hnswlib", "build_s": build, "rss_mb": mem, "ef": out, "save_s": save, "load_s": load, "numpy_exact_qps": exact_qps}))
"#;

/// faiss's HNSW (`IndexHNSWFlat`, inner product) on the same vectors: built on every core,
/// searched on one thread (one batch call, as hnswlib's `knn_query` above: no per-query Python
/// overhead), saved and loaded.
const FAISS_SCRIPT: &str = r#"
import json, sys, time
import numpy as np
import faiss
d, n, nq, k, m, efc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
efs = [int(x) for x in sys.argv[7].split(",")]
data = np.fromfile(d + "/data.f32", dtype="<f4").reshape(n, 384)
queries = np.fromfile(d + "/queries.f32", dtype="<f4").reshape(nq, 384)
truth = np.fromfile(d + "/truth.u32", dtype="<u4").reshape(nq, k)
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
t = time.perf_counter()
index = faiss.IndexHNSWFlat(384, m, faiss.METRIC_INNER_PRODUCT)
index.hnsw.efConstruction = efc
index.add(data)
build = time.perf_counter() - t
mem = rss()
faiss.omp_set_num_threads(1)
out = []
for ef in efs:
    index.hnsw.efSearch = ef
    t = time.perf_counter()
    _, found = index.search(queries, k)
    secs = time.perf_counter() - t
    hits = sum(len(set(found[i].tolist()) & set(truth[i].tolist())) for i in range(nq))
    out.append({"ef": ef, "recall": hits / (nq * k), "qps": nq / secs})
t = time.perf_counter()
faiss.write_index(index, d + "/faiss.bin")
save = time.perf_counter() - t
t = time.perf_counter()
faiss.read_index(d + "/faiss.bin")
load = time.perf_counter() - t
print(json.dumps({"backend": "faiss", "build_s": build, "rss_mb": mem, "ef": out, "save_s": save, "load_s": load}))
"#;

fn child(cmd: &mut Command) -> anyhow::Result<Value> {
    let out = cmd.output().with_context(|| format!("run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{:?} failed: {}", cmd, String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("child output {line:?}"))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("ann_bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let result = run_in(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let (n, nq) = (args.n, args.queries);
    eprintln!("workload: {n} clustered {DIMENSION}-d unit vectors, {nq} queries, k={K}");
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let centroids: Vec<Vec<f32>> = (0..2000).map(|_| rng.unit(DIMENSION)).collect();
    let data = clustered(&mut rng, &centroids, n, args.spread);
    let queries = clustered(&mut rng, &centroids, nq, args.spread);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());

    let t = Instant::now();
    let one = nq.min(100);
    for q in queries.chunks_exact(DIMENSION).take(one) {
        std::hint::black_box(ann::exact(&data, DIMENSION, q, K, None, &|_| true));
    }
    let exact_qps = one as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    std::hint::black_box(ann::exact_batch(&data, DIMENSION, &queries[..one * DIMENSION], K, 1));
    let batch_qps = one as f64 / t.elapsed().as_secs_f64();
    // The same 100 queries on every core (numpy's figure below is for these too).
    let t = Instant::now();
    std::hint::black_box(ann::exact_batch(&data, DIMENSION, &queries[..one * DIMENSION], K, threads));
    let batch_all_qps = one as f64 / t.elapsed().as_secs_f64();
    let truth = ann::exact_batch(&data, DIMENSION, &queries, K, threads);
    eprintln!(
        "exact: {exact_qps:.0} q/s one by one, {batch_qps:.0} q/s batched (1 thread), {batch_all_qps:.0} q/s batched ({threads} threads)"
    );

    write_f32(&dir.join("data.f32"), &data)?;
    write_f32(&dir.join("queries.f32"), &queries)?;
    let truth_bytes: Vec<u8> =
        truth.iter().flat_map(|t| t.iter().map(|s| s.slot as u32)).flat_map(u32::to_le_bytes).collect();
    let truth_path = dir.join("truth.u32");
    std::fs::write(&truth_path, truth_bytes).with_context(|| format!("write {}", truth_path.display()))?;
    drop((data, queries, truth));

    let exe = std::env::current_exe().context("locate this executable")?;
    let common = |cmd: &mut Command| {
        cmd.arg("--n").arg(n.to_string()).arg("--queries").arg(nq.to_string());
        cmd.arg("--m").arg(args.m.to_string()).arg("--ef-construction").arg(args.ef_construction.to_string());
        let efs: Vec<String> = args.ef.iter().map(ToString::to_string).collect();
        cmd.arg("--ef").arg(efs.join(",")).arg("--dir").arg(dir);
    };
    let runs: Vec<(Backend, Precision)> = args
        .backends
        .iter()
        .flat_map(|&b| match b {
            Backend::HnswRs => vec![(b, Precision::F32)],
            _ => args.precisions.iter().map(|&p| (b, p)).collect(),
        })
        .collect();
    // Each backend is built `--builds` times, the builds interleaved across backends; a
    // parallel build's recall varies from build to build (±0.005 at ef 64 here, for hnswlib
    // too), so one build each makes an equal-recall ratio a coin toss.
    let builds = args.builds.max(1);
    let mut per_backend: Vec<Vec<Value>> = vec![Vec::new(); runs.len()];
    let mut per_reference = Vec::new();
    let mut per_faiss = Vec::new();
    let faiss_script = dir.join("faiss_bench.py");
    std::fs::write(&faiss_script, FAISS_SCRIPT).with_context(|| format!("write {}", faiss_script.display()))?;
    let script = dir.join("hnswlib_bench.py");
    std::fs::write(&script, HNSWLIB_SCRIPT).with_context(|| format!("write {}", script.display()))?;
    for build in 1..=builds {
        for (i, &(b, p)) in runs.iter().enumerate() {
            eprintln!("{}: build {build}/{builds} and search ...", label(b, p));
            let mut cmd = Command::new(&exe);
            common(&mut cmd);
            per_backend[i].push(child(cmd.arg("--child").arg(b.name()).arg("--precision").arg(p.name()))?);
        }
        if let Some(py) = &args.hnswlib_python {
            eprintln!("hnswlib: build {build}/{builds} and search ...");
            let efs: Vec<String> = args.ef.iter().map(ToString::to_string).collect();
            let mut cmd = Command::new(py);
            cmd.arg(&script).arg("_").arg(dir).arg(n.to_string()).arg(nq.to_string()).arg(K.to_string());
            cmd.arg(args.m.to_string()).arg(args.ef_construction.to_string()).arg(efs.join(","));
            per_reference.push(child(&mut cmd)?);
        }
        if let Some(py) = &args.faiss_python {
            eprintln!("faiss: build {build}/{builds} and search ...");
            let efs: Vec<String> = args.ef.iter().map(ToString::to_string).collect();
            let mut cmd = Command::new(py);
            cmd.arg(&faiss_script).arg(dir).arg(n.to_string()).arg(nq.to_string()).arg(K.to_string());
            cmd.arg(args.m.to_string()).arg(args.ef_construction.to_string()).arg(efs.join(","));
            per_faiss.push(child(&mut cmd)?);
        }
    }
    let mut rows: Vec<Value> = per_backend.iter().map(|b| mean_of(b)).collect();
    let reference = (!per_reference.is_empty()).then(|| mean_of(&per_reference));
    let faiss = (!per_faiss.is_empty()).then(|| mean_of(&per_faiss));
    rows.extend(reference.iter().chain(&faiss).cloned());
    let mut restarts = Vec::new();
    if !args.no_restart {
        // hnsw_rs rebuilds its graph on every open: its restart is its build time above.
        for &(b, p) in runs.iter().filter(|(b, _)| b.persists()) {
            eprintln!("{}: store restart ...", label(b, p));
            let mut cmd = Command::new(&exe);
            common(&mut cmd);
            restarts.push(child(cmd.arg("--child-restart").arg(b.name()).arg("--precision").arg(p.name()))?);
        }
    }
    let references: Vec<&Value> = reference.iter().chain(&faiss).collect();
    report(args, threads, (exact_qps, batch_qps, batch_all_qps), &rows, &references, &restarts);
    if let Some(path) = &args.svg {
        chart::draw(path, args, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// The mean of several builds' results (every number averaged; recall also as min..max).
fn mean_of(results: &[Value]) -> Value {
    let Some(first) = results.first() else { return Value::Null };
    let mean = |get: &dyn Fn(&Value) -> Option<f64>| -> Option<f64> {
        let xs: Vec<f64> = results.iter().filter_map(get).collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    };
    let mut out = first.clone();
    for key in ["build_s", "rss_mb", "save_s", "load_s", "graph_mb", "numpy_exact_qps"] {
        if let Some(m) = mean(&|r| r[key].as_f64()) {
            out[key] = json!(m);
        }
    }
    if let Some(efs) = first["ef"].as_array() {
        let merged: Vec<Value> = (0..efs.len())
            .map(|i| {
                let recalls: Vec<f64> = results.iter().filter_map(|r| r["ef"][i]["recall"].as_f64()).collect();
                let lo = recalls.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = recalls.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                json!({
                    "ef": efs[i]["ef"],
                    "recall": mean(&|r| r["ef"][i]["recall"].as_f64()),
                    "qps": mean(&|r| r["ef"][i]["qps"].as_f64()),
                    "recall_min": lo, "recall_max": hi,
                })
            })
            .collect();
        out["ef"] = json!(merged);
    }
    out["builds"] = json!(results.len());
    out
}

/// Queries/s of a row at recall `target`: the first pair of measured beams whose recalls
/// bracket it, interpolated linearly in recall on log q/s (q/s falls roughly geometrically as
/// the beam doubles). `None` when no measured beam reaches `target`.
fn qps_at_recall(row: &Value, target: f64) -> Option<f64> {
    let points: Vec<(f64, f64)> = row["ef"]
        .as_array()?
        .iter()
        .map(|e| (f(e, "recall"), f(e, "qps")))
        .filter(|(r, q)| r.is_finite() && *q > 0.0)
        .collect();
    if let Some(&(r, q)) = points.first()
        && r >= target
    {
        return Some(q);
    }
    points.windows(2).find(|w| w[0].0 < target && w[1].0 >= target).map(|w| {
        let ((r0, q0), (r1, q1)) = (w[0], w[1]);
        let t = (target - r0) / (r1 - r0);
        (q0.ln() + t * (q1.ln() - q0.ln())).exp()
    })
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(f64::NAN)
}

fn report(
    args: &Args,
    threads: usize,
    exact: (f64, f64, f64),
    rows: &[Value],
    references: &[&Value],
    restarts: &[Value],
) {
    println!(
        "\n## ANN: {} clustered {DIMENSION}-d unit vectors, {} queries, k={K}, M={}, efConstruction={}; mean of {} build(s) each",
        args.n,
        args.queries,
        args.m,
        args.ef_construction,
        args.builds.max(1)
    );
    let efs: Vec<String> = args.ef.iter().map(|e| format!("ef {e} recall / q/s")).collect();
    println!("| backend | build ({threads} threads) | RSS | {} | save | load |", efs.join(" | "));
    println!("|---|---|---|{}---|---|", "---|".repeat(args.ef.len()));
    for r in rows {
        let per_ef: Vec<String> = r["ef"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| match (e["recall_min"].as_f64(), e["recall_max"].as_f64()) {
                        (Some(lo), Some(hi)) if hi > lo => {
                            format!("{:.4} ({lo:.4}..{hi:.4}) / {:.0}", f(e, "recall"), f(e, "qps"))
                        }
                        _ => format!("{:.4} / {:.0}", f(e, "recall"), f(e, "qps")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let opt = |k: &str| r[k].as_f64().map_or("n/a".to_owned(), |s| format!("{s:.2} s"));
        println!(
            "| {} | {:.1} s | {:.0} MB | {} | {} | {} |",
            r["backend"].as_str().unwrap_or("?"),
            f(r, "build_s"),
            f(r, "rss_mb"),
            per_ef.join(" | "),
            opt("save_s"),
            opt("load_s")
        );
    }
    let targets = [0.95, 0.99, 0.995, 0.999];
    let name = |r: &Value| r["backend"].as_str().unwrap_or("?").to_owned();
    let is_reference = |r: &Value| references.iter().any(|h| h["backend"] == r["backend"]);
    println!(
        "\nq/s at equal recall@10 (interpolated between the measured ef on log q/s; - where the curve does not reach it){}:",
        if references.is_empty() { String::new() } else { ", ours as ratios of each reference's".to_owned() }
    );
    let heads: Vec<String> = targets.iter().map(|t| format!("recall {t}")).collect();
    println!("| backend | {} |", heads.join(" | "));
    println!("|---|{}", "---|".repeat(targets.len()));
    for r in rows {
        let cells: Vec<String> = targets
            .iter()
            .map(|&t| match qps_at_recall(r, t) {
                None => "-".to_owned(),
                Some(q) if is_reference(r) => format!("{q:.0}"),
                Some(q) => {
                    let ratios: Vec<String> = references
                        .iter()
                        .filter_map(|h| qps_at_recall(h, t).map(|b| format!("{:.2}x {}", q / b, name(h))))
                        .collect();
                    if ratios.is_empty() { format!("{q:.0}") } else { format!("{q:.0} ({})", ratios.join(", ")) }
                }
            })
            .collect();
        println!("| {} | {} |", name(r), cells.join(" | "));
    }
    for h in references {
        println!(
            "\nRatios to {} at equal ef (q/s: ours / theirs, higher is better; build and RSS: ours / theirs, lower is better):",
            name(h)
        );
        for r in rows.iter().filter(|r| !is_reference(r)) {
            let qps: Vec<String> = args
                .ef
                .iter()
                .enumerate()
                .map(|(i, ef)| format!("ef {ef}: {:.2}x", f(&r["ef"][i], "qps") / f(&h["ef"][i], "qps")))
                .collect();
            println!(
                "- {}: build {:.2}x, RSS {:.2}x, q/s {}",
                name(r),
                f(r, "build_s") / f(h, "build_s"),
                f(r, "rss_mb") / f(h, "rss_mb"),
                qps.join(", ")
            );
        }
    }
    println!(
        "\nExact search (1 thread unless noted): {:.0} q/s one query at a time, {:.0} q/s batched, {:.0} q/s batched on {threads} threads",
        exact.0, exact.1, exact.2
    );
    if let Some(numpy) = references.iter().find_map(|h| h["numpy_exact_qps"].as_f64()) {
        println!(
            "numpy exact, batched (BLAS on every core): {numpy:.0} q/s; ours batched on {threads} threads is {:.2}x",
            exact.2 / numpy
        );
    }
    if !restarts.is_empty() {
        println!("\n## Store restart with {} documents (open = snapshot + graph; first query included)", args.n);
        println!("| backend | first open | first open RSS | restart | restart RSS |");
        println!("|---|---|---|---|---|");
        for r in restarts {
            println!(
                "| {} | {:.2} s | {:.0} MB | {:.2} s | {:.0} MB |",
                r["backend"].as_str().unwrap_or("?"),
                f(&r["first_open"], "first_query_s"),
                f(&r["first_open"], "rss_mb"),
                f(&r["restart"], "first_query_s"),
                f(&r["restart"], "rss_mb"),
            );
        }
    }
    println!(
        "\ncommand: target/release/ann_bench --n {} --queries {} --builds {}",
        args.n,
        args.queries,
        args.builds.max(1)
    );
}

/// The recall/throughput picture of `--svg`, drawn with plotters' SVG backend. Its text goes
/// into the file as SVG `<text>` for the viewer to set in its own sans-serif; plotters sizes it
/// with a built-in estimate, so no font is read at build or run time.
mod chart {
    use rcp_bench::chart::{log_ticks, marker, thousands, titled, today};
    use std::path::Path;

    use anyhow::{anyhow, bail};
    use plotters::prelude::*;
    use serde_json::Value;

    use super::{Args, DIMENSION, K};

    /// Series colours (matplotlib's `tab10`), in the order of the rows.
    const COLOURS: [RGBColor; 6] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];

    /// One measured curve: its label and its (recall, q/s) points in `ef` order.
    type Curve = (String, Vec<(f64, f64)>);

    /// Draws recall@10 (x) against single-thread q/s (y, log scale), a curve per row.
    pub(super) fn draw(path: &Path, args: &Args, rows: &[Value]) -> anyhow::Result<()> {
        let curves: Vec<Curve> = rows
            .iter()
            .map(|r| {
                let points = r["ef"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| Some((e["recall"].as_f64()?, e["qps"].as_f64()?)))
                    .filter(|(r, q)| r.is_finite() && q.is_finite() && *q > 0.0)
                    .collect();
                (r["backend"].as_str().unwrap_or("?").to_owned(), points)
            })
            .filter(|(_, points): &Curve| !points.is_empty())
            .collect();
        let all = || curves.iter().flat_map(|(_, p)| p.iter().copied());
        let Some(recall_min) = all().map(|p| p.0).reduce(f64::min) else { bail!("no measured point to draw") };
        let qps_min = all().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let qps_max = all().map(|p| p.1).fold(0.0, f64::max);
        // x from the hundredth below the lowest recall to just past 1; y a quarter beyond both ends.
        let x_lo = (((recall_min - 0.002) * 100.0).floor() / 100.0).max(0.0);
        let x_hi = 1.0 + (1.0 - x_lo) * 0.02;
        let (y_lo, y_hi) = (qps_min / 1.25, qps_max * 1.25);

        let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
        let plotting = || -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
            root.fill(&WHITE)?;
            let area = titled(
                &root,
                "Recall@10 against queries per second, one thread (up and to the right is better)",
                &format!(
                    "{} clustered {DIMENSION}-d unit vectors, {} queries, k={K}, M={}, efConstruction={}, \
                     mean of {} build(s) · {}",
                    thousands(args.n as f64),
                    thousands(args.queries as f64),
                    args.m,
                    args.ef_construction,
                    args.builds.max(1),
                    today()
                ),
            )?;
            let mut chart = ChartBuilder::on(&area)
                .margin(16)
                .x_label_area_size(48)
                .y_label_area_size(72)
                .build_cartesian_2d(x_lo..x_hi, (y_lo..y_hi).log_scale().with_key_points(log_ticks(y_lo, y_hi)))?;
            chart
                .configure_mesh()
                .x_desc("recall@10")
                .y_desc("queries/s, one thread (log scale)")
                .x_label_formatter(&|x| decimal(*x))
                .y_label_formatter(&|y| thousands(*y))
                .label_style(("sans-serif", 16))
                .axis_desc_style(("sans-serif", 18))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            for (i, (name, points)) in curves.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                let line = colour.stroke_width(2);
                chart.draw_series(LineSeries::new(points.iter().copied(), line))?;
                chart
                    .draw_series(
                        points.iter().map(|&p| EmptyElement::at(p) + Polygon::new(marker(i), colour.filled())),
                    )?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(-10, 0), (10, 0)], line)
                            + Polygon::new(marker(i), colour.filled())
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerLeft)
                .margin(12)
                .label_font(("sans-serif", 17))
                .background_style(WHITE.mix(0.9))
                .border_style(RGBColor(160, 160, 160))
                .draw()?;
            root.present()
        };
        plotting().map_err(|e| anyhow!("draw {}: {e}", path.display()))
    }

    /// A recall tick: at least two decimals, at most four, no trailing zeros past two.
    fn decimal(v: f64) -> String {
        let s = format!("{v:.4}");
        let trimmed = s.trim_end_matches('0');
        let dot = trimmed.find('.').unwrap_or(trimmed.len());
        if trimmed.len() - dot < 3 { format!("{v:.2}") } else { trimmed.to_owned() }
    }
}
