//! Keeping every node reachable at level 0. A full neighbour list re-pruned by the heuristic
//! drops links, and a node whose every incoming link was dropped that way is never visited by
//! a search again: its document is stored but can never be found. After a bulk insert the
//! graph is scanned once and each such node is linked from a few of the nodes a search for its
//! own vector ends at, each in place of a link whose target other nodes still reach.

use std::sync::atomic::Ordering;

use crate::graph::{Hnsw, unpack};
use crate::insert::lock;
use crate::table::{Row, published_level};

/// How many of the nodes a search for an unreachable node's vector ends at link it back.
const ADOPTERS: usize = 3;

impl Hnsw {
    /// Level-0 nodes (not the entry point) that no other node links to.
    pub fn unreachable(&self) -> Vec<u32> {
        self.orphans(&self.incoming())
    }

    /// Links every unreachable level-0 node from up to three of the nodes a search for its
    /// vector ends at; returns how many were relinked. Runs after a bulk insert
    /// ([`Hnsw::insert_many`]); searches may run meanwhile, inserts must not.
    pub fn relink_unreachable(&self) -> usize {
        let mut incoming = self.incoming();
        let mut relinked = 0;
        for orphan in self.orphans(&incoming) {
            // Adopted by the nodes a search for its own vector ends at: those the search
            // reaches, so the node is found where it is looked for.
            let Some(q) = self.vector_f32(orphan) else { continue };
            let near = self.search(&q, ADOPTERS + 1, self.params.ef_construction, None);
            let adopted = near
                .into_iter()
                .map(|(slot, _)| slot as u32)
                .filter(|&t| t != orphan && self.adopt(t, orphan, &mut incoming))
                .take(ADOPTERS)
                .count();
            if adopted > 0 {
                relinked += 1;
            }
        }
        relinked
    }

    /// Links `orphan` from `slot`: into a free place, or instead of the farthest link whose
    /// target keeps another incoming link.
    fn adopt(&self, slot: u32, orphan: u32, incoming: &mut [u32]) -> bool {
        let _g = lock(self.stripe(slot));
        let Some((count, links)) = self.links(slot, 0, None) else { return false };
        let n = (count.load(Ordering::Acquire) as usize).min(links.len());
        if n < links.len() {
            links[n].store(orphan, Ordering::Release);
            count.store(n as u32 + 1, Ordering::Release);
            incoming[orphan as usize] += 1;
            return true;
        }
        let farthest = links[..n]
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.load(Ordering::Acquire)))
            .filter(|&(_, t)| incoming.get(t as usize).is_some_and(|&c| c > 1))
            .map(|(i, t)| (i, t, 1.0 - self.dot_nodes(slot, t)))
            .max_by(|a, b| a.2.total_cmp(&b.2));
        let Some((i, target, _)) = farthest else { return false };
        links[i].store(orphan, Ordering::Release);
        incoming[target as usize] -= 1;
        incoming[orphan as usize] += 1;
        true
    }

    /// Published nodes other than the entry point with no incoming link in `incoming`.
    fn orphans(&self, incoming: &[u32]) -> Vec<u32> {
        let entry = unpack(self.entry.load(Ordering::Acquire)).map(|(e, _)| e);
        (0..incoming.len() as u32)
            .filter(|&s| incoming[s as usize] == 0 && self.published(s) && Some(s) != entry)
            .collect()
    }

    /// Incoming level-0 links per slot.
    fn incoming(&self) -> Vec<u32> {
        let extent = self.extent.load(Ordering::Acquire);
        let mut incoming = vec![0u32; extent];
        for slot in 0..extent as u32 {
            if !self.published(slot) {
                continue;
            }
            let Some((count, links)) = self.links(slot, 0, None) else { continue };
            let n = (count.load(Ordering::Acquire) as usize).min(links.len());
            for l in &links[..n] {
                if let Some(c) = incoming.get_mut(l.load(Ordering::Acquire) as usize) {
                    *c += 1;
                }
            }
        }
        incoming
    }

    /// The vector of a published node, as `f32`.
    pub(crate) fn vector_f32(&self, slot: u32) -> Option<Vec<f32>> {
        Some(match self.table.row(self.table.get(slot)?)? {
            Row::F32(x) => x.to_vec(),
            Row::F16(x) => {
                use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
                // The slice conversion runs on F16C where the CPU has it (a load converts
                // every stored vector once, to make its `i8` codes).
                let mut out = vec![0.0; x.len()];
                x.reinterpret_cast::<half::f16>().convert_to_f32_slice(&mut out);
                out
            }
            Row::I8(x, scale) => x.iter().map(|&c| f32::from(c) * scale).collect(),
        })
    }

    fn published(&self, slot: u32) -> bool {
        self.table.get(slot).and_then(published_level).is_some()
    }
}
