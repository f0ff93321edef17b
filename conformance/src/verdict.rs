//! What a check concludes, and the helpers every check reaches a conclusion with: the outcome
//! constructors, the expected error codes (MUST) with their `error.data` details (SHOULD), and
//! reading hits out of a `retrieve` result.

use serde_json::Value;

use crate::conn::Resp;
use crate::report::truncate;

/// What a check concluded (a transport failure is `Err`, reported as a FAIL).
pub(crate) enum Outcome {
    Pass(String),
    Fail(String),
    /// Every MUST held, but a SHOULD did not (e.g. no `error.data.field`, §12.1).
    Warn(String),
    Skip(String),
}

/// The result of a check body: `?` on a transport or protocol error fails the check.
pub(crate) type Res = Result<Outcome, String>;

pub(crate) fn pass() -> Res {
    Ok(Outcome::Pass(String::new()))
}

pub(crate) fn pass_note(note: impl Into<String>) -> Res {
    Ok(Outcome::Pass(note.into()))
}

pub(crate) fn skip(reason: impl Into<String>) -> Res {
    Ok(Outcome::Skip(reason.into()))
}

pub(crate) fn fail(reason: impl Into<String>) -> Res {
    Ok(Outcome::Fail(reason.into()))
}

/// The MUSTs held but a SHOULD did not: reported as a warning, never a failure.
pub(crate) fn warn(reason: impl Into<String>) -> Res {
    Ok(Outcome::Warn(reason.into()))
}

/// Passes when `ok`, fails with `reason` otherwise.
pub(crate) fn verdict(ok: bool, reason: impl FnOnce() -> String) -> Res {
    if ok { pass() } else { fail(reason()) }
}

/// Requires an error response with `code`.
pub(crate) fn expect_code(r: &Resp, code: i64) -> Result<(), String> {
    match r.code() {
        Some(c) if c == code => Ok(()),
        _ => Err(format!("expected error {code}, got {}", r.brief())),
    }
}

/// Requires `-32602` (a MUST); `error.data.field` naming one of `names` is only a SHOULD
/// (§12.1: `error.data` is optional and its conventional fields are recommended), so a missing or
/// different field is a warning.
pub(crate) fn expect_invalid_params(r: &Resp, names: &[&str]) -> Res {
    expect_code(r, -32602)?;
    match r.data_str("field") {
        Some(f) if names.iter().any(|n| f.contains(n)) => pass(),
        Some(f) => warn(format!(
            "-32602 returned, but error.data.field is '{f}' (recommended: name {}, §12.1)",
            names.join(" or ")
        )),
        None => warn("-32602 returned without error.data.field naming the offending field (SHOULD, §12.1)"),
    }
}

/// Requires `-32005` (a MUST); `error.data.option` is a SHOULD (§12.1), so its absence is a
/// warning.
pub(crate) fn expect_option_unsupported(r: &Resp) -> Res {
    expect_code(r, -32005)?;
    match r.data_str("option") {
        Some(_) => pass(),
        None => warn("-32005 returned without error.data.option naming the option (SHOULD, §12.1)"),
    }
}

/// The `hits` array of a `retrieve` result.
pub(crate) fn hits(r: &Resp) -> Result<Vec<Value>, String> {
    let res = r.ok()?;
    res.get("hits").and_then(Value::as_array).cloned().ok_or_else(|| "retrieve result has no hits array".to_owned())
}

/// A hit's id as a comparable string key (ids are string or number, §7.7).
pub(crate) fn hit_key(h: &Value) -> String {
    match h.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Pretty-prints a value for a failure message.
pub(crate) fn show(v: &Value) -> String {
    truncate(&v.to_string(), 160)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn missing_error_data_details_are_warnings() {
        let bare = Resp(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad k"}}));
        assert!(matches!(expect_invalid_params(&bare, &["k"]), Ok(Outcome::Warn(_))));
        let named = Resp(
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad", "data": {"field": "k"}}}),
        );
        assert!(matches!(expect_invalid_params(&named, &["k"]), Ok(Outcome::Pass(_))));
        let wrong = Resp(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32005, "message": "no"}}));
        assert!(expect_invalid_params(&wrong, &["k"]).is_err(), "the code itself is a MUST");
        assert!(matches!(expect_option_unsupported(&wrong), Ok(Outcome::Warn(_))));
    }
}
