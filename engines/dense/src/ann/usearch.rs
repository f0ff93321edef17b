//! The [`usearch`] backend: an HNSW graph with flat neighbour lists and SIMD distance kernels
//! chosen at run time, which saves its graph to a file and loads it back.
//!
//! usearch serves each concurrent call from one of a fixed number of per-thread search
//! contexts reserved up front; a [`Gate`] keeps the number of calls in flight within them.
//! The beam width of a search is its result count (the index's own `expansion_search` is 1),
//! so every call chooses its `ef`.

use std::path::Path;
use std::sync::{Condvar, Mutex, RwLock, RwLockReadGuard};

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::{
    AnnError, AnnIndex, Backend, HnswParams, Precision, SEQUENTIAL_BUILD_MAX, Scored, build_threads, by_score,
};

/// Search contexts reserved: enough for every core twice over, at least 8.
fn contexts() -> usize {
    (build_threads() * 2).max(8)
}

/// A counting semaphore: at most `limit` holders at once.
#[derive(Debug)]
struct Gate {
    free: Mutex<usize>,
    freed: Condvar,
}

struct Permit<'a>(&'a Gate);

impl Gate {
    fn new(limit: usize) -> Self {
        Self { free: Mutex::new(limit), freed: Condvar::new() }
    }

    fn enter(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Permit(self)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// An HNSW graph built with `usearch` (inner-product metric, `f32` vectors).
///
/// The native index is created on the first insert (so creating an empty one cannot fail)
/// and sits behind a lock taken for writing only to grow its capacity.
pub struct UsearchIndex {
    index: RwLock<Option<Index>>,
    params: HnswParams,
    dim: usize,
    /// Capacity reserved when the native index is created.
    initial: usize,
    gate: Gate,
}

impl std::fmt::Debug for UsearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsearchIndex").field("params", &self.params).field("nodes", &self.len()).finish()
    }
}

fn scalar_kind(precision: Precision) -> ScalarKind {
    match precision {
        Precision::F32 => ScalarKind::F32,
        Precision::F16 => ScalarKind::F16,
    }
}

fn backend_error(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> AnnError {
    AnnError::Backend { backend: Backend::Usearch, source: e.into() }
}

impl UsearchIndex {
    /// An empty index for `dim`-dimensional vectors, sized for about `capacity` nodes on its
    /// first insert.
    pub fn new(params: HnswParams, dim: usize, capacity: usize) -> Self {
        Self { index: RwLock::new(None), params, dim, initial: capacity, gate: Gate::new(contexts()) }
    }

    fn options(&self) -> IndexOptions {
        IndexOptions {
            dimensions: self.dim,
            metric: MetricKind::IP,
            quantization: scalar_kind(self.params.precision),
            connectivity: self.params.m.clamp(2, 256),
            expansion_add: self.params.ef_construction.max(1),
            expansion_search: 1,
            multi: false,
        }
    }

    /// Loads a graph saved by [`AnnIndex::save`].
    pub fn load(params: HnswParams, dim: usize, path: &Path) -> Result<Self, AnnError> {
        let this = Self::new(params, dim, 0);
        let path_str = path.to_str().ok_or_else(|| backend_error(format!("{}: not UTF-8", path.display())))?;
        let meta = Index::metadata(path_str).map_err(backend_error)?;
        let quantization = scalar_kind(params.precision);
        if meta.dimensions != dim as u64
            || meta.metric != MetricKind::IP
            || meta.multi
            || meta.quantization != quantization
        {
            return Err(AnnError::Mismatch(format!(
                "{} dimensions, metric {:?}, {:?} vectors; expected {dim}, inner product, {quantization:?}",
                meta.dimensions, meta.metric, meta.quantization
            )));
        }
        let index = Index::new(&this.options()).map_err(backend_error)?;
        index.load(path_str).map_err(backend_error)?;
        index.change_expansion_add(params.ef_construction.max(1));
        index.change_expansion_search(1);
        index.reserve_capacity_and_threads(index.size().max(1024), contexts()).map_err(backend_error)?;
        *this.index.write().unwrap_or_else(|p| p.into_inner()) = Some(index);
        Ok(this)
    }

    fn read(&self) -> RwLockReadGuard<'_, Option<Index>> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes room for `more` nodes: creates the index or doubles its capacity as needed.
    fn reserve(&self, more: usize) -> Result<(), AnnError> {
        let fits = |index: &Option<Index>| index.as_ref().is_some_and(|i| i.size() + more <= i.capacity());
        if fits(&self.read()) {
            return Ok(());
        }
        let mut guard = self.index.write().unwrap_or_else(|p| p.into_inner());
        if fits(&guard) {
            return Ok(());
        }
        if guard.is_none() {
            *guard = Some(Index::new(&self.options()).map_err(backend_error)?);
        }
        let index = guard.as_ref().ok_or_else(|| backend_error("index missing"))?;
        let capacity = (index.size() + more).max(index.capacity() * 2).max(self.initial).max(1024);
        index.reserve_capacity_and_threads(capacity, contexts()).map_err(backend_error)
    }

    fn add(&self, index: &Index, vector: &[f32], slot: usize) -> Result<(), AnnError> {
        let _permit = self.gate.enter();
        index.add(slot as u64, vector).map_err(backend_error)
    }
}

impl AnnIndex for UsearchIndex {
    fn backend(&self) -> Backend {
        Backend::Usearch
    }

    fn params(&self) -> HnswParams {
        self.params
    }

    fn len(&self) -> usize {
        self.read().as_ref().map_or(0, Index::size)
    }

    fn insert(&self, vector: &[f32], slot: usize) -> Result<(), AnnError> {
        self.reserve(1)?;
        let guard = self.read();
        let index = guard.as_ref().ok_or_else(|| backend_error("index missing"))?;
        self.add(index, vector, slot)
    }

    fn insert_many(&self, rows: &[(&[f32], usize)]) -> Result<(), AnnError> {
        self.reserve(rows.len())?;
        let guard = self.read();
        let index = guard.as_ref().ok_or_else(|| backend_error("index missing"))?;
        if rows.len() <= SEQUENTIAL_BUILD_MAX {
            return rows.iter().try_for_each(|&(v, slot)| self.add(index, v, slot));
        }
        let threads = build_threads();
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        rows.iter().skip(t).step_by(threads).try_for_each(|&(v, slot)| self.add(index, v, slot))
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })
    }

    fn search(&self, query: &[f32], want: usize, ef: usize, keep: Option<&dyn Fn(usize) -> bool>) -> Vec<Scored> {
        let guard = self.read();
        let Some(index) = guard.as_ref().filter(|i| want > 0 && i.size() > 0) else { return Vec::new() };
        let beam = ef.max(want);
        let found = {
            let _permit = self.gate.enter();
            match keep {
                None => index.search(query, beam),
                Some(keep) => index.filtered_search(query, beam, |key| keep(key as usize)),
            }
        };
        let matches = match found {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "usearch search failed; the caller falls back to an exact scan");
                return Vec::new();
            }
        };
        let mut out: Vec<Scored> = matches
            .keys
            .iter()
            .zip(&matches.distances)
            .map(|(&k, &d)| Scored { slot: k as usize, score: 1.0 - d })
            .collect();
        out.sort_by(by_score);
        out.truncate(want);
        out
    }

    fn save(&self, path: &Path) -> Result<(), AnnError> {
        let path_str = path.to_str().ok_or_else(|| backend_error(format!("{}: not UTF-8", path.display())))?;
        let guard = self.read();
        match guard.as_ref() {
            Some(index) => index.save(path_str).map_err(backend_error),
            // Nothing inserted yet: an index with no node saves as well as any.
            None => {
                drop(guard);
                self.reserve(0)?;
                self.save(path)
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.read().as_ref().map_or(0, Index::memory_usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::random_unit;

    #[test]
    fn grows_saves_and_loads() {
        let dim = 8;
        let v = random_unit(3000, dim, 21);
        let index = UsearchIndex::new(HnswParams::default(), dim, 0);
        assert!(index.is_empty());
        assert!(index.search(&v[..dim], 3, 16, None).is_empty());
        for (slot, row) in v.chunks_exact(dim).enumerate() {
            index.insert(row, slot).unwrap();
        }
        assert_eq!(index.len(), 3000);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.usearch");
        index.save(&path).unwrap();
        let loaded = UsearchIndex::load(HnswParams::default(), dim, &path).unwrap();
        assert_eq!(loaded.len(), 3000);
        let q = &v[7 * dim..8 * dim];
        assert_eq!(loaded.search(q, 5, 32, None), index.search(q, 5, 32, None));
        loaded.insert(q, 3000).unwrap();
        assert_eq!(loaded.search(q, 2, 32, None).len(), 2);
        let wrong_dim = UsearchIndex::load(HnswParams::default(), dim * 2, &path).unwrap_err();
        assert!(matches!(wrong_dim, AnnError::Mismatch(_)), "{wrong_dim}");
        std::fs::write(&path, b"not a graph").unwrap();
        assert!(UsearchIndex::load(HnswParams::default(), dim, &path).is_err());
    }

    #[test]
    fn gate_bounds_concurrency() {
        let gate = Gate::new(2);
        let a = gate.enter();
        let _b = gate.enter();
        assert_eq!(*gate.free.lock().unwrap(), 0);
        drop(a);
        assert_eq!(*gate.free.lock().unwrap(), 1);
    }
}
