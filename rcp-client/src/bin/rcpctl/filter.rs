//! `--filter`: a metadata filter (§8) from the command line, as a JSON filter tree or in the
//! short form `field=value`, `field!=value`, `field>value`, `field>=value`, `field<value`,
//! `field<=value`. Repeated flags are ANDed. Short-form values that read as a number or a
//! boolean are sent as one; anything else is a string (`lang="1990"` forces a string).

use rcp_wire::filter::{Filter, Op};
use serde_json::Value;

/// The operators of the short form, longest first so `>=` is not read as `>`.
const OPS: [(&str, Op); 6] =
    [(">=", Op::Gte), ("<=", Op::Lte), ("!=", Op::Ne), (">", Op::Gt), ("<", Op::Lt), ("=", Op::Eq)];

/// One `--filter` value as a filter tree.
pub(crate) fn parse_one(arg: &str) -> Result<Filter, String> {
    let arg = arg.trim();
    if arg.starts_with('{') {
        let v: Value = serde_json::from_str(arg).map_err(|e| format!("--filter '{arg}': not JSON: {e}"))?;
        return serde_json::from_value(v).map_err(|e| format!("--filter '{arg}': not a filter tree (§8): {e}"));
    }
    let at = arg.find(['=', '!', '<', '>']).ok_or_else(|| {
        format!(
            "--filter '{arg}': expected JSON or FIELD OP VALUE with OP one of =, !=, >, >=, <, <= (e.g. year>=1990)"
        )
    })?;
    let (field, rest) = arg.split_at(at);
    let field = field.trim();
    if field.is_empty() {
        return Err(format!("--filter '{arg}': no field name before the operator"));
    }
    let (sym, op) = OPS
        .iter()
        .find(|(sym, _)| rest.starts_with(sym))
        .ok_or_else(|| format!("--filter '{arg}': unknown operator; use =, !=, >, >=, <, <="))?;
    let raw = rest[sym.len()..].trim();
    // `year=>1990` reads as year = ">1990": an operator typed in the wrong order. Say how it
    // was read and what was probably meant instead of sending a string the engine refuses.
    if raw.starts_with(['=', '!', '<', '>']) {
        let typed: String = rest.chars().take_while(|c| "=!<>".contains(*c)).collect();
        let meant = match typed.as_str() {
            "=>" => Some(">="),
            "=<" => Some("<="),
            "==" => Some("="),
            "=!" | "!==" => Some("!="),
            _ => None,
        };
        let value_text = &rest[typed.len()..];
        let read = format!("read as {field} {sym} \"{raw}\" (a string)");
        return Err(match meant {
            Some(m) => format!("--filter '{arg}': {read}; did you mean '{field}{m}{}'?", value_text.trim()),
            None => format!("--filter '{arg}': {read}; operators are =, !=, >, >=, <, <="),
        });
    }
    Ok(Filter::leaf(field, *op, value(raw)))
}

/// Every `--filter` flag ANDed into one wire filter; `None` without flags.
pub(crate) fn parse_all(args: &[String]) -> Result<Option<Value>, String> {
    let mut filters = args.iter().map(|a| parse_one(a)).collect::<Result<Vec<_>, _>>()?;
    Ok(match filters.len() {
        0 => None,
        1 => filters.pop().map(|f| f.to_value()),
        _ => Some(Filter::all(filters).to_value()),
    })
}

/// A short-form value: a JSON number, boolean or quoted string as such, else the raw text.
fn value(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::String(_))) => v,
        _ => Value::String(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn short_forms_parse_typed_values() {
        let f = |s: &str| parse_one(s).map(|f| f.to_value()).unwrap();
        assert_eq!(f("lang=en"), json!({"field": "lang", "op": "eq", "value": "en"}));
        assert_eq!(f("year>=1990"), json!({"field": "year", "op": "gte", "value": 1990}));
        assert_eq!(f("year > 1990"), json!({"field": "year", "op": "gt", "value": 1990}));
        assert_eq!(f("rating<=4.5"), json!({"field": "rating", "op": "lte", "value": 4.5}));
        assert_eq!(f("draft!=true"), json!({"field": "draft", "op": "ne", "value": true}));
        assert_eq!(f("n<3"), json!({"field": "n", "op": "lt", "value": 3}));
        assert_eq!(f("code=\"1990\""), json!({"field": "code", "op": "eq", "value": "1990"}));
        assert_eq!(f("title=wing lift"), json!({"field": "title", "op": "eq", "value": "wing lift"}));
    }

    #[test]
    fn json_and_repeated_flags() {
        let all = parse_all(&["lang=en".into(), r#"{"field":"year","op":"in","value":[1,2]}"#.into()]).unwrap();
        assert_eq!(
            all,
            Some(json!({"and": [
                {"field": "lang", "op": "eq", "value": "en"},
                {"field": "year", "op": "in", "value": [1, 2]}
            ]}))
        );
        assert_eq!(parse_all(&[]).unwrap(), None);
    }

    #[test]
    fn mistakes_are_explained() {
        assert!(parse_one("year").unwrap_err().contains("expected JSON or FIELD OP VALUE"));
        assert!(parse_one("=3").unwrap_err().contains("no field name"));
        assert!(parse_one("a!3").unwrap_err().contains("unknown operator"));
        let e = parse_one("year=>1990").unwrap_err();
        assert!(e.contains(r#"read as year = ">1990" (a string); did you mean 'year>=1990'?"#), "{e}");
        assert!(parse_one("year=<1990").unwrap_err().contains("did you mean 'year<=1990'?"));
        assert!(parse_one("a=>>1").unwrap_err().contains("operators are"));
        assert!(parse_one("{nope").unwrap_err().contains("not JSON"));
        assert!(parse_one(r#"{"field":"a"}"#).unwrap_err().contains("not a filter tree"));
    }
}
