//! Unit tests of params validation: each finding of the gating module becomes `-32005` under
//! `strict` and a fallback plus a note under `strict:false`.

use rcp_wire::capabilities::default_encodings;
use rcp_wire::{Capabilities, ErrorCode, RetrieveParams};
use serde_json::{Value, json};

use super::*;

fn caps(v: Value) -> Capabilities {
    serde_json::from_value(v).expect("capabilities")
}

fn params(v: Value) -> RetrieveParams {
    serde_json::from_value(v).expect("params")
}

fn run(c: &Capabilities, p: Value) -> (Result<crate::handler::RetrieveRequest, RcpError>, Vec<String>) {
    let mut notes = Vec::new();
    let r = retrieve(params(p), c, &mut notes);
    (r, notes)
}

#[test]
fn k_is_clamped_to_max_k_with_a_note() {
    let c = caps(json!({"retrieve": {"maxK": 5}}));
    let (r, notes) = run(&c, json!({"query": "q", "k": 9}));
    assert_eq!(r.expect("ok").k, 5);
    assert_eq!(notes, ["k clamped from 9 to maxK 5"]);
    let (r, _) = run(&c, json!({"query": "q", "k": 0}));
    assert_eq!(r.expect_err("k=0").code, ErrorCode::INVALID_PARAMS);
}

#[test]
fn unadvertised_mode_is_refused_or_falls_back_to_the_default() {
    let c = caps(json!({"retrieve": {"modes": ["sparse"]}}));
    let (r, _) = run(&c, json!({"query": "q", "k": 1, "mode": "dense"}));
    let e = r.expect_err("strict");
    assert_eq!(e.code, ErrorCode::OPTION_UNSUPPORTED);
    assert_eq!(e.option(), Some("mode"));
    let (r, notes) = run(&c, json!({"query": "q", "k": 1, "mode": "dense", "strict": false}));
    assert_eq!(r.expect("fallback").mode, Some(rcp_wire::Mode::Sparse));
    assert_eq!(notes, ["mode 'dense' not advertised; using 'sparse'"]);
}

#[test]
fn flags_are_refused_when_strict_and_ignored_with_a_note_otherwise() {
    let c = caps(json!({"retrieve": {}}));
    for (option, value) in [
        ("level", json!(2)),
        ("tokenBudget", json!(100)),
        ("indexVersion", json!("v1")),
        ("cursor", json!("c")),
        ("mmr", json!({"lambda": 0.5})),
        ("rerank", json!(true)),
        // Not gated by a capability flag: refused unless the engine honours it (Honours).
        ("recency", json!({"field": "ts"})),
        ("includeVectors", json!(true)),
    ] {
        let mut p = json!({"query": "q", "k": 1});
        p[option] = value;
        let (r, _) = run(&c, p.clone());
        assert_eq!(r.expect_err(option).option(), Some(option));
        p["strict"] = json!(false);
        let (r, notes) = run(&c, p);
        assert!(r.is_ok(), "{option}");
        assert!(notes[0].starts_with(&format!("{option} ignored: ")), "{notes:?}");
    }
}

#[test]
fn rewrite_is_gated_on_transform_methods() {
    let c = caps(json!({"retrieve": {}, "transform": {"methods": ["hyde"]}}));
    assert!(run(&c, json!({"query": "q", "k": 1, "rewrite": "hyde"})).0.is_ok());
    let (r, _) = run(&c, json!({"query": "q", "k": 1, "rewrite": "decompose"}));
    assert_eq!(r.expect_err("strict").option(), Some("rewrite"));
    let (r, notes) = run(&c, json!({"query": "q", "k": 1, "rewrite": "decompose", "strict": false}));
    assert!(r.expect("fallback").rewrite.is_none());
    assert_eq!(notes, ["rewrite 'decompose' not advertised; query used as given"]);
    let (r, _) = run(&c, json!({"query": "q", "k": 1, "rewrite": true}));
    assert_eq!(r.expect_err("true").code, ErrorCode::INVALID_PARAMS);
}

#[test]
fn filter_operator_drops_but_field_and_recency_field_are_invalid_params() {
    let c = caps(json!({"retrieve": {}, "filter": {"fields": {"lang": "keyword", "ts": "date"}, "operators": ["eq"]}}));
    let ne = json!({"field": "lang", "op": "ne", "value": "en"});
    let (r, _) = run(&c, json!({"query": "q", "k": 1, "filter": ne}));
    assert_eq!(r.expect_err("strict").code, ErrorCode::OPTION_UNSUPPORTED);
    let (r, notes) = run(&c, json!({"query": "q", "k": 1, "filter": ne, "strict": false}));
    let req = r.expect("dropped");
    assert!(req.filter.is_none());
    assert!(notes[0].starts_with("filter dropped: "), "{notes:?}");
    let (r, _) =
        run(&c, json!({"query": "q", "k": 1, "strict": false, "filter": {"field": "x", "op": "eq", "value": 1}}));
    assert_eq!(r.expect_err("field").code, ErrorCode::INVALID_PARAMS);
    let (r, _) = run(&c, json!({"query": "q", "k": 1, "strict": false, "recency": {"field": "lang"}}));
    assert_eq!(r.expect_err("recency").field(), Some("recency.field"));
    // A valid field on an engine that does not honour recency: -32005; on one that does, served.
    let (r, _) = run(&c, json!({"query": "q", "k": 1, "recency": {"field": "ts"}}));
    assert_eq!(r.expect_err("unhonoured").option(), Some("recency"));
    let honours = caps(json!({"retrieve": {"x-rcp-honours": ["recency"]}, "filter": {"fields": {"ts": "date"}}}));
    let (r, notes) = run(&honours, json!({"query": "q", "k": 1, "recency": {"field": "ts"}}));
    assert_eq!(r.expect("honoured").recency.map(|r| r.half_life_days), Some(30.0));
    assert_eq!(notes, ["recency.halfLifeDays defaulted to 30"]);
}

#[test]
fn a_session_id_without_the_session_capability_is_noted() {
    let (r, notes) = run(&caps(json!({"retrieve": {}})), json!({"query": "q", "k": 1, "sessionId": "s"}));
    assert!(r.is_ok());
    assert_eq!(notes, ["sessionId ignored: this server does not advertise session"]);
    let (_, notes) =
        run(&caps(json!({"retrieve": {}, "session": {}})), json!({"query": "q", "k": 1, "sessionId": "s"}));
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn units_default_to_chunk_and_passage() {
    let c = caps(json!({"retrieve": {}}));
    assert!(run(&c, json!({"query": "q", "k": 1, "unit": "passage"})).0.is_ok());
    let (r, notes) = run(&c, json!({"query": "q", "k": 1, "unit": "document", "strict": false}));
    assert!(r.expect("fallback").unit.is_none());
    assert_eq!(notes, ["unit 'document' not advertised; returning the default unit"]);
}

#[test]
fn seed_is_never_an_error() {
    let c = caps(json!({"retrieve": {}}));
    let (r, notes) = run(&c, json!({"query": "q", "k": 1, "seed": 7}));
    assert!(r.is_ok());
    assert_eq!(notes, ["seed ignored: this server does not advertise retrieve.deterministic"]);
}

#[test]
fn embed_encoding_falls_back_to_json() {
    let p: EmbedParams =
        serde_json::from_value(json!({"inputs": ["a"], "encoding": "f32-base64", "strict": false})).expect("params");
    let mut notes = Vec::new();
    let (_, enc) = embed(p, None, default_modalities(), default_encodings(), &mut notes).expect("fallback");
    assert_eq!(enc, "json");
    assert_eq!(notes, ["encoding 'f32-base64' not advertised; using json"]);
    let p: EmbedParams = serde_json::from_value(json!({"inputs": ["a"], "encoding": "f32-base64"})).expect("params");
    let e = embed(p, None, default_modalities(), default_encodings(), &mut notes).expect_err("strict");
    assert_eq!(e.option(), Some("encoding"));
}

#[test]
fn rerank_method_falls_back_to_the_first_advertised() {
    let c = caps(json!({"rerank": {"methods": ["colbert"]}}));
    let p: RerankParams =
        serde_json::from_value(json!({"query": "q", "passages": ["a"], "method": "llm", "strict": false}))
            .expect("params");
    let mut notes = Vec::new();
    let (req, _) = rerank(p, &c, &mut notes).expect("fallback");
    assert_eq!(req.method, "colbert");
    assert_eq!(notes, ["method 'llm' not advertised; using 'colbert'"]);
}

#[test]
fn one_of_reports_the_option_and_the_list() {
    let e = one_of("op", "global", &["local".to_owned()]).expect_err("refused");
    assert_eq!(e.option(), Some("op"));
    assert!(e.message.contains("advertised: local"));
    assert!(one_of("scope", "global", &["global".to_owned()]).is_ok());
}

#[test]
fn embed_input_modality_names_the_input() {
    let mut items: Vec<InputItem> =
        serde_json::from_value(json!(["a", {"type": "image", "data": "AAAA", "mimeType": "image/png"}]))
            .expect("items");
    let e = inputs(&mut items, "inputs", None, default_modalities()).expect_err("image");
    assert_eq!(e.field(), Some("inputs[1]"));
    assert_eq!(e.option(), Some("modality"));
}

#[test]
fn deadline_ms_must_be_a_non_negative_integer() {
    let meta = |v: Value| json!({ "deadlineMs": v }).as_object().cloned().expect("object");
    assert_eq!(deadline_ms(None).expect("absent"), None);
    assert_eq!(deadline_ms(Some(&meta(json!(0)))).expect("zero"), Some(0));
    assert_eq!(deadline_ms(Some(&meta(json!(1500)))).expect("ms"), Some(1500));
    let two_63: Value = serde_json::from_str("9223372036854775808").expect("2^63");
    for bad in [json!(-1), json!("5"), json!(0.5), json!(true), two_63, json!(1e300), Value::Null] {
        let e = deadline_ms(Some(&meta(bad.clone()))).expect_err("refused");
        assert_eq!((e.code, e.field()), (ErrorCode::INVALID_PARAMS, Some("_meta.deadlineMs")), "{bad}");
    }
}

#[test]
fn counts_ids_and_rewards_are_checked() {
    assert!(at_least_one("k", Some(0u32)).is_err());
    assert!(at_least_one("k", Some(1u32)).is_ok() && at_least_one("k", None::<u32>).is_ok());
    let docs: Vec<Document> =
        serde_json::from_value(json!([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])).expect("documents");
    assert_eq!(document_ids(&docs).expect_err("duplicate").field(), Some("documents[1].id"));
    let docs: Vec<Document> = serde_json::from_value(json!([{"id": "", "text": "x"}])).expect("documents");
    assert_eq!(document_ids(&docs).expect_err("empty").field(), Some("documents[0].id"));
    let signals: Vec<Signal> =
        serde_json::from_value(json!([{"hitId": "h1", "reward": 0.5}, {"hitId": "h2", "reward": 1.5}]))
            .expect("signals");
    assert_eq!(rewards(&signals).expect_err("range").field(), Some("signals[1].reward"));
}

#[test]
fn index_add_options_are_gated_by_the_shared_module() {
    let p: IndexAddParams = serde_json::from_value(json!({"documents": [], "chunk": true})).expect("params");
    let e = index_add(&p, &caps(json!({"index": {"writable": true}}))).expect_err("chunking not advertised");
    assert_eq!(e.code, ErrorCode::OPTION_UNSUPPORTED);
    assert!(index_add(&p, &caps(json!({"index": {"writable": true, "chunking": true}}))).is_ok());
}
