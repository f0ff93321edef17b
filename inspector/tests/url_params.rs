//! The page's URL parameters in a real headless browser (Debian's `chromium` through
//! `chromedriver`): a bad `filter=` is shown next to the filter box instead of being dropped
//! (the query is then not run unfiltered), and `q=` without `panel=` opens the Query panel.
//! Skips, saying so, without the browser binaries unless `RCP_BROWSER_REQUIRED` is set.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use serde_json::{Value, json};

/// Kills a child process (and, for a group leader, its group) when dropped.
struct Reaper(Child, bool);

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.1 {
            let group = format!("-{}", self.0.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let chromium = std::env::var_os("RCP_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    let driver =
        std::env::var_os("RCP_CHROMEDRIVER").map_or_else(|| PathBuf::from("/usr/bin/chromedriver"), PathBuf::from);
    if chromium.is_file() && driver.is_file() {
        return Some((chromium, driver));
    }
    let why = format!("browser tests need {} and {}", chromium.display(), driver.display());
    assert!(std::env::var_os("RCP_BROWSER_REQUIRED").is_none(), "RCP_BROWSER_REQUIRED is set, but the {why}");
    eprintln!("SKIPPED: {why}");
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A headless chromium session, its chromedriver and profile ended on drop.
async fn browser(chromium: &Path, driver: &Path) -> (Client, Reaper, tempfile::TempDir) {
    let port = free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start chromedriver");
    let reaper = Reaper(child, true);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen on port {port} within 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let profile = tempfile::tempdir().expect("profile dir");
    let args = [
        "--headless".to_owned(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-dev-shm-usage".into(),
        format!("--user-data-dir={}", profile.path().display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), json!({"binary": chromium, "args": args}));
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("open a chromium session through chromedriver");
    (client, reaper, profile)
}

/// `rcp-inspect` with `args`, and the URL it printed.
fn start_inspector(args: &[&str]) -> (Reaper, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rcp-inspect"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rcp-inspect");
    let stderr = child.stderr.take().expect("stderr");
    let reaper = Reaper(child, false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent && let Some(url) = line.strip_prefix("RCP_INSPECT_URL=") {
                let _ = tx.send(url.to_owned());
                sent = true;
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(120)).expect("rcp-inspect printed RCP_INSPECT_URL=... within 120 s");
    (reaper, url)
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, Vec::new()).await.unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
}

/// Polls `expr` until it is truthy, or panics naming `what`.
async fn wait_until(c: &Client, what: &str, expr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let script = format!("return !!({expr});");
    while js(c, &script).await != Value::Bool(true) {
        assert!(Instant::now() < deadline, "timed out waiting for {what} ({expr})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const FILTER_ERROR: &str =
    "(() => { const b = document.getElementById('filter-error'); return b.hidden ? '' : b.innerText; })()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_url_filters_are_shown_and_a_query_opens_its_panel() {
    let Some((chromium, driver)) = browser_binaries() else { return };
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let command = format!("{} serve", bm25.display());
    let (_inspector, url) = start_inspector(&["--stdio", &command]);
    let (c, _driver, _profile) = browser(&chromium, &driver).await;
    let ready = "document.body.dataset.ready === 'true'";

    // The CLI's short form: an error beside the filter box spelling out the JSON to use, and
    // no unfiltered hits.
    c.goto(&format!("{url}?panel=query&q=search&filter=year%3E%3D2015")).await.expect("open");
    wait_until(&c, "the page", ready).await;
    let shown = js(&c, &format!("return {FILTER_ERROR};")).await;
    let shown = shown.as_str().unwrap_or_default();
    assert!(shown.contains(r#"filter={"field":"year","op":"gte","value":2015}"#), "{shown}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let hits = js(&c, "return document.querySelectorAll('#hits li.hit').length;").await;
    assert_eq!(hits, json!(0), "a query with a bad filter is not run unfiltered");

    // Not JSON at all.
    c.goto(&format!("{url}?panel=query&q=search&filter=%7Bbroken")).await.expect("open");
    wait_until(&c, "the page", ready).await;
    let shown = js(&c, &format!("return {FILTER_ERROR};")).await;
    assert!(shown.as_str().unwrap_or_default().contains("not JSON"), "{shown}");

    // q= without panel=: the Query panel opens and runs the query.
    c.goto(&format!("{url}?q=search&k=3")).await.expect("open");
    wait_until(
        &c,
        "the Query panel with hits",
        "!document.getElementById('panel-query').hidden && document.querySelectorAll('#hits li.hit').length > 0",
    )
    .await;
    let hits = js(&c, "return document.querySelectorAll('#hits li.hit').length;").await;
    assert_eq!(hits, json!(3));
    let errors = js(&c, "return window.inspectorErrors || [];").await;
    assert_eq!(errors, json!([]), "the page threw");
    c.close().await.expect("close the session");
}
