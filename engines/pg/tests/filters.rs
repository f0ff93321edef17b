//! The SQL compilation of §8 filters agrees with the reference evaluator (`Filter::matches`)
//! row by row, on real PostgreSQL, for every operator, missing and null fields, dates in both
//! encodings, arrays, and nested and/or/not. Vectors are synthetic: no model is needed.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use rcp_pg::migrate::{HnswParams, migrate};
use rcp_pg::query::{Lists, Search, Unit};
use rcp_pg::store::NewDoc;
use rcp_pg::{Database, DbError, PoolOptions, Store};
use rcp_wire::filter::{FieldType, Filter, Op, date_to_epoch_ms};
use serde_json::{Value, json};

fn rows() -> Vec<(String, Value)> {
    let metas = [
        json!({"year": 1999, "lang": "en", "score": 4.5, "tags": ["a", "b"], "at": "1999-12-31T23:00:00-02:00", "draft": false}),
        json!({"year": 2000, "lang": "de", "score": 3, "tags": ["b"], "at": 946684800000_i64, "draft": true}),
        json!({"year": 2001, "lang": "EN", "tags": [], "at": "2001-01-01", "title": "x"}),
        json!({"year": null, "lang": "fr", "score": -1.25, "tags": ["a"], "at": null}),
        json!({"lang": "en-GB", "score": 0, "tags": ["c", "a"], "at": "2000-01-01T00:00:00Z", "draft": true}),
        json!({}),
        json!({"year": 2000.0, "lang": "ende", "tags": ["ab"], "at": "not a date"}),
    ];
    metas.into_iter().enumerate().map(|(i, m)| (format!("r{i}"), m)).collect()
}

fn filters() -> Vec<Filter> {
    let mut out = Vec::new();
    for (field, values) in [
        ("year", vec![json!(2000), json!(1999.5), json!(2001)]),
        ("lang", vec![json!("en"), json!("EN"), json!("de"), json!("e")]),
        ("score", vec![json!(0), json!(3.0), json!(-1.25)]),
        ("at", vec![json!("2000-01-01"), json!(946684800000_i64), json!("1999-12-31T23:30:00-02:00")]),
        ("draft", vec![json!(true), json!(false)]),
        ("missing", vec![json!(1)]),
    ] {
        for v in &values {
            for op in [Op::Eq, Op::Ne, Op::Gt, Op::Gte, Op::Lt, Op::Lte] {
                if field == "draft" && op.is_ordered() {
                    continue;
                }
                out.push(Filter::leaf(field, op, v.clone()));
            }
        }
        out.push(Filter::leaf(field, Op::In, Value::Array(values.clone())));
        out.push(Filter::leaf(field, Op::Nin, Value::Array(values.clone())));
        out.push(Filter::exists(field, true));
        out.push(Filter::exists(field, false));
    }
    for needle in ["a", "b", "n", "ab", "EN"] {
        out.push(Filter::contains("tags", needle));
        out.push(Filter::contains("lang", needle));
    }
    out.push(Filter::eq("tags", json!(["a", "b"])));
    out.push(Filter::eq("lang", "en") | (Filter::gte("year", 2000) & !Filter::contains("tags", "b")));
    out.push(!(Filter::exists("score", true) | Filter::eq("draft", true)));
    out.push(Filter::And(vec![]));
    out.push(Filter::Or(vec![]));
    out
}

/// The reference evaluator, except that the typed `date` field `at` always compares instants
/// (the evaluator knows no field types: it compares two strings as strings, so it would call
/// "2000-01-01" and "2000-01-01T00:00:00Z" different, and "not a date" later than both).
fn expected(f: &Filter, meta: &rcp_wire::Meta) -> bool {
    let instant = |v: &Value| date_to_epoch_ms(v);
    match f {
        Filter::And(items) => items.iter().all(|x| expected(x, meta)),
        Filter::Or(items) => items.iter().any(|x| expected(x, meta)),
        Filter::Not(inner) => !expected(inner, meta),
        Filter::Leaf { field, op, value } if field == "at" && !matches!(op, Op::Exists | Op::Contains) => {
            let actual = meta.get("at").and_then(instant);
            let operand = instant(value);
            let hit = match op {
                Op::Eq | Op::Ne => actual.is_some() && actual == operand,
                Op::In | Op::Nin => {
                    actual.is_some() && value.as_array().is_some_and(|vs| vs.iter().any(|v| instant(v) == actual))
                }
                Op::Gt => actual.zip(operand).is_some_and(|(a, b)| a > b),
                Op::Gte => actual.zip(operand).is_some_and(|(a, b)| a >= b),
                Op::Lt => actual.zip(operand).is_some_and(|(a, b)| a < b),
                _ => actual.zip(operand).is_some_and(|(a, b)| a <= b),
            };
            if matches!(op, Op::Ne | Op::Nin) { !hit } else { hit }
        }
        leaf => leaf.matches(meta),
    }
}

#[test]
fn sql_filters_match_the_reference_evaluator_row_by_row() {
    let Some(url) = common::database("filters") else { return };
    let fields = BTreeMap::from([
        ("year".to_owned(), FieldType::Int),
        ("lang".to_owned(), FieldType::Keyword),
        ("score".to_owned(), FieldType::Float),
        ("tags".to_owned(), FieldType::Keyword),
        ("at".to_owned(), FieldType::Date),
        ("draft".to_owned(), FieldType::Bool),
        ("missing".to_owned(), FieldType::Int),
    ]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let db = Database::new(&url, &PoolOptions::default()).expect("pool");
        migrate(&mut db.client().await.expect("connect"), HnswParams::default()).await.expect("migrate");
        let store = Store::new(db, fields);
        let docs: Vec<NewDoc> =
            rows().into_iter().map(|(id, meta)| NewDoc::new(id.clone(), None, format!("row {id}"), meta)).collect();
        // Synthetic unit vectors: the filter, not the ranking, is under test.
        let embed = |texts: Vec<String>| async move {
            Ok::<_, DbError>(
                texts
                    .iter()
                    .enumerate()
                    .map(|(i, _)| (0..384).map(|j| if j == i % 384 { 1.0 } else { 0.0 }).collect())
                    .collect(),
            )
        };
        store.put(docs, embed).await.expect("write rows");
        let query: Vec<f32> = (0..384).map(|j| if j == 0 { 1.0 } else { 0.0 }).collect();
        let mut checked = 0;
        for f in filters() {
            let search = Search {
                text: "row",
                vector: Some(&query),
                lists: Lists::Dense,
                filter: Some(&f),
                limit: 100,
                ef_search: 100,
                with_vectors: false,
                unit: Unit::Document,
            };
            let found = store.search(&search).await.unwrap_or_else(|e| panic!("{}: {e}", f.to_value()));
            let got: BTreeSet<String> = found.dense.into_iter().map(|r| r.id).collect();
            let want: BTreeSet<String> = rows()
                .into_iter()
                .filter(|(_, m)| m.as_object().is_some_and(|m| expected(&f, m)))
                .map(|(id, _)| id)
                .collect();
            assert_eq!(got, want, "filter {}", f.to_value());
            checked += 1;
        }
        assert!(checked > 100, "{checked} filters checked");
    });
}
