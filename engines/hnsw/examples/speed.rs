//! A quick single-thread speed probe of the search path, without the dense engine: clustered
//! 384-d unit vectors (the same generator and seed as `ann_bench`), the graph built once and
//! cached in a file, then recall@10 and q/s per `ef` with the beam rescored in exact `f32`, as
//! the engine serves a query.
//!
//! ```sh
//! cargo run --release -p rcp-hnsw --example speed -- 100000 1000 /tmp/hnsw-speed f16
//! ```

use std::path::PathBuf;
use std::time::Instant;

use rcp_hnsw::{Hnsw, Params, Precision};

const DIM: usize = 384;
const K: usize = 10;

struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

fn clustered(rng: &mut Rng, centroids: &[Vec<f32>], n: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(n * DIM);
    for _ in 0..n {
        let c = &centroids[(rng.uniform() * centroids.len() as f64) as usize % centroids.len()];
        let mut v: Vec<f32> = c.iter().map(|x| x + 0.08 * rng.gauss()).collect();
        normalize(&mut v);
        out.extend(v);
    }
    out
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    rcp_hnsw::kernels::Simd::detect().dot_f32(a, b)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let nq: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(500);
    let cache = PathBuf::from(args.get(3).cloned().unwrap_or_else(|| "/tmp/hnsw-speed".into()));
    let precision = if args.get(4).is_some_and(|s| s == "f32") { Precision::F32 } else { Precision::F16 };
    let efs: Vec<usize> = args
        .get(5)
        .map_or(vec![24, 32, 48, 64, 96, 128, 192, 256], |s| s.split(',').filter_map(|x| x.parse().ok()).collect());
    let rounds: usize = args.get(6).and_then(|s| s.parse().ok()).unwrap_or(1);
    std::fs::create_dir_all(&cache).expect("cache dir");
    let exact = std::env::var("HNSW_EXACT").is_ok();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let centroids: Vec<Vec<f32>> = (0..2000)
        .map(|_| {
            let mut v: Vec<f32> = (0..DIM).map(|_| rng.gauss()).collect();
            normalize(&mut v);
            v
        })
        .collect();
    let data = clustered(&mut rng, &centroids, n);
    let queries = clustered(&mut rng, &centroids, nq);
    let params = Params { precision, ..Params::default() };
    let graph_path = cache.join(format!("graph-{n}-{precision:?}"));
    let t = Instant::now();
    let graph = match Hnsw::load(&graph_path, DIM, params) {
        Ok(g) => {
            eprintln!("loaded in {:.3} s", t.elapsed().as_secs_f64());
            g
        }
        Err(e) => {
            eprintln!("building ({e})");
            let g = Hnsw::new(DIM, params);
            let rows: Vec<(&[f32], usize)> = data.chunks_exact(DIM).enumerate().map(|(i, v)| (v, i)).collect();
            let t = Instant::now();
            g.insert_many(&rows, 2).expect("build");
            eprintln!("built in {:.1} s", t.elapsed().as_secs_f64());
            g.save(&graph_path).expect("save");
            g
        }
    };
    graph.set_int8_walk(!exact);
    eprintln!("int8 walk: {}", graph.int8_walk());
    let truth_path = cache.join(format!("truth-{n}-{nq}"));
    let truth: Vec<Vec<u32>> = match std::fs::read(&truth_path) {
        Ok(b) if b.len() == nq * K * 4 => b
            .chunks_exact(4 * K)
            .map(|c| c.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect())
            .collect(),
        _ => {
            let t: Vec<Vec<u32>> = queries
                .chunks_exact(DIM)
                .map(|q| {
                    let mut s: Vec<(f32, u32)> =
                        data.chunks_exact(DIM).enumerate().map(|(i, v)| (dot(q, v), i as u32)).collect();
                    s.select_nth_unstable_by(K, |a, b| b.0.total_cmp(&a.0));
                    s[..K].iter().map(|x| x.1).collect()
                })
                .collect();
            let bytes: Vec<u8> = t.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
            std::fs::write(&truth_path, bytes).expect("write truth");
            t
        }
    };
    for _ in 0..rounds {
        for &ef in &efs {
            let t = Instant::now();
            let mut hits = 0;
            for (q, tr) in queries.chunks_exact(DIM).zip(&truth) {
                let beam = ef.max(K);
                let mut found = graph.search(q, beam, beam, None);
                for s in &mut found {
                    s.1 = dot(q, &data[s.0 * DIM..(s.0 + 1) * DIM]);
                }
                found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                hits += found.iter().take(K).filter(|s| tr.contains(&(s.0 as u32))).count();
            }
            let secs = t.elapsed().as_secs_f64();
            println!("ef {ef:4} recall {:.4} q/s {:.0}", hits as f64 / (nq * K) as f64, nq as f64 / secs);
        }
    }
}
