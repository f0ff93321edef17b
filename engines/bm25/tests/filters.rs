//! §8 filters over real stdio: every operator on every field type, combinators, and the
//! precise errors for unknown fields and mistyped values.

mod common;

use common::{add, ids, serve_dir, tempdir};
use rcp_testkit::{Engine, code};
use serde_json::{Value, json};

const FIELDS: &[&str] = &[
    "--create",
    "--field",
    "lang:keyword",
    "--field",
    "year:int",
    "--field",
    "rating:float",
    "--field",
    "published:date",
    "--field",
    "draft:bool",
    "--field",
    "tags:keyword",
    "--field",
    "summary:text",
];

fn corpus(e: &mut Engine) {
    add(
        e,
        &[
            (
                "d1",
                "common words one",
                json!({"lang": "en", "year": 2020, "rating": 4.5, "published": "2024-01-15", "draft": false,
                       "tags": ["rust", "search"], "summary": "Fast full-text search engines"}),
            ),
            (
                "d2",
                "common words two",
                json!({"lang": "fr", "year": 2018, "rating": 3.0, "published": "2023-06-01T12:00:00Z", "draft": true,
                       "tags": ["python"], "summary": "Slow crawlers"}),
            ),
            (
                "d3",
                "common words three",
                json!({"lang": "en", "year": 2022, "rating": 5, "published": 1_700_000_000_000i64, "draft": false,
                       "tags": "rustacean", "summary": "Searching the web"}),
            ),
            ("d4", "common words four", json!({"lang": "de", "year": 2015})),
            (
                "d5",
                "common words five",
                json!({"lang": "English", "year": 2020, "rating": 2.5, "published": "2020-02-29", "draft": true,
                       "tags": [], "summary": null}),
            ),
        ],
    );
}

/// A JSON number as serde_json reads it from text (beyond i64 it is a u64 or an f64).
fn big(text: &str) -> Value {
    serde_json::from_str(text).expect("a JSON number")
}

fn matching(e: &mut Engine, filter: Value) -> Vec<String> {
    let r = e.ok("retrieve", json!({"query": "common", "k": 100, "filter": filter}));
    let mut got = ids(&r);
    got.sort();
    got
}

#[test]
fn every_operator_on_every_type() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), FIELDS);
    let caps = e.ok("info", json!({}));
    assert_eq!(caps["capabilities"]["filter"]["fields"]["published"], "date");
    corpus(&mut e);

    let cases: Vec<(Value, &[&str])> = vec![
        // keyword
        (json!({"field": "lang", "op": "eq", "value": "en"}), &["d1", "d3"]),
        (json!({"field": "lang", "op": "ne", "value": "en"}), &["d2", "d4", "d5"]),
        (json!({"field": "lang", "op": "in", "value": ["en", "de"]}), &["d1", "d3", "d4"]),
        (json!({"field": "lang", "op": "nin", "value": ["en", "de"]}), &["d2", "d5"]),
        (json!({"field": "lang", "op": "contains", "value": "ngl"}), &["d5"]),
        (json!({"field": "lang", "op": "eq", "value": "EN"}), &[]),
        // int
        (json!({"field": "year", "op": "gt", "value": 2018}), &["d1", "d3", "d5"]),
        (json!({"field": "year", "op": "gte", "value": 2018}), &["d1", "d2", "d3", "d5"]),
        (json!({"field": "year", "op": "lt", "value": 2018}), &["d4"]),
        (json!({"field": "year", "op": "lte", "value": 2018}), &["d2", "d4"]),
        (json!({"field": "year", "op": "eq", "value": 2020}), &["d1", "d5"]),
        (json!({"field": "year", "op": "in", "value": [2015, 2022]}), &["d3", "d4"]),
        // int operands beyond i64 (JSON integers the schema admits) bound the range exactly
        (json!({"field": "year", "op": "gt", "value": big("-9223372036854775809")}), &["d1", "d2", "d3", "d4", "d5"]),
        (json!({"field": "year", "op": "gte", "value": big("-1e19")}), &["d1", "d2", "d3", "d4", "d5"]),
        (json!({"field": "year", "op": "lt", "value": big("-9223372036854775809")}), &[]),
        (json!({"field": "year", "op": "lt", "value": big("9223372036854775808")}), &["d1", "d2", "d3", "d4", "d5"]),
        (json!({"field": "year", "op": "gte", "value": big("9223372036854775808")}), &[]),
        (json!({"field": "year", "op": "lte", "value": big("18446744073709551615")}), &["d1", "d2", "d3", "d4", "d5"]),
        // float (an int-valued document counts as 5.0; a missing field satisfies ne)
        (json!({"field": "rating", "op": "gt", "value": 3.0}), &["d1", "d3"]),
        (json!({"field": "rating", "op": "lte", "value": 3}), &["d2", "d5"]),
        (json!({"field": "rating", "op": "eq", "value": 5}), &["d3"]),
        (json!({"field": "rating", "op": "ne", "value": 3.0}), &["d1", "d3", "d4", "d5"]),
        (json!({"field": "rating", "op": "exists", "value": false}), &["d4"]),
        // date: RFC 3339 strings and epoch milliseconds, in documents and in filters
        (json!({"field": "published", "op": "gte", "value": "2023-11-14"}), &["d1", "d3"]),
        (json!({"field": "published", "op": "lt", "value": 1_685_620_800_000i64}), &["d5"]),
        (json!({"field": "published", "op": "eq", "value": "2023-06-01T12:00:00Z"}), &["d2"]),
        (json!({"field": "published", "op": "eq", "value": 1_685_620_800_000i64}), &["d2"]),
        (json!({"field": "published", "op": "lte", "value": "2023-06-01T14:00:00+02:00"}), &["d2", "d5"]),
        // bool
        (json!({"field": "draft", "op": "eq", "value": true}), &["d2", "d5"]),
        (json!({"field": "draft", "op": "ne", "value": true}), &["d1", "d3", "d4"]),
        (json!({"field": "draft", "op": "eq", "value": false}), &["d1", "d3"]),
        // arrays: contains is membership on arrays, substring on a scalar string
        (json!({"field": "tags", "op": "contains", "value": "rust"}), &["d1", "d3"]),
        (json!({"field": "tags", "op": "contains", "value": "rus"}), &["d3"]),
        (json!({"field": "tags", "op": "exists", "value": true}), &["d1", "d2", "d3", "d5"]),
        (json!({"field": "tags", "op": "exists"}), &["d1", "d2", "d3", "d5"]),
        (json!({"field": "tags", "op": "nin", "value": ["python", "rustacean"]}), &["d1", "d4", "d5"]),
        // text: analyzed containment (stemmed, case-insensitive, phrase for several words)
        (json!({"field": "summary", "op": "contains", "value": "Search"}), &["d1", "d3"]),
        (json!({"field": "summary", "op": "contains", "value": "full text search"}), &["d1"]),
        (json!({"field": "summary", "op": "contains", "value": "search full"}), &[]),
        (json!({"field": "summary", "op": "eq", "value": "Slow crawlers"}), &["d2"]),
        (json!({"field": "summary", "op": "exists", "value": true}), &["d1", "d2", "d3"]),
        // combinators
        (
            json!({"and": [{"field": "lang", "op": "eq", "value": "en"}, {"field": "year", "op": "gt", "value": 2020}]}),
            &["d3"],
        ),
        (
            json!({"or": [{"field": "lang", "op": "eq", "value": "fr"}, {"field": "lang", "op": "eq", "value": "de"}]}),
            &["d2", "d4"],
        ),
        (json!({"not": {"field": "lang", "op": "eq", "value": "en"}}), &["d2", "d4", "d5"]),
        (
            json!({"and": [
                {"not": {"or": [{"field": "draft", "op": "eq", "value": true}, {"field": "year", "op": "lt", "value": 2016}]}},
                {"field": "tags", "op": "exists", "value": true}]}),
            &["d1", "d3"],
        ),
    ];
    for (filter, want) in cases {
        assert_eq!(matching(&mut e, filter.clone()), want, "filter {filter}");
    }
}

#[test]
fn unknown_fields_and_mistyped_values_are_precise_errors() {
    let dir = tempdir();
    let mut e = serve_dir(dir.path(), FIELDS);
    corpus(&mut e);
    let err =
        e.err("retrieve", json!({"query": "common", "k": 5, "filter": {"field": "color", "op": "eq", "value": "red"}}));
    assert_eq!(code(&err), -32602);
    assert_eq!(err["data"]["field"], "filter.field");
    let err =
        e.err("retrieve", json!({"query": "common", "k": 5, "filter": {"field": "year", "op": "eq", "value": "2020"}}));
    assert_eq!(code(&err), -32602);
    assert_eq!(err["data"]["field"], "filter.value");
    let err =
        e.err("retrieve", json!({"query": "common", "k": 5, "filter": {"field": "lang", "op": "gt", "value": "a"}}));
    assert_eq!(code(&err), -32602);
    let err = e.err("retrieve", json!({"query": "common", "k": 5, "filter": {"and": []}}));
    assert_eq!(code(&err), -32602);

    // A document whose metadata does not fit its declared type rejects the whole batch.
    let before = ids(&e.ok("retrieve", json!({"query": "common", "k": 100}))).len();
    let err = e.err(
        "index/add",
        json!({"documents": [
            {"id": "ok-1", "text": "common fine"},
            {"id": "bad-1", "text": "common broken", "meta": {"year": "nineteen"}}]}),
    );
    assert_eq!(code(&err), -32602);
    assert_eq!(err["data"]["field"], "documents[1].meta.year");
    let err =
        e.err("index/add", json!({"documents": [{"id": "bad-2", "text": "x", "meta": {"published": "yesterday"}}]}));
    assert_eq!(err["data"]["field"], "documents[0].meta.published");
    let after = ids(&e.ok("retrieve", json!({"query": "common", "k": 100}))).len();
    assert_eq!(before, after, "a rejected batch writes nothing");
    // The server is still up.
    e.ok("ping", json!({}));
}

#[test]
fn builtin_corpus_declares_topic_and_year() {
    let mut e = common::serve(&[]);
    let info = e.ok("info", json!({}));
    assert_eq!(info["capabilities"]["filter"]["fields"], json!({"topic": "keyword", "year": "int"}));
    let r = e.ok(
        "retrieve",
        json!({"query": "search engine index", "k": 10,
               "filter": {"and": [{"field": "topic", "op": "eq", "value": "retrieval"}, {"field": "year", "op": "lt", "value": 2000}]}}),
    );
    let got = ids(&r);
    assert!(!got.is_empty());
    for h in r["hits"].as_array().unwrap() {
        assert_eq!(h["meta"]["topic"], "retrieval");
        assert!(h["meta"]["year"].as_i64().unwrap() < 2000);
    }
}
