//! Chunked writes at the store: only new or changed chunks are embedded (an unchanged chunk at
//! the same position keeps its vector), every passage is the title and the chunk's text, and a
//! document switching between whole and chunked is embedded as what it now is. Vectors are
//! synthetic: no model is needed.

mod common;

use std::sync::Mutex;

use common::database;
use rcp_corpus::chunking::ChunkPolicy;
use rcp_pg::migrate::{HnswParams, migrate};
use rcp_pg::store::NewDoc;
use rcp_pg::{Database, DbError, PoolOptions, Store};
use serde_json::json;

const TEXT: &str = "One two three four. Five six seven eight. Nine ten eleven twelve.";

fn policy() -> ChunkPolicy {
    ChunkPolicy { max_words: 4, overlap_words: 0 }
}

fn doc(text: &str, chunked: bool) -> NewDoc {
    let d = NewDoc::new("d".into(), Some("Title".into()), text.into(), json!({"lang": "en"}));
    if chunked { d.chunked(policy()) } else { d }
}

#[test]
fn only_new_or_changed_chunks_are_embedded() {
    let Some(url) = database("chunk_store") else { return };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let db = Database::new(&url, &PoolOptions::default()).expect("pool");
        migrate(&mut db.client().await.expect("connect"), HnswParams::default()).await.expect("migrate");
        let store = Store::new(db, Default::default());
        let seen = Mutex::new(Vec::<String>::new());
        let put = |d: NewDoc| {
            let seen = &seen;
            let embed = move |texts: Vec<String>| async move {
                seen.lock().expect("lock").extend(texts.iter().cloned());
                Ok::<_, DbError>(texts.iter().map(|_| vec![0.5_f32; 384]).collect())
            };
            let store = store.clone();
            async move { store.put(vec![d], embed).await.expect("put") }
        };
        let take = || std::mem::take(&mut *seen.lock().expect("lock"));

        put(doc(TEXT, true)).await;
        assert_eq!(
            take(),
            ["Title One two three four.", "Title Five six seven eight.", "Title Nine ten eleven twelve."]
        );
        put(doc(TEXT, true)).await;
        assert_eq!(take(), Vec::<String>::new(), "unchanged chunks keep their vectors");
        put(doc(&TEXT.replace("Nine", "Zero"), true)).await;
        assert_eq!(take(), ["Title Zero ten eleven twelve."], "only the changed chunk");
        put(doc(TEXT, false)).await;
        assert_eq!(take(), [format!("Title {TEXT}")], "whole again: the document is embedded");
        put(doc(TEXT, true)).await;
        assert_eq!(take().len(), 3, "its chunks went when it was added whole");
    });
}
