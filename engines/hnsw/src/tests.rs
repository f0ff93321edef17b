use std::sync::atomic::Ordering;

use super::*;
use crate::graph::{pack, unpack};

/// Deterministic clustered unit vectors: `n` rows around `n / 50` random centres.
fn clustered(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let centres: Vec<f32> = (0..(n / 50).max(1) * dim).map(|_| next()).collect();
    let mut out = Vec::with_capacity(n * dim);
    for i in 0..n {
        let c = &centres[(i % (n / 50).max(1)) * dim..][..dim];
        let mut row: Vec<f32> = c.iter().map(|x| x + 0.3 * next()).collect();
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
        out.extend(row);
    }
    out
}

fn truth(v: &[f32], dim: usize, q: &[f32], k: usize, keep: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut all: Vec<(f32, usize)> = v
        .chunks_exact(dim)
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(i, r)| (-r.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), i))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all.into_iter().take(k).map(|(_, i)| i).collect()
}

fn recall(g: &Hnsw, v: &[f32], queries: &[f32], dim: usize, ef: usize) -> f64 {
    let mut hit = 0;
    let mut total = 0;
    for q in queries.chunks_exact(dim) {
        let t = truth(v, dim, q, 10, |_| true);
        let found = g.search(q, 10, ef, None);
        hit += found.iter().filter(|(s, _)| t.contains(s)).count();
        total += t.len();
    }
    hit as f64 / total as f64
}

fn build(v: &[f32], dim: usize, params: Params, threads: usize) -> Hnsw {
    let g = Hnsw::new(dim, params);
    let rows: Vec<(&[f32], usize)> = v.chunks_exact(dim).enumerate().map(|(i, r)| (r, i)).collect();
    g.insert_many(&rows, threads).unwrap();
    g
}

#[test]
fn finds_near_neighbours_at_both_precisions_sequentially_and_in_parallel() {
    let dim = 48;
    let v = clustered(6000, dim, 1);
    // Queries from the same clusters as the data (not copies of rows).
    let queries: Vec<f32> = clustered(6000, dim, 1)
        .chunks_exact(dim)
        .zip(clustered(6000, dim, 2).chunks_exact(dim))
        .step_by(60)
        .flat_map(|(a, b)| {
            let mut q: Vec<f32> = a.iter().zip(b).map(|(x, y)| x + 0.2 * y).collect();
            let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt();
            q.iter_mut().for_each(|x| *x /= norm);
            q
        })
        .collect();
    for precision in [Precision::F32, Precision::F16] {
        for threads in [1, 4] {
            let params = Params { m: 12, ef_construction: 64, precision };
            let g = build(&v, dim, params, threads);
            assert_eq!(g.len(), 6000);
            let r = recall(&g, &v, &queries, dim, 96);
            assert!(r >= 0.95, "{precision:?} on {threads} threads: recall@10 {r}");
            // Every vector finds itself first, with its own dot product.
            let q = &v[123 * dim..124 * dim];
            let hits = g.search(q, 3, 32, None);
            assert_eq!(hits[0].0, 123);
            assert!((hits[0].1 - 1.0).abs() < 2e-3, "{}", hits[0].1);
            assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
        }
    }
}

#[test]
fn a_filter_is_applied_during_the_walk() {
    let dim = 16;
    let v = clustered(3000, dim, 3);
    let g = build(&v, dim, Params::default(), 1);
    let q = &v[10 * dim..11 * dim];
    // A selective filter (1 in 30) still fills k with matching nodes, the same as exact.
    let keep = |s: usize| s % 30 == 7;
    let hits = g.search(q, 10, 200, Some(&keep));
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|(s, _)| keep(*s)));
    let t = truth(&v, dim, q, 10, keep);
    let found = hits.iter().filter(|(s, _)| t.contains(s)).count();
    assert!(found >= 8, "{found} of the exact 10");
    assert!(g.search(q, 10, 50, Some(&|_| false)).is_empty());
}

#[test]
fn slots_may_have_gaps_and_bad_input_is_refused() {
    let dim = 8;
    let v = clustered(200, dim, 4);
    let g = Hnsw::new(dim, Params::default());
    assert!(g.search(&v[..dim], 5, 16, None).is_empty(), "empty graph");
    for (i, row) in v.chunks_exact(dim).enumerate() {
        g.insert(row, i * 3 + 40_000).unwrap();
    }
    assert_eq!(g.len(), 200);
    let hits = g.search(&v[5 * dim..6 * dim], 5, 32, None);
    assert_eq!(hits[0].0, 5 * 3 + 40_000);
    assert!(hits.iter().all(|(s, _)| (s - 40_000) % 3 == 0));
    assert!(matches!(g.insert(&v[..dim], 40_000), Err(Error::Duplicate(40_000))));
    assert!(matches!(g.insert(&v[..dim - 1], 1), Err(Error::Dimension { got: 7, want: 8 })));
    assert!(matches!(g.insert(&v[..dim], usize::MAX), Err(Error::Capacity(_))));
    assert!(g.search(&v[..dim - 1], 5, 16, None).is_empty(), "a query of the wrong length");
    assert!(g.search(&v[..dim], 0, 16, None).is_empty());
}

#[test]
fn saves_and_loads_the_same_graph_and_refuses_damage() {
    let dim = 24;
    let v = clustered(2500, dim, 5);
    let dir = tempfile::tempdir().unwrap();
    for precision in [Precision::F32, Precision::F16] {
        let params = Params { m: 8, ef_construction: 40, precision };
        let g = build(&v, dim, params, 2);
        let path = dir.path().join("g.hnsw");
        g.save(&path).unwrap();
        let loaded = Hnsw::load(&path, dim, params).unwrap();
        assert_eq!(loaded.len(), g.len());
        for q in v.chunks_exact(dim).step_by(97) {
            assert_eq!(loaded.search(q, 10, 50, None), g.search(q, 10, 50, None));
        }
        // The loaded graph takes new nodes.
        loaded.insert(&v[..dim], 9999).unwrap();
        assert_eq!(loaded.search(&v[..dim], 2, 32, None).len(), 2);

        let other = Params { m: 9, ..params };
        assert!(matches!(Hnsw::load(&path, dim, other), Err(Error::Mismatch(_))));
        assert!(matches!(Hnsw::load(&path, dim + 1, params), Err(Error::Mismatch(_))));

        let bytes = std::fs::read(&path).unwrap();
        let damaged = dir.path().join("bad.hnsw");
        let refused = |b: &[u8]| {
            std::fs::write(&damaged, b).unwrap();
            match Hnsw::load(&damaged, dim, params) {
                Err(Error::Corrupt(why)) => why,
                other => panic!("expected Corrupt, got {other:?}"),
            }
        };
        assert!(refused(&bytes[..bytes.len() - 5]).contains("ends early"));
        assert!(refused(&[bytes.as_slice(), b"x"].concat()).contains("after the last list"));
        assert!(refused(b"RCPHNSW0 and more").contains("not an rcp-hnsw"));
        // A level-0 link of the first node pointed past every node.
        let header = 8 + 4 * 4 + 3 * 8;
        let first = (0..2500)
            .map(|s| header + s * g.table.record_words() * 4)
            .find(|&at| u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) > 0)
            .unwrap();
        let mut b = bytes.clone();
        let link0 = first + (g.table.record_words() - 2 * params.m) * 4;
        b[link0..link0 + 4].copy_from_slice(&5_000_000u32.to_le_bytes());
        assert!(refused(&b).contains("holds no node"), "{}", refused(&b));
        // A neighbour count beyond the list.
        let mut b = bytes.clone();
        b[first + 4..first + 8].copy_from_slice(&1000u32.to_le_bytes());
        assert!(refused(&b).contains("links, at most"));
    }
}

#[test]
fn searches_run_while_nodes_are_inserted() {
    let dim = 32;
    let v = clustered(8000, dim, 6);
    let g = Hnsw::new(dim, Params { m: 8, ef_construction: 32, precision: Precision::F16 });
    let rows: Vec<(&[f32], usize)> = v.chunks_exact(dim).enumerate().map(|(i, r)| (r, i)).collect();
    g.insert_many(&rows[..500], 1).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| g.insert_many(&rows[500..], 2).unwrap());
        for q in v.chunks_exact(dim).take(2000) {
            let hits = g.search(q, 10, 32, None);
            assert!(!hits.is_empty());
            assert!(hits.iter().all(|&(slot, _)| slot < 8000));
        }
    });
    assert_eq!(g.len(), 8000);
    assert!(recall(&g, &v, &v[..50 * dim], dim, 64) >= 0.95);
}

#[test]
fn every_node_of_a_parallel_build_is_reachable_at_level_0() {
    // Concurrent inserts once overwrote links other inserts had just made to a node still
    // being linked, leaving nodes no other node pointed to: unreachable, never returned.
    let dim = 16;
    let v = clustered(12_000, dim, 8);
    for round in 0..3 {
        let g = build(
            &v,
            dim,
            Params { m: 6, ef_construction: 24, precision: Precision::F16 },
            if round == 0 { 1 } else { 4 },
        );
        let mut incoming = vec![0u32; 12_000];
        for slot in 0..12_000u32 {
            let (count, links) = g.links(slot, 0, None).expect("a node");
            let n = (count.load(Ordering::Acquire) as usize).min(links.len());
            for link in &links[..n] {
                incoming[link.load(Ordering::Acquire) as usize] += 1;
            }
        }
        let entry = unpack(g.entry.load(Ordering::Acquire)).map(|(e, _)| e as usize);
        let orphans: Vec<usize> = (0..12_000).filter(|&s| incoming[s] == 0 && Some(s) != entry).collect();
        assert!(
            orphans.is_empty(),
            "round {round}: {} nodes nothing links to, e.g. {:?}",
            orphans.len(),
            &orphans[..orphans.len().min(5)]
        );
    }
}

#[test]
fn nodes_pruning_left_unreachable_are_relinked() {
    // One insert at a time (no bulk relink), with small lists that overflow often.
    let dim = 16;
    let v = clustered(6_000, dim, 9);
    let g = Hnsw::new(dim, Params { m: 4, ef_construction: 16, precision: Precision::F16 });
    for (slot, row) in v.chunks_exact(dim).enumerate() {
        g.insert(row, slot).unwrap();
    }
    let before = g.unreachable();
    assert!(!before.is_empty(), "these parameters leave some node unreachable before the relink");
    assert_eq!(g.relink_unreachable(), before.len());
    assert_eq!(g.unreachable(), Vec::<u32>::new());
    // A search for a relinked node's own vector finds it again (this small graph, M 4, is
    // not perfect at it, so most of them, not every one).
    let found = before
        .iter()
        .filter(|&&s| {
            let q = &v[s as usize * dim..(s as usize + 1) * dim];
            g.search(q, 10, 64, None).iter().any(|&(hit, _)| hit == s as usize)
        })
        .count();
    assert!(found * 10 >= before.len() * 9, "{found} of {} relinked nodes found", before.len());
}

#[test]
fn an_entry_point_without_a_level_is_no_entry_point() {
    assert_eq!(unpack(0), None);
    assert_eq!(unpack(5), None, "slot bits but no level: a crafted file, not a node");
    assert_eq!(unpack(pack(5, 0)), Some((5, 0)));
    assert_eq!(unpack(pack(u32::MAX, MAX_LEVEL)), Some((u32::MAX, MAX_LEVEL)));
}

#[test]
fn the_int8_walk_finds_what_the_stored_vectors_find_and_scores_with_them() {
    let dim = 48;
    let v = clustered(5000, dim, 11);
    let queries = clustered(200, dim, 12);
    for precision in [Precision::F32, Precision::F16] {
        let g = build(&v, dim, Params { m: 12, ef_construction: 64, precision }, 2);
        assert!(g.int8_walk(), "on by default");
        // Every node has its codes, within half a step of the stored vector.
        for slot in (0..5000u32).step_by(37) {
            let stored = g.vector_f32(slot).unwrap();
            let Some(crate::table::Row::I8(codes, scale)) = g.coarse.get(slot).and_then(|r| g.coarse.row(r)) else {
                panic!("slot {slot} has no codes")
            };
            assert!(codes.iter().zip(&stored).all(|(&c, &x)| (f32::from(c) * scale - x).abs() <= 0.5 * scale + 1e-6));
        }
        for ef in [10, 20, 40, 80, 160] {
            let coarse = recall(&g, &v, &queries, dim, ef);
            g.set_int8_walk(false);
            let exact = recall(&g, &v, &queries, dim, ef);
            g.set_int8_walk(true);
            assert!(coarse >= exact - 0.01, "{precision:?} ef {ef}: int8 walk {coarse}, stored vectors {exact}");
            eprintln!("{precision:?} ef {ef}: int8 walk {coarse}, stored vectors {exact}");
            assert!(ef < 160 || coarse > 0.9, "{precision:?} ef {ef}: {coarse}");
        }
        // The scores returned are those of the stored vectors, best first.
        for q in queries.chunks_exact(dim).take(20) {
            let found = g.search(q, 10, 40, None);
            assert_eq!(found.len(), 10);
            for w in found.windows(2) {
                assert!(w[0].1 >= w[1].1);
            }
            for &(slot, score) in &found {
                assert_eq!(score, 1.0 - (1.0 - g.dot_query(q, slot as u32)));
            }
        }
        // A filter still applies to what the int8 walk returns.
        let odd = |s: usize| s % 2 == 1;
        for q in queries.chunks_exact(dim).take(20) {
            assert!(g.search(q, 10, 40, Some(&odd)).iter().all(|&(s, _)| odd(s)));
        }
    }
}

#[test]
fn a_loaded_graph_has_the_codes_of_its_vectors() {
    let dim = 16;
    let v = clustered(600, dim, 21);
    let dir = tempfile::tempdir().unwrap();
    let params = Params { m: 6, ef_construction: 30, precision: Precision::F16 };
    let g = build(&v, dim, params, 1);
    let path = dir.path().join("g.hnsw");
    g.save(&path).unwrap();
    let loaded = Hnsw::load(&path, dim, params).unwrap();
    let words =
        |h: &Hnsw, s: u32| -> Vec<u32> { h.coarse.get(s).unwrap().iter().map(|w| w.load(Ordering::Relaxed)).collect() };
    for slot in 0..600u32 {
        assert_eq!(words(&loaded, slot), words(&g, slot), "slot {slot}");
    }
    assert!(loaded.memory_bytes() >= loaded.coarse.allocated_bytes() + loaded.table.allocated_bytes());
}
