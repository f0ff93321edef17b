//! `index/add` results by `_meta.idempotencyKey` (§7.10): one write per key.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use rcp_wire::index::IndexAddResult;
use tokio::sync::OnceCell;

/// `index/add` results by `_meta.idempotencyKey`, oldest evicted first. Each key owns a cell
/// that the first write fills; repeats (concurrent or later) read it instead of writing again.
#[derive(Debug)]
pub(crate) struct IdempotencyCache {
    cap: usize,
    order: VecDeque<String>,
    map: HashMap<String, Arc<OnceCell<IndexAddResult>>>,
}

impl IdempotencyCache {
    /// A cache remembering at most `cap` keys (`0`: none).
    pub(crate) fn new(cap: usize) -> Self {
        Self { cap, order: VecDeque::new(), map: HashMap::new() }
    }

    /// The cell of `key`, created if absent.
    pub(crate) fn cell(&mut self, key: String) -> Arc<OnceCell<IndexAddResult>> {
        if let Some(c) = self.map.get(&key) {
            return Arc::clone(c);
        }
        let cell = Arc::new(OnceCell::new());
        if self.cap > 0 {
            self.map.insert(key.clone(), Arc::clone(&cell));
            self.order.push_back(key);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
        cell
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_keeps_its_cell_until_evicted() {
        let mut cache = IdempotencyCache::new(1);
        let a = cache.cell("a".into());
        assert!(Arc::ptr_eq(&a, &cache.cell("a".into())));
        cache.cell("b".into());
        assert!(!Arc::ptr_eq(&a, &cache.cell("a".into())), "the oldest key is evicted first");
        let mut none = IdempotencyCache::new(0);
        let x = none.cell("x".into());
        assert!(!Arc::ptr_eq(&x, &none.cell("x".into())), "a zero-sized cache remembers nothing");
    }
}
