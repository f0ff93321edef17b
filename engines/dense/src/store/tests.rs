//! The store end to end: persistence, snapshots, repair, compaction, the saved graph and
//! the search fallbacks.

use std::fs;

use rcp_wire::Meta;
use rcp_wire::filter::Filter;
use serde_json::json;

use crate::ann::Backend;

use super::layout::{MANIFEST, generations, snapshot_path};
use super::*;

fn unit(seed: usize) -> Vec<f32> {
    crate::testutil::random_unit(1, DIMENSION, seed as u64)
}

fn doc(id: &str, year: i64) -> (StoredDoc, Vec<f32>) {
    let meta: Meta = json!({"year": year}).as_object().cloned().unwrap();
    (stored(id.into(), format!("body {id}"), meta, Origin::Client), unit(id.len() * 7 + year as usize))
}

fn no_full_scan() -> StoreOptions {
    StoreOptions { planner: PlannerOptions::without_full_scan(), ..StoreOptions::default() }
}

fn ids(store: &Store) -> Vec<String> {
    let t = store.read();
    let mut v: Vec<String> = t.by_id.ids(&t.docs).map(str::to_owned).collect();
    v.sort();
    v
}

#[test]
fn persistence_round_trip_with_wal_and_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions::default();
    {
        let m8 = StoreOptions { hnsw: HnswOverride { m: Some(8), ..Default::default() }, ..opts };
        let (s, report) = Store::open(dir.path(), m8).unwrap();
        assert_eq!(report, OpenReport::default());
        s.upsert(vec![doc("a", 2000), doc("b", 2001)]).unwrap();
        s.snapshot().unwrap();
        s.upsert(vec![doc("c", 2002)]).unwrap();
        assert_eq!(s.delete(vec!["a".into(), "zz".into()]).unwrap(), 1);
        assert_eq!(s.delete(vec!["a".into()]).unwrap(), 0);
    }
    let (s, report) = Store::open(dir.path(), opts).unwrap();
    assert!(Store::open(dir.path(), opts).unwrap_err().to_string().contains("in use"));
    assert_eq!(s.read().params().m, 8, "HNSW parameters persist in the manifest");
    assert_eq!(report.snapshot_docs, 2);
    assert_eq!(report.replayed, 2);
    assert_eq!(ids(&s), vec!["b", "c"]);
    let t = s.read();
    assert_eq!(t.get("c").unwrap().meta["year"], 2002);
    let slot = t.slot("c").unwrap();
    assert_eq!(t.vector(slot), unit(7 + 2002).as_slice());
}

#[test]
fn a_new_snapshot_removes_every_older_generation_including_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = Store::open(dir.path(), StoreOptions::default()).unwrap();
    s.upsert(vec![doc("a", 2000)]).unwrap();
    s.snapshot().unwrap();
    // A crash between writing a generation and switching the manifest leaves it orphaned.
    for ext in ["docs", "f32"] {
        fs::write(snapshot_path(dir.path(), 7, ext), b"orphan").unwrap();
    }
    s.upsert(vec![doc("b", 2001)]).unwrap();
    s.snapshot().unwrap();
    let current = s.writer.lock().unwrap().manifest.snapshot.unwrap().generation;
    assert_eq!(generations(dir.path()), vec![current]);
}

#[test]
fn a_lost_manifest_is_refused_and_rebuilt_from_the_newest_complete_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (s, _) = Store::open(dir.path(), StoreOptions::default()).unwrap();
        s.upsert(vec![doc("a", 2000), doc("b", 2001)]).unwrap();
        s.snapshot().unwrap();
        s.upsert(vec![doc("c", 2002)]).unwrap();
        s.delete(vec!["a".into()]).unwrap();
    }
    // A newer, incomplete generation must be skipped, not trusted.
    fs::write(snapshot_path(dir.path(), 9, "docs"), b"RCPDOCS1").unwrap();
    fs::remove_file(dir.path().join(MANIFEST)).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("manifest.json") && err.contains("missing") && err.contains("repair"), "{err}");
    assert!(!dir.path().join(MANIFEST).exists());

    let repair = rebuild_manifest(dir.path(), |docs| {
        assert_eq!(docs.len(), 2);
        BTreeMap::from([("year".to_owned(), FieldType::Int)])
    })
    .unwrap();
    assert_eq!((repair.docs, repair.skipped.len()), (2, 1));
    assert!(rebuild_manifest(dir.path(), |_| BTreeMap::new()).is_err(), "never replaces a manifest");
    let (s, report) = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(report.snapshot_docs, 2);
    assert_eq!(ids(&s), vec!["b", "c"], "snapshot plus the replayed log");
    assert_eq!(s.fields().get("year"), Some(&FieldType::Int));
}

#[test]
fn upsert_replaces_and_compaction_drops_tombstones() {
    let opts = no_full_scan();
    let s = Store::in_memory(opts);
    let batch: Vec<_> = (0..200).map(|i| doc(&format!("d{i}"), 1900 + i)).collect();
    s.upsert(batch).unwrap();
    // Re-adding replaces: one live copy, the old slot is a tombstone.
    s.upsert(vec![doc("d5", 3000)]).unwrap();
    {
        let t = s.read();
        assert_eq!(t.live(), 200);
        assert_eq!(t.tombstones(), 1);
        assert_eq!(t.get("d5").unwrap().meta["year"], 3000);
        let (hits, _) = t.search(&unit(2 * 7 + 3000), 200, 64, None, &PlannerOptions::without_full_scan());
        assert_eq!(hits.len(), 200, "over-fetch meets want despite the tombstone");
        assert_eq!(hits.iter().filter(|h| t.doc(h.slot).unwrap().id == "d5").count(), 1);
    }
    let gone: Vec<String> = (0..100).map(|i| format!("d{i}")).collect();
    assert_eq!(s.delete(gone).unwrap(), 100);
    let t = s.read();
    assert_eq!(t.live(), 100);
    assert_eq!(t.tombstones(), 0, "compacted once tombstones passed a quarter of the slots");
    assert_eq!(t.ann.len(), 100);
}

#[test]
fn graph_is_saved_loaded_checked_and_extended_by_the_log_tail() {
    let dir = tempfile::tempdir().unwrap();
    let opts = no_full_scan();
    let find = |s: &Store, id: &str| {
        let t = s.read();
        let q = t.vector(t.slot(id).unwrap()).to_vec();
        let (hits, path) = t.search(&q, 1, 16, None, &PlannerOptions::without_full_scan());
        assert!(matches!(path.ran, Plan::Hnsw { .. }), "{path:?}");
        t.doc(hits[0].slot).unwrap().id.clone()
    };
    {
        let (s, _) = Store::open(dir.path(), opts).unwrap();
        s.upsert((0..300).map(|i| doc(&format!("d{i}"), i)).collect()).unwrap();
        s.snapshot().unwrap();
        s.upsert(vec![doc("tail", 5000)]).unwrap();
    }
    let graph = snapshot_path(dir.path(), 1, "graph");
    assert!(graph.exists());
    {
        let (s, report) = Store::open(dir.path(), opts).unwrap();
        assert_eq!(report.graph, Some(GraphSource::Loaded));
        assert_eq!(report.replayed, 1);
        assert_eq!(s.read().ann.len(), 301, "the log tail is inserted into the loaded graph");
        assert_eq!(find(&s, "tail"), "tail");
        assert_eq!(find(&s, "d42"), "d42");
    }
    // A corrupt graph is never served: it is rebuilt from the vectors and saved again.
    let mut bytes = fs::read(&graph).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    fs::write(&graph, bytes).unwrap();
    {
        let (s, report) = Store::open(dir.path(), opts).unwrap();
        match report.graph {
            Some(GraphSource::Rebuilt(why)) => assert!(why.contains("checksum"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(find(&s, "d42"), "d42");
    }
    let (_, report) = Store::open(dir.path(), opts).unwrap();
    assert_eq!(report.graph, Some(GraphSource::Loaded));
}

#[test]
fn another_backend_rebuilds_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let opts = no_full_scan();
    {
        let (s, _) = Store::open(dir.path(), opts).unwrap();
        s.upsert((0..50).map(|i| doc(&format!("d{i}"), i)).collect()).unwrap();
        s.snapshot().unwrap();
    }
    let hnsw_rs = StoreOptions { ann: Some(Backend::HnswRs), ..opts };
    {
        let (s, report) = Store::open(dir.path(), hnsw_rs).unwrap();
        assert!(matches!(report.graph, Some(GraphSource::Rebuilt(ref why)) if why.contains("saved by rcp-hnsw")));
        assert_eq!(s.read().backend(), Backend::HnswRs);
        assert_eq!(s.read().ann.len(), 50);
    }
    // The backend persists in the manifest; hnsw_rs saves no graph.
    let (s, report) = Store::open(dir.path(), opts).unwrap();
    assert_eq!(s.read().backend(), Backend::HnswRs);
    assert!(matches!(report.graph, Some(GraphSource::Rebuilt(ref why)) if why == "no saved graph"));
}

#[test]
fn selective_filter_falls_back_to_exact() {
    let opts = no_full_scan();
    let s = Store::in_memory(opts);
    s.upsert((0..300).map(|i| doc(&format!("d{i}"), i)).collect()).unwrap();
    let t = s.read();
    let f = Filter::parse(&json!({"field": "year", "op": "in", "value": [7, 250]})).unwrap();
    let (hits, _) = t.search(&unit(3), 10, 16, Some(&f), &PlannerOptions::without_full_scan());
    let mut got: Vec<i64> = hits.iter().map(|h| t.doc(h.slot).unwrap().meta["year"].as_i64().unwrap()).collect();
    got.sort();
    assert_eq!(got, vec![7, 250]);
}

/// A store of three documents with one snapshot, closed; returns its generation.
fn snapshotted(dir: &std::path::Path) -> u64 {
    let (s, _) = Store::open(dir, StoreOptions::default()).unwrap();
    s.upsert(vec![doc("a", 2000), doc("b", 2001), doc("c", 2002)]).unwrap();
    s.snapshot().unwrap();
    let t = s.read();
    assert_eq!((t.vectors().heap_bytes(), t.vectors().mapped_bytes()), (0, 3 * DIMENSION * 4), "served from the file");
    drop(t);
    s.writer.lock().unwrap().manifest.snapshot.unwrap().generation
}

#[test]
fn a_damaged_or_truncated_snapshot_is_refused_never_served_as_less() {
    let dir = tempfile::tempdir().unwrap();
    let generation = snapshotted(dir.path());
    for (ext, cut, expect) in [
        ("f32", false, "checksum"),
        ("f32", true, "not served"),
        ("docs", false, "checksum"),
        ("docs", true, "not served"),
    ] {
        let path = snapshot_path(dir.path(), generation, ext);
        let good = fs::read(&path).unwrap();
        let mut bad = good.clone();
        if cut {
            bad.truncate(bad.len() - 4);
        } else {
            bad[good.len() / 2] ^= 0x10;
        }
        fs::write(&path, &bad).unwrap();
        let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
        assert!(matches!(err, StoreError::Damaged { .. }), "{ext} cut {cut}: {err}");
        assert!(err.to_string().contains(expect), "{ext} cut {cut}: {err}");
        fs::write(&path, &good).unwrap();
    }
    let (s, report) = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!((report.snapshot_docs, ids(&s).len()), (3, 3));
}

#[test]
fn a_snapshot_written_before_the_binary_formats_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let generation = snapshotted(dir.path());
    // As an older engine wrote it: documents as JSON lines, no checksum of the vectors.
    let docs = super::docs::read_docs(&fs::read(snapshot_path(dir.path(), generation, "docs")).unwrap()).unwrap();
    let lines: String = docs.iter().map(|d| serde_json::to_string(d).unwrap() + "\n").collect();
    fs::write(snapshot_path(dir.path(), generation, "jsonl"), lines).unwrap();
    fs::remove_file(snapshot_path(dir.path(), generation, "docs")).unwrap();
    let mut manifest = Manifest::read(&dir.path().join(MANIFEST)).unwrap().unwrap();
    manifest.snapshot.as_mut().unwrap().vectors_crc32 = None;
    manifest.write(dir.path()).unwrap();
    let (s, report) = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!((report.snapshot_docs, report.graph), (3, Some(GraphSource::Loaded)));
    assert_eq!(s.read().get("b").unwrap().meta["year"], 2001);
    // The next snapshot is written in the current formats and the old file is removed.
    s.upsert(vec![doc("d", 2003)]).unwrap();
    s.snapshot().unwrap();
    let next = generation + 1;
    assert!(snapshot_path(dir.path(), next, "docs").exists());
    assert!(!snapshot_path(dir.path(), generation, "jsonl").exists());
}
