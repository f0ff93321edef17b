//! Diagnostics to stderr (never stdout, which carries protocol frames only, §5.1): text or
//! JSON lines, colours only on a terminal, filtered by `RCP_LOG` or `RUST_LOG`, with the noisy
//! dependencies (ANN, ONNX runtime, tantivy, hyper) held at `warn` unless the filter names them.

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::operations::telemetry::Telemetry;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`), for log shippers.
    Json,
}

/// Level of everything not named otherwise when no filter is set.
const DEFAULT_LEVEL: &str = "info";

/// Targets held at `warn` unless the filter names them: their `info` is about their own
/// internals, not about serving. `rcp_server::http` is the per-request access log.
const QUIET: &[&str] = &["hnsw_rs", "ort", "tantivy", "hyper", "hyper_util", "h2", "reqwest", "rcp_server::http"];

/// The filter: `spec` (from `RCP_LOG`/`RUST_LOG`, default `info`) plus `target=warn` for each
/// quiet target `spec` does not mention.
fn filter_directives(spec: Option<&str>) -> String {
    let spec = spec.map(str::trim).filter(|s| !s.is_empty()).unwrap_or(DEFAULT_LEVEL);
    let named: Vec<&str> = spec.split(',').filter_map(|d| d.split('=').next()).map(str::trim).collect();
    let mut directives = spec.to_owned();
    for target in QUIET {
        if !named.iter().any(|n| n == target || n.starts_with(&format!("{target}::"))) {
            directives.push_str(&format!(",{target}=warn"));
        }
    }
    directives
}

/// The filter from the environment: `RCP_LOG`, else `RUST_LOG`, else `info`.
fn env_filter() -> EnvFilter {
    let spec = std::env::var("RCP_LOG").ok().or_else(|| std::env::var("RUST_LOG").ok());
    let directives = filter_directives(spec.as_deref());
    EnvFilter::try_new(&directives).unwrap_or_else(|e| {
        eprintln!("ignoring invalid log filter '{directives}': {e}");
        EnvFilter::new(filter_directives(None))
    })
}

/// Installs the global `tracing` subscriber writing `format` lines to stderr. A second call
/// (or a subscriber installed by the embedder) is left alone.
pub fn init_logging(format: LogFormat) {
    install::<NoExport>(format, None);
}

/// [`init_logging`] with text lines.
pub fn init_tracing() {
    init_logging(LogFormat::Text);
}

/// [`init_logging`], and with the `otlp` feature the export of spans over OTLP/HTTP to the
/// collector at `otlp_endpoint` (its base URL), or to the one `OTEL_EXPORTER_OTLP_ENDPOINT`
/// names, as `service` (unless `OTEL_SERVICE_NAME` names it). Returns the guard that keeps the
/// export running: hold it until the process ends. Without a collector (or the feature) the
/// guard exports nothing; a collector that cannot be configured is reported on stderr and
/// the logs are installed anyway.
pub fn init_telemetry(format: LogFormat, otlp_endpoint: Option<&str>, service: &str) -> Telemetry {
    #[cfg(feature = "otlp")]
    match crate::operations::telemetry::export::provider(otlp_endpoint, service) {
        Ok(Some(provider)) => {
            let layer = crate::operations::telemetry::export::layer(&provider);
            install(format, Some(layer));
            return Telemetry { provider: Some(provider) };
        }
        Ok(None) => {}
        Err(e) => eprintln!("{service}: spans not exported: {e}"),
    }
    let _ = (otlp_endpoint, service);
    init_logging(format);
    Telemetry::default()
}

/// A layer type for [`install`] calls without an exporter.
type NoExport = tracing_subscriber::layer::Identity;

/// The global subscriber: `export` (if any), the stderr lines, the filter from the environment.
fn install<L>(format: LogFormat, export: Option<L>)
where
    L: Layer<Registry> + Send + Sync,
{
    let ansi = std::io::stderr().is_terminal();
    let lines = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).boxed(),
        LogFormat::Json => {
            tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr).with_ansi(false).boxed()
        }
    };
    let _ = tracing_subscriber::registry().with(export).with(lines).with(env_filter()).try_init();
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn noisy_targets_are_quiet_unless_the_filter_names_them() {
        let d = filter_directives(None);
        assert!(d.starts_with("info,"), "{d}");
        assert!(d.contains("tantivy=warn") && d.contains("hnsw_rs=warn") && d.contains("ort=warn"), "{d}");
        let d = filter_directives(Some("debug,tantivy=trace,hyper_util::client=debug"));
        assert!(d.starts_with("debug,tantivy=trace"), "{d}");
        assert!(!d.contains("tantivy=warn") && !d.contains("hyper_util=warn"), "{d}");
        assert!(d.contains(",hyper=warn"), "{d}");
        assert!(EnvFilter::try_new(&d).is_ok());
    }

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_lines_parse_as_json_objects() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_ansi(false)
            .with_env_filter(EnvFilter::new(filter_directives(None)))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "rcp_server", engine = "e", documents = 3u64, "serving");
            tracing::info!(target: "tantivy", "held back by the default filter");
        });
        let text = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default()).unwrap_or_default();
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap_or(serde_json::Value::Null)).collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert_eq!(lines[0]["fields"]["message"], "serving");
        assert_eq!(lines[0]["fields"]["documents"], 3);
        assert_eq!(lines[0]["level"], "INFO");
    }
}
