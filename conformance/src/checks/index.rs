//! Corpus mutation (§7.10, §7.11): positional ids, upsert, minted ids, idempotent delete. Every
//! document added is deleted again.

use serde_json::{Value, json};

use crate::session::Main;
use crate::verdict::{Res, expect_code, fail, hit_key, hits, pass, pass_note, show, skip, verdict};

fn writable(m: &Main) -> bool {
    m.caps.has("index") && m.caps.flag(&["index", "writable"])
}

const NOT_WRITABLE: &str = "index not advertised as writable";

async fn add(m: &mut Main, docs: Value) -> Result<Vec<String>, String> {
    let r = m.conn.call("index/add", json!({"documents": docs})).await?;
    let ids = r.ok()?.get("ids").and_then(Value::as_array).cloned().ok_or("index/add result has no ids array")?;
    ids.iter().map(|i| i.as_str().map(str::to_owned).ok_or_else(|| format!("id {i} is not a string"))).collect()
}

async fn delete(m: &mut Main, ids: &[String]) -> Result<u64, String> {
    let r = m.conn.call("index/delete", json!({"ids": ids})).await?;
    let res = r.ok()?;
    res.get("deleted")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("index/delete result has no deleted count: {}", show(res)))
}

pub(crate) async fn readonly(m: &mut Main) -> Res {
    if !m.caps.has("index") {
        return skip("index not advertised");
    }
    if writable(m) {
        return skip("index is writable");
    }
    let r = m.conn.call("index/add", json!({"documents": [{"id": "conformance-ro", "text": "x"}]})).await?;
    expect_code(&r, -32003)?;
    pass()
}

pub(crate) async fn positional(m: &mut Main) -> Res {
    if !writable(m) {
        return skip(NOT_WRITABLE);
    }
    let (a, b) = ("conformance-doc-a", "conformance-doc-b");
    let ids = add(
        m,
        json!([
            {"id": a, "text": "zqxjconformance first document", "meta": {}},
            {"text": "zqxjconformance second document without id"},
            {"id": b, "text": "zqxjconformance third document"},
        ]),
    )
    .await?;
    let outcome = if ids.len() != 3 {
        fail(format!("{} ids for 3 documents: {ids:?}", ids.len()))
    } else if ids[0] != a || ids[2] != b {
        fail(format!("ids {ids:?} are not positional (expected [{a}, <minted>, {b}])"))
    } else if ids[1].is_empty() {
        fail("the minted id is empty")
    } else {
        pass()
    };
    delete(m, &ids).await?;
    outcome
}

pub(crate) async fn upsert(m: &mut Main) -> Res {
    if !writable(m) {
        return skip(NOT_WRITABLE);
    }
    let id = "conformance-upsert";
    add(m, json!([{"id": id, "text": "zqxjupsert original version"}])).await?;
    let r =
        m.conn.call("index/add", json!({"documents": [{"id": id, "text": "zqxjupsert replacement version"}]})).await?;
    if r.code() == Some(-32016) {
        delete(m, &[id.to_owned()]).await?;
        return pass_note("the server does not upsert and rejects the duplicate with -32016 (allowed)");
    }
    let ids: Vec<String> = r
        .ok()?
        .get("ids")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    if ids != [id] {
        return fail(format!("re-adding id {id} returned ids {ids:?}"));
    }
    // Identical {id, text} pairs again: observationally a no-op.
    add(m, json!([{"id": id, "text": "zqxjupsert replacement version"}])).await?;
    let k = m.k(50);
    let hs = hits(&m.retrieve(json!({"query": "zqxjupsert replacement version", "k": k})).await?)?;
    let copies: Vec<&Value> = hs.iter().filter(|h| hit_key(h) == id).collect();
    let deleted = delete(m, &[id.to_owned()]).await?;
    if copies.len() > 1 {
        return fail(format!("id {id} appears {} times after re-adding it", copies.len()));
    }
    if deleted > 1 {
        return fail(format!("deleting {id} removed {deleted} documents: re-adding created copies"));
    }
    if let Some(text) = copies.first().and_then(|h| h.get("text")).and_then(Value::as_str)
        && !text.contains("replacement")
    {
        return fail(format!("after the upsert, hit {id} still carries the old text '{text}'"));
    }
    pass()
}

pub(crate) async fn minted_fresh(m: &mut Main) -> Res {
    if !writable(m) {
        return skip(NOT_WRITABLE);
    }
    let one = add(m, json!([{"text": "zqxjminted one"}])).await?;
    let two = add(m, json!([{"text": "zqxjminted two"}])).await?;
    delete(m, &one).await?;
    let three = add(m, json!([{"text": "zqxjminted three"}])).await?;
    let mut cleanup = two.clone();
    cleanup.extend(three.iter().cloned());
    cleanup.dedup();
    delete(m, &cleanup).await?;
    verdict(three != two, || {
        format!(
            "added [no id] → {one:?}, [no id] → {two:?}, deleted {one:?}, added [no id] → {three:?}: the new document took the id of an existing one and replaced it"
        )
    })
}

pub(crate) async fn delete_idempotent(m: &mut Main) -> Res {
    if !writable(m) {
        return skip(NOT_WRITABLE);
    }
    let id = "conformance-delete-me".to_owned();
    add(m, json!([{"id": id, "text": "zqxjdelete"}])).await?;
    let first = delete(m, std::slice::from_ref(&id)).await?;
    let second = delete(m, std::slice::from_ref(&id)).await?;
    let never = delete(m, &["conformance-never-existed".to_owned()]).await?;
    verdict((first, second, never) == (1, 0, 0), || {
        format!("deleted counts: {first} then {second} (expected 1 then 0); an id that never existed: {never}")
    })
}
