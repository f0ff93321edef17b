//! One flag vocabulary across binaries (issue #28, item 9), through the real binaries:
//! `rcp-conformance` takes `--stdio "CMD"` and `--token-env VAR` like every other client, and
//! the servers' former `--tokens-env` and the seconds spellings of timeouts still work.

use std::process::{Command, Output, Stdio};

use rcp_testkit::{HttpServer, schema_path, workspace_bin};

fn bm25() -> String {
    workspace_bin("rcp-bm25", "rcp-bm25").to_string_lossy().into_owned()
}

/// `rcp-bm25 serve --http 127.0.0.1:0 ARGS` with `env`, and its base URL.
fn bm25_http(args: &[&str], env: &[(&str, &str)]) -> (HttpServer, String) {
    let mut cmd = Command::new(bm25());
    cmd.args(["serve", "--http", "127.0.0.1:0"]).args(args).envs(env.iter().copied());
    let server = HttpServer::spawn(cmd);
    let url = server.url.clone();
    (server, url)
}

/// `rcp-conformance --schema S ARGS` with `env`.
fn conformance(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(workspace_bin("rcp-conformance", "rcp-conformance"));
    cmd.arg("--schema").arg(schema_path()).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null()).output().expect("run rcp-conformance")
}

fn certified_l2(out: &Output) -> bool {
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("CERTIFIED LEVEL: L2")
}

#[test]
fn conformance_takes_stdio_and_token_env_like_every_client() {
    let engine = format!("{} serve", bm25());
    let out = conformance(&["--stdio", &engine], &[]);
    assert!(certified_l2(&out), "--stdio \"CMD\": {}", String::from_utf8_lossy(&out.stdout));

    // The server's former spelling (--tokens-env) still works, and the suite authenticates with
    // --token-env: certified with the token, refused without it.
    let (_engine, url) = bm25_http(&["--tokens-env", "RCP_VOCAB_SERVER"], &[("RCP_VOCAB_SERVER", "s3cret")]);
    let out = conformance(&["--http", &url, "--token-env", "RCP_VOCAB_CLIENT"], &[("RCP_VOCAB_CLIENT", "s3cret")]);
    assert!(certified_l2(&out), "--token-env: {}", String::from_utf8_lossy(&out.stdout));
    let out = conformance(&["--http", &url], &[]);
    assert!(!certified_l2(&out), "certified without the token:\n{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn servers_take_ms_timeouts_and_still_the_seconds_spellings() {
    for args in
        [["--header-timeout-ms", "5000", "--body-timeout-ms", "5000"], ["--header-timeout", "5", "--body-timeout", "5"]]
    {
        let (_engine, url) = bm25_http(&args, &[]);
        assert!(url.starts_with("http://127.0.0.1:"), "{args:?} served at {url}");
    }
    let both = Command::new(bm25())
        .args(["serve", "--http", "127.0.0.1:0", "--header-timeout", "5", "--header-timeout-ms", "5000"])
        .stdin(Stdio::null())
        .output()
        .expect("run rcp-bm25");
    assert_eq!(both.status.code(), Some(2), "two spellings of one timeout are a usage error");
}
