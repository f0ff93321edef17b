//! Test harness for RCP servers: spawn an engine binary, talk NDJSON over real pipes, and validate every
//! frame the server writes against the RCP JSON Schema: the one built into rcp-conformance, and also
//! the file `RCP_SCHEMA` names (the spec's normative `rcp-1.0.json`) when that is set.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

mod http;
pub mod pg;
#[cfg(feature = "tls")]
pub mod pki;
mod sample;

pub use http::{HttpServer, http_client, http_client_builder};
pub use sample::{MemField, PeakSampler, status_kb};

use rcp_client::ndjson::MAX_READ_LINE_BYTES;
use rcp_client::ndjson::blocking::{BlockingChild, LineReader, write_line};
use rcp_conformance::{BUILTIN_SCHEMA, Schemas};
use serde_json::{Value, json};

/// The file `RCP_SCHEMA` names, when it is set. Panics when it names no file: a run that sets it
/// (CI, to the spec's normative `rcp-1.0.json`) and has no file is misconfigured.
fn env_schema() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("RCP_SCHEMA")?);
    assert!(path.is_file(), "RCP_SCHEMA is set to {}, which is not a file", path.display());
    Some(path)
}

/// A schema file for tools that take `--schema PATH`: `RCP_SCHEMA` when it is set, else a copy
/// of the schema built into rcp-conformance, written once under `target/<profile>/`.
pub fn schema_path() -> PathBuf {
    static BUILTIN_COPY: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = env_schema() {
        return path;
    }
    BUILTIN_COPY
        .get_or_init(|| {
            let dir = profile_dir().join("rcp-conformance-schema");
            let path = dir.join("rcp-1.0.json");
            if std::fs::read_to_string(&path).is_ok_and(|text| text == BUILTIN_SCHEMA) {
                return path;
            }
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
            // Written aside and renamed, so a test binary running beside this one never reads half.
            let tmp = dir.join(format!("rcp-1.0.json.{}", std::process::id()));
            std::fs::write(&tmp, BUILTIN_SCHEMA).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
            std::fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("rename to {}: {e}", path.display()));
            path
        })
        .clone()
}

/// The schema validators, compiled once per test binary: the schema built into rcp-conformance,
/// and with it the one at `RCP_SCHEMA` when that is set (a frame is valid only if both accept it).
fn schemas() -> &'static Schemas {
    static S: OnceLock<Schemas> = OnceLock::new();
    S.get_or_init(|| {
        let builtin = Schemas::builtin();
        match env_schema() {
            Some(path) => builtin.and(
                Schemas::load(&path).unwrap_or_else(|e| panic!("the RCP JSON Schema at {} ({e})", path.display())),
            ),
            None => builtin,
        }
    })
}

/// Panics unless `frame` is a valid RCP/1 message (or batch).
pub fn assert_valid_frame(frame: &Value) {
    let errors = schemas().frame_errors(frame);
    assert!(errors.is_empty(), "frame violates the schema: {errors:?}\n{frame}");
}

/// Panics unless `result` is a valid result of `method`.
pub fn assert_valid_result(method: &str, result: &Value) {
    let errors = schemas().result_errors(method, result);
    assert!(errors.is_empty(), "{method} result violates the schema: {errors:?}\n{result}");
}

/// The Cranfield collection (BEIR layout) for the tests that measure retrieval quality:
/// `RCP_CRANFIELD` when it is set (it must hold `corpus.jsonl`: a run that names a collection
/// and has none is misconfigured), else `shared/data/cranfield` beside the workspace when it is
/// there, else `None`: a clean clone has no collection, and those tests then skip, saying so
/// (CI sets `RCP_CRANFIELD`, so there they always run).
pub fn cranfield() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RCP_CRANFIELD").map(PathBuf::from) {
        assert!(dir.join("corpus.jsonl").is_file(), "RCP_CRANFIELD={} holds no corpus.jsonl", dir.display());
        return Some(dir);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/cranfield");
    if beside.join("corpus.jsonl").is_file() {
        return Some(beside);
    }
    eprintln!(
        "skipped: no Cranfield collection (set RCP_CRANFIELD, or place it in shared/data/cranfield beside the workspace)"
    );
    None
}

/// Path of an example of the `rcp-examples` package (`tiny_engine`, ...), built beside the test
/// executable; a missing one is built with the cargo that runs the tests, in the same profile.
pub fn example_bin(name: &str) -> PathBuf {
    let dir = profile_dir();
    let bin = dir.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    build_once(&bin, &["-p", "rcp-examples", "--example", name], &dir);
    bin
}

/// A binary of another workspace package (`rcp-bm25`, `rcp-dense`, ...), built beside the
/// test executable. Integration tests cannot name another package's `CARGO_BIN_EXE_*`, so
/// a missing binary is built with the cargo that runs the tests, in the same profile.
pub fn workspace_bin(package: &str, name: &str) -> PathBuf {
    let dir = profile_dir();
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    build_once(&bin, &["-p", package, "--bin", name], &dir);
    bin
}

/// `target/<profile>` of the running test executable.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe path");
    exe.parent().and_then(|d| d.parent()).expect("target/<profile>").to_path_buf()
}

/// Runs `cargo build TARGET_ARGS` into `dir`'s target directory and profile unless `bin`
/// exists.
fn build_once(bin: &Path, target_args: &[&str], dir: &Path) {
    if bin.is_file() {
        return;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let profile = dir.file_name().and_then(|p| p.to_str()).unwrap_or("debug").to_owned();
    let mut cmd = Command::new(cargo);
    cmd.arg("build").args(target_args).arg("--target-dir").arg(dir.parent().expect("target dir"));
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let status = cmd.status().expect("run cargo build");
    assert!(status.success() && bin.is_file(), "building {} failed", bin.display());
}

/// A running engine process, spoken to over rcp-client's blocking NDJSON harness; killed
/// when dropped.
pub struct Engine {
    child: BlockingChild,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Notifications received while waiting for responses, in arrival order.
    pub notifications: Vec<Value>,
    pending: Vec<Value>,
    next_id: i64,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("notifications", &self.notifications.len()).finish_non_exhaustive()
    }
}

impl Engine {
    /// Spawns `bin` with `args`.
    pub fn spawn(bin: &std::path::Path, args: &[&str]) -> Self {
        let mut cmd = Command::new(bin);
        cmd.args(args);
        Self::from_command(cmd)
    }

    /// Spawns a prepared command with piped stdin/stdout (stderr inherited). Lines are read
    /// verbatim, so a blank or malformed line the server writes fails [`Self::recv`].
    pub fn from_command(mut cmd: Command) -> Self {
        cmd.stderr(Stdio::inherit());
        let described = format!("{cmd:?}");
        let mut child = BlockingChild::spawn(cmd).unwrap_or_else(|e| panic!("spawn {described}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in LineReader::verbatim(stdout, MAX_READ_LINE_BYTES) {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Self { child, stdin, lines: rx, notifications: Vec::new(), pending: Vec::new(), next_id: 1000 }
    }

    /// Spawns an example binary of the calling package (see [`example_bin`]).
    pub fn example(name: &str) -> Self {
        Self::spawn(&example_bin(name), &[])
    }

    /// Spawns `bin` with `args` and extra environment variables.
    pub fn spawn_env(bin: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(bin);
        cmd.args(args).envs(env.iter().copied());
        Self::from_command(cmd)
    }

    /// Writes one raw line (a `\n` is appended).
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        write_line(stdin, line.as_bytes()).expect("write");
    }

    /// Writes one JSON message.
    pub fn send(&mut self, msg: &Value) {
        self.send_raw(&msg.to_string());
    }

    /// Closes stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Next frame from stdout within `timeout`, schema-validated; `None` on timeout or EOF.
    pub fn recv(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                assert!(!line.contains('\n'), "a frame must be one line");
                let v: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {line}"));
                assert_valid_frame(&v);
                Some(v)
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Next frame that is not a notification (notifications are kept in `self.notifications`).
    pub fn recv_response(&mut self, timeout: Duration) -> Option<Value> {
        if !self.pending.is_empty() {
            return Some(self.pending.remove(0));
        }
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let v = self.recv(left)?;
            if v.get("method").is_some() && v.get("id").is_none() {
                self.notifications.push(v);
                continue;
            }
            return Some(v);
        }
    }

    /// Waits for the response with this id (others are kept for later).
    pub fn response_for(&mut self, id: &Value, timeout: Duration) -> Value {
        if let Some(pos) = self.pending.iter().position(|r| r.get("id") == Some(id)) {
            return self.pending.remove(pos);
        }
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let v = self.recv(left).unwrap_or_else(|| panic!("no response for id {id} within {timeout:?}"));
            if v.get("method").is_some() && v.get("id").is_none() {
                self.notifications.push(v);
            } else if v.get("id") == Some(id) {
                return v;
            } else {
                self.pending.push(v);
            }
        }
    }

    /// Sends a request and returns its response; the result is checked against the schema.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let r = self.response_for(&id, Duration::from_secs(10));
        if let Some(result) = r.get("result") {
            assert_valid_result(method, result);
        }
        r
    }

    /// `call` that must succeed; returns the result.
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        r.get("result").cloned().unwrap_or_else(|| panic!("{method} failed: {r}"))
    }

    /// `call` that must fail; returns the error object.
    pub fn err(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        r.get("error").cloned().unwrap_or_else(|| panic!("{method} unexpectedly succeeded: {r}"))
    }

    /// Runs the handshake (advertising `log` when asked).
    pub fn initialize(&mut self) -> Value {
        self.ok("initialize", json!({"protocolVersion": 1, "client": {"name": "tests", "version": "0"}}))
    }

    /// Asserts nothing arrives on stdout for `dur`.
    pub fn expect_silence(&mut self, dur: Duration) {
        if let Some(v) = self.recv(dur) {
            panic!("expected no output, got {v}");
        }
    }

    /// Waits for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < end, "engine did not exit within {timeout:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The error code of an error object.
pub fn code(err: &Value) -> i64 {
    err["code"].as_i64().unwrap_or_else(|| panic!("no code in {err}"))
}

/// Kills the engine with SIGKILL (no chance to flush or clean up) and reaps it.
pub fn kill9(engine: &mut Engine) {
    engine.child.kill_now();
}

/// How far an int8-quantised model's output may stand from a reference that ONNX Runtime gave
/// on the machine where it was recorded, one with AVX-512 VNNI: `recorded` there, `elsewhere`
/// on any other CPU. ONNX Runtime's int8 matrix products take another path without VNNI (on
/// AVX2 the pairwise products saturate), and the same model scores the same pair a little
/// differently: a cross-encoder logit by about 0.2 (8.05 against 7.82), a ColBERT MaxSim by
/// about 0.05, a matrix entry by a few thousandths. `elsewhere` still catches a wrong model, a
/// wrong tokenisation or a wrong layout, which move these by whole units or reorder them.
pub fn int8_tolerance(recorded: f32, elsewhere: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512vnni") {
        return recorded;
    }
    elsewhere
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_path_is_rcp_schema_or_a_copy_of_the_builtin_schema() {
        let path = schema_path();
        match std::env::var_os("RCP_SCHEMA") {
            Some(set) => assert_eq!(path, PathBuf::from(set)),
            None => {
                let text = std::fs::read_to_string(&path).expect("the copy is readable");
                assert_eq!(text, BUILTIN_SCHEMA, "{} is not the built-in schema", path.display());
                assert_eq!(schema_path(), path, "written once");
            }
        }
    }

    #[test]
    fn valid_frames_and_results_pass() {
        assert_valid_frame(&json!({"jsonrpc": "2.0", "id": 1, "result": {"hits": []}}));
        assert_valid_result("retrieve", &json!({"hits": [{"id": "a", "score": 1.0}]}));
    }

    #[test]
    #[should_panic(expected = "frame violates the schema")]
    fn a_frame_without_jsonrpc_fails() {
        assert_valid_frame(&json!({"id": 1, "result": {}}));
    }

    #[test]
    #[should_panic(expected = "retrieve result violates the schema")]
    fn a_hit_without_score_fails() {
        assert_valid_result("retrieve", &json!({"hits": [{"id": "a"}]}));
    }
}
