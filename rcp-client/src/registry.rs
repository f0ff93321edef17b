//! The static engine registry of §16.1: an `rcp.json` with `engines[]`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// How to reach an engine.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// Spawn `command` (program + arguments) and speak NDJSON over its stdio.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
    },
    /// POST to `url` (the base, e.g. `http://127.0.0.1:8080/rcp`).
    Http {
        /// Base URL.
        url: String,
    },
}

/// One registry entry.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSpec {
    /// Client-local label, used to tag fused hits (`meta.engine`).
    pub id: String,
    /// How to connect.
    pub transport: Transport,
    /// Higher is preferred by a [`crate::Selector`] (default 0).
    pub priority: i64,
    /// Scales the engine's contribution to fusion (default 1.0).
    pub weight: f64,
    /// If true, the engine's failure fails a federated query (default false).
    pub required: bool,
    /// Extra HTTP headers sent on every request to this engine (`headers` in `rcp.json`, an
    /// object of name → value). Ignored for stdio engines.
    pub headers: Vec<(String, String)>,
    /// The environment variable holding this engine's bearer token (`tokenEnv` in
    /// `rcp.json`), read when connecting and sent as `Authorization: Bearer ...`; the token
    /// itself never appears in the file. Ignored for stdio engines.
    pub token_env: Option<String>,
}

impl EngineSpec {
    /// An entry with the defaults of a registry line that names only `id` and its transport.
    pub fn new(id: impl Into<String>, transport: Transport) -> Self {
        Self {
            id: id.into(),
            transport,
            priority: 0,
            weight: 1.0,
            required: false,
            headers: Vec::new(),
            token_env: None,
        }
    }

    /// The HTTP headers to send to this engine: `headers`, then the bearer token read from
    /// `token_env` (an unset or empty variable is an error naming it, rather than an
    /// unauthenticated request).
    pub fn http_headers(&self) -> Result<Vec<(String, String)>, String> {
        self.http_headers_with(|var| std::env::var(var).ok())
    }

    fn http_headers_with(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Vec<(String, String)>, String> {
        let mut out = self.headers.clone();
        if let Some(var) = &self.token_env {
            out.push(bearer(var, lookup(var))?);
        }
        Ok(out)
    }
}

/// The `Authorization: Bearer <token>` header for the token held in the environment variable
/// `var`; an error naming the variable when it is unset or empty.
pub fn bearer_from_env(var: &str) -> Result<(String, String), String> {
    bearer(var, std::env::var(var).ok())
}

fn bearer(var: &str, value: Option<String>) -> Result<(String, String), String> {
    match value {
        Some(token) if !token.trim().is_empty() => Ok(("Authorization".to_owned(), format!("Bearer {}", token.trim()))),
        Some(_) => Err(format!("the token variable {var} is empty")),
        None => Err(format!("the token variable {var} is not set")),
    }
}

/// A parsed, validated registry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Registry {
    /// Engines in file order.
    pub engines: Vec<EngineSpec>,
}

/// Why a registry could not be loaded; names the entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not JSON or lacks `engines`.
    #[error("{0}")]
    Format(String),
    /// An entry is invalid.
    #[error("engines[{index}]{}: {detail}", id.as_ref().map(|i| format!(" ('{i}')")).unwrap_or_default())]
    Entry {
        /// Position in `engines`.
        index: usize,
        /// The entry's id, when it has one.
        id: Option<String>,
        /// What is wrong.
        detail: String,
    },
}

#[derive(Deserialize)]
struct RawEntry {
    id: Option<Value>,
    transport: Option<String>,
    command: Option<Value>,
    url: Option<String>,
    priority: Option<Value>,
    weight: Option<Value>,
    required: Option<Value>,
    headers: Option<Value>,
    #[serde(rename = "tokenEnv")]
    token_env: Option<Value>,
}

impl Registry {
    /// Loads and validates an `rcp.json`. Relative program paths in `command` (containing a
    /// `/`) are resolved against the file's directory; bare names are looked up on `PATH`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, RegistryError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|source| RegistryError::Io { path: path.to_path_buf(), source })?;
        Self::parse(&text, path.parent())
    }

    /// Parses registry JSON; `base` resolves relative program paths.
    pub fn parse(text: &str, base: Option<&Path>) -> Result<Self, RegistryError> {
        let v: Value = serde_json::from_str(text).map_err(|e| RegistryError::Format(format!("not JSON: {e}")))?;
        let entries = v
            .get("engines")
            .and_then(Value::as_array)
            .ok_or_else(|| RegistryError::Format("missing 'engines' array".into()))?;
        let mut seen = HashSet::new();
        let mut engines = Vec::with_capacity(entries.len());
        for (index, raw) in entries.iter().enumerate() {
            let id = raw.get("id").and_then(Value::as_str).map(str::to_owned);
            let bad = |detail: String| RegistryError::Entry { index, id: id.clone(), detail };
            let e: RawEntry = serde_json::from_value(raw.clone()).map_err(|e| bad(e.to_string()))?;
            let id = match e.id {
                Some(Value::String(s)) if !s.trim().is_empty() => s,
                Some(other) => return Err(bad(format!("'id' must be a non-empty string, got {other}"))),
                None => return Err(bad("missing 'id'".into())),
            };
            if !seen.insert(id.clone()) {
                return Err(bad(format!("duplicate id '{id}'")));
            }
            let command = match e.command {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.split_whitespace().map(str::to_owned).collect::<Vec<_>>()),
                Some(Value::Array(a)) => Some(
                    a.iter()
                        .map(|x| {
                            x.as_str()
                                .map(str::to_owned)
                                .ok_or_else(|| bad(format!("'command' items must be strings, got {x}")))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                Some(other) => return Err(bad(format!("'command' must be an array of strings, got {other}"))),
            };
            let transport = match (e.transport.as_deref(), command, e.url) {
                (Some("stdio") | None, Some(mut cmd), _) => {
                    if cmd.is_empty() || cmd[0].is_empty() {
                        return Err(bad("'command' is empty".into()));
                    }
                    if let Some(base) = base
                        && cmd[0].contains('/')
                        && Path::new(&cmd[0]).is_relative()
                    {
                        cmd[0] = base.join(&cmd[0]).to_string_lossy().into_owned();
                    }
                    Transport::Stdio { command: cmd }
                }
                (Some("http") | None, None, Some(url)) => {
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err(bad(format!("'url' must be an http(s) URL, got '{url}'")));
                    }
                    Transport::Http { url }
                }
                (Some("stdio"), None, _) => return Err(bad("transport 'stdio' needs 'command'".into())),
                (Some("http"), _, None) => return Err(bad("transport 'http' needs 'url'".into())),
                (Some(t), _, _) if t != "stdio" && t != "http" => {
                    return Err(bad(format!("unknown transport '{t}'; expected stdio or http")));
                }
                _ => return Err(bad("needs either 'command' (stdio) or 'url' (http)".into())),
            };
            let priority = match e.priority {
                None | Some(Value::Null) => 0,
                Some(v) => v.as_i64().ok_or_else(|| bad(format!("'priority' must be an integer, got {v}")))?,
            };
            let weight = match e.weight {
                None | Some(Value::Null) => 1.0,
                Some(v) => match v.as_f64() {
                    Some(w) if w.is_finite() && w >= 0.0 => w,
                    _ => return Err(bad(format!("'weight' must be a number >= 0, got {v}"))),
                },
            };
            let required = match e.required {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => b,
                Some(v) => return Err(bad(format!("'required' must be a boolean, got {v}"))),
            };
            let headers = match e.headers {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(m)) => m
                    .into_iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => Ok((k, s)),
                        other => Err(bad(format!("'headers.{k}' must be a string, got {other}"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(other) => return Err(bad(format!("'headers' must be an object of strings, got {other}"))),
            };
            let token_env = match e.token_env {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
                Some(other) => return Err(bad(format!("'tokenEnv' must be a variable name, got {other}"))),
            };
            engines.push(EngineSpec { id, transport, priority, weight, required, headers, token_env });
        }
        Ok(Self { engines })
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&EngineSpec> {
        self.engines.iter().find(|e| e.id == id)
    }

    /// Entries by descending priority (file order among equals).
    pub fn by_priority(&self) -> Vec<&EngineSpec> {
        let mut v: Vec<&EngineSpec> = self.engines.iter().collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.priority));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_defaults_and_ignores_unknown_fields() {
        let r = Registry::parse(
            r#"{"engines":[
                {"id":"a","transport":"stdio","command":["./bin/a","--x"],"x-note":1},
                {"id":"b","url":"http://127.0.0.1:1/rcp","priority":5,"weight":2.5,"required":true},
                {"id":"c","command":"engine --flag"}],"version":3}"#,
            Some(Path::new("/etc/rcp")),
        )
        .unwrap();
        assert_eq!(r.engines[0].transport, Transport::Stdio { command: vec!["/etc/rcp/./bin/a".into(), "--x".into()] });
        assert_eq!((r.engines[0].priority, r.engines[0].weight, r.engines[0].required), (0, 1.0, false));
        assert_eq!(r.engines[1].transport, Transport::Http { url: "http://127.0.0.1:1/rcp".into() });
        assert!(r.engines[1].required);
        assert_eq!(r.engines[2].transport, Transport::Stdio { command: vec!["engine".into(), "--flag".into()] });
        assert_eq!(r.by_priority()[0].id, "b");
    }

    #[test]
    fn headers_and_token_env_become_http_headers() {
        let r = Registry::parse(
            r#"{"engines":[{"id":"a","url":"http://h/rcp","headers":{"X-Team":"ir"},"tokenEnv":"RCP_TEST_REG_TOKEN"}]}"#,
            None,
        )
        .unwrap();
        let a = &r.engines[0];
        assert_eq!(a.headers, vec![("X-Team".to_owned(), "ir".to_owned())]);
        assert!(a.http_headers_with(|_| None).unwrap_err().contains("RCP_TEST_REG_TOKEN is not set"));
        assert!(a.http_headers_with(|_| Some(" ".into())).unwrap_err().contains("is empty"));
        let got = a.http_headers_with(|v| (v == "RCP_TEST_REG_TOKEN").then(|| "s3cret".to_owned())).unwrap();
        assert_eq!(got[1], ("Authorization".to_owned(), "Bearer s3cret".to_owned()));
    }

    #[test]
    fn bad_entries_are_named() {
        let cases = [
            (r#"{"engines":[{"command":["x"]}]}"#, "engines[0]: missing 'id'"),
            (r#"{"engines":[{"id":"a","command":["x"]},{"id":"a","command":["y"]}]}"#, "duplicate id"),
            (r#"{"engines":[{"id":"a","transport":"grpc","url":"x"}]}"#, "unknown transport 'grpc'"),
            (r#"{"engines":[{"id":"a","transport":"http"}]}"#, "needs 'url'"),
            (r#"{"engines":[{"id":"a","command":[]}]}"#, "'command' is empty"),
            (r#"{"engines":[{"id":"a","command":["x"],"weight":-1}]}"#, "'weight' must be a number >= 0"),
            (r#"{"engines":[{"id":"w","url":"ftp://x"}]}"#, "engines[0] ('w'): 'url' must be an http(s) URL"),
            (r#"{"nope":[]}"#, "missing 'engines'"),
            (r#"{"engines":[{"id":"h","url":"http://x","headers":{"A":1}}]}"#, "'headers.A' must be a string"),
        ];
        for (text, expected) in cases {
            let e = Registry::parse(text, None).unwrap_err().to_string();
            assert!(e.contains(expected), "{text}: {e}");
        }
    }
}
