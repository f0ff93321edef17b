//! End-to-end tests of the inspector page in a real headless browser: Debian's `chromium`,
//! driven through `chromedriver` over WebDriver (fantoccini). Each test starts `rcp-inspect` on
//! the bundled engines (built-in corpus), clicks through the panels like a person would, and
//! saves a screenshot of each panel under `<target>/inspector-screenshots/`.
//! `RCP_INSPECTOR_DOCS=1` also copies the Query and Compare screenshots to `docs/`.
//!
//! The tests skip, saying so, only when `chromium` or `chromedriver` is not installed;
//! `.ci/run` installs both and sets `RCP_BROWSER_REQUIRED`, which turns a skip into a failure.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Kills a child process when dropped.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Ends a process and every process of its group (it was started as a group leader).
struct GroupReaper(Child);

impl Drop for GroupReaper {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The browser binaries, or `None` (and a message) when they are not installed.
fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let chromium = std::env::var_os("RCP_CHROMIUM").map_or_else(|| PathBuf::from(CHROMIUM), PathBuf::from);
    let driver = std::env::var_os("RCP_CHROMEDRIVER").map_or_else(|| PathBuf::from(CHROMEDRIVER), PathBuf::from);
    if chromium.is_file() && driver.is_file() {
        return Some((chromium, driver));
    }
    let why = format!(
        "browser tests need {} and {} (apt-get install chromium chromium-driver; .ci/run does)",
        chromium.display(),
        driver.display()
    );
    assert!(std::env::var_os("RCP_BROWSER_REQUIRED").is_none(), "RCP_BROWSER_REQUIRED is set, but the {why}");
    eprintln!("SKIPPED: {why}");
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// `<target>/<profile>`, where the test executable's own directory (`deps/`) lives.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe path");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf()
}

fn screenshot_dir() -> PathBuf {
    let dir = profile_dir().parent().expect("target dir").join("inspector-screenshots");
    std::fs::create_dir_all(&dir).expect("create the screenshot directory");
    dir
}

/// A headless chromium behind a chromedriver of its own, with a fresh profile.
struct Browser {
    client: Client,
    _driver: GroupReaper,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start(chromium: &Path, driver: &Path) -> Self {
        let port = free_port();
        // chromedriver and the chromium it starts share a process group of their own, so a
        // failing test (which never closes its session) still ends the browser.
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start chromedriver");
        let driver_proc = GroupReaper(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen on port {port} within 20 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let args = vec![
            "--headless".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-crash-reporter".into(),
            "--disable-breakpad".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,800".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), json!({"binary": chromium, "args": args}));
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("open a chromium session through chromedriver");
        let browser = Self { client, _driver: driver_proc, _profile: profile };
        browser.viewport(1280, 800).await;
        browser
    }

    /// Resizes the window so that the page itself gets `width` × `height` pixels.
    async fn viewport(&self, width: u32, height: u32) {
        self.client.set_window_size(width, height).await.expect("window size");
        let chrome =
            self.js("return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight];").await;
        let extra = |i: usize| chrome[i].as_u64().unwrap_or(0) as u32;
        self.client.set_window_size(width + extra(0), height + extra(1)).await.expect("window size");
    }

    async fn js(&self, script: &str) -> Value {
        self.client.execute(script, Vec::new()).await.unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Polls `expr` (a JavaScript expression) until it is truthy; panics with `what` and the
    /// page's visible error boxes otherwise.
    async fn wait_until(&self, what: &str, expr: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let script = format!("return !!({expr});");
        loop {
            if self.js(&script).await == Value::Bool(true) {
                return;
            }
            if Instant::now() > deadline {
                let errors = self
                    .js("return [...document.querySelectorAll('.error:not([hidden])')].map(e => e.innerText).join(' | ');")
                    .await;
                let status = self.js("return document.getElementById('conn').innerText;").await;
                panic!(
                    "timed out after {timeout:?} waiting for {what} ({expr}); status: {status}; errors shown: {errors}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Panics if the page threw an uncaught error or rejection since it loaded.
    async fn assert_no_page_errors(&self) {
        let errors = self.js("return window.inspectorErrors || [];").await;
        assert_eq!(errors, json!([]), "the page threw");
    }

    /// Leaves the current page (after checking it threw nothing) for `url`.
    async fn goto(&self, url: &str) {
        self.assert_no_page_errors().await;
        self.client.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    async fn strings(&self, expr: &str) -> Vec<String> {
        let v = self.js(&format!("return {expr};")).await;
        v.as_array().map(|a| a.iter().map(|x| x.as_str().unwrap_or_default().to_owned()).collect()).unwrap_or_default()
    }

    async fn click(&self, id: &str) {
        self.client.find(Locator::Id(id)).await.unwrap_or_else(|e| panic!("#{id}: {e}")).click().await.expect("click");
    }

    async fn type_into(&self, id: &str, text: &str) {
        let input = self.client.find(Locator::Id(id)).await.unwrap_or_else(|e| panic!("#{id}: {e}"));
        input.clear().await.expect("clear");
        input.send_keys(text).await.expect("type");
    }

    async fn screenshot(&self, name: &str) -> PathBuf {
        // Let layout and the SVG links settle.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let png = self.client.screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
        let path = screenshot_dir().join(format!("{name}.png"));
        std::fs::write(&path, &png).expect("write the screenshot");
        if std::env::var_os("RCP_INSPECTOR_DOCS").is_some() && ["query", "compare"].contains(&name) {
            let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(format!("inspector-{name}.png"));
            std::fs::write(&docs, &png).expect("write the docs screenshot");
        }
        path
    }
}

/// `rcp-inspect` with `args`, and the URL it printed.
fn start_inspector(args: &[&str]) -> (Reaper, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rcp-inspect"))
        .args(args)
        .arg("--schema")
        .arg(rcp_testkit::schema_path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rcp-inspect");
    let stderr = child.stderr.take().expect("stderr");
    let reaper = Reaper(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent && let Some(url) = line.strip_prefix("RCP_INSPECT_URL=") {
                let _ = tx.send(url.to_owned());
                sent = true;
            } else {
                eprintln!("[rcp-inspect] {line}");
            }
        }
    });
    let url = rx.recv_timeout(Duration::from_secs(120)).expect("rcp-inspect printed RCP_INSPECT_URL=... within 120 s");
    (reaper, url)
}

fn hit_ids_js() -> &'static str {
    "[...document.querySelectorAll('#hits li.hit')].map(li => li.dataset.doc)"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panels_against_rcp_bm25() {
    let Some((chromium, driver)) = browser_binaries() else { return };
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let command = format!("{} serve", bm25.display());
    let (_inspector, url) = start_inspector(&["--stdio", &command]);
    let b = Browser::start(&chromium, &driver).await;
    let long = Duration::from_secs(30);

    // Server: identity and every capability with its metadata.
    b.goto(&format!("{url}?panel=server")).await;
    b.wait_until(
        "retrieve's scoreScale in the capabilities panel",
        "document.querySelector('#cap-retrieve [data-key=\"scoreScale\"] dd')?.textContent === 'bm25'",
        long,
    )
    .await;
    let caps = b.strings("[...document.querySelectorAll('#caps .cap')].map(c => c.dataset.cap)").await;
    for cap in ["retrieve", "filter", "streaming", "pagination"] {
        assert!(caps.contains(&cap.to_owned()), "capability {cap} missing from the Server panel: {caps:?}");
    }
    b.wait_until("the health line with a ping", "document.querySelector('#health')?.innerText.includes('ping')", long)
        .await;
    let identity = b.js("return document.querySelector('#server-body .kv').innerText;").await;
    assert!(identity.as_str().is_some_and(|t| t.contains("rcp-bm25") && t.contains("L2")), "identity: {identity}");
    assert_eq!(b.js("return document.getElementById('tab-graph').hidden;").await, true, "no graph: no Graph tab");
    b.screenshot("server").await;

    // Keyboard: the tabs are a tablist moved through with the arrow keys.
    b.client.find(Locator::Id("tab-server")).await.expect("tab").send_keys(&Key::Right.to_string()).await.expect("key");
    let active = b.js("return document.activeElement.id;").await;
    assert_eq!(active, "tab-query", "ArrowRight on the Server tab moves to the Query tab");
    assert_eq!(b.js("return document.getElementById('panel-query').hidden;").await, false);

    // Query: hits render, with the query's terms highlighted.
    b.type_into("q", "search engines").await;
    b.click("query-run").await;
    b.wait_until("hits", "document.querySelectorAll('#hits li.hit').length > 0", long).await;
    let unfiltered = b.strings(hit_ids_js()).await;
    let marks = b.js("return document.querySelectorAll('#hits mark').length;").await;
    assert!(marks.as_u64().unwrap_or(0) > 0, "query terms are highlighted in the snippets");
    assert!(
        b.js("return document.getElementById('query-meta').innerText;")
            .await
            .as_str()
            .unwrap_or("")
            .contains("latencyMs")
    );

    // Pagination through nextCursor: two pages of 2.
    b.type_into("k", "2").await;
    b.click("query-run").await;
    b.wait_until(
        "a first page of 2 and a next-page button",
        "document.querySelectorAll('#hits li.hit').length === 2 && !document.getElementById('next-page').hidden",
        long,
    )
    .await;
    b.click("next-page").await;
    b.wait_until("the second page appended", "document.querySelectorAll('#hits li.hit').length === 4", long).await;
    let paged = b.strings(hit_ids_js()).await;
    assert_eq!(paged[..], unfiltered[..4], "two pages of 2 are the first 4 hits of one page of 10");

    // A filter from the builder (fields and operators as advertised) changes the hit set.
    b.type_into("k", "10").await;
    b.click("filter-add").await;
    let row = b.client.find(Locator::Css("#filter-rows .filter-row")).await.expect("a filter row");
    row.find(Locator::Css(".f-field")).await.expect("field").select_by_value("year").await.expect("year");
    row.find(Locator::Css(".f-op")).await.expect("op").select_by_value("gte").await.expect("gte");
    row.find(Locator::Css(".f-value")).await.expect("value").send_keys("2015").await.expect("2015");
    b.click("query-run").await;
    let before = serde_json::to_string(&unfiltered).expect("json");
    b.wait_until(
        "a different, non-empty hit set",
        &format!(
            "(() => {{ const ids = {}; return ids.length > 0 && JSON.stringify(ids) !== '{before}'; }})()",
            hit_ids_js()
        ),
        long,
    )
    .await;
    let years = b.strings("[...document.querySelectorAll('#hits li.hit .meta')].map(m => m.textContent)").await;
    for y in &years {
        let year: i64 =
            y.split("year: ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap_or(0);
        assert!(year >= 2015, "a hit outside the filter year >= 2015: {y}");
    }
    let page_url = b.client.current_url().await.expect("url");
    assert!(page_url.as_str().contains("filter="), "the filter is in the URL: {page_url}");
    b.screenshot("query").await;

    // The view lives in the URL: a query given there runs on load.
    b.goto(&format!("{url}?panel=query&q=search&k=3")).await;
    b.wait_until("3 hits from the URL's query", "document.querySelectorAll('#hits li.hit').length === 3", long).await;
    assert_eq!(b.js("return document.getElementById('q').value;").await, "search");

    // Errors are shown as the spec names them (code, message, data), never a blank panel.
    let bad = "{\"field\":\"nosuch\",\"op\":\"eq\",\"value\":1}";
    b.goto(&format!("{url}?panel=query&q=lexical&k=3&filter={}", percent(bad))).await;
    b.wait_until("an error box", "!document.getElementById('query-error').hidden", long).await;
    let err = b.js("return document.getElementById('query-error').innerText;").await;
    assert!(err.as_str().is_some_and(|t| t.contains("error -32")), "the error names its JSON-RPC code: {err}");

    // Stream: progress frames (with partial hits) arrive before the final list.
    b.goto(&format!("{url}?panel=stream")).await;
    b.wait_until("the page", "document.body.dataset.ready === 'true'", long).await;
    b.type_into("stream-q", "search").await;
    b.click("stream-run").await;
    b.wait_until("the final response", "document.querySelector('#stream-log li[data-kind=\"final\"]')", long).await;
    let kinds = b.strings("[...document.querySelectorAll('#stream-log li')].map(li => li.dataset.kind)").await;
    let first_progress = kinds.iter().position(|k| k == "progress").expect("at least one progress frame");
    let final_at = kinds.iter().position(|k| k == "final").expect("final");
    assert!(first_progress < final_at, "progress frames come before the final list: {kinds:?}");
    assert_eq!(final_at, kinds.len() - 1, "the final response is the last frame: {kinds:?}");
    assert!(b.js("return document.querySelectorAll('#stream-hits li.hit').length;").await.as_u64().unwrap_or(0) > 0);
    b.screenshot("stream").await;

    // Wire: every frame both ways, and a request copied as curl that really replays it.
    b.click("tab-wire").await;
    b.wait_until(
        "a sent retrieve in the wire log",
        "[...document.querySelectorAll('#wire-list li[data-dir=\"sent\"]')].some(li => li.innerText.includes('retrieve'))",
        long,
    )
    .await;
    let dirs = b.strings("[...document.querySelectorAll('#wire-list li')].map(li => li.dataset.dir)").await;
    assert!(dirs.iter().any(|d| d == "received"), "received frames are logged too");
    b.js("[...document.querySelectorAll('#wire-list li[data-dir=\"sent\"]')].find(li => li.innerText.includes('retrieve')).querySelector('.copy-curl').click(); return null;").await;
    b.wait_until("the curl command", "document.getElementById('curl-out').value.startsWith('curl ')", long).await;
    let curl = b.js("return document.getElementById('curl-out').value;").await;
    let curl = curl.as_str().expect("curl text").to_owned();
    assert!(curl.contains("/rpc/rcp-bm25/retrieve"), "curl targets the proxy of the stdio engine: {curl}");
    if Path::new("/usr/bin/curl").is_file() {
        let out = Command::new("sh").arg("-c").arg(&curl).output().expect("run the copied curl");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("\"hits\""), "the copied curl replays the request: {text}");
    }
    b.screenshot("wire").await;

    // Conformance: the suite's report, by level.
    b.click("tab-conformance").await;
    b.click("conf-run").await;
    b.wait_until("the conformance report", "document.getElementById('conf-level')", Duration::from_secs(90)).await;
    assert_eq!(b.js("return document.getElementById('conf-level').textContent;").await, "L2");
    let levels = b.strings("[...document.querySelectorAll('#conf-body table')].map(t => t.dataset.level)").await;
    assert_eq!(levels, ["L0", "L1", "L2"]);
    // Each level's summary counts its own table's rows, for every status the suite reports
    // (INFO and SEE included), and every row is counted under some status.
    let summaries = b
        .strings(
            "[...document.querySelectorAll('#conf-body details')].map(d => { \
               const rows = [...d.querySelectorAll('tbody tr')]; \
               const n = (s) => rows.filter(r => r.dataset.status.toUpperCase() === s).length; \
               return [d.querySelector('summary').innerText, rows.length, \
                 ...['PASS', 'FAIL', 'SKIP', 'WARN', 'INFO', 'SEE'].map(n)].join(' | '); })",
        )
        .await;
    for s in &summaries {
        let parts: Vec<&str> = s.split(" | ").collect();
        let (text, total) = (parts[0], parts[1].parse::<usize>().expect("row count"));
        let counts: Vec<usize> = parts[2..].iter().map(|n| n.parse().expect("count")).collect();
        assert_eq!(counts.iter().sum::<usize>(), total, "a row with a status the page does not count: {text:?}");
        assert!(counts[0] > 0, "level summary {text:?} has no passing row");
        for (label, rows) in ["passed", "failed", "skipped", "warnings", "info", "see"].iter().zip(&counts) {
            let always = ["passed", "failed", "skipped", "warnings"].contains(label);
            if always || *rows > 0 {
                assert!(text.contains(&format!("{rows} {label}")), "level summary {text:?} vs {rows} {label} rows");
            }
        }
    }
    // INFO and SEE rows wear their own badges, not SKIP's.
    let badges = b
        .strings(
            "[...document.querySelectorAll('#conf-body tbody tr')].filter(r => ['INFO', 'SEE'].includes(r.dataset.status)) \
             .map(r => r.dataset.status + ' ' + r.querySelector('.badge').className)",
        )
        .await;
    for badge in &badges {
        let (status, class) = badge.split_once(' ').expect("status class");
        assert_eq!(class, format!("badge {}", status.to_lowercase()), "{badge}");
    }
    b.screenshot("conformance").await;
    // A report with INFO and SEE rows (bm25 earns none): each has its badge, a SEE row names
    // the check it points to, and the summaries count both.
    let summary = b
        .js("const row = (id, status, see) => ({ id, level: 'L1', status, see, name: id, section: '§1', detail: 'd' }); \
             document.getElementById('conf-body').replaceChildren(); \
             renderConformance({ certifiedLevel: 'L1', declaredLevel: 'L1', transport: 'stdio', \
               counts: { passed: 1, failed: 0, skipped: 0, warnings: 0, infos: 2, see: 1 }, \
               checks: [row('a', 'PASS', null), row('b', 'INFO', null), row('c', 'INFO', null), row('d', 'SEE', 'a')] }); \
             return document.querySelector('#conf-body .conf-summary').innerText + ' | ' + \
               document.querySelector('#conf-body details summary').innerText;")
        .await;
    let summary = summary.as_str().expect("summary text").to_owned();
    assert!(summary.contains("2 info") && summary.contains("1 see"), "{summary}");
    assert!(summary.matches("2 info").count() == 2, "the report's and the level's counts: {summary}");
    let badges = b.strings("[...document.querySelectorAll('#conf-body tbody .badge')].map(x => x.className)").await;
    assert_eq!(badges, ["badge ok", "badge info", "badge info", "badge see"]);
    let see =
        b.js("return document.querySelector('#conf-body tr[data-status=\"SEE\"] .see-ref code').textContent;").await;
    assert_eq!(see, "a");

    // A narrow window: the layout reflows instead of scrolling sideways.
    b.viewport(500, 860).await;
    b.goto(&format!("{url}?panel=query&q=search&k=3")).await;
    b.wait_until("hits", "document.querySelectorAll('#hits li.hit').length === 3", long).await;
    let width = b.js("return window.innerWidth;").await.as_i64().unwrap_or(0);
    assert!(width <= 520, "a narrow window (chromium's minimum is about 500 px), got {width}");
    let overflow = b.js("return document.documentElement.scrollWidth - window.innerWidth;").await;
    assert!(overflow.as_i64().unwrap_or(1) <= 0, "no horizontal scrolling at {width} px (overflow {overflow})");
    b.screenshot("query-narrow").await;

    b.assert_no_page_errors().await;
    b.client.close().await.expect("close the browser");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_panel_fuses_bm25_and_dense() {
    let Some((chromium, driver)) = browser_binaries() else { return };
    let bm25 = rcp_testkit::workspace_bin("rcp-bm25", "rcp-bm25");
    let dense = rcp_testkit::workspace_bin("rcp-dense", "rcp-dense");
    // examples/rcp.json, pointed at the binaries of this build.
    let registry = json!({"engines": [
        {"id": "bm25", "transport": "stdio", "command": [bm25, "serve"], "priority": 1},
        {"id": "dense", "transport": "stdio", "command": [dense, "serve", "--fetch-model"], "priority": 2},
    ]});
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rcp.json");
    std::fs::write(&path, registry.to_string()).expect("write the registry");
    let (_inspector, url) = start_inspector(&["--registry", path.to_str().expect("utf-8 path")]);
    let b = Browser::start(&chromium, &driver).await;
    let q = percent("lexical versus semantic search");
    b.goto(&format!("{url}?panel=compare&q={q}&k=5&fusion=rrf")).await;
    let long = Duration::from_secs(60);
    b.wait_until("the fused column", "document.querySelectorAll('#compare-col-fused li').length === 5", long).await;
    for col in ["bm25", "dense"] {
        // Each engine is asked for k × 2 hits (the federation's headroom for fusion).
        let n = b.js(&format!("return document.querySelectorAll('#compare-col-{col} li').length;")).await;
        let n = n.as_u64().unwrap_or(0);
        assert!((5..=10).contains(&n), "the {col} column lists its own ranking (5 to 10 hits), got {n}");
    }
    let order = b.strings("[...document.querySelectorAll('#compare-cols .compare-col')].map(c => c.dataset.col)").await;
    assert_eq!(order, ["bm25", "__fused", "dense"], "the fused list sits between the engines");
    b.wait_until(
        "lines linking the same document",
        "document.querySelectorAll('#compare-links line').length > 0",
        long,
    )
    .await;
    // Every line ends on a fused hit with the same id.
    let linked = b.strings("[...document.querySelectorAll('#compare-links line')].map(l => l.dataset.doc)").await;
    let fused = b.strings("[...document.querySelectorAll('#compare-col-fused li')].map(li => li.dataset.doc)").await;
    assert!(linked.iter().all(|d| fused.contains(d)), "lines {linked:?} link into the fused list {fused:?}");
    let charts = b.strings("[...document.querySelectorAll('#compare-charts figure')].map(f => f.dataset.chart)").await;
    assert_eq!(charts, ["bm25", "dense", "fused (rrf)"], "one score-vs-rank chart per engine and the fused list");
    let points = b.js("return document.querySelectorAll('#compare-charts circle').length;").await;
    assert!(points.as_u64().unwrap_or(0) >= 15, "a point per hit in each chart, got {points}");
    // Tall enough for the columns and the charts in one picture.
    b.viewport(1280, 960).await;
    b.screenshot("compare").await;

    // The federation's frames went through the inspector and are in the wire log.
    b.click("tab-wire").await;
    b.wait_until(
        "frames of the Compare panel's federation",
        "[...document.querySelectorAll('#wire-list li')].some(li => li.innerText.includes('via compare'))",
        long,
    )
    .await;

    // The dense engine from the picker: its Query panel offers MMR (it advertises `mmr`), and its
    // filter (no `operators`: all of §8) offers only unordered operators on a keyword field.
    b.client.find(Locator::Id("engine")).await.expect("picker").select_by_value("dense").await.expect("dense");
    b.wait_until(
        "the dense engine's identity",
        "document.getElementById('conn').innerText.includes('rcp-dense')",
        long,
    )
    .await;
    b.click("tab-query").await;
    assert_eq!(b.js("return document.getElementById('mmr-label').hidden;").await, false, "MMR is offered");
    b.type_into("q", "semantic search").await;
    b.type_into("k", "5").await;
    b.type_into("mmr", "0.5").await;
    b.click("filter-add").await;
    let ops = b.strings("[...document.querySelectorAll('#filter-rows .f-op option')].map(o => o.value)").await;
    assert!(ops.contains(&"eq".to_owned()) && !ops.contains(&"gt".to_owned()), "keyword field operators: {ops:?}");
    let row = b.client.find(Locator::Css("#filter-rows .filter-row")).await.expect("a filter row");
    row.find(Locator::Css(".f-field")).await.expect("field").select_by_value("topic").await.expect("topic");
    row.find(Locator::Css(".f-value")).await.expect("value").send_keys("retrieval").await.expect("value");
    b.click("query-run").await;
    b.wait_until("dense hits", "document.querySelectorAll('#hits li.hit').length > 0", long).await;
    let topics = b.strings("[...document.querySelectorAll('#hits li.hit .meta')].map(m => m.textContent)").await;
    assert!(topics.iter().all(|t| t.contains("topic: retrieval")), "the filter applied: {topics:?}");
    let confidence = b.js("return document.querySelectorAll('#hits .score small').length;").await;
    assert!(confidence.as_u64().unwrap_or(0) > 0, "the dense engine's confidence is shown");
    b.assert_no_page_errors().await;
    b.client.close().await.expect("close the browser");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_cancel_button_stops_a_slow_request() {
    let Some((chromium, driver)) = browser_binaries() else { return };
    let tiny = tiny_engine();
    let (_inspector, url) = start_inspector(&["--stdio", tiny.to_str().expect("utf-8 path")]);
    let b = Browser::start(&chromium, &driver).await;
    let long = Duration::from_secs(30);
    b.goto(&format!("{url}?panel=stream")).await;
    b.wait_until("the page", "document.body.dataset.ready === 'true'", long).await;
    b.type_into("stream-q", "rust").await;
    // tiny_engine's slow-backend switch: 20 s unless cancelled.
    b.type_into("stream-extra", r#"{"_meta": {"x-tiny-delayMs": 20000}}"#).await;
    let started = Instant::now();
    b.click("stream-run").await;
    b.wait_until("the request in flight", "!document.getElementById('stream-cancel').disabled", long).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.click("stream-cancel").await;
    b.wait_until("the cancelled answer", "document.querySelector('#stream-log li[data-kind=\"error\"]')", long).await;
    assert!(started.elapsed() < Duration::from_secs(15), "cancelled before the engine's 20 s delay");
    let log = b
        .strings("[...document.querySelectorAll('#stream-log li')].map(li => li.dataset.kind + ': ' + li.innerText)")
        .await;
    let cancel_at = log.iter().position(|l| l.starts_with("cancel:")).expect("the cancel is logged");
    let error_at = log.iter().position(|l| l.starts_with("error:")).expect("the error is logged");
    assert!(cancel_at < error_at, "cancel sent, then the engine's answer: {log:?}");
    assert!(log[error_at].contains("-32006"), "the engine answered 'request cancelled' (-32006): {log:?}");
    let shown = b.js("return document.getElementById('stream-error').innerText;").await;
    assert!(shown.as_str().is_some_and(|t| t.contains("error -32006")), "the error box names the code: {shown}");
    b.assert_no_page_errors().await;
    b.client.close().await.expect("close the browser");
}

/// The engine the Graph panel test runs against, as an `--stdio` command, and a node id of its
/// graph to start from. It is the `graph_engine` example (a fixed twelve-document graph); to run
/// the same test against another engine serving `graph` (e.g. `rcp-dense serve`), return its
/// command and one of its document ids here.
fn graph_server() -> (String, &'static str) {
    let bin = rcp_testkit::example_bin("graph_engine");
    (bin.display().to_string(), "bm25")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_panel_draws_neighbors_and_lists_communities() {
    let Some((chromium, driver)) = browser_binaries() else { return };
    let (command, seed) = graph_server();
    let (_inspector, url) = start_inspector(&["--stdio", &command]);
    let b = Browser::start(&chromium, &driver).await;
    let long = Duration::from_secs(30);
    b.goto(&format!("{url}?panel=graph")).await;
    b.wait_until("the page", "document.body.dataset.ready === 'true'", long).await;
    assert_eq!(b.js("return document.getElementById('tab-graph').hidden;").await, false, "graph is advertised");
    let ops = b.strings("[...document.querySelectorAll('#graph-op option')].map(o => o.value)").await;
    assert!(ops.contains(&"neighbors".to_owned()) && ops.contains(&"communities".to_owned()), "ops: {ops:?}");

    // neighbors of the seed: drawn as nodes and weighted edges between them.
    b.client.find(Locator::Id("graph-op")).await.expect("op").select_by_value("neighbors").await.expect("neighbors");
    b.type_into("graph-seed", seed).await;
    b.type_into("graph-hops", "1").await;
    b.click("graph-run").await;
    b.wait_until("the drawn neighbors", "document.querySelectorAll('#graph-svg g.node').length > 1", long).await;
    let nodes = b.strings("[...document.querySelectorAll('#graph-svg g.node')].map(g => g.dataset.id)").await;
    let seeds = b.strings("[...document.querySelectorAll('#graph-svg g.node.seed')].map(g => g.dataset.id)").await;
    assert_eq!(seeds, [seed], "the seed is marked");
    let edges = b
        .strings("[...document.querySelectorAll('#graph-svg line.edge')].map(l => l.dataset.src + ' ' + l.dataset.dst + ' ' + l.getAttribute('stroke-width'))")
        .await;
    assert!(!edges.is_empty(), "edges are drawn");
    for e in &edges {
        let parts: Vec<&str> = e.split(' ').collect();
        assert!(
            nodes.contains(&parts[0].to_owned()) && nodes.contains(&parts[1].to_owned()),
            "edge {e} joins drawn nodes"
        );
        assert!(parts[2].parse::<f64>().is_ok_and(|w| w >= 1.0), "edge {e} has a width from its weight");
    }
    let shown = b.js("return document.getElementById('graph-svg').getBoundingClientRect().height;").await;
    assert!(shown.as_f64().unwrap_or(0.0) > 100.0, "the drawing is shown, got a height of {shown}");
    b.screenshot("graph").await;

    // Clicking another node runs neighbors on it.
    let other = nodes.iter().find(|n| n.as_str() != seed).expect("a neighbour").clone();
    let node =
        b.client.find(Locator::Css(&format!("#graph-svg g.node[data-id='{other}'] circle"))).await.expect("node");
    node.click().await.expect("click the node");
    b.wait_until(
        "neighbors of the clicked node",
        &format!("document.querySelector('#graph-svg g.node.seed')?.dataset.id === '{other}'"),
        long,
    )
    .await;
    assert_eq!(b.js("return document.getElementById('graph-seed').value;").await, json!(other));

    // communities: a list with level and summary.
    b.client.find(Locator::Id("graph-op")).await.expect("op").select_by_value("communities").await.expect("op");
    b.type_into("graph-seed", "").await;
    b.click("graph-run").await;
    b.wait_until("communities", "document.querySelectorAll('#graph-communities li.community').length > 0", long).await;
    assert_eq!(
        b.js("return document.getElementById('graph-svg').hasAttribute('hidden');").await,
        true,
        "nothing drawn for communities"
    );
    let rows = b
        .strings("[...document.querySelectorAll('#graph-communities li.community')].map(li => li.dataset.level + '|' + li.querySelector('.snippet').textContent)")
        .await;
    for r in &rows {
        let (level, summary) = r.split_once('|').expect("level|summary");
        assert!(level.parse::<u32>().is_ok(), "a community without a level: {r}");
        assert!(!summary.is_empty() && summary != "(no summary)", "a community without a summary: {r}");
    }
    b.screenshot("graph-communities").await;

    // A link reproduces the view.
    b.goto(&format!("{url}?panel=graph&op=neighbors&seed={seed}&hops=2")).await;
    b.wait_until("the linked neighbors view", "document.querySelectorAll('#graph-svg g.node').length > 1", long).await;
    b.assert_no_page_errors().await;
    b.client.close().await.expect("close the browser");
}

/// `examples/tiny_engine` (package rcp-examples), built when missing.
fn tiny_engine() -> PathBuf {
    let bin = profile_dir().join("examples").join(format!("tiny_engine{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "rcp-examples", "--example", "tiny_engine", "--target-dir"])
            .arg(profile_dir().parent().expect("target dir"))
            .status()
            .expect("cargo build");
        assert!(status.success() && bin.is_file(), "building tiny_engine failed");
    }
    bin
}

/// Percent-encodes a query-string value.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
