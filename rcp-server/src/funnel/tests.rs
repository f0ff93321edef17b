use rcp_wire::{Hit, Mode, RetrieveParams, RetrieveResult};
use serde_json::json;

use super::Funnel;

fn params(v: serde_json::Value) -> RetrieveParams {
    serde_json::from_value(v).expect("params")
}

#[test]
fn plan_defaults_clamps_and_opt_outs() {
    let p = params(json!({"query": "q", "k": 3}));
    let f = Funnel::plan(&p, 3, 100, "cross-encoder", Some(40)).expect("a stage");
    assert_eq!((f.candidates, f.top_n, f.k, f.method.as_str()), (100, 40, 3, "cross-encoder"));
    assert_eq!(f.first_stage, "recall");
    let p = params(json!({"query": "q", "k": 3, "mode": "hybrid", "rerank": {"method": "colbert", "topN": 20}}));
    let f = Funnel::plan(&p, 3, 10, "cross-encoder", None).expect("a stage");
    assert_eq!((f.candidates, f.top_n, f.method.as_str(), f.first_stage.as_str()), (20, 20, "colbert", "fusion"));
    assert!(Funnel::plan(&params(json!({"query": "q", "k": 3, "rerank": false})), 3, 100, "x", None).is_none());
    assert!(Funnel::plan(&params(json!({"query": "q", "k": 3, "cursor": "c"})), 3, 100, "x", None).is_none());
    let mut p = params(json!({"query": "q", "k": 3}));
    p.mode = Some(Mode::Dense);
    assert_eq!(Funnel::plan(&p, 3, 100, "x", None).map(|f| f.first_stage), Some("dense".to_owned()));
}

#[test]
fn apply_rescores_sorts_cuts_and_counts() {
    let p = params(json!({"query": "q", "k": 2, "mode": "sparse", "rerank": {"topN": 3}}));
    let f = Funnel::plan(&p, 2, 4, "cross-encoder", None).expect("a stage");
    let hits = (0..4).map(|i| Hit::new(format!("d{i}"), f64::from(10 - i)).with_text(format!("t{i}"))).collect();
    let mut res = RetrieveResult::from_hits(hits);
    let (passages, missing) = f.passages(&res.hits);
    assert_eq!((passages.len(), missing), (3, 0));
    f.apply(&mut res, vec![0.1, f64::NAN, 0.7], None);
    let ids: Vec<String> = res.hits.iter().map(Hit::key).collect();
    assert_eq!(ids, ["d2", "d0"]);
    let scores = res.hits[0].scores.clone().unwrap_or_default();
    assert_eq!((scores.get("rerank"), scores.get("sparse")), (Some(&0.7), Some(&8.0)));
    let usage = res.usage.clone().unwrap_or_default();
    assert_eq!((usage.candidates, usage.reranked), (Some(4), Some(3)));
}

#[test]
fn k_above_max_candidates_returns_fewer_and_says_why() {
    let p = params(json!({"query": "q", "k": 5}));
    let f = Funnel::plan(&p, 5, 100, "cross-encoder", Some(2)).expect("a stage");
    let hits = (0..6).map(|i| Hit::new(format!("d{i}"), 1.0).with_text("t")).collect();
    let mut res = RetrieveResult::from_hits(hits);
    f.apply(&mut res, vec![1.0, 2.0], None);
    assert_eq!(res.hits.len(), 2);
    assert!(res.usage.unwrap_or_default().notes.iter().any(|n| n.contains("maxCandidates")));
}

#[test]
fn diversify_runs_mmr_over_the_reranked_hits() {
    use rcp_wire::retrieve::WireVector;
    let p = params(json!({"query": "q", "k": 2}));
    let mut f = Funnel::plan(&p, 2, 3, "cross-encoder", None).expect("a stage");
    f.diversify = Some(0.5);
    let vectors = [[1.0f32, 0.0], [1.0, 0.0], [0.0, 1.0]];
    let hits = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut h = Hit::new(format!("d{i}"), 1.0).with_text("t");
            h.vector = Some(WireVector::Json(v.to_vec()));
            h
        })
        .collect();
    let mut res = RetrieveResult::from_hits(hits);
    f.apply(&mut res, vec![0.9, 0.8, 0.5], None);
    let ids: Vec<String> = res.hits.iter().map(Hit::key).collect();
    // d1 duplicates d0: 0.5·0.8 − 0.5·1 < 0.5·0.5 − 0 for d2.
    assert_eq!(ids, ["d0", "d2"]);
    let mut res = RetrieveResult::from_hits(vec![Hit::new("x", 1.0).with_text("t")]);
    f.apply(&mut res, vec![0.3], None);
    assert!(res.usage.unwrap_or_default().notes.iter().any(|n| n.contains("mmr not applied")));
}
