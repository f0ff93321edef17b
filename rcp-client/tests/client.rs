//! The client, Selector and Federation against real subprocess servers built on the framework
//! (the `fixture_engine` example: different corpora, one that sleeps, one that fails, one that
//! exits).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rcp_client::federation::EngineOutcome;
use rcp_client::{Client, ClientError, ClientOptions, Federation, FederationOptions, Registry, Selector};
use rcp_wire::capabilities::Capability;
use rcp_wire::embed::EmbedParams;
use rcp_wire::fusion::FusionMethod;
use rcp_wire::{ErrorCode, RetrieveParams};

fn fixture() -> String {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join("fixture_engine");
    assert!(bin.exists(), "{} not built (cargo test builds examples)", bin.display());
    bin.to_string_lossy().into_owned()
}

fn cmd(args: &[&str]) -> Vec<String> {
    std::iter::once(fixture()).chain(args.iter().map(|s| (*s).to_owned())).collect()
}

fn events_file(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("rcp-client-{tag}-{}.events", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn events(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

async fn connect(args: &[&str]) -> Client {
    Client::connect_stdio(&cmd(args), ClientOptions::default()).await.expect("connect")
}

const DOCS: [&str; 6] = ["--doc", "a:wing lift drag", "--doc", "b:wing tip", "--doc", "c:engine thrust"];

#[tokio::test]
async fn calls_are_gated_before_any_io() {
    let c = connect(&DOCS).await;
    let sent = c.frames_sent();
    let err = c.request::<rcp_wire::request::EmbedSparse>(&Default::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::CapabilityMissing { .. }), "{err}");
    assert_eq!(err.code(), Some(ErrorCode::CAPABILITY_MISSING));
    let mut p = RetrieveParams::new("wing", 3);
    p.mode = Some(rcp_wire::Mode::Dense);
    let err = c.retrieve(p.clone()).await.unwrap_err();
    assert!(matches!(err, ClientError::OptionUnsupported { ref option, .. } if option == "mode"), "{err}");
    let mut e = EmbedParams::texts(["x"]);
    e.encoding = Some("f32-base64".into());
    assert!(matches!(c.embed(e).await.unwrap_err(), ClientError::OptionUnsupported { .. }));
    assert!(matches!(c.index_add(Default::default()).await.unwrap_err(), ClientError::CapabilityMissing { .. }));
    assert_eq!(c.frames_sent(), sent, "a refused call must write nothing");
    // strict:false lets the server degrade instead.
    p.strict = Some(false);
    let res = c.retrieve(p).await.expect("degraded call");
    assert!(res.usage.unwrap().notes.iter().any(|n| n.contains("mode 'dense'")));
    assert!(c.supports(Capability::Retrieve) && !c.supports(Capability::Index));
}

#[tokio::test]
async fn many_calls_in_flight_on_one_connection() {
    let c = connect(&["--sleep-ms", "400", "--doc", "a:wing"]).await;
    let started = Instant::now();
    let calls = (0..8).map(|_| c.search("wing", 1));
    let ping = c.ping(Duration::from_secs(2));
    let (results, ping) = tokio::join!(futures::future::join_all(calls), ping);
    assert!(ping.expect("ping") < Duration::from_millis(300), "ping waited behind slow calls");
    assert!(results.iter().all(|r| r.as_ref().is_ok_and(|r| r.hits[0].key() == "a")));
    assert!(started.elapsed() < Duration::from_millis(2500), "calls were serialised: {:?}", started.elapsed());
}

#[tokio::test]
async fn dropping_a_call_sends_cancel_and_a_deadline_cancels_too() {
    let ev = events_file("cancel");
    let c = connect(&["--sleep-ms", "5000", "--doc", "a:wing", "--events", ev.to_str().unwrap()]).await;
    let call = c.search("wing", 1);
    let _ = tokio::time::timeout(Duration::from_millis(200), call).await;
    assert_eq!(c.in_flight(), 0);
    let started = Instant::now();
    while !events(&ev).iter().any(|l| l.contains("cancelled")) {
        assert!(started.elapsed() < Duration::from_secs(3), "server never saw the cancel: {:?}", events(&ev));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = c
        .call_with_timeout("retrieve", serde_json::json!({"query": "wing", "k": 1}), Duration::from_millis(150))
        .await
        .unwrap_err();
    // The deadline travels as `_meta.deadlineMs`: on a loaded machine the server's own timer
    // (-32014) may answer before the client's fires. Either way the call ends at its deadline.
    let ended_at_deadline = matches!(err, ClientError::Timeout(150))
        || matches!(&err, ClientError::Rpc(e) if e.code == rcp_wire::ErrorCode::TIMEOUT);
    assert!(ended_at_deadline, "{err}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(events(&ev).iter().filter(|l| l.contains("cancelled")).count(), 2, "{:?}", events(&ev));
    // The connection is still healthy; a late answer (if any) was discarded.
    assert!(c.ping(Duration::from_secs(2)).await.is_ok());
}

#[tokio::test]
async fn transport_death_fails_every_call_in_flight() {
    let c = connect(&["--sleep-ms", "300", "--exit-after", "0", "--doc", "a:wing"]).await;
    let calls = (0..3).map(|_| c.search("wing", 1));
    let results = futures::future::join_all(calls).await;
    for r in results {
        assert!(matches!(r, Err(ClientError::Closed(_))), "{r:?}");
    }
    assert!(c.closed_reason().is_some());
    assert!(matches!(c.search("wing", 1).await, Err(ClientError::Closed(_))));
}

fn registry(entries: &[serde_json::Value]) -> Registry {
    Registry::parse(&serde_json::json!({"engines": entries}).to_string(), None).expect("registry")
}

fn stdio_entry(id: &str, priority: i64, args: &[&str]) -> serde_json::Value {
    serde_json::json!({"id": id, "transport": "stdio", "command": cmd(args), "priority": priority})
}

#[tokio::test]
async fn selector_connects_lazily_in_priority_order_and_falls_through() {
    let ev = events_file("selector");
    let e = ev.to_str().unwrap();
    let reg = registry(&[
        stdio_entry("low", 1, &["--name", "low", "--events", e, "--doc", "a:x"]),
        serde_json::json!({"id": "dead", "command": ["/nonexistent/engine"], "priority": 9}),
        stdio_entry("high", 5, &["--name", "high", "--events", e, "--doc", "a:x"]),
        stdio_entry("embedder", 0, &["--name", "embedder", "--events", e, "--embed-only"]),
    ]);
    let sel = Selector::new(reg, ClientOptions::default());
    assert!(events(&ev).is_empty(), "nothing connects before a select call");
    let c = sel.select_primary().await.expect("primary");
    assert_eq!(c.label(), "high");
    assert_eq!(events(&ev), ["high start"], "only the winner was spawned (the dead one failed to spawn)");
    let c = sel.select_capable(Capability::Embed).await.expect("capable");
    assert_eq!(c.label(), "high", "high advertises embed too");
    let c = sel.select("embedder").await.expect("by id");
    assert!(!c.supports(Capability::Retrieve));
    let err = sel.select("nope").await.unwrap_err().to_string();
    assert!(err.contains("unknown engine id 'nope'"), "{err}");
    assert_eq!(events(&ev).iter().filter(|l| l.ends_with("start")).count(), 2);
    assert!(sel.connections_opened() >= 3);
}

fn federation(entries: &[serde_json::Value], fusion: FusionMethod, timeout: Duration) -> Federation {
    Federation::new(registry(entries), FederationOptions { fusion, engine_timeout: timeout, ..Default::default() })
}

#[tokio::test]
async fn federation_survives_partial_failure_and_records_it() {
    let fed = federation(
        &[
            stdio_entry("good", 0, &["--name", "good", "--doc", "a:wing lift", "--doc", "b:wing"]),
            stdio_entry("bad", 0, &["--name", "bad", "--fail"]),
            stdio_entry("slow", 0, &["--name", "slow", "--sleep-ms", "5000", "--doc", "s:wing"]),
            stdio_entry("embedder", 0, &["--embed-only"]),
        ],
        FusionMethod::rrf(),
        Duration::from_millis(1500),
    );
    let started = Instant::now();
    let out = fed.retrieve(RetrieveParams::new("wing lift", 5)).await.expect("partial success");
    assert!(started.elapsed() < Duration::from_secs(4), "the slow engine stalled the query");
    let ids: Vec<String> = out.result.hits.iter().map(|h| h.key()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert!(out.result.hits.iter().all(|h| h.meta.as_ref().is_some_and(|m| m["engine"] == "good")));
    let notes = out.result.usage.as_ref().unwrap().notes.join(" | ");
    assert!(
        notes.contains("'bad' failed") && notes.contains("'slow' failed") && notes.contains("'embedder' skipped"),
        "{notes}"
    );
    let degraded = &out.result.meta.as_ref().unwrap()["degraded"];
    assert_eq!(degraded, &serde_json::json!(["bad", "slow", "embedder"]));
    assert!(matches!(out.engines[3].1, EngineOutcome::Skipped(_)));
}

#[tokio::test]
async fn engines_that_failed_to_connect_are_not_retried_on_every_query() {
    let entries = [
        stdio_entry("good", 0, &["--doc", "a:wing"]),
        serde_json::json!({"id": "dead", "command": ["/nonexistent/engine"]}),
    ];
    let options = FederationOptions { reconnect_after: Duration::from_millis(400), ..Default::default() };
    let fed = Federation::new(registry(&entries), options);
    for _ in 0..3 {
        let out = fed.retrieve(RetrieveParams::new("wing", 1)).await.expect("good answers");
        assert!(out.result.usage.unwrap().notes.iter().any(|n| n.contains("'dead' unavailable")));
    }
    assert_eq!(fed.connection_attempts(), 2, "one attempt each, then the dead engine is skipped");
    tokio::time::sleep(Duration::from_millis(500)).await;
    fed.retrieve(RetrieveParams::new("wing", 1)).await.expect("good answers");
    assert_eq!(fed.connection_attempts(), 3, "retried once the back-off passed");
}

#[tokio::test]
async fn an_engine_that_crashes_on_every_query_is_backed_off_not_respawned_per_query() {
    let entries = [
        stdio_entry("good", 0, &["--doc", "a:wing"]),
        stdio_entry("crash", 0, &["--name", "crash", "--exit-after", "0", "--doc", "c:wing"]),
    ];
    let options = FederationOptions { reconnect_after: Duration::from_secs(3), ..Default::default() };
    let fed = Federation::new(registry(&entries), options);
    for _ in 0..12 {
        let out = fed.retrieve(RetrieveParams::new("wing", 1)).await.expect("good answers");
        assert_eq!(out.result.hits.len(), 1);
    }
    // One connection each, then two respawns of the crashing engine; the third failure opens
    // its breaker for 3 s ± 20%.
    assert_eq!(fed.connection_attempts(), 4, "the crashing engine was respawned per query");
    let out = fed.retrieve(RetrieveParams::new("wing", 1)).await.expect("good answers");
    let notes = out.result.usage.unwrap().notes.join("; ");
    assert!(notes.contains("backing off after 3 consecutive failures"), "{notes}");
}

#[tokio::test]
async fn a_required_failure_fails_the_query_and_all_failing_is_backend_unavailable() {
    let mut bad = stdio_entry("bad", 0, &["--fail"]);
    bad["required"] = serde_json::json!(true);
    let fed =
        federation(&[stdio_entry("good", 0, &["--doc", "a:wing"]), bad], FusionMethod::rrf(), Duration::from_secs(5));
    let err = fed.retrieve(RetrieveParams::new("wing", 3)).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::BACKEND_UNAVAILABLE));
    assert!(err.to_string().contains("configured to fail"), "the required engine's own error: {err}");

    let fed = federation(
        &[stdio_entry("x", 0, &["--fail"]), stdio_entry("y", 0, &["--fail"])],
        FusionMethod::rrf(),
        Duration::from_secs(5),
    );
    let err = fed.retrieve(RetrieveParams::new("wing", 3)).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::BACKEND_UNAVAILABLE));
    assert!(err.to_string().contains("every engine failed"));
}

#[tokio::test]
async fn weights_convex_fallback_and_capability_sets() {
    // Both engines rank their own doc first; the heavier engine's doc wins under RRF.
    let mut heavy = stdio_entry("heavy", 0, &["--doc", "h:wing", "--doc", "shared:wing"]);
    heavy["weight"] = serde_json::json!(2.0);
    let light = stdio_entry("light", 0, &["--doc", "l:wing", "--doc", "shared:wing", "--score-floor", "0"]);
    let fed = federation(&[light.clone(), heavy.clone()], FusionMethod::rrf(), Duration::from_secs(5));
    let out = fed.retrieve(RetrieveParams::new("wing", 3)).await.unwrap();
    let ids: Vec<String> = out.result.hits.iter().map(|h| h.key()).collect();
    // RRF with rrfK 60: shared = 2/62 + 1/62 = 3/62 ≈ 0.0484; h = 2/61 ≈ 0.0328; l = 1/61 ≈ 0.0164.
    assert_eq!(ids, ["shared", "h", "l"]);
    let s = &out.result.hits[0];
    assert!((s.score - 3.0 / 62.0).abs() < 1e-12, "{}", s.score);

    let fed = federation(&[light, heavy], FusionMethod::convex(0.5), Duration::from_secs(5));
    let out = fed.retrieve(RetrieveParams::new("wing", 3)).await.unwrap();
    assert_eq!(out.fusion.name(), "rrf", "heavy has no scoreFloor, so convex falls back");
    assert!(out.result.usage.unwrap().notes.iter().any(|n| n.to_lowercase().contains("rrf")));

    let fed = federation(
        &[stdio_entry("r", 0, &["--doc", "a:x"]), stdio_entry("e", 0, &["--embed-only"])],
        FusionMethod::rrf(),
        Duration::from_secs(5),
    );
    let union = fed.effective_capabilities().await;
    let inter = fed.guaranteed_capabilities().await;
    assert!(union.contains("retrieve") && union.contains("embed"));
    assert_eq!(inter, HashSet::from(["embed".to_owned()]).into_iter().collect());
}

#[tokio::test]
async fn fused_order_does_not_depend_on_arrival_order() {
    let run = |slow_first: bool| async move {
        let (d1, d2) = if slow_first { ("300", "0") } else { ("0", "300") };
        let fed = federation(
            &[
                stdio_entry(
                    "one",
                    0,
                    &["--sleep-ms", d1, "--doc", "a:wing lift", "--doc", "b:wing", "--doc", "c:lift"],
                ),
                stdio_entry(
                    "two",
                    0,
                    &["--sleep-ms", d2, "--doc", "c:wing lift", "--doc", "b:lift", "--doc", "d:wing"],
                ),
            ],
            FusionMethod::rrf(),
            Duration::from_secs(5),
        );
        let out = fed.retrieve(RetrieveParams::new("wing lift", 4)).await.unwrap();
        out.result.hits.iter().map(|h| (h.key(), h.score.to_bits())).collect::<Vec<_>>()
    };
    let a = run(true).await;
    let b = run(false).await;
    assert_eq!(a, b);
    assert_eq!(a.len(), 4);
}

#[tokio::test]
async fn a_dead_engine_reports_the_tail_of_its_stderr() {
    // 30 lines of stderr, then exit without answering: the error keeps the last 20, in order.
    let script = "for i in $(seq 1 30); do echo \"line $i\" >&2; done; echo 'fatal: index locked' >&2; exit 2";
    let command: Vec<String> = ["sh", "-c", script].iter().map(|s| (*s).to_owned()).collect();
    let e = Client::connect_stdio(&command, ClientOptions::default()).await.expect_err("the engine exits");
    let ClientError::Closed(rcp_client::Disconnect::Exited { stderr_tail }) = &e else {
        panic!("expected Closed(Exited), got {e:?}");
    };
    assert_eq!(stderr_tail.len(), 20, "{stderr_tail:?}");
    assert_eq!(stderr_tail.first().map(String::as_str), Some("line 12"));
    assert_eq!(stderr_tail.last().map(String::as_str), Some("fatal: index locked"));
    let text = e.to_string();
    assert!(text.contains("its stderr ended with:\n    line 12") && text.ends_with("fatal: index locked"), "{text}");
}
