//! Shared helpers: a real PostgreSQL (testkit), the provisioned model, the engine binary.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use rcp_embedder::model;
use rcp_testkit::Engine;
use rcp_testkit::pg::PgCluster;
use serde_json::{Value, json};

/// The shared cluster of this test binary. `None` (after saying why) only when Python, which
/// provisions PostgreSQL, is absent; any other failure fails the test.
pub(crate) fn cluster() -> Option<&'static PgCluster> {
    match PgCluster::shared() {
        Ok(c) => Some(c),
        Err(e) if Command::new("python3").arg("--version").output().is_err() => {
            eprintln!("SKIP: PostgreSQL cannot be provisioned without python3 ({e})");
            None
        }
        Err(e) => panic!("PostgreSQL could not be started: {e}"),
    }
}

/// A fresh database on the shared cluster.
pub(crate) fn database(prefix: &str) -> Option<String> {
    cluster().map(|c| c.create_database(prefix).expect("create database"))
}

/// The model directory, provisioned once.
pub(crate) fn model_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = model::default_dir();
        model::locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the model");
        dir
    })
    .clone()
}

/// The engine binary.
pub(crate) fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rcp-pg"))
}

/// `rcp-pg serve --database-url URL ARGS...` over stdio, initialized.
pub(crate) fn serve(url: &str, args: &[&str]) -> Engine {
    let dir = model_dir();
    let mut all = vec!["serve", "--database-url", url];
    all.extend_from_slice(args);
    let mut e = Engine::spawn_env(&bin(), &all, &[("RCP_MODEL_DIR", dir.to_str().expect("utf-8 path"))]);
    e.initialize();
    e
}

/// A small corpus with typed metadata.
pub(crate) fn docs() -> Vec<Value> {
    vec![
        json!({"id": "wing", "text": "The wing of the aircraft produces lift in a propeller slipstream.", "meta": {"title": "Wings", "year": 1960, "topic": "aero", "tags": ["lift", "wing"], "published": "1960-05-01"}}),
        json!({"id": "boundary", "text": "Boundary layer transition on a flat plate at supersonic speed.", "meta": {"title": "Boundary layers", "year": 1975, "topic": "aero", "tags": ["flow"], "published": "1975-01-15T12:00:00Z"}}),
        json!({"id": "bread", "text": "Sourdough bread rises slowly; the crust browns in a hot oven.", "meta": {"title": "Baking", "year": 2021, "topic": "food", "tags": ["bread"], "published": 1609459200000_i64}}),
        json!({"id": "soup", "text": "A tomato soup recipe with basil and garlic.", "meta": {"year": 2023, "topic": "food"}}),
        json!({"id": "rust", "text": "Rust programs manage memory without a garbage collector.", "meta": {"title": "Rust", "year": 2015, "topic": "code", "tags": ["memory", "lang"]}}),
        json!({"id": "search", "text": "Search engines rank documents with BM25 and dense vectors.", "meta": {"title": "Retrieval", "year": 2020, "topic": "code", "tags": ["ranking"], "published": "2020-02-29"}}),
    ]
}

/// The fields the tests declare.
pub(crate) const FIELDS: [&str; 8] =
    ["--field", "year:int", "--field", "topic:keyword", "--field", "tags:keyword", "--field", "published:date"];

/// Ids of a retrieve result, in rank order.
pub(crate) fn ids(result: &Value) -> Vec<String> {
    result["hits"].as_array().expect("hits").iter().map(|h| h["id"].as_str().expect("string id").to_owned()).collect()
}
