//! A memory's content: one entry per community of the document graph (its size, centroid,
//! tf-idf key terms, members and most central documents), and recall from it: communities
//! ranked by centroid cosine, and in each the members nearest the query as entry points.

use rcp_graph::DocGraph;
use rcp_graph::terms::followup;
use rcp_wire::memory::Clue;

use crate::ann::dot;
use crate::graph::communities::{Communities, Community};
use crate::store::Table;

/// Most entries a memory holds: the finest Louvain level with at most this many communities
/// is taken, else the largest communities of the coarsest level.
pub const MAX_ENTRIES: usize = 4096;
/// Key terms of a community added to the query in its clue.
pub const CLUE_TERMS: usize = 4;
/// Entry points (`seedIds`) one clue names.
pub const CLUE_SEEDS: usize = 3;

/// One community, as the memory keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The community's id in the graph at build time (`L{level}C{index}`).
    pub community: String,
    /// How many documents it had.
    pub size: u32,
    /// The normalised mean of its members' vectors.
    pub centroid: Vec<f32>,
    /// Key terms, best first.
    pub terms: Vec<String>,
    /// Its most central documents, best first: the entry points a clue names when the
    /// members' vectors cannot be read.
    pub representatives: Vec<String>,
    /// Every member document.
    pub members: Vec<String>,
}

/// What a recall found: the clues, and the documents they name as entry points with their
/// cosine to the query (best first, each once) — the draft hits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recalled {
    /// One clue per recalled community, best first.
    pub clues: Vec<Clue>,
    /// The clues' entry points with their cosine to the query, best first, each id once.
    pub entry_points: Vec<(String, f32)>,
}

/// A built memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Digest {
    /// The index version (write position) it was built from; `0` for inline memories.
    pub stamp: u64,
    /// The Louvain level its entries come from.
    pub level: u32,
    /// One entry per community.
    pub entries: Vec<Entry>,
}

impl Digest {
    /// The memory of `graph`'s communities, stamped with the index version `stamp`.
    pub fn build(graph: &DocGraph, communities: &Communities, stamp: u64) -> Self {
        let level = communities.levels.iter().position(|l| l.len() <= MAX_ENTRIES).unwrap_or_else(|| {
            communities.levels.len().saturating_sub(1) // coarsest; cut to the largest below
        });
        let mut chosen: Vec<&Community> = communities.levels.get(level).map(|l| l.iter().collect()).unwrap_or_default();
        chosen.sort_by(|a, b| b.members.len().cmp(&a.members.len()).then_with(|| a.id.cmp(&b.id)));
        chosen.truncate(MAX_ENTRIES);
        let entries = chosen
            .into_iter()
            .map(|c| Entry {
                community: c.id.clone(),
                size: u32::try_from(c.members.len()).unwrap_or(u32::MAX),
                centroid: c.centroid.clone(),
                terms: c.terms.clone(),
                representatives: c.representatives.iter().filter_map(|&n| graph.id(n).map(str::to_owned)).collect(),
                members: c.members.iter().filter_map(|&n| graph.id(n).map(str::to_owned)).collect(),
            })
            .collect();
        Self { stamp, level: level as u32, entries }
    }

    /// The memory's size in tokens: the key terms and entry-point ids it holds.
    pub fn tokens(&self) -> u64 {
        self.entries.iter().map(|e| (e.terms.len() + e.representatives.len()) as u64).sum()
    }

    /// Up to `n` clues for `query` (embedded as `vector`): the communities whose centroids
    /// are nearest to it, each as the query extended with the community's key terms it
    /// lacks, the [`CLUE_SEEDS`] members nearest the query as seeds, and a weight, the cosine
    /// divided by the best one (so the first clue weighs 1; negative cosines weigh 0).
    ///
    /// `cosine(id)` is a member's cosine to the query; a community none of whose members it
    /// can score names its most central members instead.
    pub fn recall(&self, query: &str, vector: &[f32], n: usize, cosine: impl Fn(&str) -> Option<f32>) -> Recalled {
        let mut ranked: Vec<(f32, &Entry)> = self
            .entries
            .iter()
            .filter(|e| e.centroid.len() == vector.len())
            .map(|e| (dot(&e.centroid, vector), e))
            .filter(|(s, _): &(f32, _)| s.is_finite())
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.community.cmp(&b.1.community)));
        ranked.truncate(n);
        let best = ranked.first().map_or(0.0, |r| r.0);
        let mut recalled = Recalled::default();
        for (s, e) in ranked {
            let seeds = nearest_members(e, &cosine);
            let seed_ids: Vec<String> = if seeds.is_empty() {
                e.representatives.iter().take(CLUE_SEEDS).cloned().collect()
            } else {
                seeds.iter().map(|(id, _)| id.clone()).collect()
            };
            recalled.entry_points.extend(seeds);
            recalled.clues.push(Clue {
                query: followup(query, &e.terms, CLUE_TERMS).map(|fresh| format!("{} {fresh}", query.trim())),
                seed_ids: (!seed_ids.is_empty()).then_some(seed_ids),
                weight: Some(if best > 0.0 { f64::from((s / best).clamp(0.0, 1.0)) } else { 0.0 }),
            });
        }
        recalled.entry_points.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut seen = std::collections::HashSet::new();
        recalled.entry_points.retain(|(id, _)| seen.insert(id.clone()));
        recalled
    }

    /// [`recall`](Self::recall) with the members' cosines read from `table`, the store the
    /// memory was built over (a member no longer stored is skipped).
    pub fn recall_in(&self, table: &Table, query: &str, vector: &[f32], n: usize) -> Recalled {
        let cosine = |id: &str| table.slot(id).map(|s| dot(table.vector(s), vector));
        self.recall(query, vector, n, cosine)
    }
}

/// The [`CLUE_SEEDS`] members of `e` nearest the query, best first (ties by id).
fn nearest_members(e: &Entry, cosine: &impl Fn(&str) -> Option<f32>) -> Vec<(String, f32)> {
    let mut scored: Vec<(&String, f32)> =
        e.members.iter().filter_map(|id| cosine(id).filter(|c| c.is_finite()).map(|c| (id, c))).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    scored.into_iter().take(CLUE_SEEDS).map(|(id, c)| (id.clone(), c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, centroid: [f32; 2], terms: &[&str]) -> Entry {
        Entry {
            community: id.into(),
            size: 5,
            centroid: centroid.to_vec(),
            terms: terms.iter().map(|t| (*t).to_owned()).collect(),
            representatives: vec![format!("{id}-central")],
            members: (0..5).map(|i| format!("{id}{i}")).collect(),
        }
    }

    fn memory() -> Digest {
        Digest {
            stamp: 1,
            level: 0,
            entries: vec![
                entry("a", [1.0, 0.0], &["wing", "lift"]),
                entry("b", [0.6, 0.8], &["heat", "plate"]),
                entry("c", [-1.0, 0.0], &["pasta"]),
            ],
        }
    }

    #[test]
    fn recall_ranks_by_centroid_cosine_and_extends_the_query() {
        let d = memory();
        let unscored = |_: &str| None;
        let r = d.recall("wing flutter", &[0.8, 0.6], 2, unscored);
        assert_eq!(r.clues.len(), 2);
        assert_eq!(r.clues[0].seed_ids.as_deref(), Some(&["b-central".to_owned()][..]), "no vectors: central members");
        assert_eq!(r.clues[0].weight, Some(1.0));
        assert_eq!(r.clues[0].query.as_deref(), Some("wing flutter heat plate"));
        assert_eq!(r.clues[1].query.as_deref(), Some("wing flutter lift"), "terms already asked are not repeated");
        assert!((r.clues[1].weight.unwrap() - 0.8 / 0.96).abs() < 1e-6);
        assert!(r.entry_points.is_empty());
        let all = d.recall("x", &[0.8, 0.6], 10, unscored);
        assert_eq!(all.clues.len(), 3);
        assert_eq!(all.clues[2].weight, Some(0.0), "a negative cosine weighs nothing");
        assert_eq!(d.tokens(), 5 + 3);
    }

    #[test]
    fn seeds_are_the_members_nearest_the_query() {
        let d = memory();
        // Members' cosines: b3 > b0 > b4 > the rest of b; a1 best of a; a2 unreadable.
        let cosine = |id: &str| match id {
            "b3" => Some(0.9),
            "b0" => Some(0.7),
            "b4" => Some(0.69),
            "a1" => Some(0.8),
            "a2" => None,
            "a3" => Some(f32::NAN),
            _ => Some(0.1),
        };
        let r = d.recall("wing", &[0.8, 0.6], 2, cosine);
        let seeds: Vec<&[String]> = r.clues.iter().map(|c| c.seed_ids.as_deref().unwrap_or_default()).collect();
        assert_eq!(seeds[0], ["b3", "b0", "b4"]);
        assert_eq!(seeds[1], ["a1", "a0", "a4"], "unreadable and non-finite members are skipped; ties by id");
        let ids: Vec<&str> = r.entry_points.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["b3", "a1", "b0", "b4", "a0", "a4"], "entry points across clues, best first");
    }
}
