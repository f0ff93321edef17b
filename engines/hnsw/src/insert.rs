//! Inserting: draw the node's level, publish its vector, pick its neighbours level by level
//! with the paper's heuristic, then link them back to it, in parallel under striped locks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::Precision;
use crate::beam::Cand;
use crate::error::Error;
use crate::graph::{Hnsw, LOCK_STRIPES, MAX_LEVEL, Upper, pack, unpack};
use crate::table::{self, CLAIMED, Row, Table};

/// Takes a stripe (or the grow lock); a poisoned lock guards no data, so it is taken anyway.
pub(crate) fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hnsw {
    /// Inserts many `(vector, slot)` rows on `threads` threads (each takes the next row when it
    /// is free, so the work stays balanced). Stops at the first error. A batch that is at least
    /// an eighth of the graph is followed by [`Hnsw::relink_unreachable`] (a scan of every
    /// level-0 list, so smaller batches leave it to the next large one).
    pub fn insert_many(&self, rows: &[(&[f32], usize)], threads: usize) -> Result<(), Error> {
        self.insert_batch(rows, threads)?;
        if rows.len() * 8 >= self.len.load(Ordering::Acquire) {
            self.relink_unreachable();
        }
        Ok(())
    }

    fn insert_batch(&self, rows: &[(&[f32], usize)], threads: usize) -> Result<(), Error> {
        if threads <= 1 || rows.len() < 2 * threads {
            return rows.iter().try_for_each(|&(v, slot)| self.insert(v, slot));
        }
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(v, slot)) = rows.get(i) else { return Ok(()) };
                            if let Err(e) = self.insert(v, slot) {
                                next.store(rows.len(), Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })
    }

    /// Inserts `vector` (unit length, `dim` long) as the node of `slot`.
    pub fn insert(&self, vector: &[f32], slot: usize) -> Result<(), Error> {
        if vector.len() != self.dim {
            return Err(Error::Dimension { got: vector.len(), want: self.dim });
        }
        if slot >= Table::CAPACITY {
            return Err(Error::Capacity(slot));
        }
        let id = slot as u32;
        let record = self.table.ensure(id).ok_or(Error::Capacity(slot))?;
        if record[0].compare_exchange(0, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(Error::Duplicate(slot));
        }
        let level = self.level_of(id);
        self.table.write_vector(record, vector);
        // The codes are made from the vector as stored, as a load makes them from the file.
        match self.params.precision {
            Precision::F32 => self.write_coarse(id, vector),
            Precision::F16 => {
                let stored: Vec<f32> = vector.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect();
                self.write_coarse(id, &stored);
            }
        }
        if level > 0 {
            let lists = table::zeroed_words(level * (self.params.m + 1));
            self.upper.write().unwrap_or_else(|p| p.into_inner()).insert(id, lists);
        }
        record[0].store(level as u32 + 1, Ordering::Release);
        self.extent.fetch_max(slot + 1, Ordering::AcqRel);
        self.len.fetch_add(1, Ordering::AcqRel);
        self.link(vector, id, level);
        Ok(())
    }

    /// Links a published node into the graph.
    fn link(&self, q: &[f32], id: u32, level: usize) {
        let mut growing = None;
        let (entry, top) = loop {
            let packed = self.entry.load(Ordering::Acquire);
            match unpack(packed) {
                // Above the top: take the lock, then read the entry point again.
                Some((_, top)) if level > top && growing.is_none() => growing = Some(lock(&self.grow)),
                Some(e) => break e,
                None => {
                    if self.entry.compare_exchange(0, pack(id, level), Ordering::AcqRel, Ordering::Acquire).is_ok() {
                        return;
                    }
                }
            }
        };
        let mut cur = Cand { d: 1.0 - self.dot_query(q, entry), id: entry };
        if top > level {
            let upper = self.upper.read().unwrap_or_else(|p| p.into_inner());
            for l in (level + 1..=top).rev() {
                self.greedy(q, &mut cur, l, &upper);
            }
        }
        // First the node's own lists at every level, while nothing links to it yet; only then
        // the links to it. Another insert can reach the node only through those, so it never
        // walks a node whose lists are still being written (it would find no neighbours there,
        // link to that node alone, and lose that one link when the node's list is pruned).
        let mut visited = self.checkout_visited();
        let mut chosen: Vec<(usize, Vec<Cand>)> = Vec::with_capacity(level.min(top) + 1);
        for l in (0..=level.min(top)).rev() {
            let guard = (l > 0).then(|| self.upper.read().unwrap_or_else(|p| p.into_inner()));
            let upper = guard.as_deref();
            visited.reset(self.extent.load(Ordering::Acquire));
            let mut found = self
                .search_level(q, cur, self.params.ef_construction, (l, upper), None, &mut visited, false)
                .into_sorted_vec();
            found.retain(|c| c.id != id);
            // At level 0 the node keeps up to `m0` (2M) neighbours of its own, as faiss does,
            // where hnswlib keeps M: the extra out-links cost a few distances per expansion
            // and buy a graph whose recall at a given beam is far higher (100k x 384-d, M 16:
            // recall 0.976 instead of 0.925 at ef 32, 0.9999 instead of 0.9994 at the top).
            let cap = if l == 0 { self.m0 } else { self.params.m };
            let kept = self.select(&found, cap);
            if let Some((count, links)) = self.links(id, l, upper) {
                let _g = lock(self.stripe(id));
                for (link, k) in links.iter().zip(&kept) {
                    link.store(k.id, Ordering::Release);
                }
                count.store(kept.len().min(links.len()) as u32, Ordering::Release);
            }
            if let Some(&nearest) = found.first() {
                cur = nearest;
            }
            chosen.push((l, kept));
        }
        for (l, kept) in chosen {
            let guard = (l > 0).then(|| self.upper.read().unwrap_or_else(|p| p.into_inner()));
            // Links back from the nearest M only: linking back from all 2M doubles the
            // re-pruning of full lists, the bulk of a build's time, for no recall measured.
            for k in kept.iter().take(self.params.m) {
                self.connect(k.id, id, l, guard.as_deref());
            }
        }
        self.checkin_visited(visited);
        // `growing` is held until the entry point names this node.
        if level > top {
            let mut packed = self.entry.load(Ordering::Acquire);
            while unpack(packed).is_some_and(|(_, t)| t < level) {
                match self.entry.compare_exchange(packed, pack(id, level), Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(now) => packed = now,
                }
            }
        }
    }

    /// The level a slot's node is drawn at: a hash of the slot, so the same slots always give
    /// the same levels, whatever order (or threads) they are inserted in.
    fn level_of(&self, slot: u32) -> usize {
        let mut x = (slot as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        let u = ((x >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() * self.level_mult) as usize).min(MAX_LEVEL)
    }

    /// The write lock of `slot`'s neighbour lists.
    pub(crate) fn stripe(&self, slot: u32) -> &Mutex<()> {
        &self.locks[slot as usize % LOCK_STRIPES]
    }

    /// `v(a) · v(b)` between two nodes; `-inf` if either holds no published node.
    pub(crate) fn dot_nodes(&self, a: u32, b: u32) -> f32 {
        let row = |s: u32| self.table.get(s).and_then(|r| self.table.row(r));
        match (row(a), row(b)) {
            (Some(Row::F32(x)), Some(Row::F32(y))) => self.simd.dot_f32(x, y),
            (Some(Row::F16(x)), Some(Row::F16(y))) => self.simd.dot_f16(x, y),
            _ => f32::NEG_INFINITY,
        }
    }

    /// The heuristic of the HNSW paper (and hnswlib): from candidates sorted nearest first, keep
    /// one only if it is nearer to the base than to every candidate already kept, up to `m`.
    fn select(&self, sorted: &[Cand], m: usize) -> Vec<Cand> {
        let mut kept: Vec<Cand> = Vec::with_capacity(m);
        for &c in sorted {
            if kept.len() >= m {
                break;
            }
            if kept.iter().all(|k| 1.0 - self.dot_nodes(c.id, k.id) >= c.d) {
                kept.push(c);
            }
        }
        kept
    }

    /// Adds `new` to the list of `slot` at `level`; a full list is re-pruned by [`Hnsw::select`].
    fn connect(&self, slot: u32, new: u32, level: usize, upper: Option<&Upper>) {
        let _g = lock(self.stripe(slot));
        let Some((count, links)) = self.links(slot, level, upper) else { return };
        let n = (count.load(Ordering::Acquire) as usize).min(links.len());
        if links[..n].iter().any(|l| l.load(Ordering::Relaxed) == new) {
            return;
        }
        if n < links.len() {
            links[n].store(new, Ordering::Release);
            count.store(n as u32 + 1, Ordering::Release);
            return;
        }
        let mut cands: Vec<Cand> = links
            .iter()
            .map(|l| l.load(Ordering::Acquire))
            .chain([new])
            .map(|id| Cand { d: 1.0 - self.dot_nodes(slot, id), id })
            .collect();
        cands.sort_unstable();
        let kept = self.select(&cands, links.len());
        for (link, k) in links.iter().zip(&kept) {
            link.store(k.id, Ordering::Release);
        }
        count.store(kept.len() as u32, Ordering::Release);
    }
}
