//! Server-side chunking (§7.10 `chunk:true`) and retrieval units (§7.7.2) through the real
//! binary: chunks are byte-exact slices of the original with their offsets, `unit:"chunk"`
//! returns them, `unit:"document"` one hit per document ranked by its best chunk, filters still
//! apply, delete and upsert take every chunk of a document, and a restart keeps them.

mod common;

use common::{ids, serve_dir, tempdir};
use rcp_testkit::{Engine, kill9};
use serde_json::{Value, json};

/// A document of seven sentences with multi-byte characters, chunked at 12 words.
const LONG: &str = "Die Flügel werden über Mach zwei erhitzt.  Heated wings lose stiffness at high speed. \
The flutter boundary moves as the skin temperature rises.\n\nThermal stress buckles thin panels near the leading edge. \
Engineers measure the panel temperature with thermocouples. Résumé: heating changes aeroelastic behaviour! \
Wind tunnels reproduce the heating with radiant lamps.";

const SHORT: &str = "Laminar boundary layers on flat plates, measured in a low speed tunnel.";

const ARGS: &[&str] = &["--create", "--field", "lang:keyword", "--chunk-words", "12", "--chunk-overlap", "4"];

fn add_docs(e: &mut Engine) -> Value {
    e.ok(
        "index/add",
        json!({"chunk": true, "documents": [
            {"id": "long", "text": LONG, "meta": {"lang": "en"}},
            {"id": "short", "text": SHORT, "meta": {"lang": "de"}}
        ]}),
    )
}

fn chunk_hits(e: &mut Engine, query: &str, extra: Value) -> Vec<Value> {
    let mut params = json!({"query": query, "k": 50, "unit": "chunk"});
    if let (Some(p), Some(x)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(x.clone());
    }
    e.ok("retrieve", params)["hits"].as_array().cloned().unwrap_or_default()
}

/// Every chunk hit: unit, parent, index and a text that is exactly the cited byte range.
fn check_chunks(hits: &[Value]) {
    for h in hits {
        assert_eq!(h["unit"], "chunk", "{h}");
        let doc = h["chunk"]["docId"].as_str().expect("chunk.docId");
        let original = if doc == "long" { LONG } else { SHORT };
        let (start, end) =
            (h["citation"]["start"].as_u64().expect("start"), h["citation"]["end"].as_u64().expect("end"));
        let text = h["text"].as_str().expect("text");
        assert_eq!(original.as_bytes().get(start as usize..end as usize), Some(text.as_bytes()), "{h}");
        assert_eq!(h["id"], format!("{doc}#{}", h["chunk"]["index"]), "{h}");
    }
}

#[test]
fn chunks_are_exact_slices_retrieved_by_unit_filtered_deleted_and_kept_across_restarts() {
    let dir = tempdir();
    let data = dir.path().join("data");
    let mut e = serve_dir(&data, ARGS);
    let info = e.ok("info", json!({}));
    assert_eq!(info["capabilities"]["index"]["chunking"], true, "{info}");
    assert_eq!(info["capabilities"]["retrieve"]["units"], json!(["document", "chunk"]));

    let added = add_docs(&mut e);
    assert_eq!(added["ids"], json!(["long", "short"]));
    let chunks = added["chunks"].as_u64().expect("chunks");
    assert!(chunks >= 5, "seven sentences of 6-9 words in 12-word windows: {added}");

    // Every chunk of the long document, in order, covering every sentence.
    let all =
        chunk_hits(&mut e, "heating wings panels tunnel thermocouples flutter stiffness Flügel Résumé", json!({}));
    check_chunks(&all);
    let mut long: Vec<&Value> = all.iter().filter(|h| h["chunk"]["docId"] == "long").collect();
    long.sort_by_key(|h| h["chunk"]["index"].as_u64());
    assert_eq!(long.len() as u64, chunks - 1, "the short document is one chunk");
    assert_eq!(long[0]["citation"]["start"], 0);
    assert_eq!(long.last().map(|h| h["citation"]["end"].clone()), Some(json!(LONG.len())));

    // One hit per document, whole, scored by its best chunk.
    let best = chunk_hits(&mut e, "panel temperature", json!({}));
    let docs = e.ok("retrieve", json!({"query": "panel temperature", "k": 10, "unit": "document"}));
    assert_eq!(ids(&docs), ["long"], "{docs}");
    assert_eq!(docs["hits"][0]["unit"], "document");
    assert_eq!(docs["hits"][0]["text"], LONG);
    assert_eq!(docs["hits"][0]["score"], best[0]["score"], "the best chunk's score");
    let default_unit = e.ok("retrieve", json!({"query": "panel temperature", "k": 10}));
    assert_eq!(ids(&default_unit), ["long"], "document is the default unit");

    // Filters apply to chunks.
    let de = chunk_hits(&mut e, "tunnel", json!({"filter": {"field": "lang", "op": "eq", "value": "de"}}));
    assert_eq!(de.iter().map(|h| h["id"].as_str().unwrap_or_default()).collect::<Vec<_>>(), ["short#0"]);

    // A restart keeps the chunks.
    kill9(&mut e);
    let mut e = serve_dir(&data, &ARGS[1..]);
    assert_eq!(chunk_hits(&mut e, "thermocouples", json!({})).len(), 1);

    // Re-adding without chunking replaces every chunk: the document is one chunk again.
    e.ok("index/add", json!({"documents": [{"id": "long", "text": LONG}]}));
    let whole = chunk_hits(&mut e, "thermocouples", json!({}));
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!(whole[0]["id"], "long");
    assert_eq!(
        (whole[0]["chunk"]["index"].clone(), whole[0]["citation"]["end"].clone()),
        (json!(0), json!(LONG.len()))
    );

    // Chunk again, then delete the document: all its chunks go, counted as one document.
    e.ok("index/add", json!({"chunk": true, "documents": [{"id": "long", "text": LONG}]}));
    assert!(chunk_hits(&mut e, "heating", json!({})).len() >= 2);
    assert_eq!(e.ok("index/delete", json!({"ids": ["long"]}))["deleted"], 1);
    let left = chunk_hits(&mut e, "heating thermocouples panels", json!({}));
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(e.ok("index/delete", json!({"ids": ["long"]}))["deleted"], 0);
    kill9(&mut e);
}

#[test]
fn unadvertised_units_follow_strict() {
    let dir = tempdir();
    let mut e = serve_dir(&dir.path().join("data"), ARGS);
    add_docs(&mut e);
    let refused = e.err("retrieve", json!({"query": "tunnel", "k": 3, "unit": "community"}));
    assert_eq!(refused["code"], -32005, "{refused}");
    let lenient = e.ok("retrieve", json!({"query": "tunnel", "k": 3, "unit": "community", "strict": false}));
    assert!(lenient["hits"].as_array().is_some_and(|h| h.iter().all(|h| h["unit"] == "document")), "{lenient}");
    assert!(lenient["usage"]["notes"].to_string().contains("unit"), "{lenient}");
    let bad = e.err("index/add", json!({"chunk": "yes", "documents": [{"id": "x", "text": "t"}]}));
    assert_eq!(bad["code"], -32602, "{bad}");
    kill9(&mut e);
}
