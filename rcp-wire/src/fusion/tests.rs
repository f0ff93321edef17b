use super::*;
use crate::content::Content;
use crate::error::ErrorCode;
use serde_json::json;

fn hits(ids: &[&str]) -> Vec<Hit> {
    ids.iter().enumerate().map(|(i, id)| Hit::new(*id, 1.0 / (i as f64 + 1.0))).collect()
}

fn scored(pairs: &[(&str, f64)]) -> Vec<Hit> {
    pairs.iter().map(|(id, s)| Hit::new(*id, *s)).collect()
}

fn keys(hits: &[Hit]) -> Vec<String> {
    hits.iter().map(Hit::key).collect()
}

fn meta<'a>(h: &'a Hit, key: &str) -> &'a Value {
    &h.meta.as_ref().unwrap()[key]
}

#[test]
fn rrf_hand_computed() {
    let lists = [EngineList::new("A", hits(&["a", "b", "c"])), EngineList::new("B", hits(&["b", "d"]))];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    assert_eq!(keys(&out), ["b", "a", "d", "c"]);
    assert_eq!(out[0].score, 1.0 / 62.0 + 1.0 / 61.0);
    assert_eq!(out[1].score, 1.0 / 61.0);
    assert_eq!(out[2].score, 1.0 / 62.0);
    assert_eq!(out[3].score, 1.0 / 63.0);
    assert_eq!(meta(&out[0], "fusedScore"), &json!(1.0 / 62.0 + 1.0 / 61.0));
    assert_eq!(meta(&out[0], "engineRanks"), &json!({"A": 2, "B": 1}));
    assert_eq!(meta(&out[0], "engineScores"), &json!({"A": 0.5, "B": 1.0}));
    // b: best rank 1 at B.
    assert_eq!(meta(&out[0], "engine"), "B");
    assert_eq!(meta(&out[0], "engineRank"), 1);
    assert_eq!(meta(&out[0], "engineScore"), 1.0);
    assert_eq!(meta(&out[3], "engine"), "A");
    // Truncation to k.
    assert_eq!(keys(&fuse(&lists, &FusionMethod::rrf(), 2).unwrap()), ["b", "a"]);
    assert!(fuse(&lists, &FusionMethod::rrf(), 0).unwrap().is_empty());
}

#[test]
fn rrf_weights_and_custom_k() {
    let lists = [
        EngineList::new("A", hits(&["a", "b"])).with_weight(2.0),
        EngineList::new("B", hits(&["b", "a"])).with_weight(0.5),
    ];
    let out = fuse(&lists, &FusionMethod::Rrf { rrf_k: 0.0 }, 10).unwrap();
    // a: 2/1 + 0.5/2 = 2.25; b: 2/2 + 0.5/1 = 1.5.
    assert_eq!(keys(&out), ["a", "b"]);
    assert_eq!(out[0].score, 2.0 / 1.0 + 0.5 / 2.0);
    assert_eq!(out[1].score, 2.0 / 2.0 + 0.5 / 1.0);
}

#[test]
fn ties_break_by_summed_weight_then_id() {
    // x: only A (w=1) at rank 1 -> 1/61. y: only B (w=1) at rank 1 -> 1/61.
    // z: C (w=0.5) rank 1 + D (w=0.5) rank 1 -> 0.5/61 + 0.5/61 = 1/61 exactly, weight 1.0.
    // So x, y, z tie on score and summed weight: by id. Then make z heavier.
    let lists = [
        EngineList::new("A", hits(&["y"])),
        EngineList::new("B", hits(&["x"])),
        EngineList::new("C", hits(&["z"])).with_weight(0.5),
        EngineList::new("D", hits(&["z"])).with_weight(0.5),
    ];
    let out = fuse(&lists, &FusionMethod::Rrf { rrf_k: 1.0 }, 10).unwrap();
    assert_eq!(out[0].score, out[2].score);
    assert_eq!(keys(&out), ["x", "y", "z"]);

    // Equal fused score (0.5 each), different summed weight: w=1 for "m" vs w=2 for "n".
    // m: A(w=1) rank 1, rrfK=1 -> 1/2. n: B(w=2) rank 3, rrfK=1 -> 2/4 = 1/2.
    let lists = [EngineList::new("A", hits(&["m"])), EngineList::new("B", hits(&["p", "q", "n"])).with_weight(2.0)];
    let out = fuse(&lists, &FusionMethod::Rrf { rrf_k: 1.0 }, 10).unwrap();
    let m = out.iter().position(|h| h.key() == "m").unwrap();
    let n = out.iter().position(|h| h.key() == "n").unwrap();
    assert_eq!(out[m].score, out[n].score);
    assert!(n < m, "higher summed weight wins the tie: {:?}", keys(&out));
}

#[test]
fn id_tiebreak_is_bytewise_on_the_stringified_id() {
    let lists = [EngineList::new("A", vec![Hit::new(10, 1.0)]), EngineList::new("B", vec![Hit::new(9, 1.0)])];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    // "10" < "9" lexicographically.
    assert_eq!(keys(&out), ["10", "9"]);
    // A numeric id and the equal string id are the same document.
    let lists = [EngineList::new("A", vec![Hit::new(7, 1.0)]), EngineList::new("B", vec![Hit::new("7", 1.0)])];
    assert_eq!(fuse(&lists, &FusionMethod::rrf(), 10).unwrap().len(), 1);
}

#[test]
fn input_order_does_not_matter() {
    let make = || {
        vec![
            EngineList::new("kw", scored(&[("a", 9.0), ("b", 7.5), ("c", 1.0), ("e", 0.3)]))
                .with_weight(0.7)
                .with_score_floor(0.0),
            EngineList::new("dense", scored(&[("b", 0.91), ("d", 0.8), ("a", 0.33)]))
                .with_weight(1.3)
                .with_score_floor(-1.0),
            EngineList::new("graph", scored(&[("e", 3.0), ("a", 2.0), ("f", 2.0)])).with_score_floor(0.0),
        ]
    };
    for method in [FusionMethod::rrf(), FusionMethod::Weighted, FusionMethod::convex(0.3)] {
        let base = fuse(&make(), &method, 10).unwrap();
        for perm in [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
            let lists = make();
            let shuffled: Vec<EngineList> = perm.iter().map(|&i| lists[i].clone()).collect();
            let out = fuse(&shuffled, &method, 10).unwrap();
            assert_eq!(out, base, "{method:?} {perm:?}");
            let a: Vec<u64> = out.iter().map(|h| h.score.to_bits()).collect();
            let b: Vec<u64> = base.iter().map(|h| h.score.to_bits()).collect();
            assert_eq!(a, b);
        }
    }
}

#[test]
fn weighted_min_max_hand_computed() {
    // A: scores 10, 6, 2 -> norm 1, 0.5, 0. B (w=2): 0.9, 0.1 -> 1, 0. C: all 5 -> 1.
    let lists = [
        EngineList::new("A", scored(&[("a", 10.0), ("b", 6.0), ("c", 2.0)])),
        EngineList::new("B", scored(&[("c", 0.9), ("b", 0.1)])).with_weight(2.0),
        EngineList::new("C", scored(&[("d", 5.0), ("e", 5.0)])).with_weight(0.25),
    ];
    let out = fuse(&lists, &FusionMethod::Weighted, 10).unwrap();
    // a = 1; b = 0.5 + 0; c = 0 + 2; d = e = 0.25.
    assert_eq!(keys(&out), ["c", "a", "b", "d", "e"]);
    assert_eq!(out[0].score, 2.0);
    assert_eq!(out[1].score, 1.0);
    assert_eq!(out[2].score, 0.5);
    assert_eq!(out[3].score, 0.25);
    assert_eq!(meta(&out[0], "engineScores"), &json!({"A": 2.0, "B": 0.9}));
    assert_eq!(meta(&out[0], "engine"), "B");
}

#[test]
fn convex_with_floors_hand_computed() {
    // dense floor -1: scores 0.8, 0.2 -> (0.8+1)/(0.8+1) = 1, (0.2+1)/1.8 = 2/3.
    // sparse floor 0: scores 12, 3 -> 1, 0.25. α = 0.75 on "dense", 0.25 on "sparse".
    let lists = [
        EngineList::new("sparse", scored(&[("x", 12.0), ("y", 3.0)])).with_score_floor(0.0),
        EngineList::new("dense", scored(&[("y", 0.8), ("z", 0.2)])).with_score_floor(-1.0),
    ];
    let out = fuse(&lists, &FusionMethod::convex(0.75), 10).unwrap();
    let y = 0.75 * 1.0 + 0.25 * 0.25;
    let z = 0.75 * ((0.2 - -1.0) / (0.8 - -1.0));
    let x = 0.25 * 1.0;
    assert_eq!(keys(&out), ["y", "z", "x"]);
    // Summation is in engine-name order: dense first, then sparse.
    assert_eq!(out[0].score, 0.0 + 0.75 * 1.0 + 0.25 * 0.25);
    assert_eq!(out[0].score, y);
    assert_eq!(out[1].score, z);
    assert_eq!(out[2].score, x);

    // Explicit α engine; and with three lists α is not applied.
    let out = fuse(&lists, &FusionMethod::convex_for(0.75, "sparse"), 10).unwrap();
    assert_eq!(keys(&out), ["x", "y", "z"]);
    assert_eq!(out[0].score, 0.75);
    let mut three = lists.to_vec();
    three.push(EngineList::new("graph", scored(&[("q", 1.0)])).with_score_floor(0.0));
    let out = fuse(&three, &FusionMethod::convex(0.75), 10).unwrap();
    assert_eq!(out[0].key(), "y");
    assert_eq!(out[0].score, 1.0 + 0.25);
}

#[test]
fn convex_guards_and_clamps() {
    // Single score equal to the floor: max == floor -> 1.0. A score below the floor
    // (a misbehaving engine) clamps to 0.
    let lists = [
        EngineList::new("a", scored(&[("p", 0.0)])).with_score_floor(0.0),
        EngineList::new("b", scored(&[("q", 1.0), ("r", -5.0)])).with_score_floor(0.0),
    ];
    let out = fuse(&lists, &FusionMethod::convex(0.5), 10).unwrap();
    assert_eq!(keys(&out), ["p", "q", "r"]);
    assert_eq!(out[0].score, 1.0);
    assert_eq!(out[2].score, 0.0);
}

#[test]
fn convex_without_floor_errors_and_falls_back() {
    let lists = [
        EngineList::new("A", hits(&["a", "b", "c"])).with_score_floor(0.0),
        EngineList::new("C", hits(&["c"])),
        EngineList::new("B", hits(&["b", "d"])),
    ];
    let err = fuse(&lists, &FusionMethod::convex(0.5), 10).unwrap_err();
    assert_eq!(err, FusionError::MissingScoreFloor { engines: vec!["B".into(), "C".into()] });
    let rcp: RcpError = err.into();
    assert_eq!(rcp.code, ErrorCode::OPTION_UNSUPPORTED);
    assert_eq!(rcp.option(), Some("fusion.method"));

    let outcome = fuse_or_fallback(&lists, &FusionMethod::convex(0.5), 10).unwrap();
    assert_eq!(outcome.method, FusionMethod::rrf());
    assert_eq!(outcome.hits, fuse(&lists, &FusionMethod::rrf(), 10).unwrap());
    let note = outcome.note.unwrap();
    assert!(note.contains("B, C") && note.contains("rrf"), "{note}");

    let ok = fuse_or_fallback(&lists, &FusionMethod::Weighted, 3).unwrap();
    assert_eq!(ok.note, None);
    assert_eq!(ok.method, FusionMethod::Weighted);
    assert_eq!(ok.hits.len(), 3);
}

#[test]
fn invalid_parameters_are_rejected() {
    let lists = [EngineList::new("A", hits(&["a"]))];
    for (method, param) in [
        (FusionMethod::Rrf { rrf_k: -1.0 }, "fusion.rrfK"),
        (FusionMethod::Rrf { rrf_k: f64::NAN }, "fusion.rrfK"),
        (FusionMethod::convex(1.5), "fusion.alpha"),
        (FusionMethod::convex(f64::NAN), "fusion.alpha"),
    ] {
        let e = fuse(&lists, &method, 5).unwrap_err();
        assert!(matches!(e, FusionError::InvalidParameter { param: p, .. } if p == param), "{e:?}");
        let rcp: RcpError = e.into();
        assert_eq!(rcp.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(rcp.field(), Some(param));
    }
    for w in [-0.5, f64::INFINITY, f64::NAN] {
        let lists = [EngineList::new("A", hits(&["a"])).with_weight(w)];
        let e = fuse(&lists, &FusionMethod::rrf(), 5).unwrap_err();
        assert!(matches!(e, FusionError::InvalidParameter { param: "fusion.weights", .. }));
    }
    let dup = [EngineList::new("A", hits(&["a"])), EngineList::new("A", hits(&["b"]))];
    assert_eq!(fuse(&dup, &FusionMethod::rrf(), 5).unwrap_err(), FusionError::DuplicateEngine("A".into()));
    assert_eq!(RcpError::from(FusionError::DuplicateEngine("A".into())).code, ErrorCode::INTERNAL_ERROR);
}

#[test]
fn dedup_keeps_richest_body_and_merges_meta() {
    let short = Hit::new("d", 0.9).with_text("short").with_meta("lang", "en").with_meta("src", "A");
    let long = Hit::new("d", 0.1).with_text("a much longer body").with_meta("src", "B").with_meta("year", 2024);
    let lists = [EngineList::new("A", vec![short]), EngineList::new("B", vec![Hit::new("x", 1.0), long])];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    let d = out.iter().find(|h| h.key() == "d").unwrap();
    assert_eq!(d.text.as_deref(), Some("a much longer body"));
    let m = d.meta.as_ref().unwrap();
    assert_eq!(m["lang"], "en");
    assert_eq!(m["src"], "B", "the body's engine wins a conflict");
    assert_eq!(m["year"], 2024);
    // meta.engine names the engine whose body is kept (B), with its own rank and score, even
    // though A ranked the document better; A's overruled value stays visible.
    assert_eq!(m["engine"], "B");
    assert_eq!(m["engineRank"], 2);
    assert_eq!(m["engineScore"], 0.1);
    assert_eq!(m["engineRanks"], json!({"A": 1, "B": 2}));
    assert_eq!(m["engineMeta"], json!({"A": {"src": "A"}}));
    assert_eq!(d.score, 1.0 / 61.0 + 1.0 / 62.0);
}

#[test]
fn dedup_by_content_blocks_and_rank_ties() {
    let one = Hit { content: Some(vec![Content::text("p")]), ..Hit::new("d", 1.0) };
    let two = Hit { content: Some(vec![Content::text("p"), Content::text("q")]), ..Hit::new("d", 1.0) };
    let lists = [EngineList::new("A", vec![one]), EngineList::new("B", vec![two.clone()])];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    assert_eq!(out[0].content, two.content);
    // Same richness and rank: engine name order picks A for both body and meta.engine.
    let lists = [
        EngineList::new("B", vec![Hit::new("d", 1.0).with_meta("from", "B")]),
        EngineList::new("A", vec![Hit::new("d", 2.0).with_meta("from", "A")]),
    ];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    assert_eq!(meta(&out[0], "engine"), "A");
    assert_eq!(meta(&out[0], "from"), "A");
    assert_eq!(meta(&out[0], "engineScore"), 2.0);
}

#[test]
fn two_documents_under_one_id_never_mix() {
    // Two engines holding different documents under one id: the fused hit's text, citation
    // and every conflicting meta value come from the engine meta.engine names.
    let tokio = Hit::new("rust-3", 3.0)
        .with_text("Tokio: an asynchronous runtime for Rust with a work-stealing scheduler")
        .with_meta("year", 2016)
        .with_meta("topic", "async");
    let tantivy = Hit::new("rust-3", 9.0).with_text("Tantivy").with_meta("year", 2018).with_meta("lang", "en");
    let lists = [EngineList::new("one", vec![tantivy]), EngineList::new("two", vec![tokio.clone()])];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    let m = out[0].meta.as_ref().unwrap();
    assert_eq!(m["engine"], "two");
    assert_eq!(out[0].text, tokio.text);
    assert_eq!((m["year"].clone(), m["topic"].clone(), m["lang"].clone()), (json!(2016), json!("async"), json!("en")));
    assert_eq!(m["engineMeta"], json!({"one": {"year": 2018}}));
    assert!(m.get("engineMeta").and_then(|e| e.get("two")).is_none(), "the winner lost nothing");
}

#[test]
fn repeated_id_within_a_list_keeps_first_rank() {
    let lists = [EngineList::new("A", hits(&["a", "b", "a", "c"]))];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    assert_eq!(keys(&out), ["a", "b", "c"]);
    assert_eq!(out[0].score, 1.0 / 61.0);
    // c keeps its list position (4).
    assert_eq!(meta(&out[2], "engineRank"), 4);
}

#[test]
fn empty_inputs_and_non_finite_scores() {
    assert!(fuse(&[], &FusionMethod::rrf(), 10).unwrap().is_empty());
    assert!(fuse(&[EngineList::new("A", vec![])], &FusionMethod::Weighted, 10).unwrap().is_empty());
    let lists = [EngineList::new("A", scored(&[("a", f64::NAN), ("b", 2.0), ("c", 1.0)]))];
    let out = fuse(&lists, &FusionMethod::Weighted, 10).unwrap();
    assert_eq!(keys(&out), ["b", "a", "c"]);
    assert!(out.iter().all(|h| h.score.is_finite()));
}

#[test]
fn method_names_round_trip() {
    for m in [FusionMethod::rrf(), FusionMethod::Weighted, FusionMethod::convex(DEFAULT_ALPHA)] {
        assert_eq!(FusionMethod::from_name(m.name()), Some(m));
    }
    assert_eq!(FusionMethod::from_name("borda"), None);
    assert_eq!(FusionMethod::default(), FusionMethod::Rrf { rrf_k: 60.0 });
}

#[test]
fn a_fused_hit_keeps_the_highest_confidence() {
    let with = |id: &str, score: f64, confidence: Option<f64>| Hit { confidence, ..Hit::new(id, score) };
    let lists = [
        EngineList::new("A", vec![with("d", 2.0, Some(0.4)), with("e", 1.0, None)]),
        EngineList::new("B", vec![with("d", 9.0, Some(0.8))]),
    ];
    let out = fuse(&lists, &FusionMethod::rrf(), 10).unwrap();
    assert_eq!(out[0].confidence, Some(0.8), "the strongest engine's calibrated belief");
    assert_eq!(out[1].confidence, None, "none given, none made up");
}
