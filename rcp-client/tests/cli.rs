//! The `rcpctl` command line against real engines: the client's fixture engine over stdio, and
//! the BM25 engine over HTTP and stdio (index writes, filters, bearer tokens, evaluation).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rcp_testkit::HttpServer;
use serde_json::Value;

fn fixture() -> String {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join("fixture_engine");
    bin.to_string_lossy().into_owned()
}

#[test]
fn info_retrieve_and_federate_print_tables_and_json() {
    let rcp = env!("CARGO_BIN_EXE_rcpctl");
    let stdio = format!("{} --name one --doc a:wing --doc b:lift", fixture());
    let out = Command::new(rcp).args(["info", "--stdio", &stdio]).output().expect("run rcp");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("server:       one") && text.contains("retrieve"), "{text}");

    let out = Command::new(rcp).args(["retrieve", "--stdio", &stdio, "lift", "-k", "1", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert_eq!(v["hits"][0]["id"], "b");
    assert_eq!(v["hits"].as_array().map(Vec::len), Some(1));

    let dir = std::env::temp_dir().join(format!("rcp-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let reg = dir.join("rcp.json");
    let f = fixture();
    let registry = serde_json::json!({"engines": [
        {"id": "one", "command": [f, "--doc", "a:wing", "--doc", "b:wing lift"]},
        {"id": "two", "command": [f, "--doc", "b:lift", "--doc", "c:wing"]}
    ]});
    std::fs::write(&reg, registry.to_string()).unwrap();
    let out = Command::new(rcp).args(["federate", reg.to_str().unwrap(), "wing lift", "-k", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("== one") && text.contains("== two") && text.contains("== fused (rrf)"), "{text}");
    let b_row = text.lines().skip_while(|l| !l.starts_with("== fused")).find(|l| l.contains(" b ")).unwrap_or("");
    assert!(b_row.contains("one+two"), "the fused row of b names both engines: {text}");
    assert!(!text.contains("Some(") && !text.contains("None"), "no debug formatting: {text}");
    let out =
        Command::new(rcp).args(["federate", reg.to_str().unwrap(), "wing lift", "-k", "3", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["fused"]["hits"][0]["id"], "b", "b is ranked by both engines");
    // The fixture has no index: the write is refused before any I/O, naming the capability.
    let docs = dir.join("docs.jsonl");
    std::fs::write(&docs, "{\"_id\":\"z\",\"text\":\"zz\"}\n").unwrap();
    let out = Command::new(rcp).args(["index", "add", "--stdio", &stdio, docs.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs capability 'index'"), "{out:?}");
    let out = Command::new(rcp).args(["index", "delete", "--registry", reg.to_str().unwrap(), "a"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("no live engine found for an engine advertising 'index'"));
    let out = Command::new(rcp).args(["retrieve", "--stdio", "/nonexistent/x", "q"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("spawn"));
}

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

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "rcp failed: {}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// A scratch directory unique to this test process and `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rcp-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Starts `rcp-bm25 serve --http 127.0.0.1:0 ARGS` and returns it with its base URL (read from
/// its log line `serving RCP over HTTP addr=...`).
fn bm25_http(args: &[&str], env: &[(&str, &str)]) -> (HttpServer, String) {
    let mut cmd = Command::new(rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25"));
    cmd.arg("serve").args(args).args(["--http", "127.0.0.1:0"]).envs(env.iter().copied());
    let server = HttpServer::spawn(cmd);
    let url = server.url.clone();
    (server, url)
}

#[test]
fn url_mistakes_get_actionable_hints() {
    let o = rcp(&["info", "--http", "127.0.0.1:8080/rcp"], &[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no scheme: add http:// (e.g. http://127.0.0.1:8080/rcp)"), "{}", stderr(&o));

    // A port nothing listens on: bind, note it, close.
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let o = rcp(&["info", "--http", &format!("http://127.0.0.1:{port}/rcp")], &[]);
    assert!(
        stderr(&o).contains(&format!("connection refused: is the server running at 127.0.0.1:{port}?")),
        "{}",
        stderr(&o)
    );

    // A web server that is not RCP at this path: every request gets an empty 404.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    let o = rcp(&["info", "--http", &format!("http://127.0.0.1:{port}")], &[]);
    let e = stderr(&o);
    assert!(e.contains("HTTP 404 Not Found") && e.contains(&format!("try http://127.0.0.1:{port}/rcp")), "{e}");
}

#[test]
fn index_add_then_retrieve_with_filters_and_a_token_over_http() {
    let dir = scratch("index");
    let data = dir.join("idx");
    let data = data.to_str().expect("utf-8 path");
    let (_engine, url) = bm25_http(
        &[
            "--data-dir",
            data,
            "--create",
            "--field",
            "year:int",
            "--field",
            "lang:keyword",
            "--tokens-env",
            "RCP_CLI_T",
        ],
        &[("RCP_CLI_T", "s3cret")],
    );
    let corpus = dir.join("docs.jsonl");
    std::fs::write(
        &corpus,
        concat!(
            "{\"_id\": \"w1\", \"title\": \"Swept wings\", \"text\": \"transonic flutter of swept wings\", \"year\": 1958, \"lang\": \"en\"}\n",
            "{\"id\": \"w2\", \"text\": \"flutter margins of delta wings\", \"meta\": {\"year\": 2004, \"lang\": \"en\"}}\n",
            "{\"_id\": \"w3\", \"title\": \"Ailes\", \"text\": \"flutter des ailes\", \"year\": 2010, \"lang\": \"fr\"}\n",
            "{\"_id\": \"bad\"}\n",
        ),
    )
    .expect("corpus");
    let token = [("RCP_CLI_TOKEN", "s3cret")];

    // Without the token the server refuses.
    let o = rcp(&["index", "add", "--http", &url, corpus.to_str().unwrap_or("")], &[]);
    assert!(!o.status.success(), "{}", stdout(&o));

    // With it: three documents added, the line without text reported and counted.
    let o =
        rcp(&["index", "add", "--http", &url, "--token-env", "RCP_CLI_TOKEN", corpus.to_str().unwrap_or("")], &token);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.starts_with("added 3, failed 1, in "), "{out}\n{err}");
    assert!(err.contains("docs.jsonl:4: skipped: missing 'text'"), "{err}");

    let q = |extra: &[&str]| {
        let mut args = vec!["retrieve", "--http", &url, "--token-env", "RCP_CLI_TOKEN", "flutter wings", "--json"];
        args.extend_from_slice(extra);
        let v = json(&rcp(&args, &token));
        v["hits"].as_array().map(|h| h.iter().map(|h| h["id"].as_str().unwrap_or("").to_owned()).collect::<Vec<_>>())
    };
    let mut all = q(&[]).unwrap_or_default();
    all.sort();
    assert_eq!(all, ["w1", "w2", "w3"]);
    assert_eq!(q(&["--filter", "year>=2000", "--filter", "lang=en"]), Some(vec!["w2".to_owned()]));
    assert_eq!(q(&["--filter", r#"{"field":"lang","op":"eq","value":"fr"}"#]), Some(vec!["w3".to_owned()]));
    assert_eq!(q(&["--filter", "year<1960"]), Some(vec!["w1".to_owned()]));

    // The title column shows the document's title.
    let o = rcp(&["retrieve", "--http", &url, "-H", "Authorization: Bearer s3cret", "swept", "-k", "1"], &[]);
    assert!(stdout(&o).contains("Swept wings"), "{}{}", stdout(&o), stderr(&o));

    let o = rcp(&["index", "delete", "--http", &url, "--token-env", "RCP_CLI_TOKEN", "w1", "w3"], &token);
    assert_eq!(stdout(&o).trim(), "deleted 2", "{}", stderr(&o));
    assert_eq!(q(&[]), Some(vec!["w2".to_owned()]));

    // A registry entry authenticates with its own tokenEnv.
    let reg = dir.join("rcp.json");
    let entry = serde_json::json!({"engines": [{"id": "bm25", "url": url, "tokenEnv": "RCP_CLI_TOKEN"}]});
    std::fs::write(&reg, entry.to_string()).expect("registry");
    let v = json(&rcp(&["federate", reg.to_str().unwrap_or(""), "delta flutter", "--json"], &token));
    assert_eq!(v["fused"]["hits"][0]["id"], "w2");
    let v = json(&rcp(&["retrieve", "--registry", reg.to_str().unwrap_or(""), "delta", "--json"], &token));
    assert_eq!(v["hits"][0]["id"], "w2");

    // A second engine on the same data directory dies at start; the error says why.
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let o = rcp(&["retrieve", "--stdio", &format!("{} serve --data-dir {data}", bm25.display()), "x"], &[]);
    let e = stderr(&o);
    assert!(e.contains("its stderr ended with") && e.contains("open for writing by another process"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Copies the directory tree `from` to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

#[test]
fn eval_reports_engines_and_fusions_on_a_cranfield_subset() {
    let Some(data) = rcp_testkit::cranfield() else { return };
    let dir = scratch("eval");
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let built = Command::new(&bm25)
        .args(["index", "--data-dir", a.to_str().unwrap_or(""), data.join("corpus.jsonl").to_str().unwrap_or("")])
        .output()
        .expect("rcp-bm25 index");
    assert!(built.status.success(), "{}", stderr(&built));
    // A second, identical engine: a copy of the index directory.
    copy_dir(&a, &b);
    let reg = dir.join("rcp.json");
    let engine =
        |d: &Path| serde_json::json!([bm25.to_str().unwrap_or(""), "serve", "--data-dir", d.to_str().unwrap_or("")]);
    let registry =
        serde_json::json!({"engines": [{"id": "bm25", "command": engine(&a)}, {"id": "copy", "command": engine(&b)}]});
    std::fs::write(&reg, registry.to_string()).expect("registry");

    let v = json(&rcp(
        &["eval", data.to_str().unwrap_or(""), "--registry", reg.to_str().unwrap_or(""), "--limit", "20", "--json"],
        &[],
    ));
    assert_eq!(v["queries"], 20);
    let in_unit = |s: &Value, what: &str| {
        for m in ["ndcg@10", "recall@50", "recall@100", "mrr@10"] {
            let x = s[m].as_f64().unwrap_or(-1.0);
            assert!(x > 0.0 && x <= 1.0, "{what} {m} = {x}: {v}");
        }
        assert_eq!(s["queries"], 20, "{what}");
    };
    in_unit(&v["engines"]["bm25"], "bm25");
    in_unit(&v["engines"]["copy"], "copy");
    in_unit(&v["fused"]["rrf"], "rrf");
    in_unit(&v["fused"]["convex"], "convex");
    assert_eq!(v["fused"]["convex"]["used"], "convex", "both engines advertise scoreFloor");
    assert_eq!(v["engines"]["bm25"], v["engines"]["copy"], "identical engines score identically");

    let o = rcp(
        &[
            "eval",
            data.to_str().unwrap_or(""),
            "--stdio",
            &format!("{} serve --data-dir {}", bm25.display(), a.display()),
            "--limit",
            "5",
        ],
        &[],
    );
    let out = stdout(&o);
    assert!(out.contains("(5 queries)") && out.contains("nDCG@10") && out.contains("rcp-bm25"), "{out}{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completions_and_logging_follow_the_environment() {
    let o = rcp(&["completions", "bash"], &[]);
    assert!(o.status.success() && stdout(&o).contains("_rcpctl()"), "{}", stderr(&o));
    let o = rcp(&["completions", "zsh"], &[]);
    assert!(stdout(&o).contains("#compdef rcpctl"));
    // RUST_LOG is honoured, and a pipe gets no colour codes.
    // The fixture's stderr line is forwarded to tracing at info level (target rcp_client::engine).
    let stdio = format!("{} --name logged --no-such-flag", fixture());
    let o = rcp(&["info", "--stdio", &stdio], &[]);
    assert!(!stderr(&o).contains("ignoring unknown flag"), "warn is the default level: {}", stderr(&o));
    let o = rcp(&["info", "--stdio", &stdio], &[("RUST_LOG", "info")]);
    let e = stderr(&o);
    assert!(e.contains("INFO") && e.contains("ignoring unknown flag --no-such-flag"), "{e}");
    assert!(!e.contains('\u{1b}'), "ANSI escape in piped logs: {e:?}");
}
