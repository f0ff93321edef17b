//! The Prometheus recorder behind `/metrics`: installed once per process (the `metrics`
//! recorder is global), with latency buckets, and the engine gauges refreshed at each scrape.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::LATENCY;
use crate::operations::status::EngineStats;

/// Latency buckets in seconds: sub-millisecond lookups up to minute-long writes.
const BUCKETS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Whether the recorder is installed (and so whether anything is worth recording).
pub(crate) fn installed() -> bool {
    HANDLE.get().is_some_and(Option::is_some)
}

/// The process's Prometheus handle, installing the recorder on first use; `None` when another
/// `metrics` recorder was installed first (the embedder's own: then it exports, not us).
pub(crate) fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = match PrometheusBuilder::new().set_buckets_for_metric(Matcher::Full(LATENCY.into()), BUCKETS) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(target: "rcp_server", error = %e, "metrics: invalid latency buckets");
                    PrometheusBuilder::new()
                }
            };
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => {
                    describe();
                    Some(handle)
                }
                Err(_) => {
                    tracing::warn!(target: "rcp_server", "metrics: another recorder is installed; /metrics is disabled");
                    None
                }
            }
        })
        .as_ref()
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(super::REQUESTS, "RCP requests answered, by method and outcome (ok or error code)");
    describe_histogram!(LATENCY, Unit::Seconds, "RCP request latency from dispatch to answer, by method");
    describe_gauge!(super::IN_FLIGHT, "RCP requests dispatched and not yet answered");
    describe_counter!(super::REJECTIONS, "requests refused before dispatch, by reason");
    describe_gauge!(DOCUMENTS, "live documents in the engine's index");
    describe_gauge!(INDEX_VERSION, "the engine's index version (commit or sequence number)");
    describe_gauge!(WAL_BYTES, Unit::Bytes, "bytes in the engine's write-ahead log");
    describe_gauge!(READY, "1 when the engine is ready to serve, 0 when not (draining or engine not ready)");
}

/// Live documents, by `engine`.
const DOCUMENTS: &str = "rcp_engine_documents";
/// Index version, by `engine`.
const INDEX_VERSION: &str = "rcp_engine_index_version";
/// Write-ahead-log bytes, by `engine`.
const WAL_BYTES: &str = "rcp_engine_wal_bytes";
/// Readiness, by `engine`.
const READY: &str = "rcp_engine_ready";

/// Refreshes the gauges of `engine` from its figures and readiness (its [`crate::Status`]),
/// then renders every metric in the Prometheus text format; `None` when the recorder is not
/// ours.
pub(crate) fn render(engine: &str, stats: &EngineStats, ready: bool) -> Option<String> {
    let handle = handle()?;
    let engine = engine.to_owned();
    let gauges = [(DOCUMENTS, stats.documents), (INDEX_VERSION, stats.index_version), (WAL_BYTES, stats.wal_bytes)];
    for (name, value) in gauges {
        if let Some(v) = value {
            metrics::gauge!(name, "engine" => engine.clone()).set(v as f64);
        }
    }
    let ready = if ready { 1.0 } else { 0.0 };
    metrics::gauge!(READY, "engine" => engine).set(ready);
    handle.run_upkeep();
    Some(handle.render())
}
