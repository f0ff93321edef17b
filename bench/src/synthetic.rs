//! Seeded synthetic vectors for the ANN benchmarks: a tiny deterministic generator and
//! clustered unit vectors, so every binary measures the same workload for the same seed.

use rcp_dense::embedder::normalize;

/// A tiny deterministic generator (xorshift64*), Gaussian by Box–Muller.
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal.
    pub fn gauss(&mut self) -> f32 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }

    /// A random unit vector of `dim` components.
    pub fn unit(&mut self, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|_| self.gauss()).collect();
        normalize(&mut v);
        v
    }
}

/// `n` unit vectors, each a random one of `centroids` plus Gaussian noise of `spread`, as one
/// flat row-major table.
pub fn clustered(rng: &mut Rng, centroids: &[Vec<f32>], n: usize, spread: f32) -> Vec<f32> {
    let dim = centroids.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = &centroids[(rng.uniform() * centroids.len() as f64) as usize % centroids.len()];
        let mut v: Vec<f32> = c.iter().map(|x| x + spread * rng.gauss()).collect();
        normalize(&mut v);
        out.extend(v);
    }
    out
}
