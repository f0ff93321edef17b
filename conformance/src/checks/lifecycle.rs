//! Session lifecycle (§7.1, §7.2, §7.12, §7.15, §13), each group on a clean session: a fresh
//! process over stdio, a token-less session over HTTP. A stateless HTTP server (§5.2) has no
//! per-connection session, so the checks that assume one are skipped for it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::conn::{Conn, Env};
use crate::session::{Caps, Main, fresh, gated_call, init_params};
use crate::verdict::{Res, expect_code, fail, pass, pass_note, show, skip, verdict, warn};

const STATELESS: &str = "stateless HTTP server: every request is implicitly initialized (§5.2), so there is no per-connection session to check";
const GLOBAL: &str = "the HTTP server keeps one process-wide session, held by the main session (see http.session-per-client): no fresh session can be opened to check this";
const SESSIONLESS: &str = "the HTTP server issues session tokens but serves token-less requests statelessly, implicitly initialized (§5.2 permits both): a session exists only once initialize returns its token, so there is no uninitialized session to check (token-less gating: see http.sessionless-gating)";

/// How an endpoint scopes `initialize` state (§5.2): what a fresh connection can expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sessions {
    /// Every connection (stdio process, HTTP session token) has its own lifecycle (§13).
    PerConnection,
    /// Stateless HTTP: every request is implicitly initialized and `initialize` is idempotent.
    Stateless,
    /// HTTP with one session for the whole process: once any client initialized, every later
    /// `initialize` is answered `-32600` and gated methods work without one.
    Global,
    /// HTTP issuing session tokens (`_meta.session`) that also serves requests without one
    /// statelessly, implicitly initialized: every session starts with a successful
    /// `initialize`, so none is ever uninitialized.
    TokenOrStateless,
}

impl Sessions {
    /// The skip reason for a check that needs a fresh, uninitialized session, if it cannot have one.
    fn no_fresh_session(self) -> Option<&'static str> {
        match self {
            Sessions::PerConnection => None,
            Sessions::Stateless => Some(STATELESS),
            Sessions::Global => Some(GLOBAL),
            Sessions::TokenOrStateless => Some(SESSIONLESS),
        }
    }
}

/// Tells how an HTTP endpoint scopes sessions while the main session is held (§5.2). With a
/// session token, a token-less gated request tells a strict per-client session (`-32001`) from a
/// server that also serves token-less requests statelessly (a result). Without one, a second
/// client's `initialize` is answered either idempotently (stateless) or with `-32600` (one
/// process-wide session). Only a SHOULD: §5.2 leaves session handling to the server, but a
/// global session locks out every other client.
pub(crate) async fn session_model(env: &Env, main: &Main, sessions: &mut Sessions) -> Res {
    if matches!(env.target, crate::config::Target::Stdio { .. }) {
        return skip("stdio: every client spawns its own process");
    }
    if !main.stateless {
        return token_model(env, main, sessions).await;
    }
    let mut c = Conn::open(env).await?;
    let r = c.call("initialize", init_params(1)).await?;
    if r.result().is_some() {
        *sessions = Sessions::Stateless;
        return pass_note("a second client's initialize was answered too (stateless, §5.2)");
    }
    if r.code() == Some(-32600) {
        *sessions = Sessions::Global;
        return warn(
            "the server keeps one process-wide session: a second client's initialize is answered -32600 while the \
             first holds it, so only one client can ever use this endpoint (§5.2: initialize state does not persist \
             across connections by default; issue _meta.session or be stateless). Checks that need a fresh session \
             are skipped",
        );
    }
    *sessions = Sessions::Stateless;
    fail(format!("a second client's initialize was answered neither with a result nor -32600: {}", r.brief()))
}

/// The main session got a token: is a request without one refused (`-32001`, one session per
/// client) or served statelessly?
async fn token_model(env: &Env, main: &Main, sessions: &mut Sessions) -> Res {
    *sessions = Sessions::PerConnection;
    let Some((method, params)) = main.some_gated_call() else {
        return pass_note("initialize issued a session token (_meta.session): one session per client");
    };
    let mut c = Conn::open(env).await?;
    let r = c.call(method, params).await?;
    if r.result().is_some() {
        *sessions = Sessions::TokenOrStateless;
        return pass_note(format!(
            "initialize issued a session token (_meta.session), and a {method} without one was served statelessly \
             (implicitly initialized, §5.2)"
        ));
    }
    pass_note(format!(
        "initialize issued a session token (_meta.session): one session per client (a {method} without one: {})",
        r.brief()
    ))
}

/// A stateless HTTP server "MUST still reject capability-gated methods it does not advertise with
/// -32003" (§5.2): checked without a token on a server that also keeps sessions (a purely
/// stateless server's main session is token-less already: `method.unadvertised` covers it).
pub(crate) async fn sessionless_gating(env: &Env, caps: &Caps, sessions: Sessions) -> Res {
    if sessions != Sessions::TokenOrStateless {
        return skip("only for a server that issues session tokens and also serves token-less requests");
    }
    let Some((method, cap, params)) = super::methods::unadvertised_call(caps) else {
        return skip("every core capability is advertised");
    };
    let mut c = Conn::open(env).await?;
    let r = c.call(method, params).await?;
    expect_code(&r, -32003).map_err(|e| format!("{method} without a session token ({cap} not advertised): {e}"))?;
    pass()
}

pub(crate) async fn ping_nonce(env: &Env, slot: &mut Option<Conn>, nonce: Value) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("ping", json!({"nonce": nonce})).await?;
    let got = r.ok()?.get("nonce");
    verdict(got == Some(&nonce), || format!("sent nonce {nonce}, got back {}", got.map_or("no nonce".into(), show)))
}

pub(crate) async fn ping_plain(env: &Env, slot: &mut Option<Conn>) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("ping", json!({})).await?;
    let res = r.ok()?;
    verdict(res.is_object(), || format!("ping result is not an object: {}", show(res)))
}

/// Checks an initialize/info result shape; returns the problems found.
pub(crate) fn result_shape(res: &Value) -> Vec<&'static str> {
    [
        res.get("protocolVersion").and_then(Value::as_i64).is_none_or(|v| v < 1).then_some("protocolVersion ≥ 1"),
        (!res.get("server").and_then(|s| s.get("name")).is_some_and(Value::is_string)).then_some("server.name"),
        (!res.get("capabilities").is_some_and(Value::is_object)).then_some("a capabilities object"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub(crate) async fn info_pre_init(env: &Env, slot: &mut Option<Conn>, caps: &mut Caps) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("info", json!({})).await?;
    let res = r.ok()?;
    *caps = Caps(res.get("capabilities").cloned().unwrap_or(Value::Null));
    let problems = result_shape(res);
    verdict(problems.is_empty(), || format!("info result lacks {}", problems.join(", ")))
}

fn gated(caps: &Caps) -> (&'static str, Value) {
    gated_call(caps).unwrap_or(("retrieve", json!({"query": "conformance probe", "k": 1})))
}

pub(crate) async fn notify_pre_init(env: &Env, slot: &mut Option<Conn>, caps: &Caps) -> Res {
    let c = fresh(env, slot).await?;
    let (method, params) = gated(caps);
    c.notify(method, Some(params)).await?;
    c.expect_silence().await?;
    pass()
}

pub(crate) async fn pre_init_gated(env: &Env, slot: &mut Option<Conn>, caps: &Caps, sessions: Sessions) -> Res {
    if let Some(why) = sessions.no_fresh_session() {
        return skip(why);
    }
    let c = fresh(env, slot).await?;
    let (method, params) = gated(caps);
    let r = c.call(method, params).await?;
    expect_code(&r, -32001).map_err(|e| format!("{method} before initialize: {e}"))?;
    pass()
}

pub(crate) async fn version_zero(env: &Env, slot: &mut Option<Conn>, sessions: Sessions) -> Res {
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", init_params(0)).await?;
    if sessions == Sessions::Global && r.code() == Some(-32600) {
        return skip(format!("{GLOBAL} (answered -32600: the session is already initialized)"));
    }
    expect_code(&r, -32002)?;
    pass()
}

pub(crate) async fn locked_after_failure(env: &Env, slot: &mut Option<Conn>, caps: &Caps, sessions: Sessions) -> Res {
    if let Some(why) = sessions.no_fresh_session() {
        return skip(why);
    }
    let c = fresh(env, slot).await?;
    let (method, params) = gated(caps);
    let r = c.call(method, params).await?;
    expect_code(&r, -32001).map_err(|e| format!("{method} after a failed initialize: {e}"))?;
    pass()
}

pub(crate) async fn retry_after_failure(env: &Env, slot: &mut Option<Conn>, sessions: Sessions) -> Res {
    if sessions == Sessions::Global {
        return skip(GLOBAL);
    }
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", init_params(1)).await?;
    let res = r.ok()?;
    let problems = result_shape(res);
    verdict(problems.is_empty(), || format!("initialize result lacks {}", problems.join(", ")))
}

pub(crate) async fn repeat_rejected(env: &Env, slot: &mut Option<Conn>, sessions: Sessions) -> Res {
    if sessions == Sessions::Stateless {
        return skip(STATELESS);
    }
    let c = fresh(env, slot).await?;
    if sessions == Sessions::Global {
        // The main session holds the one session: this initialize is the second one.
        let r = c.call("initialize", init_params(1)).await?;
        expect_code(&r, -32600)?;
        return pass_note("checked against the process-wide session held by the main session");
    }
    if !c.is_stdio() && c.http_session().is_none() {
        return skip("the retried initialize did not establish a session");
    }
    let r = c.call("initialize", init_params(1)).await?;
    expect_code(&r, -32600)?;
    pass()
}

pub(crate) async fn missing_version(env: &Env, slot: &mut Option<Conn>, sessions: Sessions) -> Res {
    let c = fresh(env, slot).await?;
    let r = c
        .call("initialize", json!({"client": {"name": "rcp-conformance", "version": "0"}, "capabilities": {}}))
        .await?;
    if sessions == Sessions::Global && r.code() == Some(-32600) {
        return skip(format!("{GLOBAL} (answered -32600: the session is already initialized)"));
    }
    expect_code(&r, -32602)?;
    match r.data_str("field") {
        Some(f) if f.contains("protocolVersion") => pass(),
        Some(f) => pass_note(format!("error.data.field is '{f}'")),
        None => pass_note("no error.data.field"),
    }
}

pub(crate) async fn tolerant_init(env: &Env, slot: &mut Option<Conn>, sessions: Sessions) -> Res {
    if sessions == Sessions::Global {
        return skip(GLOBAL);
    }
    let c = fresh(env, slot).await?;
    let params = json!({
        "protocolVersion": 1,
        "client": {"name": "rcp-conformance", "version": "0", "x-conformance-build": 7},
        "capabilities": {"x-conformance": {"anything": true}, "futureCapability": {"level": 3}},
        "_meta": {"traceId": "conformance-trace", "x-conformance-unknown": [1, 2, 3]},
        "x-conformance-field": true,
        "futureField": {"nested": {"deep": null}},
    });
    let r = c.call("initialize", params).await?;
    let res = r.ok()?;
    let v = res.get("protocolVersion").and_then(Value::as_i64);
    verdict(v == Some(1), || format!("negotiated protocolVersion {v:?} for a client at version 1"))
}

pub(crate) async fn negotiates_min(env: &Env, slot: &mut Option<Conn>, sessions: Sessions) -> Res {
    if sessions == Sessions::Global {
        return skip(GLOBAL);
    }
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", init_params(99)).await?;
    let res = r.ok()?;
    let v = res.get("protocolVersion").and_then(Value::as_i64);
    verdict(v.is_some_and(|v| (1..=99).contains(&v)), || {
        format!("a client at version 99 was answered with protocolVersion {v:?}; expected min(99, server) in 1..=99")
    })
}

pub(crate) async fn shutdown_pre_init(env: &Env, slot: &mut Option<Conn>, stdio: bool) -> Res {
    if !stdio {
        return skip("HTTP: shutdown would end a shared endpoint; checked on the main session instead");
    }
    let c = fresh(env, slot).await?;
    let r = c.call("shutdown", json!({})).await?;
    let res = r.ok()?;
    if !res.is_object() {
        return fail(format!("shutdown result is not an object: {}", show(res)));
    }
    exit_zero(c).await
}

/// The answer to `shutdown` is a MUST (§7.12); exiting afterwards is a SHOULD (§13.1: "After
/// answering `shutdown` a server SHOULD stop reading new requests and exit"), so a process that
/// lingers or exits non-zero is a warning.
async fn exit_zero(c: &mut Conn) -> Res {
    let timeout = c.timeout();
    let Some(s) = c.stdio() else { return pass() };
    match s.wait_exit(timeout).await {
        Some(st) if st.success() => pass(),
        Some(st) => warn(format!("the process exited with {st} after shutdown (SHOULD exit cleanly, §13.1)")),
        None => warn(format!(
            "the process did not exit within {} ms of answering shutdown (SHOULD exit, §13.1)",
            timeout.as_millis()
        )),
    }
}

pub(crate) async fn shutdown_main(m: &mut Main) -> Res {
    m.closed = true;
    let r = m.conn.call("shutdown", json!({})).await?;
    let res = r.ok()?;
    let rest: Vec<&String> = res.as_object().map(|o| o.keys().filter(|k| *k != "_meta").collect()).unwrap_or_default();
    if !res.is_object() || !rest.is_empty() {
        return fail(format!("shutdown result should be {{}}, got {}", show(res)));
    }
    exit_zero(&mut m.conn).await
}

pub(crate) async fn nothing_after_shutdown(m: &mut Main) -> Res {
    if !m.conn.is_stdio() {
        return skip("HTTP: a later request is a new exchange; stdio only");
    }
    // Exited already (shutdown.main waited for it): writes fail or are never read.
    let id = json!("after-shutdown");
    if m.conn.send_request(id, "ping", Some(json!({"nonce": 1}))).await.is_err() {
        return pass_note("stdin closed after shutdown");
    }
    let late = m.conn.drain(Duration::from_millis(300)).await;
    verdict(late.is_empty(), || format!("the server answered after its shutdown response: {}", show(&late[0])))
}

pub(crate) async fn minimal_init(env: &Env, slot: &mut Option<Conn>, sessions: Sessions) -> Res {
    if sessions == Sessions::Global {
        return skip(GLOBAL);
    }
    let c = fresh(env, slot).await?;
    let r = c.call("initialize", json!({"protocolVersion": 1})).await?;
    let res = r.ok()?;
    let problems = result_shape(res);
    verdict(problems.is_empty(), || format!("initialize result lacks {}", problems.join(", ")))
}
