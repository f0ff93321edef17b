//! The static engine registry of §16.1: an `rcp.json` with `engines[]`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

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
    /// TLS for this `https://` engine: `ca_cert` is `caCert` in `rcp.json` (a PEM file,
    /// relative to the registry file), trusted beside the system's roots. What is set here
    /// takes the place of the client's own [`crate::ClientOptions::tls`] for this engine.
    /// Ignored for stdio engines.
    pub tls: crate::TlsOptions,
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
            tls: crate::TlsOptions::default(),
        }
    }

    /// The TLS settings to reach this engine with: its own ([`EngineSpec::tls`]), each unset
    /// one taken from `client` (the client's options, its command line).
    pub fn tls_or(&self, client: &crate::TlsOptions) -> crate::TlsOptions {
        crate::TlsOptions {
            ca_cert: self.tls.ca_cert.clone().or_else(|| client.ca_cert.clone()),
            client_cert: self.tls.client_cert.clone().or_else(|| client.client_cert.clone()),
        }
    }

    /// The HTTP headers to send to this engine: `headers`, then the bearer token read from
    /// `token_env` (an unset or empty variable is an error naming it, rather than an
    /// unauthenticated request).
    pub fn http_headers(&self) -> Result<Vec<(String, String)>, TokenError> {
        self.http_headers_with(|var| std::env::var(var).ok())
    }

    fn http_headers_with(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<Vec<(String, String)>, TokenError> {
        let mut out = self.headers.clone();
        if let Some(var) = &self.token_env {
            out.push(bearer(var, lookup(var))?);
        }
        Ok(out)
    }
}

/// Why a bearer token could not be read from its environment variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The variable is not set.
    #[error("the token variable {0} is not set")]
    Unset(String),
    /// The variable is set but empty (or only whitespace).
    #[error("the token variable {0} is empty")]
    Empty(String),
}

/// The `Authorization: Bearer <token>` header for the token held in the environment variable
/// `var`; an error naming the variable when it is unset or empty.
pub fn bearer_from_env(var: &str) -> Result<(String, String), TokenError> {
    bearer(var, std::env::var(var).ok())
}

/// An HTTP header given on a command line as `'Name: value'` (`--header` of `rcpctl` and
/// `rcp-gateway mcp`); an error naming the argument when it has no colon or no valid name.
pub fn parse_header(arg: &str) -> Result<(String, String), String> {
    let (name, value) = arg.split_once(':').ok_or_else(|| format!("--header '{arg}': expected 'Name: value'"))?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!("--header '{arg}': '{name}' is not a header name"));
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

fn bearer(var: &str, value: Option<String>) -> Result<(String, String), TokenError> {
    match value {
        Some(token) if !token.trim().is_empty() => Ok(("Authorization".to_owned(), format!("Bearer {}", token.trim()))),
        Some(_) => Err(TokenError::Empty(var.to_owned())),
        None => Err(TokenError::Unset(var.to_owned())),
    }
}

/// A parsed, validated registry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Registry {
    /// Engines in file order.
    pub engines: Vec<EngineSpec>,
    /// Whether the engines index one corpus or different ones (the top-level `corpora` key).
    pub corpora: Corpora,
}

/// What the engines of a registry hold, from its top-level `"corpora"` key (an extension of
/// §16.1's format).
///
/// - `"shared"` (the default): the engines index the same corpus, so one id names one document
///   everywhere; a federation collapses hits by id (§16.3 dedup: "found by bm25+dense").
/// - `"distinct"`: the engines hold different corpora, so one id may name two different
///   documents. A federation then returns every id namespaced as `<engine>:<id>` (the engine's
///   registry id, or the gateway collection), so different documents never collapse, and
///   accepts ids back in that form (`graph` seeds, `feedback`, `index/delete`). Engine ids of
///   such a registry may not contain `:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Corpora {
    /// One corpus: ids are shared.
    #[default]
    Shared,
    /// Different corpora: ids are namespaced per engine.
    Distinct,
}

/// A registry's entries as the one loader validated them, each with what the caller read of
/// its own keys, and the registry-wide keys.
#[derive(Debug, Clone)]
pub struct Entries<X> {
    /// Entries in file order.
    pub engines: Vec<(EngineSpec, X)>,
    /// The top-level `corpora` key.
    pub corpora: Corpora,
}

/// Why a registry could not be loaded. Every error names the file it came from (when it came
/// from one) and the entry at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The file could not be read.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error (printed in this error's message, so not also its `source`, which would
        /// print it twice in a cause chain).
        cause: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{}not JSON: {cause}", origin(path.as_deref()))]
    Json {
        /// The file, when the text came from one.
        path: Option<PathBuf>,
        /// The parser's error (printed in this error's message, so not also its `source`).
        cause: serde_json::Error,
    },
    /// The document has no `engines` array.
    #[error("{}missing 'engines' array", origin(path.as_deref()))]
    MissingEngines {
        /// The file, when the text came from one.
        path: Option<PathBuf>,
    },
    /// The top-level `corpora` key is invalid.
    #[error("{}{detail}", origin(path.as_deref()))]
    Corpora {
        /// The file, when the text came from one.
        path: Option<PathBuf>,
        /// What is wrong, and what is allowed.
        detail: String,
    },
    /// An entry is invalid.
    #[error("{}engines[{index}]{}: {detail}", origin(path.as_deref()), id.as_ref().map(|i| format!(" ('{i}')")).unwrap_or_default())]
    Entry {
        /// The file, when the text came from one.
        path: Option<PathBuf>,
        /// Position in `engines`.
        index: usize,
        /// The entry's id, when it has one.
        id: Option<String>,
        /// What is wrong, and what is allowed.
        detail: String,
    },
}

impl RegistryError {
    /// The same error, naming `file` as where the registry came from.
    fn in_file(mut self, file: &Path) -> Self {
        match &mut self {
            Self::Io { .. } => {}
            Self::Json { path, .. }
            | Self::MissingEngines { path }
            | Self::Entry { path, .. }
            | Self::Corpora { path, .. } => {
                *path = Some(file.to_path_buf());
            }
        }
        self
    }
}

/// `"<file>: "` for an error message, or nothing for a registry parsed from memory.
fn origin(path: Option<&Path>) -> String {
    path.map(|p| format!("{}: ", p.display())).unwrap_or_default()
}

/// One entry of `engines[]` as written, for the keys the client does not read itself (an
/// aggregator's own, such as rcp-gateway's `collection`).
pub type RawEntry = serde_json::Map<String, Value>;

impl Registry {
    /// Loads and validates an `rcp.json`. Relative program paths in `command` (containing a
    /// `/`) are resolved against the file's directory; bare names are looked up on `PATH`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, RegistryError> {
        Ok(Self::of(load_entries(path, |_, _| Ok(()))?))
    }

    /// Parses registry JSON; `base` resolves relative program paths.
    pub fn parse(text: &str, base: Option<&Path>) -> Result<Self, RegistryError> {
        Ok(Self::of(parse_entries(text, base, |_, _| Ok(()))?))
    }

    fn of(entries: Entries<()>) -> Self {
        Self { engines: entries.engines.into_iter().map(|(spec, ())| spec).collect(), corpora: entries.corpora }
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

/// The one registry loader: reads and validates an `rcp.json` as [`Registry::load`] does, and
/// hands every entry, once validated, with its raw object to `extend`, which reads the keys a
/// tool adds to the format (an `Err` is what is wrong with them, reported naming the file and
/// the entry). Relative program paths resolve against the file's directory.
pub fn load_entries<X>(
    path: impl AsRef<Path>,
    extend: impl FnMut(&EngineSpec, &RawEntry) -> Result<X, String>,
) -> Result<Entries<X>, RegistryError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|cause| RegistryError::Io { path: path.to_path_buf(), cause })?;
    parse_entries(&text, path.parent(), extend).map_err(|e| e.in_file(path))
}

/// [`load_entries`] over registry JSON already in memory; `base` resolves relative program
/// paths.
pub fn parse_entries<X>(
    text: &str,
    base: Option<&Path>,
    mut extend: impl FnMut(&EngineSpec, &RawEntry) -> Result<X, String>,
) -> Result<Entries<X>, RegistryError> {
    let v: Value = serde_json::from_str(text).map_err(|cause| RegistryError::Json { path: None, cause })?;
    let entries = v.get("engines").and_then(Value::as_array).ok_or(RegistryError::MissingEngines { path: None })?;
    let corpora = match v.get("corpora") {
        None | Some(Value::Null) => Corpora::Shared,
        Some(Value::String(s)) if s == "shared" => Corpora::Shared,
        Some(Value::String(s)) if s == "distinct" => Corpora::Distinct,
        Some(other) => {
            let detail = format!("'corpora' must be \"shared\" or \"distinct\", got {other}");
            return Err(RegistryError::Corpora { path: None, detail });
        }
    };
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (index, raw) in entries.iter().enumerate() {
        let id = raw.get("id").and_then(Value::as_str).map(str::to_owned);
        let bad = |detail: String| RegistryError::Entry { path: None, index, id: id.clone(), detail };
        let Value::Object(raw) = raw else {
            return Err(bad(format!("an entry must be an object, got {raw}")));
        };
        let spec = engine_spec(raw, base).map_err(bad)?;
        if !seen.insert(spec.id.clone()) {
            return Err(bad(format!("duplicate id '{}'", spec.id)));
        }
        if corpora == Corpora::Distinct && spec.id.contains(':') {
            return Err(bad(format!(
                "'id' may not contain ':' when \"corpora\" is \"distinct\" (ids are namespaced as '{}:<id>')",
                spec.id
            )));
        }
        let extra = extend(&spec, raw).map_err(bad)?;
        out.push((spec, extra));
    }
    Ok(Entries { engines: out, corpora })
}

/// The client's view of one entry, or what is wrong with it.
fn engine_spec(raw: &RawEntry, base: Option<&Path>) -> Result<EngineSpec, String> {
    let present = |key: &str| raw.get(key).filter(|v| !v.is_null());
    let id = match present("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(other) => return Err(format!("'id' must be a non-empty string, got {other}")),
        None => return Err("missing 'id'".into()),
    };
    let command = match present("command") {
        None => None,
        Some(Value::String(s)) => Some(s.split_whitespace().map(str::to_owned).collect::<Vec<_>>()),
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|x| {
                    x.as_str().map(str::to_owned).ok_or_else(|| format!("'command' items must be strings, got {x}"))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(other) => return Err(format!("'command' must be an array of strings, got {other}")),
    };
    let string = |key: &str| match present(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("'{key}' must be a string, got {other}")),
    };
    let transport = match (string("transport")?.as_deref(), command, string("url")?) {
        (Some("stdio") | None, Some(mut cmd), _) => {
            if cmd.is_empty() || cmd[0].is_empty() {
                return Err("'command' is empty".into());
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
                return Err(format!("'url' must be an http(s) URL, got '{url}'"));
            }
            Transport::Http { url }
        }
        (Some("stdio"), None, _) => return Err("transport 'stdio' needs 'command'".into()),
        (Some("http"), _, None) => return Err("transport 'http' needs 'url'".into()),
        (Some(t), _, _) if t != "stdio" && t != "http" => {
            return Err(format!("unknown transport '{t}'; expected stdio or http"));
        }
        _ => return Err("needs either 'command' (stdio) or 'url' (http)".into()),
    };
    let priority = match present("priority") {
        None => 0,
        Some(v) => v.as_i64().ok_or_else(|| format!("'priority' must be an integer, got {v}"))?,
    };
    let weight = match present("weight") {
        None => 1.0,
        Some(v) => match v.as_f64() {
            Some(w) if w.is_finite() && w >= 0.0 => w,
            _ => return Err(format!("'weight' must be a number >= 0, got {v}")),
        },
    };
    let required = match present("required") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(format!("'required' must be a boolean, got {v}")),
    };
    let headers = match present("headers") {
        None => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!("'headers.{k}' must be a string, got {other}")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => return Err(format!("'headers' must be an object of strings, got {other}")),
    };
    let token_env = match present("tokenEnv") {
        None => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(other) => return Err(format!("'tokenEnv' must be a variable name, got {other}")),
    };
    let ca_cert = match present("caCert") {
        None => None,
        Some(Value::String(s)) if !s.trim().is_empty() => {
            let path = Path::new(s);
            Some(match base {
                Some(dir) if path.is_relative() => dir.join(path),
                _ => path.to_path_buf(),
            })
        }
        Some(other) => return Err(format!("'caCert' must be a file path, got {other}")),
    };
    let tls = crate::TlsOptions { ca_cert, client_cert: None };
    Ok(EngineSpec { id, transport, priority, weight, required, headers, token_env, tls })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_cert_resolves_against_the_file_and_wins_over_the_clients() {
        let r = Registry::parse(
            r#"{"engines":[{"id":"a","url":"https://h/rcp","caCert":"ca/a.pem"},{"id":"b","url":"https://h/rcp"}]}"#,
            Some(Path::new("/etc/rcp")),
        )
        .expect("registry");
        assert_eq!(r.engines[0].tls.ca_cert.as_deref(), Some(Path::new("/etc/rcp/ca/a.pem")));
        let client = crate::TlsOptions { ca_cert: Some("cli.pem".into()), client_cert: None };
        assert_eq!(r.engines[0].tls_or(&client).ca_cert.as_deref(), Some(Path::new("/etc/rcp/ca/a.pem")));
        assert_eq!(r.engines[1].tls_or(&client).ca_cert.as_deref(), Some(Path::new("cli.pem")));
        let err = Registry::parse(r#"{"engines":[{"id":"a","url":"https://h/rcp","caCert":3}]}"#, None)
            .expect_err("a number is no path");
        assert!(err.to_string().contains("caCert"), "{err}");
    }

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
        assert!(a.http_headers_with(|_| None).unwrap_err().to_string().contains("RCP_TEST_REG_TOKEN is not set"));
        assert!(a.http_headers_with(|_| Some(" ".into())).unwrap_err().to_string().contains("is empty"));
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

    #[test]
    fn errors_name_the_file_and_keep_their_cause() {
        use std::error::Error as _;
        let dir = std::env::temp_dir().join(format!("rcp-registry-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad_entry = dir.join("bad-entry.json");
        std::fs::write(&bad_entry, r#"{"engines":[{"id":"a","command":["x"],"weight":"heavy"}]}"#).unwrap();
        let e = Registry::load(&bad_entry).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: engines[0] ('a'): 'weight'", bad_entry.display())), "{e}");
        let not_json = dir.join("not-json.json");
        std::fs::write(&not_json, "{").unwrap();
        let e = Registry::load(&not_json).unwrap_err();
        assert!(e.to_string().starts_with(&format!("{}: not JSON", not_json.display())), "{e}");
        assert!(e.source().is_none(), "the parser's error is in the message, not repeated as a source");
        let missing = Registry::load(dir.join("absent.json")).unwrap_err();
        assert!(missing.source().is_none() && missing.to_string().contains("absent.json: "), "{missing}");
        let extra = load_entries(&bad_entry, |_, raw| Ok(raw.contains_key("weight")));
        assert!(extra.is_err(), "the client's own checks run before the extension");
        std::fs::write(&bad_entry, r#"{"engines":[{"id":"a","command":["x"],"shard":3}]}"#).unwrap();
        let extra = load_entries(&bad_entry, |_, raw| match raw.get("shard") {
            Some(v) if v.is_u64() => Ok(v.as_u64()),
            other => Err(format!("'shard' must be an integer, got {other:?}")),
        });
        assert_eq!(extra.unwrap().engines[0].1, Some(3));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
