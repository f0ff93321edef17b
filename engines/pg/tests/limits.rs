//! Client input PostgreSQL would refuse is the client's error, not an outage: a filter over
//! the 65,535 bind parameters of one statement is `-32602` naming `filter` and the limit, and
//! the engine keeps serving.

mod common;

use common::{FIELDS, database, docs, serve};
use rcp_testkit::code;
use serde_json::json;

#[test]
fn a_filter_over_the_bind_parameter_limit_is_invalid_params_naming_the_limit() {
    let Some(url) = database("limits") else { return };
    let mut e = serve(&url, &FIELDS);
    e.ok("index/add", json!({"documents": docs()}));

    // 40,000 leaves of two parameters each (field name and value): 80,000 > 65,535.
    let leaves: Vec<_> = (0..40_000).map(|i| json!({"field": "topic", "op": "eq", "value": format!("t{i}")})).collect();
    let err = e.err("retrieve", json!({"query": "wing", "k": 3, "mode": "sparse", "filter": {"or": leaves}}));
    assert_eq!(code(&err), -32602, "{err}");
    assert_eq!(err["data"]["field"], "filter", "{err}");
    assert_eq!(err["data"]["limit"], 65_535, "{err}");
    assert_ne!(err["data"]["retryable"], true, "{err}");

    // Under the limit, a large filter runs.
    let leaves: Vec<_> = (0..2_000).map(|i| json!({"field": "topic", "op": "eq", "value": format!("t{i}")})).collect();
    let mut any = leaves;
    any.push(json!({"field": "topic", "op": "eq", "value": "aero"}));
    let r = e.ok("retrieve", json!({"query": "wing", "k": 3, "mode": "sparse", "filter": {"or": any}}));
    assert_eq!(r["hits"][0]["id"], "wing", "{r}");
}
