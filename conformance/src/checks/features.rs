//! The SOTA method families (L2): embeddings and their compact encoding (§7.3–§7.5), rerank
//! (§7.6), query transformation (§7.8), graph (§7.9) and the aggregator catalog (§7.13).

use serde_json::{Value, json};

use super::graph::{self, GRAPH_OPS};
use super::methods::option_probe;
use crate::session::Main;
use crate::verdict::{
    Res, expect_invalid_params, expect_option_unsupported, fail, pass, pass_note, show, skip, verdict,
};

fn dimension(m: &Main, cap: &str) -> Option<usize> {
    m.caps.u64_at(&[cap, "dimension"]).and_then(|d| usize::try_from(d).ok())
}

/// The vectors of an embed result as JSON number arrays.
fn json_vectors(res: &Value) -> Result<Vec<Vec<f64>>, String> {
    let vs = res.get("vectors").and_then(Value::as_array).ok_or("embed result has no vectors array")?;
    vs.iter()
        .map(|v| {
            v.as_array()
                .ok_or_else(|| format!("vector is not a JSON array: {}", show(v)))?
                .iter()
                .map(|x| x.as_f64().ok_or_else(|| format!("vector component {x} is not a number")))
                .collect()
        })
        .collect()
}

pub(crate) async fn embed_dimension(m: &mut Main) -> Res {
    if !m.caps.has("embed") {
        return skip("embed not advertised");
    }
    let inputs = ["alpha", "beta gamma", "δέλτα ✓"];
    let r = m.conn.call("embed", json!({"inputs": inputs, "kind": "document"})).await?;
    let vs = json_vectors(r.ok()?)?;
    if vs.len() != inputs.len() {
        return fail(format!("{} vectors for {} inputs", vs.len(), inputs.len()));
    }
    let lengths: Vec<usize> = vs.iter().map(Vec::len).collect();
    // The schema leaves embed.dimension optional; some servers spell it `dimensions`. Either
    // way the vectors must agree with what was advertised and with each other.
    let (dim, note) = match (dimension(m, "embed"), m.caps.u64_at(&["embed", "dimensions"])) {
        (Some(d), _) => (Some(d), String::new()),
        (None, Some(d)) => {
            (usize::try_from(d).ok(), "advertised as embed.dimensions (the spec spells it dimension)".into())
        }
        (None, None) => (None, "no embed.dimension advertised (optional in the schema)".to_owned()),
    };
    if let Some(v) = lengths.iter().find(|l| dim.is_some_and(|d| **l != d)) {
        return fail(format!("a vector has {v} components; the advertised dimension is {}", dim.unwrap_or_default()));
    }
    if lengths.windows(2).any(|w| w[0] != w[1]) {
        return fail(format!("the vectors of one call have different lengths: {lengths:?}"));
    }
    if note.is_empty() { pass() } else { pass_note(format!("{note}; the vectors have {} components", lengths[0])) }
}

pub(crate) async fn embed_default_json(m: &mut Main) -> Res {
    if !m.caps.has("embed") {
        return skip("embed not advertised");
    }
    let r = m.conn.call("embed", json!({"inputs": ["alpha"]})).await?;
    let res = r.ok()?;
    if let Some(enc) = res.get("encoding")
        && enc != "json"
    {
        return fail(format!("encoding {enc} used although the client requested none (MUST NOT, §7.3.1)"));
    }
    json_vectors(res)?;
    pass()
}

pub(crate) async fn embed_batch_limit(m: &mut Main) -> Res {
    if !m.caps.has("embed") {
        return skip("embed not advertised");
    }
    let Some(limit) = m.caps.u64_at(&["embed", "batchLimit"]) else { return skip("embed.batchLimit not advertised") };
    if limit > 100_000 {
        return skip(format!("embed.batchLimit {limit} is too large to probe"));
    }
    let inputs: Vec<String> = (0..=limit).map(|i| format!("input {i}")).collect();
    let r = m.conn.call("embed", json!({"inputs": inputs})).await?;
    expect_invalid_params(&r, &["inputs"])
}

pub(crate) async fn embed_legacy_texts(m: &mut Main) -> Res {
    if !m.caps.has("embed") {
        return skip("embed not advertised");
    }
    let r = m.conn.call("embed", json!({"texts": ["alpha", "beta"]})).await?;
    let vs = json_vectors(r.ok()?)?;
    verdict(vs.len() == 2, || format!("{} vectors for 2 texts", vs.len()))
}

/// Standard base64 (RFC 4648 §4, padded) to bytes.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let last = i == bytes.len() / 4 - 1;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[1..4 - pad]);
    }
    Some(out)
}

pub(crate) async fn embed_f32_base64(m: &mut Main) -> Res {
    let advertised = m.caps.strings(&["embed", "encodings"]).unwrap_or_default();
    if !m.caps.has("embed") || !advertised.iter().any(|e| e == "f32-base64") {
        return skip("f32-base64 not in embed.encodings");
    }
    let Some(dim) = dimension(m, "embed") else { return fail("embed.dimension is not advertised") };
    let inputs = json!(["alpha", "beta gamma"]);
    let plain = json_vectors(m.conn.call("embed", json!({"inputs": inputs})).await?.ok()?)?;
    let r = m.conn.call("embed", json!({"inputs": inputs, "encoding": "f32-base64"})).await?;
    let res = r.ok()?;
    if res.get("encoding") != Some(&json!("f32-base64")) {
        return fail(format!(
            "the result must echo encoding \"f32-base64\", got {}",
            res.get("encoding").map_or("none".into(), show)
        ));
    }
    if res.get("dimension").and_then(Value::as_u64) != Some(dim as u64) {
        return fail(format!(
            "dimension must be present and equal {dim}, got {}",
            res.get("dimension").map_or("none".into(), show)
        ));
    }
    let blobs = res.get("vectors").and_then(Value::as_array).ok_or("no vectors array")?;
    if blobs.len() != plain.len() {
        return fail(format!("{} blobs for {} inputs", blobs.len(), plain.len()));
    }
    for (i, (blob, json_v)) in blobs.iter().zip(&plain).enumerate() {
        let Some(bytes) = blob.as_str().and_then(base64_decode) else {
            return fail(format!("vectors[{i}] is not padded standard base64"));
        };
        if bytes.len() != dim * 4 {
            return fail(format!("vectors[{i}] decodes to {} bytes; dimension × 4 = {}", bytes.len(), dim * 4));
        }
        let floats = bytes.chunks_exact(4).map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        if let Some((j, (a, b))) =
            floats.zip(json_v).enumerate().find(|(_, (a, b))| (a - *b).abs() > 1e-6 * b.abs().max(1.0))
        {
            return fail(format!("vectors[{i}][{j}] is {a} as f32-base64 but {b} as JSON"));
        }
    }
    pass()
}

pub(crate) async fn embed_encoding_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("embed") {
        return skip("embed not advertised");
    }
    if m.caps.strings(&["embed", "encodings"]).unwrap_or_default().iter().any(|e| e == "f32-base64") {
        return skip("f32-base64 is advertised");
    }
    let r = m.probe("embed", option_probe("embed", "f32-base64")).await?;
    expect_option_unsupported(&r)
}

pub(crate) async fn sparse_shape(m: &mut Main) -> Res {
    if !m.caps.has("sparseEmbed") {
        return skip("sparseEmbed not advertised");
    }
    let r = m.conn.call("embed/sparse", json!({"texts": ["alpha beta", "gamma"]})).await?;
    let sparse = r.ok()?.get("sparse").and_then(Value::as_array).cloned().ok_or("no sparse array")?;
    if sparse.len() != 2 {
        return fail(format!("{} sparse vectors for 2 texts", sparse.len()));
    }
    for s in &sparse {
        let idx = s.get("indices").and_then(Value::as_array).map(Vec::len);
        let val = s.get("values").and_then(Value::as_array).map(Vec::len);
        if idx.is_none() || idx != val {
            return fail(format!("indices and values must be arrays of equal length: {}", show(s)));
        }
    }
    pass()
}

pub(crate) async fn multi_dimension(m: &mut Main) -> Res {
    if !m.caps.has("multiVector") {
        return skip("multiVector not advertised");
    }
    let Some(dim) = dimension(m, "multiVector") else { return fail("multiVector.dimension is not advertised") };
    let r = m.conn.call("embed/multi", json!({"inputs": ["alpha beta gamma"]})).await?;
    let mats = r.ok()?.get("matrices").and_then(Value::as_array).cloned().ok_or("no matrices array")?;
    if mats.len() != 1 {
        return fail(format!("{} matrices for 1 input", mats.len()));
    }
    let rows = mats[0].as_array().cloned().unwrap_or_default();
    match rows.iter().find(|row| row.as_array().map(Vec::len) != Some(dim)) {
        Some(row) => fail(format!("a row is not {dim} floats: {}", show(row))),
        None => pass_note(format!("{} rows of {dim}", rows.len())),
    }
}

pub(crate) async fn rerank_scores(m: &mut Main) -> Res {
    if !m.caps.has("rerank") {
        return skip("rerank not advertised");
    }
    let passages = ["alpha beta", "gamma delta", "epsilon"];
    let r = m.conn.call("rerank", json!({"query": "alpha", "passages": passages})).await?;
    let res = r.ok()?;
    let scores: Vec<f64> = res
        .get("scores")
        .and_then(Value::as_array)
        .ok_or("no scores array")?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    if scores.len() != passages.len() {
        return fail(format!("{} numeric scores for {} passages", scores.len(), passages.len()));
    }
    if let Some(order) = res.get("order").and_then(Value::as_array) {
        let idx: Vec<usize> = order.iter().filter_map(Value::as_u64).map(|i| i as usize).collect();
        if idx.len() != order.len() || idx.iter().any(|&i| i >= scores.len()) {
            return fail(format!("order {} is not a list of passage indices", show(&json!(order))));
        }
        if idx.windows(2).any(|w| scores[w[0]] < scores[w[1]]) {
            return fail(format!("order {idx:?} is not best-first for scores {scores:?}"));
        }
    }
    pass()
}

fn missing<'a>(all: &[&'a str], advertised: Option<Vec<String>>) -> Option<&'a str> {
    let adv = advertised.unwrap_or_default();
    all.iter().copied().find(|x| !adv.iter().any(|a| a == x))
}

pub(crate) async fn rerank_method_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("rerank") {
        return skip("rerank not advertised");
    }
    let Some(method) = missing(&["cross-encoder", "colbert", "llm"], m.caps.strings(&["rerank", "methods"])) else {
        return skip("every rerank method is advertised");
    };
    let r = m.probe("rerank", option_probe("rerank", method)).await?;
    expect_option_unsupported(&r)
}

pub(crate) async fn rerank_documents(m: &mut Main) -> Res {
    if !m.caps.has("rerank") {
        return skip("rerank not advertised");
    }
    let r = m.conn.call("rerank", json!({"query": "alpha", "documents": ["alpha beta", "gamma"]})).await?;
    match r.result().and_then(|x| x.get("scores")).and_then(Value::as_array) {
        Some(s) if s.len() == 2 => pass(),
        _ => fail(format!(
            "documents is not accepted as a synonym of passages (interop probe, not a MUST): {}",
            r.brief()
        )),
    }
}

pub(crate) async fn graph_op_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("graph") {
        return skip("graph not advertised");
    }
    let Some(op) = missing(&GRAPH_OPS, m.caps.strings(&["graph", "ops"])) else {
        return skip("every graph op is advertised");
    };
    let r = m.probe("graph", option_probe("graph", op)).await?;
    expect_option_unsupported(&r)
}

/// Each advertised op answers the request every graph check sends it (the broad query, `k: 3`,
/// and for `neighbors` a seed the server's own answers name).
pub(crate) async fn graph_ops_served(m: &mut Main) -> Res {
    if !m.caps.has("graph") {
        return skip("graph not advertised");
    }
    let ops = m.caps.strings(&["graph", "ops"]).unwrap_or_default();
    if ops.is_empty() {
        return skip("graph.ops is empty");
    }
    let mut notes = Vec::new();
    for op in &ops {
        let (r, from) = graph::ask(m, op).await?;
        if r.result().is_some() {
            continue;
        }
        if graph::guessed_seed_missed(&r, from) {
            notes.push(format!("{op} refused the seed it was given ({from:?}): {}", r.brief()));
            continue;
        }
        return fail(format!("advertised op '{op}' failed: {}", r.brief()));
    }
    notes.insert(0, format!("ops: {}", ops.join(", ")));
    pass_note(notes.join("; "))
}

const TRANSFORMS: [&str; 5] = ["rewrite", "hyde", "multi-query", "decompose", "step-back"];

pub(crate) async fn transform_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("transform") {
        return skip("transform not advertised");
    }
    let Some(method) = missing(&TRANSFORMS, m.caps.strings(&["transform", "methods"])) else {
        return skip("every transform method is advertised");
    };
    let r = m.probe("query/transform", option_probe("query/transform", method)).await?;
    expect_option_unsupported(&r)
}

pub(crate) async fn transform_served(m: &mut Main) -> Res {
    if !m.caps.has("transform") {
        return skip("transform not advertised");
    }
    let methods = m.caps.strings(&["transform", "methods"]).unwrap_or_default();
    for method in &methods {
        let r = m.conn.call("query/transform", json!({"query": "what is alpha", "method": method})).await?;
        let res = r.ok()?;
        if !res.get("queries").is_some_and(Value::is_array) {
            return fail(format!("'{method}' returned no queries array: {}", show(res)));
        }
    }
    pass_note(format!("methods: {}", methods.join(", ")))
}

pub(crate) async fn rewrite_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip("retrieve not advertised");
    }
    // Without `transform`, every method is unadvertised (§3.1: `retrieve.rewrite` is gated by it).
    let Some(method) =
        missing(&TRANSFORMS, m.caps.strings(&["transform", "methods"]).filter(|_| m.caps.has("transform")))
    else {
        return skip("every transform method is advertised");
    };
    let r = m.broad_hits(m.k(3), json!({"rewrite": method})).await?;
    expect_option_unsupported(&r)
}

pub(crate) async fn rewrite_served(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") || !m.caps.has("transform") {
        return skip("retrieve and transform are not both advertised");
    }
    let methods = m.caps.strings(&["transform", "methods"]).unwrap_or_default();
    if methods.is_empty() {
        return skip("transform.methods is empty");
    }
    let k = m.k(3);
    let mut reported = Vec::new();
    for method in &methods {
        let r = m.broad_hits(k, json!({"rewrite": method})).await?;
        let Some(res) = r.result() else {
            return fail(format!("retrieve with the advertised rewrite '{method}' failed: {}", r.brief()));
        };
        let n = res.get("hits").and_then(Value::as_array).map_or(0, Vec::len);
        if n as u64 > k {
            return fail(format!("retrieve with rewrite '{method}' returned {n} hits for k={k}"));
        }
        if res.get("rewrittenQuery").is_some_and(Value::is_string) {
            reported.push(method.as_str());
        }
    }
    let reported = if reported.is_empty() { "none".to_owned() } else { reported.join(", ") };
    pass_note(format!("rewrites: {}; rewrittenQuery reported for: {reported}", methods.join(", ")))
}

pub(crate) async fn catalog_list(m: &mut Main) -> Res {
    if !m.caps.has("catalog") {
        return skip("catalog not advertised");
    }
    let r = m.conn.call("catalog/list", json!({})).await?;
    let res = r.ok()?;
    verdict(res.get("engines").is_some_and(Value::is_array), || format!("no engines array: {}", show(res)))
}

pub(crate) async fn embed_modality_unadvertised(m: &mut Main) -> Res {
    if !m.caps.has("embed") {
        return skip("embed not advertised");
    }
    let modalities = m.caps.strings(&["embed", "modalities"]).unwrap_or_else(|| vec!["text".into()]);
    if modalities.iter().any(|x| x == "image" || x == "multimodal") {
        return skip("embed.modalities includes images");
    }
    let r = m.conn.call("embed", json!({"inputs": [super::retrieve::image_block()]})).await?;
    match r.code() {
        Some(-32005) => pass(),
        Some(-32602) => pass_note("-32602: a text-only server may accept only strings (§4.8)"),
        _ => fail(format!("an image input outside embed.modalities must be rejected with -32005, got {}", r.brief())),
    }
}

pub(crate) async fn rerank_max_candidates(m: &mut Main) -> Res {
    if !m.caps.has("rerank") {
        return skip("rerank not advertised");
    }
    let Some(max) = m.caps.u64_at(&["rerank", "maxCandidates"]) else {
        return skip("rerank.maxCandidates not advertised");
    };
    if max > 10_000 {
        return skip(format!("rerank.maxCandidates {max} is too large to probe"));
    }
    let passages: Vec<String> = (0..=max).map(|i| format!("passage {i}")).collect();
    let r = m.conn.call("rerank", json!({"query": "alpha", "passages": passages})).await?;
    match r.code() {
        Some(-32602 | -32011 | -32013) => pass(),
        _ => fail(format!(
            "{} passages exceed rerank.maxCandidates {max} and must be rejected, got {}",
            max + 1,
            r.brief()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::base64_decode;

    #[test]
    fn base64_round_trips_rfc4648_vectors() {
        for (enc, dec) in [("", ""), ("Zg==", "f"), ("Zm8=", "fo"), ("Zm9v", "foo"), ("Zm9vYmFy", "foobar")] {
            assert_eq!(base64_decode(enc).as_deref(), Some(dec.as_bytes()));
        }
        assert_eq!(base64_decode("Zg="), None);
        assert_eq!(base64_decode("Z=g="), None);
    }
}
