//! The filter planner end to end: the plan chosen at each selectivity, the exact scan equal
//! to the exact filtered truth, recall of the graph plans, postings kept current under
//! writes, deletes, compaction and reopening, and searches racing writers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use rcp_wire::Meta;
use rcp_wire::filter::{FieldType, Filter};
use serde_json::json;

use super::*;
use crate::ann::Scored;

/// `bucket`: "rare" for 1 document in 200, "mid" for 1 in 5, "common" otherwise; `n` the
/// document number (an int field), `day` a date.
fn meta(i: usize) -> Meta {
    let bucket = if i % 200 == 7 {
        "rare"
    } else if i % 5 == 1 {
        "mid"
    } else {
        "common"
    };
    let day = format!("2024-01-{:02}", 1 + i % 28);
    json!({"bucket": bucket, "n": i, "day": day}).as_object().cloned().unwrap_or_default()
}

/// A unit vector of the model's dimension with 16 random components: a low intrinsic
/// dimension, as real embeddings have, where a small graph reaches a high recall.
fn vector(seed: u64) -> Vec<f32> {
    let mut v = crate::testutil::random_unit(1, 16, seed);
    v.resize(DIMENSION, 0.0);
    v
}

fn doc(i: usize) -> (StoredDoc, Vec<f32>) {
    let v = vector(1_000 + i as u64);
    (stored(format!("d{i}"), format!("body {i}"), meta(i), Origin::Client), v)
}

fn fields() -> BTreeMap<String, FieldType> {
    BTreeMap::from([
        ("bucket".to_owned(), FieldType::Keyword),
        ("n".to_owned(), FieldType::Int),
        ("day".to_owned(), FieldType::Date),
    ])
}

/// A small graph (fast in a debug build) and a planner scaled to a 2,000-document collection:
/// `sqrt(0.5 · 100 · 2000) ≈ 316` matches is where the scan stops paying.
fn options() -> StoreOptions {
    StoreOptions {
        hnsw: HnswOverride { m: Some(8), ef_construction: Some(40), ..HnswOverride::default() },
        planner: PlannerOptions { full_scan_threshold: 0, scan_factor: 0.5, post_filter_from: 0.5 },
        ..StoreOptions::default()
    }
}

/// One 2,000-document store shared by the read-only tests.
fn shared() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| store(2_000))
}

fn store(n: usize) -> Store {
    let s = Store::in_memory(options());
    s.set_fields(fields()).unwrap();
    s.upsert((0..n).map(doc).collect()).unwrap();
    s
}

/// The exact filtered top `want`, by brute force over the live documents.
fn truth(t: &Table, q: &[f32], want: usize, f: &Filter) -> Vec<Scored> {
    let keep = |s: usize| t.doc(s).is_some_and(|d| f.matches(&d.meta));
    t.vectors.exact(q, want, None, &keep)
}

fn slots(found: &[Scored]) -> Vec<usize> {
    found.iter().map(|s| s.slot).collect()
}

fn eq(value: &str) -> Filter {
    Filter::eq("bucket", value)
}

#[test]
fn the_plan_follows_the_filter_selectivity() {
    let t = shared().read();
    let o = options().planner;
    let q = vector(5);
    let plan = |f: Option<&Filter>| t.search(&q, 100, 64, f, &o).1;
    assert_eq!(plan(None).chosen, Plan::Hnsw { ef: 100 });
    assert_eq!(plan(Some(&eq("rare"))).chosen, Plan::MatchScan { candidates: 10 }, "0.5%");
    assert_eq!(plan(Some(&eq("mid"))).chosen, Plan::FilteredWalk { ef: 100 }, "20%");
    // 79.5% match: a plain beam of (100 + 3·√100) / 0.795.
    assert_eq!(plan(Some(&eq("common"))).chosen, Plan::PostFilter { ef: 164 });
    let range = Filter::lt("n", 300);
    assert_eq!(plan(Some(&range)).chosen, Plan::MatchScan { candidates: 300 }, "15%, from int postings");
    // Not indexed (`contains`): estimated from a sample, never scanned from postings.
    let sampled = plan(Some(&Filter::contains("bucket", "mi")));
    assert!(matches!(sampled.estimate, Estimate::Sampled(m) if (300..=500).contains(&m)), "{sampled:?}");
    assert_eq!(sampled.chosen, Plan::FilteredWalk { ef: 100 });
    assert!(plan(Some(&eq("mid"))).note().is_some_and(|n| n.contains("filtered hnsw walk")));
    assert_eq!(plan(None).note(), None, "a plain walk needs no note");
}

#[test]
fn every_plan_meets_the_exact_filtered_truth() {
    let t = shared().read();
    let o = options().planner;
    let filters = [
        eq("rare"),
        Filter::lt("n", 300),
        Filter::gte("day", "2024-01-27") & Filter::ne("bucket", "mid"),
        eq("mid"),
        eq("common"),
        Filter::is_in("bucket", ["rare", "nope"]),
    ];
    for f in &filters {
        let (mut hit, mut total) = (0, 0);
        for seed in 0..20 {
            let q = vector(50 + seed);
            let (found, route) = t.search(&q, 10, 100, Some(f), &o);
            let exact = truth(&t, &q, 10, f);
            assert_eq!(found.len(), exact.len(), "{f:?}: {route:?}");
            assert!(found.iter().all(|h| t.doc(h.slot).is_some_and(|d| f.matches(&d.meta))), "{f:?}");
            if matches!(route.ran, Plan::MatchScan { .. } | Plan::FullScan) {
                assert_eq!(slots(&found), slots(&exact), "{f:?}: an exact plan is exact");
            }
            hit += found.iter().filter(|h| exact.iter().any(|e| e.slot == h.slot)).count();
            total += exact.len();
        }
        let recall = hit as f64 / total as f64;
        assert!(recall >= 0.95, "{f:?}: recall@10 {recall}");
    }
}

#[test]
fn forced_plans_agree_on_a_selective_filter() {
    let t = shared().read();
    let f = eq("mid");
    let c = t.meta_index().candidates(&f).unwrap();
    assert_eq!(c.len(), 400);
    let q = vector(77);
    let exact = truth(&t, &q, 10, &f);
    let run = |p: Plan| slots(&t.run(p, &q, 10, Some(&f), Some(&c)));
    assert_eq!(run(Plan::MatchScan { candidates: 400 }), slots(&exact));
    assert_eq!(run(Plan::FullScan), slots(&exact));
    let walk = run(Plan::FilteredWalk { ef: 100 });
    assert!(walk.iter().filter(|s| slots(&exact).contains(s)).count() >= 9, "{walk:?}");
}

/// The postings answer exactly what the filter matches.
fn assert_postings_current(t: &Table) {
    for f in [eq("rare"), eq("mid"), Filter::gte("n", 2_500), Filter::lt("day", "2024-01-03")] {
        let c = t.meta_index().candidates(&f).unwrap();
        assert!(c.exact);
        let want: Vec<u32> =
            (0..t.docs.len()).filter(|&s| t.doc(s).is_some_and(|d| f.matches(&d.meta))).map(|s| s as u32).collect();
        assert_eq!(c.slots.iter().collect::<Vec<_>>(), want, "{f:?}");
    }
}

#[test]
fn postings_follow_writes_deletes_compaction_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (s, _) = Store::open(dir.path(), options()).unwrap();
        s.set_fields(fields()).unwrap();
        s.upsert((0..600).map(doc).collect()).unwrap();
        s.snapshot().unwrap();
        // Replace some documents with other metadata, delete others (logged, not snapshotted).
        s.upsert(
            (0..40).map(|i| (stored(format!("d{i}"), "moved".into(), meta(i + 1), Origin::Client), doc(i).1)).collect(),
        )
        .unwrap();
        s.delete((100..130).map(|i| format!("d{i}")).collect()).unwrap();
        assert_postings_current(&s.read());
        // Deleting past a quarter of the slots compacts: the postings are renumbered.
        s.delete((200..400).map(|i| format!("d{i}")).collect()).unwrap();
        assert_eq!(s.read().tombstones(), 0, "compacted");
        assert_postings_current(&s.read());
    }
    let (s, report) = Store::open(dir.path(), options()).unwrap();
    assert!(report.snapshot_docs > 0);
    assert_postings_current(&s.read());
    // Declaring fields anew indexes the stored documents.
    s.set_fields(BTreeMap::from([("bucket".to_owned(), FieldType::Keyword)])).unwrap();
    assert!(s.read().meta_index().candidates(&eq("rare")).is_some());
    assert!(s.read().meta_index().candidates(&Filter::gte("n", 1)).is_none(), "n is no longer declared");
}

/// Readers search under every plan while a writer adds, replaces and deletes documents (with
/// compactions): each search sees one consistent table, so its results match the filter and
/// the exact plans equal the truth computed under the same read lock.
#[test]
fn searches_stay_correct_under_concurrent_writes_and_deletes() {
    let s = Arc::new(store(1_000));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
        std::thread::spawn(move || {
            for round in 0..30usize {
                let base = 1_000 + round * 40;
                s.upsert((base..base + 40).map(doc).collect()).unwrap();
                let gone: Vec<String> = (0..30).map(|k| format!("d{}", (round * 53 + k * 7) % (base + 40))).collect();
                s.delete(gone).unwrap();
            }
            stop.store(true, Ordering::Release);
        })
    };
    let filters = [eq("rare"), eq("mid"), eq("common"), Filter::lt("n", 400), Filter::contains("bucket", "ar")];
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
            let filters = filters.clone();
            std::thread::spawn(move || {
                let mut searches = 0;
                let mut i = 0u64;
                while !stop.load(Ordering::Acquire) || searches < 20 {
                    let f = &filters[(i as usize) % filters.len()];
                    let q = vector(9_000 + r * 1_000 + i);
                    let t = s.read();
                    let (found, route) = t.search(&q, 10, 64, Some(f), &options().planner);
                    let exact = truth(&t, &q, 10, f);
                    assert_eq!(found.len(), exact.len(), "{f:?}: {route:?}");
                    assert!(found.iter().all(|h| t.doc(h.slot).is_some_and(|d| f.matches(&d.meta))));
                    if matches!(route.ran, Plan::MatchScan { .. } | Plan::FullScan) {
                        assert_eq!(slots(&found), slots(&exact), "{f:?}");
                    }
                    drop(t);
                    searches += 1;
                    i += 1;
                }
                searches
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        assert!(r.join().unwrap() >= 20);
    }
    assert_postings_current(&s.read());
}
