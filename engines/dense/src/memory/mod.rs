//! The `memory` capability (§7.17) over the document graph: a memory is one entry per Louvain
//! community (size, centroid, tf-idf key terms, members, most central documents), and recall
//! ranks the entries by centroid cosine to the query, answering each as a clue (the query
//! extended with the community's key terms, its members nearest the query as `graph`/`retrieve`
//! seeds, a weight) and the seeds as draft `hits`.
//!
//! - The live index's memory ([`INDEX_MEMORY`]) is saved as `memory.rcpm` beside the graph
//!   ([`file`](mod@file): versioned, CRC-checked; damage is logged and the memory rebuilt, never served
//!   in part). It carries the index version it was built from: after `index/add` or
//!   `index/delete` it is stale and rebuilt by the next `memory/build` or `memory/recall`
//!   (from the graph, which the writes keep current), so clues never name deleted documents.
//! - Memories over inline `documents` live in process memory only, at most
//!   [`MAX_INLINE_MEMORIES`] (oldest dropped), each over at most [`MAX_INLINE_DOCS`] documents,
//!   with the scratch store of their vectors (recall reads the members' vectors from it).
//! - A memory built with `scope: "session"` belongs to the session that built it
//!   ([`SessionScope`]): another session recalling or updating it is told it does not exist
//!   (`-32015`, so its existence does not leak), and it is gone once the session ends (never
//!   recalled again; its space is released at the next memory call).
//! - [`ops`]: `impl Memory for DenseMemory`.

pub mod digest;
pub mod file;
pub mod ops;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcp_server::SessionScope;

use crate::graph::GraphIndex;
use crate::store::Store;
pub use digest::{Digest, Recalled};
pub use ops::DenseMemory;

/// The memory file's name in the data directory.
pub const FILE: &str = "memory.rcpm";
/// The `memoryId` of the live index's memory.
pub const INDEX_MEMORY: &str = "index";
/// Most inline memories kept; building one more drops the oldest.
pub const MAX_INLINE_MEMORIES: usize = 16;
/// Most documents in one inline `memory/build`.
pub const MAX_INLINE_DOCS: usize = 1024;

/// The engine's memories: the live index's (persisted) and the inline ones (in process).
#[derive(Debug)]
pub struct MemoryIndex {
    graph: Arc<GraphIndex>,
    path: Option<PathBuf>,
    index: Mutex<Option<Arc<Digest>>>,
    inline: Mutex<Inline>,
}

#[derive(Debug, Default)]
struct Inline {
    held: VecDeque<Held>,
    next: u64,
}

/// One inline (or session) memory.
#[derive(Debug)]
struct Held {
    id: String,
    digest: Arc<Digest>,
    store: Arc<Store>,
    /// The session it belongs to, for `scope: "session"`.
    owner: Option<SessionScope>,
}

impl Held {
    /// Whether `caller` may see it: a global memory anyone, a session memory its live session.
    fn visible_to(&self, caller: &SessionScope) -> bool {
        self.owner.as_ref().is_none_or(|o| o.key() == caller.key() && !o.is_ended())
    }
}

impl Inline {
    /// Drops the memories of sessions that ended.
    fn forget_ended(&mut self) {
        self.held.retain(|h| h.owner.as_ref().is_none_or(|o| !o.is_ended()));
    }
}

impl MemoryIndex {
    /// The memories of `graph`: the live index's read from `dir/memory.rcpm` when there is
    /// one (rebuilt and saved, with a warning, when it is damaged). Without `dir` memories
    /// live in process memory.
    pub fn open(graph: Arc<GraphIndex>, dir: Option<&Path>) -> std::io::Result<Self> {
        let path = dir.map(|d| d.join(FILE));
        let this = Self { graph, path, index: Mutex::new(None), inline: Mutex::new(Inline::default()) };
        let Some(path) = &this.path else { return Ok(this) };
        match file::load(path) {
            Ok(None) => tracing::info!("no saved memory; the first memory/build or memory/recall builds it"),
            Ok(Some(d)) => {
                let stale = d.stamp != this.graph.store().write_position().0;
                tracing::info!(entries = d.entries.len(), stale, "memory loaded");
                *this.index.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(d));
            }
            Err(reason) => {
                let d = this.index_memory()?;
                tracing::warn!(%reason, entries = d.entries.len(), "memory rebuilt");
            }
        }
        Ok(this)
    }

    /// The live index's memory, rebuilt (and saved) first when there is none or the index
    /// changed since it was built.
    pub fn index_memory(&self) -> std::io::Result<Arc<Digest>> {
        let mut slot = self.index.lock().unwrap_or_else(|p| p.into_inner());
        let version = self.graph.store().write_position().0;
        if let Some(d) = slot.as_ref().filter(|d| d.stamp == version) {
            return Ok(Arc::clone(d));
        }
        let communities = self.graph.communities();
        let d = Arc::new(Digest::build(&self.graph.read(), &communities, version));
        if let Some(path) = &self.path {
            file::save(path, &d)?;
        }
        *slot = Some(Arc::clone(&d));
        Ok(d)
    }

    /// The graph the memories are built from.
    pub fn graph(&self) -> &Arc<GraphIndex> {
        &self.graph
    }

    /// The inline memory `id` and the store of its documents, if held and visible to
    /// `caller` (a session memory only to its own session, while it lasts).
    pub fn inline(&self, id: &str, caller: &SessionScope) -> Option<(Arc<Digest>, Arc<Store>)> {
        let mut inline = self.inline.lock().unwrap_or_else(|p| p.into_inner());
        inline.forget_ended();
        let h = inline.held.iter().find(|h| h.id == id && h.visible_to(caller))?;
        Some((Arc::clone(&h.digest), Arc::clone(&h.store)))
    }

    /// Keeps a memory over the documents in `store` under `id` (replacing it) or under a new
    /// id, owned by `owner` when it is a session memory; returns the id and the memory. A
    /// replacement keeps the scope: only a global memory replaces a global one, and only its own
    /// session a session memory (checked here, under the lock); `None` when `id` names no memory
    /// the caller may replace.
    pub fn keep_inline(
        &self,
        id: Option<String>,
        d: Digest,
        store: Arc<Store>,
        owner: Option<SessionScope>,
    ) -> Option<(String, Arc<Digest>)> {
        let mut inline = self.inline.lock().unwrap_or_else(|p| p.into_inner());
        inline.forget_ended();
        let same_owner = |h: &Held| match (&h.owner, &owner) {
            (None, None) => true,
            (Some(a), Some(b)) => a.key() == b.key(),
            _ => false,
        };
        let id = match id {
            Some(id) if inline.held.iter().any(|h| h.id == id && same_owner(h)) => id,
            Some(_) => return None,
            None => {
                inline.next += 1;
                let kind = if owner.is_some() { "session" } else { "inline" };
                format!("{kind}-{}", inline.next)
            }
        };
        inline.held.retain(|h| h.id != id);
        let digest = Arc::new(d);
        inline.held.push_back(Held { id: id.clone(), digest: Arc::clone(&digest), store, owner });
        while inline.held.len() > MAX_INLINE_MEMORIES {
            inline.held.pop_front();
        }
        Some((id, digest))
    }
}
