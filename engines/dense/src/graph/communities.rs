//! The communities of the document graph at every Louvain level (level 0 the finest), each
//! with its key terms, an extractive summary and the centroid of its members' vectors.

use std::collections::HashMap;

use rcp_graph::terms::{self, Vocabulary};
use rcp_graph::{DocGraph, Hierarchy, LouvainOptions, NodeId};

use crate::store::Table;

/// Key terms kept per community.
pub const KEY_TERMS: usize = 8;
/// Representative documents named in a summary.
pub const REPRESENTATIVES: usize = 3;

/// One community.
#[derive(Debug, Clone, PartialEq)]
pub struct Community {
    /// The wire id: `L{level}C{index}`.
    pub id: String,
    /// Its level.
    pub level: u32,
    /// Member documents (nodes).
    pub members: Vec<NodeId>,
    /// Key terms, best first.
    pub terms: Vec<String>,
    /// Key terms and representative documents (§7.9 `summary`), extractive.
    pub summary: String,
    /// The normalised mean of the members' vectors.
    pub centroid: Vec<f32>,
    /// The most central members (largest weight of edges inside the community), best first,
    /// at most [`REPRESENTATIVES`].
    pub representatives: Vec<NodeId>,
}

/// Every level's communities.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Communities {
    /// `levels[l]`: the communities of level `l`.
    pub levels: Vec<Vec<Community>>,
    hierarchy: Hierarchy,
}

impl Communities {
    /// Bytes the communities hold on the heap: members, key terms, summaries, centroids,
    /// representatives and the level assignments, counted from capacities.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let community = |c: &Community| {
            size_of::<Community>()
                + c.id.capacity()
                + c.members.capacity() * size_of::<NodeId>()
                + c.terms.capacity() * size_of::<String>()
                + c.terms.iter().map(String::capacity).sum::<usize>()
                + c.summary.capacity()
                + c.centroid.capacity() * size_of::<f32>()
                + c.representatives.capacity() * size_of::<NodeId>()
        };
        self.levels.iter().flatten().map(community).sum::<usize>() + self.hierarchy.heap_bytes()
    }

    /// Detects the communities of `graph`, describing them from the documents in `table`.
    pub fn detect(graph: &DocGraph, table: &Table, options: &LouvainOptions) -> Self {
        let hierarchy = Hierarchy::detect(graph, options);
        let mut vocabulary = Vocabulary::default();
        let mut texts: HashMap<NodeId, String> = HashMap::new();
        for n in graph.nodes() {
            if let Some(doc) = graph.id(n).and_then(|id| table.get(id)) {
                let text = match doc.meta.get("title").and_then(|t| t.as_str()) {
                    Some(title) => format!("{title}\n{}", doc.text),
                    None => doc.text.clone(),
                };
                vocabulary.add(&text);
                texts.insert(n, text);
            }
        }
        let levels = (0..hierarchy.levels())
            .map(|level| {
                hierarchy
                    .members(level)
                    .into_iter()
                    .enumerate()
                    .map(|(i, members)| describe(graph, table, &hierarchy, &vocabulary, &texts, level, i, members))
                    .collect()
            })
            .collect();
        Self { levels, hierarchy }
    }

    /// The community of `node` at `level`.
    pub fn of(&self, level: usize, node: NodeId) -> Option<&Community> {
        let c = self.hierarchy.community(level, node)?;
        self.levels.get(level)?.get(c as usize)
    }
}

#[allow(clippy::too_many_arguments)] // one community's inputs, all borrowed from `detect`
fn describe(
    graph: &DocGraph,
    table: &Table,
    hierarchy: &Hierarchy,
    vocabulary: &Vocabulary,
    texts: &HashMap<NodeId, String>,
    level: usize,
    index: usize,
    members: Vec<NodeId>,
) -> Community {
    let terms =
        terms::key_terms(members.iter().filter_map(|n| texts.get(n).map(String::as_str)), vocabulary, KEY_TERMS);
    // The most central members: largest weight of edges inside the community.
    let mut central: Vec<(NodeId, f64)> = members
        .iter()
        .map(|&n| {
            let inside = graph
                .neighbors(n)
                .iter()
                .filter(|e| hierarchy.community(level, e.to) == hierarchy.community(level, n))
                .map(|e| f64::from(e.weight))
                .sum();
            (n, inside)
        })
        .collect();
    central.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let central: Vec<NodeId> = central.iter().take(REPRESENTATIVES).map(|&(n, _)| n).collect();
    let representatives: Vec<(&str, Option<&str>)> = central
        .iter()
        .filter_map(|&n| {
            let id = graph.id(n)?;
            let title = table.get(id).and_then(|d| d.meta.get("title")).and_then(|t| t.as_str());
            Some((id, title))
        })
        .collect();
    let summary = terms::summary(&terms, &representatives, members.len());
    let mut centroid = vec![0.0f32; rcp_embedder::model::DIMENSION];
    for &n in &members {
        if let Some(slot) = graph.id(n).and_then(|id| table.slot(id)) {
            for (c, x) in centroid.iter_mut().zip(table.vector(slot)) {
                *c += x;
            }
        }
    }
    rcp_embedder::embedder::normalize(&mut centroid);
    Community {
        id: format!("L{level}C{index}"),
        level: level as u32,
        members,
        terms,
        summary,
        centroid,
        representatives: central,
    }
}
