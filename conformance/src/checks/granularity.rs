//! Granularity and token budget (§7.7.2): every advertised `unit` is served and echoed on each
//! hit (chunk hits naming their document), and `tokenBudget` binds when it is smaller than what
//! `k` hits hold and leaves the answer alone when it is larger, with `usage.tokens` reported.

use serde_json::{Value, json};

use crate::session::Main;
use crate::verdict::{Res, fail, hits, pass_note, show, skip};

/// The advertised units (`retrieve.units`).
fn units(m: &Main) -> Vec<String> {
    m.caps.strings(&["retrieve", "units"]).unwrap_or_default()
}

/// Every advertised unit is served: the broad query with that `unit` answers with at most `k`
/// hits.
pub(crate) async fn unit_served(m: &mut Main) -> Res {
    let units = units(m);
    if !m.caps.has("retrieve") || units.is_empty() {
        return skip("retrieve.units not advertised");
    }
    let k = m.k(3);
    for unit in &units {
        let r = m.broad_hits(k, json!({"unit": unit})).await?;
        let Some(res) = r.result() else {
            return fail(format!("advertised unit '{unit}' failed: {}", r.brief()));
        };
        let n = res.get("hits").and_then(Value::as_array).map_or(0, Vec::len);
        if n as u64 > k {
            return fail(format!("unit '{unit}' returned {n} hits for k={k}"));
        }
    }
    pass_note(format!("units: {}", units.join(", ")))
}

/// With an advertised `unit`, each hit echoes it; a `chunk` hit names its document and position
/// in `hit.chunk` (an interop probe: the spec describes the echo without a keyword).
pub(crate) async fn unit_echo(m: &mut Main) -> Res {
    let units = units(m);
    if !m.caps.has("retrieve") || units.is_empty() {
        return skip("retrieve.units not advertised");
    }
    let k = m.k(3);
    let mut seen = 0;
    for unit in &units {
        let Ok(hs) = hits(&m.broad_hits(k, json!({"unit": unit})).await?) else { continue };
        seen += hs.len();
        if let Some(h) = hs.iter().find(|h| h.get("unit").and_then(Value::as_str) != Some(unit)) {
            return fail(format!("a hit of a unit '{unit}' request does not echo unit '{unit}': {}", show(h)));
        }
        if unit == "chunk"
            && let Some(h) = hs.iter().find(|h| {
                let c = h.get("chunk");
                !(c.and_then(|c| c.get("docId")).is_some_and(Value::is_string)
                    && c.and_then(|c| c.get("index")).is_some_and(Value::is_u64))
            })
        {
            return fail(format!("a chunk hit lacks chunk.docId and chunk.index: {}", show(h)));
        }
    }
    if seen == 0 {
        return skip("no hit came back to look at (use --query to pick a query)");
    }
    pass_note(format!("{seen} hits over units {}", units.join(", ")))
}

/// `usage.tokens` of an answer.
fn usage_tokens(res: &Value) -> Option<u64> {
    res.get("usage").and_then(|u| u.get("tokens")).and_then(Value::as_u64)
}

/// `tokenBudget` binds: a budget of one token leaves at most one hit (or hits totalling at most
/// one token, per `usage.tokens`); a budget far beyond `k` hits' bodies changes nothing.
pub(crate) async fn token_budget(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "tokenBudget"]) {
        return skip("retrieve.tokenBudget not advertised");
    }
    let k = m.k(5);
    let plain = hits(&m.broad_hits(k, json!({})).await?)?;
    if plain.len() < 2 {
        return skip("the broad query returned fewer than 2 hits (use --query to pick one)");
    }
    let r = m.broad_hits(k, json!({"tokenBudget": 1})).await?;
    let res = r.ok()?;
    let tight = hits(&r)?;
    let within = usage_tokens(res).is_some_and(|t| t <= 1);
    if tight.len() > 1 && !within {
        return fail(format!(
            "tokenBudget 1 returned {} hits (usage.tokens {}): a budget of one token holds at most one hit",
            tight.len(),
            usage_tokens(res).map_or("absent".into(), |t| t.to_string())
        ));
    }
    let loose = hits(&m.broad_hits(k, json!({"tokenBudget": 10_000_000})).await?)?;
    if loose.len() != plain.len() {
        return fail(format!(
            "tokenBudget 10,000,000 returned {} hits where k={k} alone returns {}: k binds first there",
            loose.len(),
            plain.len()
        ));
    }
    pass_note(format!("budget 1: {} hits; budget 10^7: {} hits, as without a budget", tight.len(), loose.len()))
}

/// A `tokenBudget` answer reports the packed total in `usage.tokens`, within the budget unless
/// a single hit is returned.
pub(crate) async fn token_usage(m: &mut Main) -> Res {
    if !m.caps.flag(&["retrieve", "tokenBudget"]) {
        return skip("retrieve.tokenBudget not advertised");
    }
    let k = m.k(5);
    let budget = 40;
    let r = m.broad_hits(k, json!({"tokenBudget": budget})).await?;
    let res = r.ok()?;
    let n = hits(&r)?.len();
    match usage_tokens(res) {
        None => fail(format!(
            "usage.tokens is not reported for tokenBudget {budget}: {}",
            show(res.get("usage").unwrap_or(&Value::Null))
        )),
        Some(t) if t > budget && n > 1 => fail(format!("usage.tokens {t} exceeds the budget {budget} with {n} hits")),
        Some(t) => {
            if n > 0 && t == 0 {
                return fail(format!("{n} hits packed, but usage.tokens is 0"));
            }
            pass_note(format!("{n} hits, usage.tokens {t} of {budget}"))
        }
    }
}
