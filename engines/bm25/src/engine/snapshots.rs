//! Published snapshots (§7.7.1): the current searcher, a ring of recent ones that
//! `indexVersion` tokens pin, and publication after every commit.

use std::collections::VecDeque;
use std::sync::Arc;

use tantivy::{Opstamp, Searcher};

use super::{Engine, now_millis};
use crate::error::EngineError;

/// One published snapshot: the commit it reflects and a searcher over it.
pub(super) struct Snapshot {
    pub(super) opstamp: Opstamp,
    pub(super) searcher: Searcher,
    /// When it was published: the clock `recency` decays against, so a pinned snapshot
    /// gives identical scores on every call (§7.7.1).
    pub(super) published_ms: i64,
}

/// The current snapshot and the recent ones still pinnable.
pub(super) struct Snapshots {
    pub(super) current: Arc<Snapshot>,
    /// Older snapshots, newest last.
    pub(super) recent: VecDeque<Arc<Snapshot>>,
}

impl Engine {
    /// The token of the current snapshot.
    pub fn index_version(&self) -> String {
        self.token(self.current().opstamp)
    }

    /// The snapshot searches run on unless one is pinned.
    pub(super) fn current(&self) -> Arc<Snapshot> {
        match self.snapshots.read() {
            Ok(s) => Arc::clone(&s.current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner().current),
        }
    }

    /// The `indexVersion` token of a commit: the index's uid and the commit's opstamp.
    pub(super) fn token(&self, opstamp: Opstamp) -> String {
        format!("{}-{opstamp}", self.config.uid)
    }

    /// Resolves an `indexVersion` token to a held snapshot (§7.7.1).
    pub(super) fn pinned(&self, token: &str) -> Result<Arc<Snapshot>, EngineError> {
        let gone = || {
            EngineError::SnapshotGone(format!(
                "indexVersion '{token}' is not held by this server (it keeps the {} most recent snapshots; current is '{}')",
                self.options.keep_snapshots + 1,
                self.index_version()
            ))
        };
        let (uid, opstamp) = token.rsplit_once('-').ok_or_else(gone)?;
        let opstamp: Opstamp = opstamp.parse().map_err(|_| gone())?;
        if uid != self.config.uid {
            return Err(gone());
        }
        let snaps = self.snapshots.read().map_err(|_| EngineError::Internal("snapshot lock poisoned".into()))?;
        std::iter::once(&snaps.current)
            .chain(snaps.recent.iter().rev())
            .find(|s| s.opstamp == opstamp)
            .cloned()
            .ok_or_else(gone)
    }

    /// Reloads the reader after a commit and publishes the new snapshot. Called with the
    /// writer lock held, so snapshots are published in commit order.
    pub(super) fn publish(&self, opstamp: Opstamp) -> Result<(), EngineError> {
        self.reader.reload()?;
        let snap = Arc::new(Snapshot { opstamp, searcher: self.reader.searcher(), published_ms: now_millis() });
        let mut snaps = self.snapshots.write().map_err(|_| EngineError::Internal("snapshot lock poisoned".into()))?;
        let old = std::mem::replace(&mut snaps.current, snap);
        if old.opstamp != opstamp {
            snaps.recent.push_back(old);
        }
        while snaps.recent.len() > self.options.keep_snapshots {
            snaps.recent.pop_front();
        }
        Ok(())
    }
}
