//! A memory's content: one entry per community of the document graph (its size, centroid,
//! tf-idf key terms and most central documents), and recall from it by centroid cosine.

use rcp_graph::DocGraph;
use rcp_graph::terms::followup;
use rcp_protocol::memory::Clue;

use crate::graph::communities::{Communities, Community};

/// Most entries a memory holds: the finest Louvain level with at most this many communities
/// is taken, else the largest communities of the coarsest level.
pub const MAX_ENTRIES: usize = 4096;
/// Key terms of a community added to the query in its clue.
pub const CLUE_TERMS: usize = 4;

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
    /// Its most central documents, best first: the entry points a clue names.
    pub representatives: Vec<String>,
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
    /// lacks, the community's most central documents as seeds, and a weight, the cosine
    /// divided by the best one (so the first clue weighs 1; negative cosines weigh 0).
    pub fn recall(&self, query: &str, vector: &[f32], n: usize) -> Vec<Clue> {
        let mut ranked: Vec<(f32, &Entry)> = self
            .entries
            .iter()
            .filter(|e| e.centroid.len() == vector.len())
            .map(|e| (e.centroid.iter().zip(vector).map(|(a, b)| a * b).sum(), e))
            .filter(|(s, _): &(f32, _)| s.is_finite())
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.community.cmp(&b.1.community)));
        ranked.truncate(n);
        let best = ranked.first().map_or(0.0, |r| r.0);
        ranked
            .into_iter()
            .map(|(s, e)| Clue {
                query: followup(query, &e.terms, CLUE_TERMS).map(|fresh| format!("{} {fresh}", query.trim())),
                seed_ids: (!e.representatives.is_empty()).then(|| e.representatives.clone()),
                weight: Some(if best > 0.0 { f64::from((s / best).clamp(0.0, 1.0)) } else { 0.0 }),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, centroid: [f32; 2], terms: &[&str]) -> Entry {
        Entry {
            community: id.into(),
            size: 3,
            centroid: centroid.to_vec(),
            terms: terms.iter().map(|t| (*t).to_owned()).collect(),
            representatives: vec![format!("{id}-doc")],
        }
    }

    #[test]
    fn recall_ranks_by_centroid_cosine_and_extends_the_query() {
        let d = Digest {
            stamp: 1,
            level: 0,
            entries: vec![
                entry("a", [1.0, 0.0], &["wing", "lift"]),
                entry("b", [0.6, 0.8], &["heat", "plate"]),
                entry("c", [-1.0, 0.0], &["pasta"]),
            ],
        };
        let clues = d.recall("wing flutter", &[0.8, 0.6], 2);
        assert_eq!(clues.len(), 2);
        assert_eq!(clues[0].seed_ids.as_deref(), Some(&["b-doc".to_owned()][..]));
        assert_eq!(clues[0].weight, Some(1.0));
        assert_eq!(clues[0].query.as_deref(), Some("wing flutter heat plate"));
        assert_eq!(clues[1].query.as_deref(), Some("wing flutter lift"), "terms already asked are not repeated");
        assert!((clues[1].weight.unwrap() - 0.8 / 0.96).abs() < 1e-6);
        let all = d.recall("x", &[0.8, 0.6], 10);
        assert_eq!(all.len(), 3);
        assert_eq!(all[2].weight, Some(0.0), "a negative cosine weighs nothing");
        assert_eq!(d.tokens(), 5 + 3);
    }
}
