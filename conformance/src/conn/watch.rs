//! The referee of single frames. It remembers what the client sent (ids and their methods,
//! progress tokens, the log opt-in) and applies, the moment a frame arrives, every rule that
//! frame can break on its own: the envelope and the JSON Schema, an id echoed with another type,
//! a second response, an answered notification, progress without a token, logs nobody opted
//! into. Each broken rule is a violation of the check that is running.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::report::truncate;
use crate::schema::envelope_errors;

/// The key of every answered notification: one defect however many were answered.
const ANSWERED: &str = "answered-notification";

/// The JSON type of an id, for keying id-echo defects.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Null => "null",
        _ => "other",
    }
}

use super::env::{Env, Violation};
use super::frame::{is_notification, key, loose_eq};
use crate::schema::fold_digits;

/// What the connection sent, and what it counted of what it received.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// Requests sent and not yet answered: id key → (id, method).
    outstanding: HashMap<String, (Value, String)>,
    /// Id keys of the requests answered.
    answered: HashSet<String>,
    /// progressToken key → id key of the request that carried it.
    tokens: HashMap<String, String>,
    /// Every server notification received, in order.
    pub notifications: Vec<Value>,
    /// Whether the client opted into `notifications/log` (§7.1, §17.1).
    pub log_opt_in: bool,
    /// Frames received whose `jsonrpc` was not `"2.0"`.
    pub bad_jsonrpc: usize,
    /// Notifications the client never opted into.
    pub unsolicited: usize,
    /// Frames received in total.
    pub frames: usize,
    /// Whether a response with `id: null` is expected (malformed input was sent).
    pub null_id_ok: bool,
}

impl Watch {
    /// Notes what a message about to be sent carries: its id and method, its progress token,
    /// a log opt-in.
    pub(crate) fn register(&mut self, msg: &Value) {
        let Some(method) = msg.get("method").and_then(Value::as_str) else { return };
        let meta = msg.get("params").and_then(|p| p.get("_meta"));
        if meta.and_then(|m| m.get("logLevel")).is_some()
            || (method == "initialize"
                && msg.get("params").and_then(|p| p.get("capabilities")).and_then(|c| c.get("log")).is_some())
        {
            self.log_opt_in = true;
        }
        let Some(id) = msg.get("id") else { return };
        self.outstanding.insert(key(id), (id.clone(), method.to_owned()));
        self.answered.remove(&key(id));
        if let Some(tok) = meta.and_then(|m| m.get("progressToken")) {
            self.tokens.insert(key(tok), key(id));
        }
    }

    /// Registers an id sent inside a raw frame, so its response is expected.
    pub(crate) fn expect_id(&mut self, id: Value, label: &str) {
        self.answered.remove(&key(&id));
        self.outstanding.insert(key(&id), (id, label.to_owned()));
    }

    /// Validates a frame and applies the rules a single frame can break.
    pub(crate) fn inspect(&mut self, env: &Env, v: &Value) {
        self.frames += 1;
        for e in envelope_errors(v) {
            if e.contains("jsonrpc") {
                self.bad_jsonrpc += 1;
            }
            let text = format!("malformed frame: {e}: {}", truncate(&v.to_string(), 160));
            env.record(Violation::rule("envelope.", &format!("malformed|{}", fold_digits(&e)), text));
        }
        if let Some(s) = env.schemas.clone() {
            for (key, e) in s.frame_violations(v) {
                env.record(Violation::rule("envelope.", &format!("schema-frame|{key}"), format!("schema: {e}")));
            }
        }
        match v {
            Value::Array(members) => {
                for m in members {
                    self.inspect_response(env, m);
                }
            }
            _ if is_notification(v) => self.inspect_notification(env, v),
            _ if v.get("method").is_some() => {}
            _ => self.inspect_response(env, v),
        }
    }

    fn inspect_response(&mut self, env: &Env, v: &Value) {
        let Some(id) = v.get("id") else { return };
        if id.is_null() {
            if !self.null_id_ok {
                env.record(Violation::rule("notify.", ANSWERED, format!(
                    "a response with id null although every frame sent was a well-formed request or notification (an answered notification? §4.5): {}",
                    truncate(&v.to_string(), 160)
                )));
            }
            return;
        }
        let k = key(id);
        let entry = match self.outstanding.remove(&k) {
            Some(e) => Some(e),
            None => {
                let loose = self.outstanding.iter().find(|(_, (sent, _))| loose_eq(sent, id)).map(|(k, _)| k.clone());
                match loose.and_then(|k| self.outstanding.remove(&k)) {
                    Some((sent, method)) => {
                        let key = format!("id-echo|{}|{}", json_type(&sent), json_type(id));
                        env.record(Violation::rule("id.", &key, format!(
                            "response id {id} does not echo the request id {sent} unchanged (same JSON type and value, §4.7)"
                        )));
                        Some((sent, method))
                    }
                    None if self.answered.contains(&k) => {
                        env.violation(format!(
                            "a second response for request id {id} (every request is answered exactly once, §13.1)"
                        ));
                        None
                    }
                    None => {
                        env.record(Violation::rule("notify.", ANSWERED, format!(
                            "a response with id {id}, which no request carried (an answered notification? §4.5): {}",
                            truncate(&v.to_string(), 160)
                        )));
                        None
                    }
                }
            }
        };
        let Some((sent, method)) = entry else { return };
        self.answered.insert(key(&sent));
        if let (Some(s), Some(result)) = (env.schemas.clone(), v.get("result"))
            && known_method(&method)
        {
            for (key, e) in s.result_violations(&method, result) {
                env.record(Violation::of_result(&method, &key, format!("schema ({method} result): {e}")));
            }
        }
    }

    fn inspect_notification(&mut self, env: &Env, v: &Value) {
        self.notifications.push(v.clone());
        let method = v.get("method").and_then(Value::as_str).unwrap_or("");
        match method {
            "notifications/progress" => {
                let Some(tok) = v.get("params").and_then(|p| p.get("progressToken")) else {
                    self.unsolicited += 1;
                    env.record(Violation::rule(
                        "progress.",
                        "progress-no-token",
                        "notifications/progress without a progressToken (§9)",
                    ));
                    return;
                };
                match self.tokens.get(&key(tok)) {
                    None => {
                        self.unsolicited += 1;
                        env.record(Violation::rule("progress.", "progress-unknown-token", format!(
                            "notifications/progress with token {tok}, which no request carried (§9: MUST NOT emit progress for a request that carried none)"
                        )));
                    }
                    Some(id_key) if self.answered.contains(id_key) => env.violation(format!(
                        "notifications/progress for token {tok} after the final response to its request (§9)"
                    )),
                    Some(_) => {}
                }
            }
            "notifications/log" if !self.log_opt_in => {
                self.unsolicited += 1;
                env.record(Violation::rule(
                    "log.",
                    "log-unsolicited",
                    "notifications/log although the client never opted in (§7.1: MUST NOT emit a notification the client did not opt into)",
                ));
            }
            _ => {}
        }
    }
}

/// Whether the schema has a result definition for this method: every method of the spec but
/// `shutdown`, whose empty result the suite checks on its own.
fn known_method(m: &str) -> bool {
    m != "shutdown" && crate::roster::is_spec_method(m)
}
