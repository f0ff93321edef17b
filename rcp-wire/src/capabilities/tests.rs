use super::*;
use serde_json::json;

#[test]
fn unknown_keys_round_trip() {
    let raw = json!({
        "retrieve": {"maxK": 50, "modes": ["sparse"], "x-acme-boost": true},
        "x-acme": {"v": 2},
        "streaming": {},
        "citations": true,
        "futureKey": {"a": 1}
    });
    let caps: Capabilities = serde_json::from_value(raw).unwrap();
    assert_eq!(caps.retrieve.as_ref().unwrap().max_k, Some(50));
    assert_eq!(caps.retrieve.as_ref().unwrap().extra["x-acme-boost"], true);
    assert!(caps.has(Capability::Citations));
    let back = serde_json::to_value(&caps).unwrap();
    assert_eq!(back["x-acme"]["v"], 2);
    assert_eq!(back["futureKey"]["a"], 1);
    assert_eq!(back["citations"], json!({}));
    assert_eq!(caps.keys(), vec!["retrieve", "streaming", "citations", "futureKey", "x-acme"]);
}

#[test]
fn defaults_of_section_6_apply_when_absent() {
    let rc = RetrieveCapability::default();
    assert_eq!(rc.modalities(), ["text"]);
    assert_eq!(rc.units(), ["chunk", "passage"]);
    assert_eq!(rc.level_count(), 1);
    assert!(rc.modes().is_empty() && rc.default_mode().is_none());
    let ec = EmbedCapability::default();
    assert_eq!(ec.encodings(), ["json"]);
    let rc = RetrieveCapability { modes: Some(vec![Mode::Sparse]), ..Default::default() };
    assert_eq!(rc.default_mode(), Some(&Mode::Sparse));
}

#[test]
fn missing_metadata_takes_defaults_and_dimensions_reads_as_dimension() {
    let raw = json!({
        "embed": {"dimensions": 384, "modes": ["dense"]},
        "sparseEmbed": {},
        "multiVector": {"dimensions": 128}
    });
    let caps: Capabilities = serde_json::from_value(raw).unwrap();
    let embed = caps.embed.as_ref().unwrap();
    assert_eq!((embed.dimension, embed.identity.as_str()), (384, ""));
    assert_eq!(embed.extra["modes"], json!(["dense"]));
    assert_eq!(caps.sparse_embed.as_ref().unwrap().identity, "");
    assert_eq!(caps.multi_vector.as_ref().unwrap().dimension, 128);
    assert!(caps.unparsed.is_empty(), "{:?}", caps.unparsed);
}

#[test]
fn unreadable_metadata_keeps_the_capability_its_readable_fields_and_its_raw_json() {
    let raw = json!({
        "rerank": {"methods": "cross-encoder", "maxCandidates": 10},
        "retrieve": ["sparse"],
        "index": {"writable": true, "chunking": "yes"},
        "streaming": 1
    });
    let caps: Capabilities = serde_json::from_value(raw.clone()).unwrap();
    for cap in [Capability::Rerank, Capability::Retrieve, Capability::Index, Capability::Streaming] {
        assert!(caps.has(cap), "{cap} must stay present");
        assert!(caps.unparsed.contains_key(&cap), "{cap} must be recorded as unparsed");
    }
    let rerank = caps.rerank.as_ref().unwrap();
    assert_eq!((rerank.max_candidates, rerank.methods.is_empty()), (Some(10), true));
    assert!(caps.unparsed[&Capability::Rerank].error.contains("methods"), "{:?}", caps.unparsed);
    let index = caps.index.as_ref().unwrap();
    assert!(index.writable && index.chunking.is_none());
    assert_eq!(caps.unparsed[&Capability::Index].raw, raw["index"]);
    assert_eq!(serde_json::to_value(&caps).unwrap(), raw, "unparsed values are written back as received");
    let mut caps = caps;
    caps.remove(Capability::Rerank);
    assert!(!caps.unparsed.contains_key(&Capability::Rerank));
    assert!(serde_json::to_value(&caps).unwrap().get("rerank").is_none());
}

#[test]
fn a_servers_own_capabilities_serialise_as_before() {
    let mut caps = Capabilities {
        embed: Some(EmbedCapability { dimension: 8, identity: "m".into(), ..Default::default() }),
        retrieve: Some(RetrieveCapability { max_k: Some(5), ..Default::default() }),
        streaming: Some(Flag::default()),
        ..Default::default()
    };
    caps.extra.insert("x-acme".into(), json!({"v": 1}));
    let wire = serde_json::to_string(&caps).unwrap();
    assert_eq!(
        wire,
        r#"{"embed":{"dimension":8,"identity":"m"},"retrieve":{"maxK":5},"streaming":{},"x-acme":{"v":1}}"#
    );
    let back: Capabilities = serde_json::from_str(&wire).unwrap();
    assert_eq!(back, caps);
}

#[test]
fn a_capability_object_that_is_not_an_object_is_still_an_error() {
    assert!(serde_json::from_value::<Capabilities>(json!(["retrieve"])).is_err());
}

#[test]
fn null_capability_is_absent() {
    let caps: Capabilities = serde_json::from_value(json!({"embed": null})).unwrap();
    assert!(!caps.has(Capability::Embed));
}
