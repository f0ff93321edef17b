//! Unit tests of the gating module.

use serde_json::Value;

use super::*;
use crate::capabilities::default_modalities;
use crate::content::QueryInput;
use crate::embed::EmbedParams;
use crate::{ErrorCode, RetrieveParams};
use serde_json::json;

fn caps(v: Value) -> Capabilities {
    serde_json::from_value(v).expect("capabilities")
}

fn params(v: Value) -> RetrieveParams {
    serde_json::from_value(v).expect("params")
}

#[test]
fn every_gate_is_listed_once() {
    let mut seen = std::collections::BTreeSet::new();
    for g in Gate::ALL {
        assert!(seen.insert(g), "{g:?} listed twice");
        assert!(!g.option().is_empty());
    }
}

#[test]
fn nothing_is_found_in_a_plain_request() {
    let c = caps(json!({"retrieve": {"modes": ["sparse"]}}));
    assert!(retrieve(&c, &params(json!({"query": "q", "k": 3, "mode": "sparse"}))).is_empty());
}

#[test]
fn defaults_of_section_6_gate_units_and_modalities() {
    let c = caps(json!({"retrieve": {}}));
    assert!(retrieve(&c, &params(json!({"query": "q", "k": 1, "unit": "passage"}))).is_empty());
    let f = retrieve(&c, &params(json!({"query": "q", "k": 1, "unit": "document", "modality": "image"})));
    let gates: Vec<Gate> = f.iter().map(|f| f.gate).collect();
    assert_eq!(gates, [Gate::RetrieveModality, Gate::RetrieveUnit]);
    assert_eq!(f[1].advertised, ["chunk", "passage"]);
}

#[test]
fn findings_carry_error_and_note() {
    let c = caps(json!({"retrieve": {"modes": ["sparse"]}}));
    let f = mode(c.retrieve.as_ref().unwrap(), &params(json!({"query": "q", "k": 1, "mode": "dense"}))).unwrap();
    assert_eq!(f.error().code, ErrorCode::OPTION_UNSUPPORTED);
    assert_eq!(f.error().option(), Some("mode"));
    assert_eq!(f.note().unwrap(), "mode 'dense' not advertised; using 'sparse'");
    assert!(f.refuses(true) && !f.refuses(false));
}

#[test]
fn flags_levels_budget_snapshots_and_rewrite_are_gated() {
    let c = caps(json!({"retrieve": {}}));
    let p = params(json!({"query": "q", "k": 1, "level": 1, "tokenBudget": 100, "indexVersion": "v1",
        "rewrite": "hyde", "mmr": {"lambda": 0.5}, "rerank": true, "cursor": "c"}));
    let gates: Vec<Gate> = retrieve(&c, &p).iter().map(|f| f.gate).collect();
    assert_eq!(
        gates,
        [
            Gate::RetrieveRerank,
            Gate::RetrieveMmr,
            Gate::RetrieveRewrite,
            Gate::RetrieveLevel,
            Gate::RetrieveTokenBudget,
            Gate::RetrieveIndexVersion,
            Gate::RetrieveCursor
        ]
    );
    let level = &retrieve(&c, &p)[3];
    assert_eq!(level.note().unwrap(), "level ignored: server advertises 1 level(s)");
}

#[test]
fn filter_operator_may_be_dropped_but_field_never() {
    let c = caps(json!({"retrieve": {}, "filter": {"fields": {"lang": "keyword"}, "operators": ["eq"]}}));
    let op = filter(&c, &json!({"field": "lang", "op": "ne", "value": "en"})).unwrap_err();
    assert!(op.fallback.is_some());
    assert_eq!(op.error().code, ErrorCode::OPTION_UNSUPPORTED);
    let field = filter(&c, &json!({"field": "year", "op": "eq", "value": 1})).unwrap_err();
    assert!(field.refuses(false));
    assert_eq!(field.error().code, ErrorCode::INVALID_PARAMS);
}

#[test]
fn image_query_without_text_has_no_fallback() {
    let q: QueryInput =
        serde_json::from_value(json!({"type": "image", "data": "AAAA", "mimeType": "image/png"})).expect("image block");
    let f = query_modality(Gate::RetrieveQueryModality, &q, default_modalities()).unwrap();
    assert!(f.refuses(false));
}

#[test]
fn method_gate_names_writable_index() {
    let c = caps(json!({"index": {"writable": false}}));
    assert_eq!(method(&c, Method::IndexAdd).unwrap_err().capability, INDEX_WRITABLE);
    assert!(method(&c, Method::IndexDelete).is_ok());
    assert_eq!(method(&c, Method::Retrieve).unwrap_err().capability, "retrieve");
}

#[test]
fn embed_encoding_json_always_passes() {
    let c = caps(json!({"embed": {"dimension": 2, "identity": "m"}}));
    let mut p = EmbedParams::texts(["a"]);
    p.encoding = Some("json".into());
    assert!(embed(&c, &p).is_empty());
    p.encoding = Some("f32-base64".into());
    assert_eq!(embed(&c, &p)[0].note().unwrap(), "encoding 'f32-base64' not advertised; using json");
}
