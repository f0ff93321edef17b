//! The main session the checks share (one initialized connection plus what was learned about
//! the server), the server's capabilities with typed accessors, and fresh connections for the
//! checks that need a clean session.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::conn::{Conn, Env, Resp};

/// A server's capabilities object with typed accessors.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caps(pub Value);

impl Caps {
    /// Presence ⇒ supported (§6); `false`/`null` count as absent.
    pub(crate) fn has(&self, key: &str) -> bool {
        matches!(self.0.get(key), Some(v) if !v.is_null() && *v != Value::Bool(false))
    }

    /// The value at a path, e.g. `["retrieve", "maxK"]`.
    pub(crate) fn at(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(&self.0, |v, k| v.get(k))
    }

    /// A string list at a path.
    pub(crate) fn strings(&self, path: &[&str]) -> Option<Vec<String>> {
        self.at(path)?.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
    }

    /// An integer at a path.
    pub(crate) fn u64_at(&self, path: &[&str]) -> Option<u64> {
        self.at(path).and_then(Value::as_u64)
    }

    /// Whether a boolean flag at a path is `true`.
    pub(crate) fn flag(&self, path: &[&str]) -> bool {
        self.at(path) == Some(&Value::Bool(true))
    }

    /// The advertised filter fields (§8), in order, each with its type when the fields are typed.
    pub(crate) fn filter_fields(&self) -> Vec<(String, Option<String>)> {
        match self.at(&["filter", "fields"]) {
            Some(Value::Object(o)) => o.iter().map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned))).collect(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(|s| (s.to_owned(), None)).collect(),
            _ => Vec::new(),
        }
    }
}

/// A filter value (§8) of the right JSON type for a field type (`None`: untyped) and operator.
pub(crate) fn filter_value(ftype: Option<&str>, op: &str) -> Option<Value> {
    let scalar = match ftype {
        None | Some("keyword") | Some("text") => json!("conformance"),
        Some("int") => json!(1),
        Some("float") => json!(1.5),
        Some("bool") => json!(true),
        Some("date") => json!("2020-01-01T00:00:00Z"),
        _ => return None,
    };
    Some(match op {
        "exists" => json!(true),
        "in" | "nin" => json!([scalar]),
        _ => scalar,
    })
}

/// Broad queries tried to find one that matches much of an unknown corpus.
pub(crate) const BROAD_QUERIES: &[&str] = &[
    "the a of and to in for with by on is are from retrieval search data vector rust async model system",
    "flow pressure heat model data system method results theory analysis",
    "information",
];

/// The main session: one initialized connection reused for every check that needs no clean
/// session, plus what was learned about the server.
pub(crate) struct Main {
    pub conn: Conn,
    pub env: Env,
    pub caps: Caps,
    pub init: Value,
    /// HTTP without a session token: every request is implicitly initialized (§5.2), or the
    /// server keeps one process-wide session (`global_session`).
    pub stateless: bool,
    /// HTTP: the server keeps one session for the whole process, held by this one (§5.2).
    pub global_session: bool,
    /// The broad query chosen by `retrieve.basic` (or `--query`).
    pub broad: String,
    /// Hits of the broad query at `probe_k`.
    pub baseline: Vec<Value>,
    /// `min(50, maxK)`.
    pub probe_k: u64,
    /// Whether `--query` chose the broad query.
    pub configured_query: bool,
    /// Set once `shutdown` was sent: the process is not revived after that.
    pub closed: bool,
    /// The check running on this session (set by the runner).
    pub current: &'static str,
    /// Probe requests already answered (method and params), with the check that sent each:
    /// a later check asking the very same thing reuses the answer ([`Main::probe`]).
    probes: HashMap<String, (&'static str, Resp)>,
    /// Set by [`Main::probe`] when the running check reused another check's answer.
    pub shared_from: Option<&'static str>,
}

/// The params of the main session's `initialize`.
pub(crate) fn init_params(version: i64) -> Value {
    json!({"protocolVersion": version, "client": {"name": "rcp-conformance", "version": env!("CARGO_PKG_VERSION")}, "capabilities": {}})
}

impl Main {
    /// Opens and initializes the main session; `query` chooses the broad query.
    pub(crate) async fn open(env: &Env, query: Option<String>) -> Result<Main, String> {
        let mut conn = Conn::open(env).await?;
        let r = conn.call("initialize", init_params(1)).await?;
        let init = r.ok()?.clone();
        let caps = Caps(init.get("capabilities").cloned().unwrap_or(Value::Null));
        let stateless = !conn.is_stdio() && conn.http_session().is_none();
        let probe_k = caps.u64_at(&["retrieve", "maxK"]).unwrap_or(50).clamp(1, 50);
        let broad = query.clone().unwrap_or_else(|| BROAD_QUERIES[0].to_owned());
        let configured_query = query.is_some();
        Ok(Main {
            conn,
            env: env.clone(),
            caps,
            init,
            stateless,
            global_session: false,
            broad,
            baseline: Vec::new(),
            probe_k,
            configured_query,
            closed: false,
            current: "",
            probes: HashMap::new(),
            shared_from: None,
        })
    }

    /// Over stdio, replaces a server process that died (an earlier check crashed it) with a
    /// fresh, initialized one so later checks still say something.
    pub(crate) async fn ensure_alive(&mut self) {
        let dead = self.conn.stdio().is_some_and(|s| s.exited());
        if !dead || self.closed {
            return;
        }
        if let Ok(mut conn) = Conn::open(&self.env).await
            && conn.call("initialize", init_params(1)).await.is_ok_and(|r| r.result().is_some())
        {
            self.conn = conn;
        }
    }

    /// Sends a probe request, or, when an earlier check sent the very same one, reuses its
    /// answer and notes that check in `shared_from`: the two checks then share one verdict.
    pub(crate) async fn probe(&mut self, method: &str, params: Value) -> Result<Resp, String> {
        let key = format!("{method} {params}");
        if let Some((owner, r)) = self.probes.get(&key) {
            self.shared_from = Some(*owner);
            return Ok(r.clone());
        }
        let r = self.conn.call(method, params).await?;
        self.probes.insert(key, (self.current, r.clone()));
        Ok(r)
    }

    /// `min(want, maxK)`.
    pub(crate) fn k(&self, want: u64) -> u64 {
        want.min(self.caps.u64_at(&["retrieve", "maxK"]).unwrap_or(u64::MAX)).max(1)
    }

    /// Calls `retrieve`.
    pub(crate) async fn retrieve(&mut self, params: Value) -> Result<Resp, String> {
        self.conn.call("retrieve", params).await
    }

    /// Retrieves the broad query with `k` and extra params merged in.
    pub(crate) async fn broad_hits(&mut self, k: u64, extra: Value) -> Result<Resp, String> {
        let mut p = json!({"query": self.broad, "k": k});
        if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        self.retrieve(p).await
    }

    /// The gated method to use where "any advertised method" will do, with valid params.
    pub(crate) fn some_gated_call(&self) -> Option<(&'static str, Value)> {
        gated_call(&self.caps)
    }
}

/// An advertised gated method with valid params, preferring `retrieve`.
pub(crate) fn gated_call(caps: &Caps) -> Option<(&'static str, Value)> {
    if caps.has("retrieve") {
        return Some(("retrieve", json!({"query": "conformance probe", "k": 1})));
    }
    if caps.has("embed") {
        return Some(("embed", json!({"inputs": ["conformance probe"]})));
    }
    if caps.has("rerank") {
        return Some(("rerank", json!({"query": "conformance probe", "passages": ["a passage"]})));
    }
    if caps.has("graph") {
        let op = caps.strings(&["graph", "ops"]).and_then(|o| o.first().cloned()).unwrap_or_else(|| "local".into());
        return Some(("graph", json!({"op": op, "query": "conformance probe"})));
    }
    None
}

/// Opens a connection into `slot` on first use (a fresh process / session per slot).
pub(crate) async fn fresh<'a>(env: &Env, slot: &'a mut Option<Conn>) -> Result<&'a mut Conn, String> {
    if slot.is_none() {
        *slot = Some(Conn::open(env).await?);
    }
    slot.as_mut().ok_or_else(|| "connection unavailable".to_owned())
}
