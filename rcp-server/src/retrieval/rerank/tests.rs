use rcp_wire::retrieve::{RERANK_FUSION_KEY, RerankFusion};
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
    // The default depth: the top 20 candidates, fused by the convex combination; without a
    // `candidateK` of the request's own, recall fetches just those.
    assert_eq!((f.candidates, f.top_n, f.k, f.method.as_str()), (20, 20, 3, "cross-encoder"));
    let asked = params(json!({"query": "q", "k": 3, "candidateK": 100}));
    let f = Funnel::plan(&asked, 3, 100, "cross-encoder", Some(40)).expect("a stage");
    assert_eq!((f.candidates, f.top_n), (100, 20), "an explicit candidateK is kept");
    assert_eq!((f.first_stage.as_str(), f.fusion), ("recall", RerankFusion::Convex));
    let f = Funnel::plan(&p, 3, 100, "cross-encoder", Some(15)).expect("a stage");
    assert_eq!(f.top_n, 15, "within maxCandidates");
    let f = Funnel::plan(&params(json!({"query": "q", "k": 30})), 30, 100, "x", None).expect("a stage");
    assert_eq!(f.top_n, 30, "never below k");
    let f = Funnel::plan(&params(json!({"query": "q", "k": 3})), 3, 12, "x", None).expect("a stage");
    assert_eq!((f.candidates, f.top_n), (12, 12), "within candidateK");
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
    let p = params(json!({"query": "q", "k": 2, "mode": "sparse", "rerank": {"topN": 3, "fusion": "none"}}));
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
    assert_eq!(res.hits[0].score, 0.7);
    let usage = res.usage.clone().unwrap_or_default();
    assert_eq!((usage.candidates, usage.reranked), (Some(4), Some(3)));
}

#[test]
fn a_passage_is_the_title_then_the_text_once() {
    let titled = |text: Option<&str>, title: serde_json::Value| {
        let mut h = Hit::new("d", 1.0);
        h.text = text.map(str::to_owned);
        h.meta = json!({"title": title, "heading": "Lift"}).as_object().cloned();
        h
    };
    let passage = |h: &Hit| Funnel::passage(h, Funnel::DEFAULT_TITLE_FIELD);
    assert_eq!(passage(&titled(Some("the lift of a wing"), json!("Wings"))), "Wings\nthe lift of a wing");
    // A text that begins with its title (Cranfield's 1,396 of 1,400) is read once.
    assert_eq!(passage(&titled(Some("Wings. the lift of a wing"), json!("Wings."))), "Wings. the lift of a wing");
    // A title-only document (half of CACM's) is its title, not an empty passage.
    assert_eq!(passage(&titled(None, json!("Wings"))), "Wings");
    assert_eq!(passage(&titled(Some("text"), json!(7))), "text", "a title that is no string is left out");
    assert_eq!(passage(&titled(Some("text"), json!("  "))), "text");
    assert_eq!(Funnel::passage(&titled(Some("text"), json!("Wings")), "heading"), "Lift\ntext", "the engine's field");
    let p = params(json!({"query": "q", "k": 2}));
    let f = Funnel::plan(&p, 2, 4, "cross-encoder", None).expect("a stage");
    let (passages, missing) = f.passages(&[titled(None, json!("Wings")), titled(None, json!(null))]);
    assert_eq!((passages.len(), missing), (2, 1), "only the hit with neither is empty");
}

#[test]
fn k_above_max_candidates_returns_fewer_and_says_why() {
    let p = params(json!({"query": "q", "k": 5, "rerank": {"fusion": "none"}}));
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
    assert!(res.usage.unwrap_or_default().notes.iter().any(|n| n.contains("likeness by their words")));
}

/// Ten candidates in first-stage order `d0..d9` (scores 10..1), and reranker scores that put
/// `d9` first and `d0` last, the rest in first-stage order.
fn inverted_head() -> (RetrieveResult, Vec<f64>) {
    let hits = (0..10).map(|i| Hit::new(format!("d{i}"), f64::from(10 - i)).with_text(format!("t{i}"))).collect();
    let mut rerank: Vec<f64> = (0..10).map(|i| f64::from(9 - i) / 10.0).collect();
    rerank.swap(0, 9);
    (RetrieveResult::from_hits(hits), rerank)
}

fn ranked(fusion: Option<&str>, min_score: Option<f64>) -> RetrieveResult {
    let stage = match fusion {
        Some(f) => json!({"fusion": f}),
        None => json!({}),
    };
    let p = params(json!({"query": "q", "k": 3, "mode": "dense", "rerank": stage}));
    let f = Funnel::plan(&p, 3, 10, "cross-encoder", None).expect("a stage");
    let (mut res, rerank) = inverted_head();
    f.apply(&mut res, rerank, min_score);
    res
}

fn keys(res: &RetrieveResult) -> Vec<String> {
    res.hits.iter().map(Hit::key).collect()
}

#[test]
fn fusion_none_is_the_reranker_order() {
    let res = ranked(Some("none"), None);
    assert_eq!(keys(&res), ["d9", "d1", "d2"]);
    let top = &res.hits[0];
    assert_eq!(top.score, 0.9);
    let scores = top.scores.clone().unwrap_or_default();
    assert_eq!((scores.get("rerank"), scores.get("dense")), (Some(&0.9), Some(&1.0)));
}

#[test]
fn rrf_fusion_keeps_the_first_stage_evidence() {
    // d1 is 2nd by both rankings: 2/(60+2); d9 is 1st by the reranker, 10th by recall:
    // 1/61 + 1/70 < 2/62. d0 (1st by recall, last by the reranker) ties d9 and keeps its
    // first-stage place ahead of it. The pure reranker order is d9, d1, d2.
    let res = ranked(Some("rrf"), None);
    assert_eq!(keys(&res), ["d1", "d2", "d3"]);
    let top = &res.hits[0];
    assert!((top.score - 2.0 / 62.0).abs() < 1e-12, "{}", top.score);
    let scores = top.scores.clone().unwrap_or_default();
    assert_eq!((scores.get("rerank"), scores.get("dense")), (Some(&0.8), Some(&9.0)));
}

#[test]
fn default_fusion_is_convex_over_normalised_scores() {
    // d0: 0.5·0 + 0.5·1 = 0.5; d1: 0.5·(0.8/0.9) + 0.5·(8/9) = 0.889; d9: 0.5·1 + 0 = 0.5.
    // The pure reranker order is d9, d1, d2.
    let res = ranked(None, None);
    assert_eq!(keys(&res), ["d1", "d2", "d3"]);
    assert_eq!(keys(&ranked(Some("convex"), None)), keys(&res));
    assert!((res.hits[0].score - 8.0 / 9.0).abs() < 1e-12, "{}", res.hits[0].score);
    assert!(res.hits.iter().all(|h| (0.0..=1.0).contains(&h.score)));
}

#[test]
fn min_score_applies_to_the_reranker_score_whatever_the_fusion() {
    for fusion in [None, Some("none"), Some("convex")] {
        let res = ranked(fusion, Some(0.65));
        let mut kept = keys(&res);
        kept.sort();
        assert_eq!(kept, ["d1", "d2", "d9"], "{fusion:?}");
    }
}

#[test]
fn rrf_scores_rank_nan_last_and_ties_by_first_stage() {
    let fused = Funnel::rrf_scores(60.0, &[f64::NAN, 1.0, 1.0]);
    // Reranker ranks: d1 1st, d2 2nd (tie, first-stage order), NaN 3rd.
    let expect = [1.0 / 61.0 + 1.0 / 63.0, 1.0 / 62.0 + 1.0 / 61.0, 1.0 / 63.0 + 1.0 / 62.0];
    for (f, e) in fused.iter().zip(expect) {
        assert!((f - e).abs() < 1e-12, "{fused:?}");
    }
    let convex = Funnel::convex_scores(0.5, &[3.0, 3.0], &[f64::NAN, 2.0]);
    assert_eq!(convex, [0.5, 1.0]);
}

#[test]
fn unknown_fusion_is_refused_naming_the_field() {
    let raw = serde_json::value::RawValue::from_string(
        r#"{"query": "q", "k": 3, "rerank": {"method": "cross-encoder", "fusion": "mean"}}"#.to_owned(),
    )
    .expect("json");
    let err = crate::service::validate::parse::<RetrieveParams>(Some(&raw)).expect_err("refused");
    assert_eq!(err.code, rcp_wire::ErrorCode::INVALID_PARAMS);
    let field = err.data.as_ref().and_then(|d| d.field.clone());
    assert_eq!(field.as_deref(), Some("rerank.fusion"), "{err:?}");
    assert!(err.message.contains("mean"), "{}", err.message);
}

#[test]
fn advertise_lists_the_default_first() {
    let mut cap = rcp_wire::capabilities::RetrieveCapability::default();
    Funnel::advertise(&mut cap);
    assert_eq!(cap.rerank_builtin, Some(true));
    assert_eq!(cap.extra[RERANK_FUSION_KEY], json!(["convex", "rrf", "none"]));
}

/// The funnel of [`inverted_head`] with `k` and `fusion`, `topN` 10.
fn cut_funnel(k: usize, fusion: &str) -> Funnel {
    let p = params(json!({"query": "q", "k": k, "mode": "dense", "rerank": {"topN": 10, "fusion": fusion}}));
    Funnel::plan(&p, k, 10, "cross-encoder", None).expect("a stage")
}

#[test]
fn a_cut_head_is_rescored_and_the_rest_follow_in_first_stage_order() {
    // The reranker had time for 3 of the 10 passages: it prefers d2, then d1, then d0.
    let f = cut_funnel(5, "none");
    let (mut res, _) = inverted_head();
    f.apply(&mut res, vec![0.1, 0.2, 0.3], None);
    assert_eq!(keys(&res), ["d2", "d1", "d0", "d3", "d4"], "k hits still come back");
    let rerank: Vec<bool> =
        res.hits.iter().map(|h| h.scores.as_ref().is_some_and(|s| s.contains_key("rerank"))).collect();
    assert_eq!(rerank, [true, true, true, false, false], "only the head carries a reranker score");
    // `score` still orders the list, each unrescored hit just below the one before it.
    assert!(res.hits.windows(2).all(|w| w[0].score > w[1].score), "{:?}", res.hits);
    assert!(res.hits[3].score < 0.1 && res.hits[3].score > 0.099, "{}", res.hits[3].score);
    let kept = res.hits[3].scores.clone().unwrap_or_default();
    assert_eq!(kept.get("dense"), Some(&7.0), "the first-stage score is kept");
    let usage = res.usage.unwrap_or_default();
    assert_eq!((usage.candidates, usage.reranked), (Some(10), Some(3)));
    // A head of k or more fills the answer by itself.
    let f = cut_funnel(2, "none");
    let (mut res, _) = inverted_head();
    f.apply(&mut res, vec![0.1, 0.2, 0.3], None);
    assert_eq!(keys(&res), ["d2", "d1"]);
}

#[test]
fn with_no_score_the_answer_is_the_first_stage() {
    for fusion in ["convex", "rrf", "none"] {
        let f = cut_funnel(3, fusion);
        let (mut res, _) = inverted_head();
        f.apply(&mut res, Vec::new(), None);
        assert_eq!(keys(&res), ["d0", "d1", "d2"], "{fusion}");
        assert_eq!(res.hits.iter().map(|h| h.score).collect::<Vec<_>>(), [10.0, 9.0, 8.0], "{fusion}");
        assert!(res.hits.iter().all(|h| h.scores.is_none()), "{fusion}");
        assert_eq!(res.usage.unwrap_or_default().reranked, Some(0), "{fusion}");
    }
}

#[test]
fn min_score_judges_an_unrescored_hit_on_its_first_stage_score() {
    let f = cut_funnel(5, "convex");
    let (mut res, _) = inverted_head();
    // Reranker scores 0.5 (d0) and 0.3 (d1) against 0.4: d0 stays, d1 goes; the unrescored
    // d2..d9 score 8..1 in the first stage, all above 0.4, and fill the answer to k.
    f.apply(&mut res, vec![0.5, 0.3], Some(0.4));
    assert_eq!(keys(&res), ["d0", "d2", "d3", "d4", "d5"]);
    // Against 6.5 neither reranker score passes; of the unrescored, d2 (8) and d3 (7) do, and
    // with no rescored hit before them they keep their first-stage scores.
    let (mut res, _) = inverted_head();
    f.apply(&mut res, vec![0.5, 0.3], Some(6.5));
    assert_eq!(keys(&res), ["d2", "d3"]);
    assert_eq!(res.hits.iter().map(|h| h.score).collect::<Vec<_>>(), [8.0, 7.0]);
}
