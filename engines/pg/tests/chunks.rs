//! Chunk units on rcp-pg (§7.10 `chunk:true`, §7.7.2 `unit`) through the real binary, with the
//! wire behaviour of rcp-bm25: chunks are byte-exact slices of the original with their offsets,
//! `unit:"chunk"` returns them in every mode, `unit:"document"` one hit per document scored by
//! its best chunk, filters, recency, cursors, sessions, tokenBudget and quarantine apply, and
//! re-adding or deleting a document takes every chunk with it, the statistics staying exact.

mod common;

use common::{database, ids, serve};
use rcp_testkit::Engine;
use serde_json::{Value, json};

/// A document of seven sentences with multi-byte characters, chunked at 12 words.
const LONG: &str = "Die Flügel werden über Mach zwei erhitzt.  Heated wings lose stiffness at high speed. \
The flutter boundary moves as the skin temperature rises.\n\nThermal stress buckles thin panels near the leading edge. \
Engineers measure the panel temperature with thermocouples. Résumé: heating changes aeroelastic behaviour! \
Wind tunnels reproduce the heating with radiant lamps.";

const SHORT: &str = "Laminar boundary layers on flat plates, measured in a low speed tunnel.";

const WHOLE: &str = "Sourdough bread rises slowly; the crust browns in a hot oven.";

const ARGS: &[&str] =
    &["--field", "lang:keyword", "--chunk-words", "12", "--chunk-overlap", "4", "--quarantine-threshold", "1"];

const MODES: [&str; 3] = ["sparse", "dense", "hybrid"];

fn add_docs(e: &mut Engine) -> Value {
    e.ok("index/add", json!({"documents": [{"id": "bread", "text": WHOLE, "meta": {"lang": "en"}}]}));
    e.ok(
        "index/add",
        json!({"chunk": true, "documents": [
            {"id": "long", "text": LONG, "meta": {"lang": "en"}},
            {"id": "short", "text": SHORT, "meta": {"lang": "de"}}
        ]}),
    )
}

fn retrieve(e: &mut Engine, query: &str, unit: &str, extra: Value) -> Value {
    let mut params = json!({"query": query, "k": 50, "unit": unit});
    if let (Some(p), Some(x)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(x.clone());
    }
    e.ok("retrieve", params)
}

fn chunk_hits(e: &mut Engine, query: &str, extra: Value) -> Vec<Value> {
    retrieve(e, query, "chunk", extra)["hits"].as_array().cloned().unwrap_or_default()
}

/// Every chunk hit: unit, parent, index and a text that is exactly the cited byte range; a
/// document added whole is its own chunk 0.
fn check_chunks(hits: &[Value]) {
    for h in hits {
        assert_eq!(h["unit"], "chunk", "{h}");
        let doc = h["chunk"]["docId"].as_str().expect("chunk.docId");
        let original = match doc {
            "long" => LONG,
            "short" => SHORT,
            _ => WHOLE,
        };
        let (start, end) =
            (h["citation"]["start"].as_u64().expect("start"), h["citation"]["end"].as_u64().expect("end"));
        let text = h["text"].as_str().expect("text");
        assert_eq!(original.as_bytes().get(start as usize..end as usize), Some(text.as_bytes()), "{h}");
        if doc == "bread" {
            assert_eq!((h["id"].as_str(), h["chunk"]["index"].as_u64(), start), (Some("bread"), Some(0), 0), "{h}");
        } else {
            assert_eq!(h["id"], format!("{doc}#{}", h["chunk"]["index"]), "{h}");
        }
    }
}

/// The collection statistics agree with the rows: counts, lengths, postings and document
/// frequencies over whole documents and chunks.
fn check_statistics(url: &str) {
    let c = common::cluster().expect("cluster");
    let db = url.rsplit('/').next().expect("db name");
    let sql = "SELECT (SELECT doc_count FROM rcp_state) = (SELECT count(*) FROM rcp_documents WHERE NOT chunked)
                  AND (SELECT chunked_docs FROM rcp_state) = (SELECT count(*) FROM rcp_documents WHERE chunked)
                  AND (SELECT chunk_count FROM rcp_state) = (SELECT count(*) FROM rcp_chunks)
                  AND (SELECT chunk_len FROM rcp_state) = (SELECT coalesce(sum(doc_len), 0) FROM rcp_chunks)
                  AND (SELECT count(*) FROM rcp_chunk_postings) = (SELECT coalesce(sum(length(tsv)), 0) FROM rcp_chunks)
                  AND (SELECT count(*) FROM rcp_postings) = (SELECT coalesce(sum(length(tsv)), 0) FROM rcp_documents WHERE NOT chunked)
                  AND NOT EXISTS (SELECT 1 FROM rcp_terms t WHERE t.df <>
                        (SELECT count(*) FROM rcp_documents d WHERE NOT d.chunked AND d.tsv @@ to_tsquery('simple', quote_literal(t.lexeme)))
                      + (SELECT count(*) FROM rcp_chunks k WHERE k.tsv @@ to_tsquery('simple', quote_literal(t.lexeme))))";
    assert_eq!(c.psql(db, sql).expect("psql").trim(), "t", "the statistics drifted");
}

fn chunk_rows(url: &str, doc: &str) -> String {
    let c = common::cluster().expect("cluster");
    let db = url.rsplit('/').next().expect("db name");
    let sql = format!("SELECT count(*) FROM rcp_chunks WHERE doc_id = '{doc}'");
    c.psql(db, &sql).expect("psql").trim().to_owned()
}

#[test]
fn chunks_are_exact_slices_retrieved_by_unit_in_every_mode_replaced_and_deleted() {
    let Some(url) = database("chunks") else { return };
    let mut e = serve(&url, ARGS);
    let info = e.ok("info", json!({}));
    assert_eq!(info["capabilities"]["index"]["chunking"], true, "{info}");
    assert_eq!(info["capabilities"]["retrieve"]["units"], json!(["document", "chunk"]));

    let added = add_docs(&mut e);
    assert_eq!(added["ids"], json!(["long", "short"]));
    let chunks = added["chunks"].as_u64().expect("chunks");
    assert!(chunks >= 5, "seven sentences of 6-9 words in 12-word windows: {added}");
    assert_eq!(chunk_rows(&url, "long").parse::<u64>().ok(), Some(chunks - 1), "the short document is one chunk");
    check_statistics(&url);

    // Every chunk of the long document, in order, covering every sentence.
    let all = chunk_hits(
        &mut e,
        "heating wings panels tunnel thermocouples flutter stiffness Flügel Résumé",
        json!({"mode": "sparse"}),
    );
    check_chunks(&all);
    let mut long: Vec<&Value> = all.iter().filter(|h| h["chunk"]["docId"] == "long").collect();
    long.sort_by_key(|h| h["chunk"]["index"].as_u64());
    assert_eq!(long.len() as u64, chunks - 1, "{all:?}");
    assert_eq!(long[0]["citation"]["start"], 0);
    assert_eq!(long.last().map(|h| h["citation"]["end"].clone()), Some(json!(LONG.len())));

    for mode in MODES {
        // Chunk hits in every mode, a document added whole among them as its own chunk 0.
        let hits = chunk_hits(&mut e, "panel temperature thermocouples bread crust", json!({"mode": mode}));
        check_chunks(&hits);
        assert!(hits.iter().any(|h| h["id"] == "bread"), "{mode}: {hits:?}");
        let top = hits[0]["id"].as_str().unwrap_or_default();
        assert!(top.starts_with("long#") || top == "bread", "{mode}: {hits:?}");

        // One hit per document, whole, scored by its best chunk.
        let docs = retrieve(&mut e, "panel temperature thermocouples", "document", json!({"mode": mode}));
        let got = ids(&docs);
        assert_eq!(got[0], "long", "{mode}: {docs}");
        assert_eq!(got.len(), got.iter().collect::<std::collections::HashSet<_>>().len(), "{mode}: {docs}");
        let first = &docs["hits"][0];
        assert_eq!((first["unit"].as_str(), first["text"].as_str()), (Some("document"), Some(LONG)), "{mode}");
        assert!(first.get("chunk").is_none() && first["citation"].get("start").is_none(), "{first}");
        if mode != "hybrid" {
            let best = chunk_hits(&mut e, "panel temperature thermocouples", json!({"mode": mode}));
            let best = best.iter().find(|h| h["chunk"]["docId"] == "long").expect("a chunk of long");
            let (a, b) = (first["score"].as_f64().expect("score"), best["score"].as_f64().expect("score"));
            assert!((a - b).abs() < 1e-9, "{mode}: the best chunk's score {b}, got {a}");
        }
        let default_unit = e.ok("retrieve", json!({"query": "panel temperature thermocouples", "k": 10, "mode": mode}));
        assert_eq!(ids(&default_unit)[0], "long", "document is the default unit");
        assert_eq!(default_unit["hits"][0]["unit"], "document");

        // Filters apply to chunks.
        let de = chunk_hits(
            &mut e,
            "tunnel boundary",
            json!({"mode": mode, "filter": {"field": "lang", "op": "eq", "value": "de"}}),
        );
        assert_eq!(de.iter().map(|h| h["id"].as_str().unwrap_or_default()).collect::<Vec<_>>(), ["short#0"], "{mode}");
    }

    // Pages of chunk hits follow the single ranking; a chunk cursor is refused for documents.
    let q = json!({"query": "heating temperature panels", "mode": "sparse", "unit": "chunk"});
    let mut whole = q.clone();
    whole["k"] = json!(4);
    let four = ids(&e.ok("retrieve", whole));
    let mut first = q.clone();
    first["k"] = json!(2);
    let page1 = e.ok("retrieve", first.clone());
    let cursor = page1["nextCursor"].as_str().expect("a next page").to_owned();
    let mut next = first.clone();
    next["cursor"] = json!(cursor);
    let page2 = e.ok("retrieve", next.clone());
    assert_eq!([ids(&page1), ids(&page2)].concat(), four);
    next["unit"] = json!("document");
    assert_eq!(e.err("retrieve", next)["code"], -32602);

    // A session never returns a chunk twice.
    let s = json!({"query": "heating temperature panels", "k": 2, "unit": "chunk", "sessionId": "chunk-session"});
    let (one, two) = (ids(&e.ok("retrieve", s.clone())), ids(&e.ok("retrieve", s)));
    assert!(one.iter().all(|id| !two.contains(id)), "{one:?} then {two:?}");

    // tokenBudget packs chunk hits.
    let packed = e.ok("retrieve", json!({"query": "heating", "k": 5, "unit": "chunk", "tokenBudget": 30}));
    assert!(packed["usage"]["tokens"].as_u64().is_some_and(|t| t <= 30), "{packed}");

    // Re-adding with other text replaces every chunk.
    let other = "Radiant lamps heat the model. The panel buckles.";
    let again = e.ok("index/add", json!({"chunk": true, "documents": [{"id": "long", "text": other}]}));
    assert_eq!(again["chunks"], 1, "{again}");
    assert_eq!(chunk_rows(&url, "long"), "1");
    let hits = chunk_hits(&mut e, "thermocouples flutter stiffness", json!({"mode": "sparse"}));
    assert!(hits.iter().all(|h| h["chunk"]["docId"] != "long"), "old chunks are gone: {hits:?}");
    check_statistics(&url);

    // Re-adding without chunking: the document is one chunk again, its chunk rows gone.
    e.ok("index/add", json!({"documents": [{"id": "long", "text": LONG}]}));
    assert_eq!(chunk_rows(&url, "long"), "0");
    let whole = chunk_hits(&mut e, "thermocouples", json!({"mode": "sparse"}));
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!(whole[0]["id"], "long");
    assert_eq!(
        (whole[0]["chunk"]["index"].clone(), whole[0]["citation"]["end"].clone(), whole[0]["text"].as_str()),
        (json!(0), json!(LONG.len()), Some(LONG))
    );
    check_statistics(&url);

    // Chunk again, then delete the document: all its chunks go, counted as one document.
    e.ok("index/add", json!({"chunk": true, "documents": [{"id": "long", "text": LONG}]}));
    for mode in MODES {
        assert!(chunk_hits(&mut e, "heating", json!({"mode": mode})).len() >= 2, "{mode}");
    }
    check_statistics(&url);
    assert_eq!(e.ok("index/delete", json!({"ids": ["long"]}))["deleted"], 1);
    assert_eq!(chunk_rows(&url, "long"), "0");
    for mode in MODES {
        let left = chunk_hits(&mut e, "heating thermocouples panels", json!({"mode": mode}));
        assert!(left.iter().all(|h| h["chunk"]["docId"] != "long"), "{mode}: {left:?}");
    }
    assert_eq!(e.ok("index/delete", json!({"ids": ["long"]}))["deleted"], 0);
    check_statistics(&url);
}

#[test]
fn a_quarantined_chunk_or_document_is_left_out_in_either_unit() {
    let Some(url) = database("chunks_quarantine") else { return };
    let mut e = serve(&url, ARGS);
    add_docs(&mut e);
    let q = "heating temperature panels thermocouples";
    let before = chunk_hits(&mut e, q, json!({"mode": "sparse"}));
    let barred = before[0]["id"].as_str().expect("id").to_owned();
    e.ok("feedback", json!({"signals": [{"hitId": barred, "poisonSuspected": true}]}));
    let after = chunk_hits(&mut e, q, json!({"mode": "sparse"}));
    assert!(!after.is_empty() && after.iter().all(|h| h["id"] != barred.as_str()), "{after:?}");
    // A quarantined document takes its chunks with it.
    e.ok("feedback", json!({"signals": [{"hitId": "long", "injectionSuspected": true}]}));
    for unit in ["chunk", "document"] {
        let hits = retrieve(&mut e, q, unit, json!({"mode": "hybrid"}));
        let hits = hits["hits"].as_array().cloned().unwrap_or_default();
        assert!(hits.iter().all(|h| h["id"] != "long" && h["chunk"]["docId"] != "long"), "{unit}: {hits:?}");
    }
}

#[test]
fn a_database_at_schema_3_with_documents_upgrades_and_serves_them_in_both_units() {
    let Some(url) = database("chunks_upgrade") else { return };
    let c = common::cluster().expect("cluster");
    let db = url.rsplit('/').next().expect("db name");
    // Schema 3 as an earlier rcp-pg left it, holding one document with its statistics.
    c.psql(db, "CREATE TABLE rcp_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        .expect("psql");
    for (version, name, sql) in rcp_pg::migrate::MIGRATIONS.iter().filter(|m| m.0 <= 3) {
        c.psql(db, sql).expect("migration");
        c.psql(db, &format!("INSERT INTO rcp_migrations (version, name) VALUES ({version}, '{name}')")).expect("psql");
    }
    let load = format!(
        "INSERT INTO rcp_documents (id, body, content_hash, embedding, version)
             VALUES ('old', '{SHORT}', 'x', array_fill(0.05::real, ARRAY[384])::vector, 1);
         INSERT INTO rcp_postings SELECT x.lexeme, d.id, cardinality(x.positions), d.doc_len
             FROM rcp_documents d CROSS JOIN LATERAL unnest(d.tsv) AS x;
         INSERT INTO rcp_terms SELECT l, count(*) FROM rcp_documents d, unnest(tsvector_to_array(d.tsv)) AS l GROUP BY l;
         UPDATE rcp_state SET version = 1, doc_count = 1, total_len = (SELECT sum(doc_len) FROM rcp_documents);"
    );
    c.psql(db, &load).expect("a schema-3 document");
    let mut e = serve(&url, ARGS);
    let latest = rcp_pg::migrate::latest().to_string();
    assert_eq!(c.psql(db, "SELECT max(version) FROM rcp_migrations").expect("psql").trim(), latest);
    let hits = chunk_hits(&mut e, "laminar tunnel", json!({"mode": "sparse"}));
    assert_eq!(ids(&json!({"hits": hits})), ["old"]);
    assert_eq!(hits[0]["trust"]["level"], "untrusted", "a document from before schema 5 has no recorded provenance");
    assert_eq!((hits[0]["chunk"]["index"].clone(), hits[0]["citation"]["end"].clone()), (json!(0), json!(SHORT.len())));
    let docs = retrieve(&mut e, "laminar tunnel", "document", json!({"mode": "hybrid"}));
    assert_eq!(ids(&docs)[0], "old", "{docs}");
    add_docs(&mut e);
    check_statistics(&url);
    assert_eq!(e.ok("index/delete", json!({"ids": ["old", "short"]}))["deleted"], 2);
    check_statistics(&url);
}

#[test]
fn recency_orders_chunks_by_their_documents_date() {
    let Some(url) = database("chunks_recency") else { return };
    let mut e = serve(&url, &["--field", "published:date", "--chunk-words", "12", "--chunk-overlap", "0"]);
    e.ok(
        "index/add",
        json!({"chunk": true, "documents": [
            {"id": "old", "text": LONG, "meta": {"published": "1990-03-01"}},
            {"id": "new", "text": LONG.replace("panel temperature", "panel heat"), "meta": {"published": "2026-11-20T00:00:00Z"}}
        ]}),
    );
    for mode in MODES {
        let plain = chunk_hits(&mut e, "panel temperature thermocouples", json!({"mode": mode, "k": 2}));
        assert_eq!(plain[0]["chunk"]["docId"], "old", "{mode} without recency: {plain:?}");
        let recent = chunk_hits(
            &mut e,
            "panel temperature thermocouples",
            json!({"mode": mode, "k": 2, "recency": {"field": "published", "halfLifeDays": 30}}),
        );
        assert_eq!(recent[0]["chunk"]["docId"], "new", "{mode} with recency: {recent:?}");
    }
}
