//! Sharded collections: which shard owns a document id, and the score merge of shard answers
//! (scatter-gather). Shards of one collection run the same engine with the same `scoreScale`,
//! so their scores are comparable and merging by score is the exact union of their rankings,
//! where fusion (§16.3) would only approximate it.

use std::collections::HashMap;
use std::hash::Hasher;

use rcp_wire::Hit;
use serde_json::json;

/// The shard (index into `shards` of size `n`) that owns `id`: FNV-1a of the id's bytes modulo
/// `n`. FNV-1a is a fixed algorithm, so the owner is the same on every host, build and run.
pub fn owner(id: &str, n: usize) -> usize {
    let mut h = fnv::FnvHasher::default();
    h.write(id.as_bytes());
    usize::try_from(h.finish() % n.max(1) as u64).unwrap_or(0)
}

/// Merges shard answers by score, highest first (ties: smaller stringified id), keeping one hit
/// per id (the best-scored) and at most `k`. Each hit's `meta.shard` names the shard it came
/// from.
pub fn merge_by_score(answers: Vec<(String, Vec<Hit>)>, k: usize) -> Vec<Hit> {
    let mut best: HashMap<String, Hit> = HashMap::new();
    for (shard, hits) in answers {
        for mut hit in hits {
            hit.meta.get_or_insert_with(Default::default).insert("shard".into(), json!(shard));
            let key = hit.key();
            match best.get(&key) {
                Some(kept) if kept.score >= hit.score => {}
                _ => {
                    best.insert(key, hit);
                }
            }
        }
    }
    let mut merged: Vec<Hit> = best.into_values().collect();
    merged.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key().cmp(&b.key())));
    merged.truncate(k);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_is_stable_and_spreads_ids() {
        assert_eq!(owner("doc-1", 4), owner("doc-1", 4));
        assert_eq!(owner("anything", 1), 0);
        let mut counts = [0usize; 3];
        for i in 0..300 {
            counts[owner(&format!("doc-{i}"), 3)] += 1;
        }
        assert!(counts.iter().all(|c| *c > 60), "{counts:?}");
        // Pinned: routing must not change between releases, or documents become unreachable.
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c.
        assert_eq!(owner("a", 1000), (0xaf63_dc4c_8601_ec8c_u64 % 1000) as usize);
    }

    #[test]
    fn merge_orders_by_score_dedups_and_tags_the_shard() {
        let a = vec![Hit::new("x", 3.0), Hit::new("y", 1.0)];
        let b = vec![Hit::new("z", 2.0), Hit::new("y", 1.5)];
        let merged = merge_by_score(vec![("s0".into(), a), ("s1".into(), b)], 10);
        let ids: Vec<String> = merged.iter().map(Hit::key).collect();
        assert_eq!(ids, ["x", "z", "y"]);
        assert_eq!(merged[2].meta.as_ref().unwrap()["shard"], json!("s1"));
        assert_eq!(merge_by_score(vec![("s0".into(), vec![Hit::new("b", 1.0), Hit::new("a", 1.0)])], 1)[0].key(), "a");
    }
}
