//! Method gating and params validation on the main session (§7, §12, §14.1 items 2, 4, 5, 7).

use serde_json::{Value, json};

use crate::roster::SPEC_METHODS;
use crate::session::{Caps, Main};
use crate::verdict::{
    Outcome, Res, expect_code, expect_invalid_params, expect_option_unsupported, fail, pass, show, skip, verdict,
};

const NO_RETRIEVE: &str = "retrieve not advertised";

pub(crate) async fn declared(m: &mut Main) -> Res {
    let from_init = m.init.get("_meta").and_then(|x| x.get("conformance")).cloned();
    let r = m.conn.call("info", json!({})).await?;
    let from_info = r.ok()?.get("_meta").and_then(|x| x.get("conformance")).cloned();
    let valid = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).is_some_and(|s| ["L0", "L1", "L2"].contains(&s));
    if !valid(&from_init) {
        return fail(format!(
            "initialize result _meta.conformance is {}, expected \"L0\", \"L1\" or \"L2\"",
            from_init.as_ref().map_or("absent".into(), show)
        ));
    }
    if !valid(&from_info) {
        return fail(format!(
            "info result _meta.conformance is {}, expected \"L0\", \"L1\" or \"L2\"",
            from_info.as_ref().map_or("absent".into(), show)
        ));
    }
    verdict(from_init == from_info, || format!("initialize declares {from_init:?} but info declares {from_info:?}"))
}

pub(crate) async fn retrieval_capability(m: &mut Main) -> Res {
    let any = ["embed", "rerank", "retrieve", "graph"].iter().any(|k| m.caps.has(k));
    verdict(any, || format!("capabilities advertise none of embed, rerank, retrieve, graph: {}", show(&m.caps.0)))
}

pub(crate) async fn info_matches(m: &mut Main) -> Res {
    let r = m.conn.call("info", json!({})).await?;
    let info_caps = r.ok()?.get("capabilities").cloned().unwrap_or(Value::Null);
    verdict(info_caps == m.caps.0, || {
        format!("info reports capabilities {} but initialize negotiated {}", show(&info_caps), show(&m.caps.0))
    })
}

pub(crate) async fn ping_after_init(m: &mut Main) -> Res {
    let nonce = json!("post-init-nonce");
    let r = m.conn.call("ping", json!({"nonce": nonce})).await?;
    let got = r.ok()?.get("nonce");
    verdict(got == Some(&nonce), || format!("sent nonce {nonce}, got back {}", got.map_or("no nonce".into(), show)))
}

pub(crate) async fn unknown_method(m: &mut Main) -> Res {
    let r = m.conn.call("conformance/undefined-method", json!({})).await?;
    expect_code(&r, -32004)?;
    pass()
}

/// The first gated method whose capability `caps` does not advertise, with a valid request
/// that reads (the roster's probe).
pub(crate) fn unadvertised_call(caps: &Caps) -> Option<(&'static str, &'static str, Value)> {
    SPEC_METHODS.iter().find_map(|m| {
        let cap = m.capability?;
        (!caps.has(cap)).then(|| m.probe().map(|p| (m.name, cap, p))).flatten()
    })
}

pub(crate) async fn unadvertised_method(m: &mut Main) -> Res {
    let Some((method, cap, params)) = unadvertised_call(&m.caps) else {
        return skip("every core capability is advertised");
    };
    let r = m.conn.call(method, params).await?;
    expect_code(&r, -32003).map_err(|e| format!("{method} ({cap} not advertised): {e}"))?;
    pass()
}

fn missing_one<'a>(all: &[&'a str], advertised: Option<Vec<String>>) -> Option<&'a str> {
    let adv = advertised?;
    all.iter().copied().find(|x| !adv.iter().any(|a| a == x))
}

/// The request that asks `method` for an option value it did not advertise: the same params
/// wherever the suite probes that value (`option.unsupported` and the L2 checks of each
/// capability), so the two checks share one request and one verdict.
pub(crate) fn option_probe(method: &str, value: &str) -> Value {
    match method {
        "retrieve" => json!({"query": "probe", "k": 1, "mode": value}),
        "rerank" => json!({"query": "probe", "passages": ["a"], "method": value}),
        "graph" => json!({"op": value, "query": "probe"}),
        "query/transform" => json!({"query": "probe", "method": value}),
        _ => json!({"inputs": ["probe"], "encoding": value}),
    }
}

/// The first advertised method with an option value left out of its advertised list.
fn unsupported_option(c: &Caps) -> Option<(&'static str, &'static str)> {
    if let (true, Some(mode)) =
        (c.has("retrieve"), missing_one(&["dense", "sparse", "hybrid"], c.strings(&["retrieve", "modes"])))
    {
        return Some(("retrieve", mode));
    }
    if let (true, Some(method)) =
        (c.has("rerank"), missing_one(&["cross-encoder", "colbert", "llm"], c.strings(&["rerank", "methods"])))
    {
        return Some(("rerank", method));
    }
    if let (true, Some(op)) = (
        c.has("graph"),
        missing_one(&["local", "global", "drift", "communities", "neighbors"], c.strings(&["graph", "ops"])),
    ) {
        return Some(("graph", op));
    }
    let transforms = ["rewrite", "hyde", "multi-query", "decompose", "step-back"];
    if let (true, Some(method)) = (c.has("transform"), missing_one(&transforms, c.strings(&["transform", "methods"]))) {
        return Some(("query/transform", method));
    }
    let f32_advertised = c.strings(&["embed", "encodings"]).unwrap_or_default().iter().any(|e| e == "f32-base64");
    (c.has("embed") && !f32_advertised).then_some(("embed", "f32-base64"))
}

pub(crate) async fn option_unsupported(m: &mut Main) -> Res {
    let Some((method, value)) = unsupported_option(&m.caps) else {
        return skip("no advertised method has an option value left to leave out");
    };
    let params = option_probe(method, value);
    let r = m.probe(method, params.clone()).await?;
    expect_option_unsupported(&r).map(|o| match o {
        Outcome::Fail(d) => Outcome::Fail(format!("{method} {}: {d}", show(&params))),
        other => other,
    })
}

/// The first advertised of retrieve/embed/rerank with valid params, for tolerance checks.
fn tolerant_target(m: &Main) -> Option<(&'static str, Value)> {
    if m.caps.has("retrieve") {
        Some(("retrieve", json!({"query": "conformance probe", "k": 1})))
    } else if m.caps.has("embed") {
        Some(("embed", json!({"inputs": ["conformance probe"]})))
    } else if m.caps.has("rerank") {
        Some(("rerank", json!({"query": "conformance probe", "passages": ["a passage"]})))
    } else {
        None
    }
}

pub(crate) async fn tolerant_params(m: &mut Main) -> Res {
    let Some((method, mut params)) = tolerant_target(m) else {
        return skip("none of retrieve, embed, rerank advertised");
    };
    if let Some(p) = params.as_object_mut() {
        p.insert("x-conformance-option".into(), json!({"enabled": true}));
        p.insert("futureOption".into(), json!([1, "two", null]));
        p.insert("_meta".into(), json!({"traceId": "conformance", "x-conformance-unknown": {"a": 1}}));
    }
    let r = m.conn.call(method, params).await?;
    r.ok()?;
    pass()
}

pub(crate) async fn null_as_absent(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let r = m
        .retrieve(json!({"query": "conformance probe", "k": 1, "mode": null, "minScore": null, "cursor": null}))
        .await?;
    r.ok()?;
    pass()
}

pub(crate) async fn missing_query(m: &mut Main) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let r = m.retrieve(json!({"k": 1})).await?;
    expect_invalid_params(&r, &["query"])
}

async fn bad_k(m: &mut Main, k: Value) -> Res {
    if !m.caps.has("retrieve") {
        return skip(NO_RETRIEVE);
    }
    let r = m.retrieve(json!({"query": "conformance probe", "k": k})).await?;
    expect_invalid_params(&r, &["k"])
}

pub(crate) async fn k_negative(m: &mut Main) -> Res {
    bad_k(m, json!(-1)).await
}

pub(crate) async fn k_fractional(m: &mut Main) -> Res {
    bad_k(m, json!(2.5)).await
}

pub(crate) async fn k_string(m: &mut Main) -> Res {
    bad_k(m, json!("5")).await
}

pub(crate) async fn embed_missing_inputs(m: &mut Main) -> Res {
    if !m.caps.has("embed") {
        return skip("embed not advertised");
    }
    let r = m.conn.call("embed", json!({"kind": "query"})).await?;
    expect_invalid_params(&r, &["inputs", "texts"])
}

pub(crate) async fn rerank_missing_passages(m: &mut Main) -> Res {
    if !m.caps.has("rerank") {
        return skip("rerank not advertised");
    }
    let r = m.conn.call("rerank", json!({"query": "probe"})).await?;
    expect_invalid_params(&r, &["passages", "documents"])
}
