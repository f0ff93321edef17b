//! The request methods of RCP/1 (§7) as the suite knows them, one row each: the wire name, the
//! capability key that gates it, and the minimal valid request the suite sends to probe it.
//!
//! The suite keeps its own roster, apart from the crates it certifies (a test holds it equal to
//! `rcp_wire`'s declarations). Its checks read it: `method.unadvertised` sends the first gated
//! method whose capability a server does not advertise, the sweep sends every plain probe of an
//! advertised capability, the frame watcher knows which methods the schema has results for.

use serde_json::{Value, json};

/// One request method of RCP/1 as the suite probes it.
#[derive(Debug, Clone, Copy)]
pub struct SpecMethod {
    /// The wire name.
    pub name: &'static str,
    /// The capability key that gates it (§6); `None` for the four lifecycle methods.
    pub capability: Option<&'static str>,
    /// A minimal valid request that reads (never writes): what the suite sends to a server
    /// that did not advertise the capability, and, when [`Self::sweep`] is set, to one that did.
    probe: Option<fn() -> Value>,
    /// Whether the sweep sends [`Self::probe`] as it is (methods whose probe depends on what
    /// the server advertised are swept by their own rule).
    sweep: bool,
}

impl SpecMethod {
    /// The probe request's params, for a method the suite may call without changing anything.
    pub fn probe(&self) -> Option<Value> {
        self.probe.map(|p| p())
    }

    /// The name of its params in the schema's `$defs`: `params.` and its name, `/` as `-`.
    pub(crate) fn params_def(&self) -> String {
        format!("params.{}", self.name.replace('/', "-"))
    }
}

const fn row(
    name: &'static str,
    capability: Option<&'static str>,
    probe: Option<fn() -> Value>,
    sweep: bool,
) -> SpecMethod {
    SpecMethod { name, capability, probe, sweep }
}

/// Every request method of RCP/1, the lifecycle four first, then the gated ones in the order
/// `method.unadvertised` tries them.
pub const SPEC_METHODS: [SpecMethod; 17] = [
    row("initialize", None, None, false),
    row("info", None, None, false),
    row("ping", None, None, false),
    row("shutdown", None, None, false),
    row("graph", Some("graph"), Some(|| json!({"op": "local", "query": "probe"})), false),
    row("query/transform", Some("transform"), Some(|| json!({"query": "probe", "method": "rewrite"})), false),
    row("embed/sparse", Some("sparseEmbed"), Some(|| json!({"texts": ["probe"]})), false),
    row("embed/multi", Some("multiVector"), Some(|| json!({"inputs": ["probe"]})), false),
    row("catalog/list", Some("catalog"), Some(|| json!({})), false),
    row("memory/recall", Some("memory"), Some(|| json!({"query": "conformance probe", "n": 1})), true),
    row("feedback", Some("feedback"), Some(|| json!({"signals": []})), false),
    row(
        "rerank",
        Some("rerank"),
        Some(|| json!({"query": "conformance probe", "passages": ["a passage", "another passage"]})),
        true,
    ),
    row("embed", Some("embed"), Some(|| json!({"inputs": ["conformance probe"]})), true),
    row("retrieve", Some("retrieve"), Some(|| json!({"query": "probe", "k": 1})), false),
    row("index/delete", Some("index"), Some(|| json!({"ids": ["conformance-none"]})), false),
    row("index/add", Some("index"), None, false),
    row("memory/build", Some("memory"), None, false),
];

/// The roster's wire names.
pub fn spec_method_names() -> impl Iterator<Item = &'static str> {
    SPEC_METHODS.iter().map(|m| m.name)
}

/// Whether RCP/1 defines a request method of this name.
pub(crate) fn is_spec_method(name: &str) -> bool {
    spec_method_names().any(|m| m == name)
}

/// The methods the sweep sends their probe to as it is, when their capability is advertised.
pub(crate) fn plain_sweeps() -> impl Iterator<Item = &'static SpecMethod> {
    SPEC_METHODS.iter().filter(|m| m.sweep)
}
