//! Group commit (§7.10, §7.11): concurrent `index/add` and `index/delete` requests share one
//! tantivy commit. A writer thread takes every write waiting in its queue, applies them in
//! arrival order, commits once, publishes the snapshot, and only then answers each request:
//! acknowledged means committed, exactly as with one commit per request, at a fraction of the
//! fsyncs under load.
//!
//! Requests are validated and converted before they are queued, so one bad document rejects
//! only its own request. Each request stays atomic: its documents land in the same commit,
//! and a failed commit fails every request of the group (none of them is acknowledged).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::mpsc;

use tantivy::{IndexWriter, TantivyDocument};

use super::Engine;
use crate::error::EngineError;

/// Most requests applied under one commit; more wait for the next one.
pub const MAX_GROUP: usize = 256;

/// Default bound of the queue in front of the writer: writes beyond it are refused with
/// `-32011` and `retryAfterMs` instead of holding their documents in memory without limit.
pub(super) const DEFAULT_QUEUE: usize = 4 * MAX_GROUP;

/// One write request, validated and ready to apply.
#[derive(Debug)]
pub enum WriteOp {
    /// Upsert these documents (`index/add`): records paired with their document id, the
    /// records of one document (a chunked one's parent and chunks) together.
    Add(Vec<(String, TantivyDocument)>),
    /// Delete these ids (`index/delete`).
    Delete(Vec<String>),
}

/// What a write did, once committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The documents were upserted; the snapshot token that holds them.
    Added {
        /// `indexVersion` of the commit that holds the documents.
        index_version: String,
    },
    /// This many live documents were deleted.
    Deleted {
        /// Live documents removed (absent ids are not counted).
        count: u64,
    },
}

/// A polled cancellation flag of the request that queued a write.
pub type CancelFlag = Box<dyn Fn() -> bool + Send>;

struct Pending {
    op: WriteOp,
    cancelled: CancelFlag,
    reply: tokio::sync::oneshot::Sender<Result<WriteOutcome, EngineError>>,
}

/// The bounded queue in front of the writer thread. Dropping it lets the thread finish the
/// writes already queued and exit.
#[derive(Debug)]
pub struct GroupCommit {
    tx: mpsc::SyncSender<Pending>,
    capacity: usize,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("op", &self.op).finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// Starts the writer thread of `engine` with a queue of `DEFAULT_QUEUE` writes.
    pub fn start(engine: Arc<Engine>) -> Self {
        Self::with_capacity(engine, DEFAULT_QUEUE)
    }

    /// Starts the writer thread of `engine`; at most `capacity` writes wait for it.
    pub fn with_capacity(engine: Arc<Engine>, capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let (tx, rx) = mpsc::sync_channel::<Pending>(capacity);
        let spawned = std::thread::Builder::new().name("rcp-bm25-writer".into()).spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut group = vec![first];
                while group.len() < MAX_GROUP {
                    match rx.try_recv() {
                        Ok(p) => group.push(p),
                        Err(_) => break,
                    }
                }
                let (ops, replies): (Vec<_>, Vec<_>) =
                    group.into_iter().map(|p| ((p.op, p.cancelled), p.reply)).unzip();
                let writer_lock = engine.writer();
                let mut writer = writer_lock.blocking_lock();
                let results = engine.commit_group(&mut writer, ops);
                drop(writer);
                for (reply, result) in replies.into_iter().zip(results) {
                    // A requester that went away (cancelled, connection closed) needs no answer.
                    let _ = reply.send(result);
                }
            }
        });
        if let Err(e) = spawned {
            tracing::error!("cannot start the writer thread: {e}; writes will fail");
        }
        Self { tx, capacity }
    }

    /// Queues a write and waits for the commit that holds it. A full queue is
    /// [`EngineError::Overloaded`] at once (never a wait that holds the documents).
    pub async fn submit(&self, op: WriteOp, cancelled: CancelFlag) -> Result<WriteOutcome, EngineError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx.try_send(Pending { op, cancelled, reply }).map_err(|e| match e {
            mpsc::TrySendError::Full(_) => EngineError::Overloaded {
                queued: self.capacity,
                // About one group commit per MAX_GROUP queued writes, each ~100 ms under load.
                retry_after_ms: 100 * (self.capacity / MAX_GROUP + 1) as u64,
            },
            mpsc::TrySendError::Disconnected(_) => EngineError::Internal("the writer thread has stopped".into()),
        })?;
        answer.await.map_err(|_| EngineError::Internal("the writer thread stopped before answering".into()))?
    }
}

impl Engine {
    /// Applies `ops` in order on `writer` and commits once; one result per op, in order. A
    /// cancelled op is skipped (and answered `Cancelled`). If applying fails, the group is
    /// rolled back and each op retried under its own commit, so only the failing one fails.
    /// Call with the writer lock held.
    pub fn commit_group(
        &self,
        writer: &mut IndexWriter,
        ops: Vec<(WriteOp, CancelFlag)>,
    ) -> Vec<Result<WriteOutcome, EngineError>> {
        let n = ops.len();
        let mut applied: Vec<Option<Result<WriteOutcome, EngineError>>> = Vec::with_capacity(n);
        // Ids written or deleted earlier in this group, uncommitted: deletes count against them.
        let mut added: HashSet<String> = HashSet::new();
        let mut deleted: HashSet<String> = HashSet::new();
        let mut changed = false;
        let mut kept: Vec<(WriteOp, CancelFlag)> = Vec::with_capacity(n);
        let mut failure: Option<EngineError> = None;
        for (op, cancelled) in ops {
            if failure.is_some() {
                kept.push((op, cancelled));
                continue;
            }
            if cancelled() {
                applied.push(Some(Err(EngineError::Cancelled)));
                kept.push((op, cancelled));
                continue;
            }
            let result = match &op {
                WriteOp::Add(docs) => (|| {
                    // The records of one document (a chunked one has several) share its id:
                    // its earlier version is deleted once, before the first of them.
                    let mut upserted: HashSet<&String> = HashSet::new();
                    for (id, doc) in docs {
                        if upserted.insert(id) {
                            writer.delete_term(self.key_term(id));
                        }
                        writer.add_document(doc.clone())?;
                        deleted.remove(id);
                        added.insert(id.clone());
                    }
                    changed |= !docs.is_empty();
                    Ok::<_, EngineError>(None)
                })(),
                WriteOp::Delete(ids) => (|| {
                    let unique: HashSet<&String> = ids.iter().collect();
                    let mut count = 0u64;
                    for id in unique {
                        let live = added.contains(id) || (!deleted.contains(id) && self.contains_id(id)?);
                        if live {
                            writer.delete_term(self.key_term(id));
                            added.remove(id);
                            deleted.insert(id.clone());
                            count += 1;
                        }
                    }
                    changed |= count > 0;
                    Ok::<_, EngineError>(Some(count))
                })(),
            };
            match result {
                Ok(None) => applied.push(None),
                Ok(Some(count)) => applied.push(Some(Ok(WriteOutcome::Deleted { count }))),
                Err(e) => failure = Some(e),
            }
            kept.push((op, cancelled));
        }
        if let Some(e) = failure {
            let _ = writer.rollback();
            if n == 1 {
                return vec![Err(e)];
            }
            return kept.into_iter().flat_map(|op| self.commit_group(writer, vec![op])).collect();
        }
        let version = if changed {
            match writer.commit().map_err(EngineError::from).and_then(|opstamp| {
                self.publish(opstamp)?;
                Ok(self.token(opstamp))
            }) {
                Ok(v) => v,
                Err(e) => {
                    let _ = writer.rollback();
                    let msg = format!("commit failed, nothing of this write is durable: {e}");
                    return applied
                        .into_iter()
                        .map(|a| match a {
                            Some(Err(EngineError::Cancelled)) => Err(EngineError::Cancelled),
                            _ => Err(EngineError::Internal(msg.clone())),
                        })
                        .collect();
                }
            }
        } else {
            self.index_version()
        };
        applied
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Ok(WriteOutcome::Added { index_version: version.clone() })))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use rcp_corpus::CorpusDoc;

    use rcp_wire::RcpError;

    use super::*;
    use crate::engine::{EngineOptions, TrustLevel};

    fn engine() -> Engine {
        Engine::in_ram(Vec::new(), EngineOptions::default()).expect("engine")
    }

    fn add(engine: &Engine, ids: &[&str]) -> WriteOp {
        WriteOp::Add(
            ids.iter()
                .map(|id| {
                    let doc = CorpusDoc {
                        id: Some((*id).into()),
                        title: None,
                        text: format!("text of {id}"),
                        meta: Default::default(),
                    };
                    (id.to_string(), engine.prepare(&doc, id, TrustLevel::Community, "test").expect("prepare"))
                })
                .collect(),
        )
    }

    fn delete(ids: &[&str]) -> WriteOp {
        WriteOp::Delete(ids.iter().map(|s| s.to_string()).collect())
    }

    fn never() -> CancelFlag {
        Box::new(|| false)
    }

    #[test]
    fn a_group_applies_in_order_counts_deletes_against_itself_and_commits_once() {
        let e = engine();
        let before = e.index_version();
        let writer = e.writer();
        let mut w = writer.blocking_lock();
        let ops = vec![
            (add(&e, &["a", "b"]), never()),
            (delete(&["a", "zz", "a"]), never()),
            (add(&e, &["a"]), never()),
            (delete(&["b"]), never()),
            (add(&e, &["c"]), Box::new(|| true) as CancelFlag),
        ];
        let results = e.commit_group(&mut w, ops);
        let version = e.index_version();
        assert_ne!(version, before);
        let added = WriteOutcome::Added { index_version: version };
        assert_eq!(results[0].as_ref().ok(), Some(&added));
        assert_eq!(results[1].as_ref().ok(), Some(&WriteOutcome::Deleted { count: 1 }));
        assert_eq!(results[2].as_ref().ok(), Some(&added));
        assert_eq!(results[3].as_ref().ok(), Some(&WriteOutcome::Deleted { count: 1 }));
        assert!(matches!(results[4], Err(EngineError::Cancelled)));
        assert!(e.contains_id("a").unwrap());
        assert!(!e.contains_id("b").unwrap() && !e.contains_id("c").unwrap());
        assert_eq!(e.num_docs(), 1);
    }

    #[test]
    fn a_group_that_changes_nothing_does_not_commit() {
        let e = engine();
        let before = e.index_version();
        let writer = e.writer();
        let results = e.commit_group(&mut writer.blocking_lock(), vec![(delete(&["nope"]), never())]);
        assert_eq!(results[0].as_ref().ok(), Some(&WriteOutcome::Deleted { count: 0 }));
        assert_eq!(e.index_version(), before);
    }

    #[tokio::test]
    async fn a_full_queue_refuses_with_a_retry_hint_and_nothing_queued_is_lost() {
        let e = Arc::new(engine());
        let queue = Arc::new(GroupCommit::with_capacity(Arc::clone(&e), 2));
        // Hold the writer so nothing commits: the thread takes one write and blocks on the
        // lock, two more fill the queue, the next is refused.
        let writer = e.writer();
        let held = writer.lock().await;
        let mut waiting = Vec::new();
        let mut refused = None;
        for i in 0..10 {
            let (e2, q) = (Arc::clone(&e), Arc::clone(&queue));
            let id = format!("q{i}");
            let op = add(&e2, &[id.as_str()]);
            let task = tokio::spawn(async move { q.submit(op, never()).await });
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            if task.is_finished() {
                refused = Some(task.await.expect("task"));
                break;
            }
            waiting.push(task);
        }
        match refused {
            Some(Err(err @ EngineError::Overloaded { .. })) => {
                let rcp = RcpError::from(err);
                assert_eq!(rcp.code, rcp_wire::ErrorCode::RATE_LIMITED);
                assert!(rcp.to_string().contains("retry"), "{rcp}");
            }
            other => panic!("expected a refusal once the queue was full, got {other:?}"),
        }
        // Two queued, plus the one the writer took (unless it had not taken it yet).
        let accepted = waiting.len();
        assert!((2..=3).contains(&accepted), "{accepted} writes accepted before the refusal");
        drop(held);
        for t in waiting {
            assert!(matches!(t.await.expect("task"), Ok(WriteOutcome::Added { .. })));
        }
        assert_eq!(e.num_docs(), accepted as u64);
    }

    #[tokio::test]
    async fn concurrent_submissions_are_each_answered_after_their_commit() {
        let e = Arc::new(engine());
        let queue = Arc::new(GroupCommit::start(Arc::clone(&e)));
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let (e, queue) = (Arc::clone(&e), Arc::clone(&queue));
                tokio::spawn(async move {
                    let id = format!("d{i}");
                    let op = add(&e, &[id.as_str()]);
                    let outcome = queue.submit(op, never()).await.expect("write");
                    // Answered means committed and published.
                    assert!(e.contains_id(&id).unwrap());
                    outcome
                })
            })
            .collect();
        for t in tasks {
            assert!(matches!(t.await.expect("task"), WriteOutcome::Added { .. }));
        }
        assert_eq!(e.num_docs(), 20);
    }
}
