//! A new user's paths through the `rcpctl` command line, against real engines (issue #28): one
//! bad line costs nothing else, errors say what happened and what to do, registry mode names
//! the engine that answered, and `eval` notices engines that hold no corpus.

use std::path::PathBuf;
use std::process::{Command, Output};

use rcp_testkit::HttpServer;
use serde_json::{Value, json};

/// Runs `rcpctl` with `args` and `env`.
fn rcp(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rcpctl"));
    cmd.args(args).env_remove("RCP_LOG").env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run rcp")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A scratch directory unique to this test process and `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rcp-paths-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn bm25() -> String {
    rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25").to_string_lossy().into_owned()
}

fn fixture() -> String {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join("fixture_engine");
    bin.to_string_lossy().into_owned()
}

/// Starts `rcp-bm25 serve --http 127.0.0.1:0 ARGS` and returns it with its base URL.
fn bm25_http(args: &[&str], env: &[(&str, &str)]) -> (HttpServer, String) {
    let mut cmd = Command::new(bm25());
    cmd.arg("serve").args(args).args(["--http", "127.0.0.1:0"]).envs(env.iter().copied());
    let server = HttpServer::spawn(cmd);
    let url = server.url.clone();
    (server, url)
}

/// 200 RCP documents, `d1`..`d200`; line `bad` (1-based) has `meta.year: "nineteen"`.
fn corpus(path: &std::path::Path, lines: usize, bad: &[usize]) {
    let mut text = String::new();
    for i in 1..=lines {
        let year = if bad.contains(&i) { json!("nineteen") } else { json!(1900 + i) };
        text.push_str(
            &json!({"id": format!("d{i}"), "text": format!("wing lift note {i}"), "meta": {"year": year}}).to_string(),
        );
        text.push('\n');
    }
    std::fs::write(path, text).expect("corpus");
}

#[test]
fn one_bad_line_loses_no_valid_document() {
    let dir = scratch("bad-line");
    let file = dir.join("mine.jsonl");
    corpus(&file, 200, &[151]);
    let data = dir.join("idx");
    let engine = format!("{} serve --data-dir {} --create --field year:int", bm25(), data.display());
    let o = rcp(&["index", "add", "--stdio", &engine, file.to_str().unwrap_or(""), "--json"], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "a failed line makes the exit status 1: {err}");
    let v: Value = serde_json::from_slice(&o.stdout).expect("summary JSON");
    assert_eq!((v["added"].as_u64(), v["failed"].as_u64()), (Some(199), Some(1)), "{v}\n{err}");
    assert!(err.contains("mine.jsonl:151: d151: meta.year: "), "the line, the id and the field: {err}");
    assert!(err.contains("\"nineteen\""), "{err}");
    assert!(!err.contains("no --data-dir"), "the engine persists: no warning: {err}");

    // The 199 are in the index: the engine, restarted on its directory, finds the last one.
    let engine = format!("{} serve --data-dir {}", bm25(), data.display());
    let o = rcp(&["retrieve", "--stdio", &engine, "note 200", "-k", "200", "--json"], &[]);
    let hits: Value = serde_json::from_slice(&o.stdout).expect("hits");
    let n = hits["hits"].as_array().map_or(0, Vec::len);
    assert_eq!(n, 199, "{}", stderr(&o));

    // Smaller batches, several bad lines in one batch: still every valid document lands.
    corpus(&file, 60, &[3, 4, 59]);
    let engine = format!("{} serve --field year:int", bm25());
    let o = rcp(&["index", "add", "--stdio", &engine, file.to_str().unwrap_or(""), "--batch", "16"], &[]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.starts_with("added 57, failed 3, in "), "{out}{err}");
    for line in [3, 4, 59] {
        assert!(err.contains(&format!("mine.jsonl:{line}: d{line}: meta.year: ")), "{err}");
    }
    // An engine without a data directory forgets the documents: the user is told.
    assert!(err.contains("no --data-dir") && err.contains("loses these documents"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_engine_refusing_everything_ends_the_run() {
    let dir = scratch("refuse-all");
    let file = dir.join("all-bad.jsonl");
    corpus(&file, 150, &(1..=150).collect::<Vec<_>>());
    let engine = format!("{} serve --field year:int", bm25());
    let o = rcp(&["index", "add", "--stdio", &engine, file.to_str().unwrap_or("")], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("refused 100 documents in a row"), "{err}");
    assert_eq!(err.matches(": meta.year: ").count(), 100, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_say_what_happened_and_what_to_do() {
    // A corpus that does not exist: the engine names the cause once.
    let dir = scratch("errors");
    let o = Command::new(bm25())
        .args(["index", "--data-dir", dir.join("idx").to_str().unwrap_or(""), "/nonexistent/x.jsonl"])
        .output()
        .expect("rcp-bm25 index");
    let err = stderr(&o);
    assert!(!o.status.success());
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");

    // An operator typed backwards: the parse is shown, with what was meant.
    let o = rcp(&["retrieve", "--stdio", &fixture(), "wing", "--filter", "year=>1990"], &[]);
    let err = stderr(&o);
    assert!(err.contains(r#"read as year = ">1990" (a string); did you mean 'year>=1990'?"#), "{err}");

    // A filter the client refuses: "invalid params" once, and how the filter was sent.
    let (_engine, url) = bm25_http(&["--field", "year:int", "--token-env", "RCP_PATHS_T"], &[("RCP_PATHS_T", "s3")]);
    let token = [("RCP_PATHS_TOKEN", "s3")];
    let f = r#"{"field":"year","op":"gte","value":"x"}"#;
    let o = rcp(&["retrieve", "--http", &url, "--token-env", "RCP_PATHS_TOKEN", "wing", "--filter", f], &token);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert_eq!(err.matches("invalid params").count(), 1, "{err}");
    assert!(err.contains(&format!("hint: --filter was sent as {f}")), "{err}");

    // No token, or the wrong one: the hint names --token-env.
    let o = rcp(&["info", "--http", &url], &[]);
    assert!(stderr(&o).contains("pass --token-env VAR"), "{}", stderr(&o));
    let o = rcp(&["info", "--http", &url, "--token-env", "RCP_PATHS_TOKEN"], &[("RCP_PATHS_TOKEN", "wrong")]);
    assert!(stderr(&o).contains("refused the token held in RCP_PATHS_TOKEN"), "{}", stderr(&o));

    // A method in the URL: drop it.
    let o = rcp(&["info", "--http", &format!("{url}/retrieve"), "--token-env", "RCP_PATHS_TOKEN"], &token);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains(&format!("drop '/retrieve' (try {url})")), "{err}");

    // No scheme, no path: the suggestion is the base URL, /rcp included.
    let o = rcp(&["info", "--http", "localhost:8080"], &[]);
    assert!(stderr(&o).contains("(e.g. http://localhost:8080/rcp)"), "{}", stderr(&o));

    // A host name that does not resolve: one readable line.
    let o = rcp(&["info", "--http", "http://no-such-host.invalid:8080/rcp"], &[]);
    let err = stderr(&o);
    assert!(err.contains("cannot resolve the host name 'no-such-host.invalid'"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    // A broken registry: the file is named.
    let reg = dir.join("broken.json");
    std::fs::write(&reg, "{\"engines\": [").expect("registry");
    let o = rcp(&["retrieve", "--registry", reg.to_str().unwrap_or(""), "wing"], &[]);
    assert!(stderr(&o).contains(&format!("{}: not JSON", reg.display())), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn registry_mode_names_the_engine_that_answered() {
    let dir = scratch("registry");
    let reg = dir.join("rcp.json");
    let registry = json!({"engines": [
        {"id": "down", "command": ["/nonexistent/engine"], "priority": 10},
        {"id": "up", "command": [fixture(), "--doc", "a:wing lift"], "priority": 1}
    ]});
    std::fs::write(&reg, registry.to_string()).expect("registry");
    let o = rcp(&["retrieve", "--registry", reg.to_str().unwrap_or(""), "wing", "--json"], &[]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("engine 'up' of {} answers", reg.display())), "{err}");
    assert!(err.contains("skipped down: "), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout only");
    assert_eq!(v["hits"][0]["id"], "a");

    // federate -k 1: the header counts the hits shown.
    let registry =
        json!({"engines": [{"id": "one", "command": [fixture(), "--doc", "a:wing", "--doc", "b:wing lift"]}]});
    std::fs::write(&reg, registry.to_string()).expect("registry");
    let o = rcp(&["federate", reg.to_str().unwrap_or(""), "wing", "-k", "1"], &[]);
    let out = stdout(&o);
    let header = out.lines().find(|l| l.starts_with("== one")).unwrap_or("");
    assert!(header.starts_with("== one (1 hits"), "{out}{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eval_notices_an_engine_without_the_corpus() {
    let dir = scratch("eval-empty");
    std::fs::write(
        dir.join("queries.jsonl"),
        "{\"_id\":\"q1\",\"text\":\"zebra\"}\n{\"_id\":\"q2\",\"text\":\"okapi\"}\n",
    )
    .expect("queries");
    std::fs::write(dir.join("qrels.tsv"), "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n").expect("qrels");
    let engine = format!("{} --doc a:wing", fixture());
    let d = dir.to_str().unwrap_or("");
    let o = rcp(&["eval", d, "--stdio", &engine], &[]);
    let err = stderr(&o);
    assert!(o.status.success(), "a warning, not a failure: {err}");
    assert!(err.contains("returned no hits for 2 of 2 queries") && err.contains("corpus.jsonl"), "{err}");
    let o = rcp(&["eval", d, "--stdio", &engine, "--strict"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--strict"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_readme_links_every_component_readme() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(readme.lines().count() <= 250, "the README stays short");
    let mut components = Vec::new();
    for dir in [root.clone(), root.join("engines")] {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path().join("README.md");
            if path.is_file() {
                let rel = path.strip_prefix(&root).expect("under root").to_string_lossy().into_owned();
                components.push(rel);
            }
        }
    }
    assert!(components.len() >= 8, "{components:?}");
    for rel in &components {
        assert!(readme.contains(&format!("]({rel})")), "README.md does not link {rel}");
    }
    assert!(readme.contains("](gateway/README.md#mcp-bridge)"), "the MCP bridge section is linked");
}

fn loose_engine() -> String {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join("loose_engine");
    bin.to_string_lossy().into_owned()
}

#[test]
fn info_json_prints_the_capabilities_as_received() {
    // The loose engine advertises `embed.dimensions` (not the spec's `dimension`) and a key the
    // spec does not define: `rcpctl info --json` shows both verbatim.
    let o = rcp(&["info", "--stdio", &loose_engine(), "--json"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let embed = &v["capabilities"]["embed"];
    assert_eq!(embed["dimensions"], 4, "{v}");
    assert_eq!(embed["vendorNote"], "kept verbatim", "{v}");
    assert!(embed.get("dimension").is_none() && embed.get("identity").is_none(), "nothing added: {v}");
    assert_eq!(v["capabilities"]["rerank"]["methods"], "cross-encoder", "unreadable metadata as sent: {v}");

    // --parsed: this client's reading, re-serialised from its types.
    let o = rcp(&["info", "--stdio", &loose_engine(), "--parsed"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let parsed: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let embed = &parsed["capabilities"]["embed"];
    assert!(embed["dimension"] == 4 && embed.get("dimensions").is_none(), "the client's spelling: {parsed}");
    assert_ne!(parsed, v, "the parsed form differs from the wire form");
}

#[test]
fn every_binary_exits_1_on_a_failed_run_and_2_on_bad_arguments() {
    // One rule (rcp_wire::exit): a corpus that cannot be read fails the run with 1 in the
    // client and in every engine alike (rcp-dense exited 2 before); bad arguments exit 2.
    let dir = scratch("exit-codes");
    let missing = "/nonexistent/corpus.jsonl";
    let data = dir.join("idx");
    let data = data.to_str().unwrap_or("");
    let dense = rcp_testkit::workspace_bin("rcp-dense", "rcp-dense").to_string_lossy().into_owned();
    let gateway = rcp_testkit::workspace_bin("rcp-gateway", "rcp-gateway").to_string_lossy().into_owned();
    let run = |program: &str, args: &[&str]| {
        let o = Command::new(program).args(args).env("RCP_MODEL_DIR", dir.join("no-model")).output().expect("run");
        (o.status.code(), stderr(&o))
    };
    let failed = [
        (env!("CARGO_BIN_EXE_rcpctl").to_owned(), vec!["index", "add", "--stdio", "rcp-bm25 serve", missing]),
        (bm25(), vec!["index", "--data-dir", data, missing]),
        (dense.clone(), vec!["index", "--data-dir", data, missing]),
        (gateway.clone(), vec!["serve", "--registry", "/nonexistent/rcp.json"]),
    ];
    for (program, args) in &failed {
        let (code, err) = run(program, args);
        assert_eq!(code, Some(1), "{program} {args:?}: {err}");
        assert!(!err.trim().is_empty(), "a failure says what happened: {program}");
    }
    for program in [env!("CARGO_BIN_EXE_rcpctl").to_owned(), bm25(), dense, gateway] {
        let (code, err) = run(&program, &["--no-such-flag"]);
        assert_eq!(code, Some(2), "{program}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn index_progress_rates_read_as_people_write_them() {
    // The bar is drawn only on a terminal: `script` gives the engine one.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIP: no `script` to give the index command a terminal");
        return;
    }
    let dir = scratch("progress");
    let file = dir.join("big.jsonl");
    corpus(&file, 20_000, &[]);
    let cmd = format!("{} index --data-dir {} {}", bm25(), dir.join("idx").display(), file.display());
    let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().expect("run script");
    let shown = String::from_utf8_lossy(&o.stdout).replace('\r', "\n");
    assert!(o.status.success(), "{shown}");
    let rates: Vec<&str> = shown.split(['(', ' ']).filter(|w| w.ends_with("/s,")).collect();
    assert!(!rates.is_empty(), "the bar shows a rate: {shown}");
    for rate in rates {
        let number = rate.trim_end_matches("/s,");
        let whole = number.split('.').next().unwrap_or("");
        let grouped = whole.split(',').enumerate().all(|(i, g)| {
            g.bytes().all(|b| b.is_ascii_digit()) && if i == 0 { (1..=3).contains(&g.len()) } else { g.len() == 3 }
        });
        let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(grouped && decimals <= 1 && (decimals == 0 || !whole.contains(',')), "rate {rate:?} in {shown}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn call_sends_any_declared_method_gated_on_its_capability() {
    let engine = format!("{} serve", bm25());
    let o = rcp(&["call", "--stdio", &engine, "retrieve", r#"{"query": "rust", "k": 2}"#], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let res: Value = serde_json::from_str(&stdout(&o)).expect("the result as JSON");
    assert!(res["hits"].as_array().is_some_and(|h| !h.is_empty() && h.len() <= 2), "{res}");
    // A declared method the engine does not advertise is refused before any request is sent.
    let o = rcp(&["call", "--stdio", &engine, "memory/recall", r#"{"query": "rust"}"#], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs capability 'memory'"), "{}", stderr(&o));
    // A name RCP/1 does not declare is refused with the list of those it does.
    let o = rcp(&["call", "--stdio", &engine, "memory/forget"], &[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("unknown method 'memory/forget'") && stderr(&o).contains("memory/recall"),
        "{}",
        stderr(&o)
    );
}
