//! Traces across hops (§17.2: correlation ids belong in `_meta`). Every request already has a
//! trace id (`_meta.traceId`, or one the server assigns) on each of its log lines; with the
//! `otlp` feature and a collector configured, the server also exports OpenTelemetry spans over
//! OTLP/HTTP (JSON):
//!
//! - `request`: one per request, with its method and id; the parent is the caller's span when
//!   `_meta.traceparent` (W3C Trace Context) names one, and the trace is the one `_meta.traceId`
//!   names otherwise (its 32 hex digits as they are, any other id hashed), so a trace id seen in
//!   the logs is the trace id of the spans;
//! - `engine`: one per engine a fan-out calls (the gateway, `rcp_client::federation`), whose
//!   context the engine receives as `_meta.traceparent` beside `_meta.traceId` ([`traceparent`]);
//! - `rerank`: the rerank stage of `retrieve`, with its method and passage count.
//!
//! Without the feature, or without a collector, the spans are the `tracing` spans every log
//! line carries and nothing is exported. Export is switched on by the binary
//! ([`crate::cli::ServeArgs::init_telemetry`]: `--otlp-endpoint URL`, or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); a library never
//! installs it on its own.

/// The `_meta` key of a W3C `traceparent` (`00-<trace id>-<parent span id>-<flags>`).
pub const TRACEPARENT_KEY: &str = "traceparent";

/// The W3C `traceparent` of the current span (`00-<trace id>-<span id>-<flags>`), for the
/// `_meta` of a call this request makes to another server; `None` without the `otlp` feature,
/// or when no exporting subscriber is installed.
pub fn traceparent() -> Option<String> {
    #[cfg(feature = "otlp")]
    {
        export::traceparent()
    }
    #[cfg(not(feature = "otlp"))]
    None
}

/// Joins `span` (a request's) to the caller's trace: its `traceparent` when it sent a valid one,
/// else the trace `trace_id` names. Nothing without the `otlp` feature.
pub(crate) fn continue_trace(span: &tracing::Span, trace_id: &str, traceparent: Option<&str>) {
    #[cfg(feature = "otlp")]
    export::continue_trace(span, trace_id, traceparent);
    #[cfg(not(feature = "otlp"))]
    let _ = (span, trace_id, traceparent);
}

/// Keeps the span exporter of the process running; dropping it sends the spans not yet
/// exported (and waits for the collector, bounded by the exporter's timeout). Hold it for the
/// life of `main`.
#[must_use = "dropping the guard stops the span export"]
#[derive(Debug, Default)]
pub struct Telemetry {
    #[cfg(feature = "otlp")]
    pub(crate) provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        #[cfg(feature = "otlp")]
        {
            self.provider.is_some()
        }
        #[cfg(not(feature = "otlp"))]
        false
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("span export: {e}");
        }
    }
}

#[cfg(feature = "otlp")]
pub(crate) mod export {
    //! The OTLP exporter and the W3C Trace Context mapping.

    use std::hash::{DefaultHasher, Hash, Hasher};

    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
    };
    use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// The environment variables that name a collector (the OpenTelemetry convention).
    const ENDPOINT_VARS: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

    /// A provider exporting to `endpoint` (a collector's base URL: spans go to
    /// `<endpoint>/v1/traces`), or to the collector the environment names; `Ok(None)` when
    /// neither names one.
    pub(crate) fn provider(endpoint: Option<&str>, service: &str) -> Result<Option<SdkTracerProvider>, String> {
        let configured = ENDPOINT_VARS.iter().any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()));
        if endpoint.is_none() && !configured {
            return Ok(None);
        }
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpJson)
            .with_http_client(http_client()?);
        if let Some(base) = endpoint {
            builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
        }
        let exporter = builder.build().map_err(|e| format!("OTLP span exporter: {e}"))?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name(service.to_owned());
        }
        Ok(Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.build()).build()))
    }

    /// The exporter's HTTP client: blocking (the batch processor runs on its own thread, outside
    /// any runtime), rustls with the `ring` provider and the system's roots for an `https://`
    /// collector, each export bounded in time.
    fn http_client() -> Result<reqwest::blocking::Client, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS for the collector: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| format!("HTTP client for the collector: {e}"))
    }

    /// The `tracing` layer that turns spans into OpenTelemetry spans of `provider`.
    pub(crate) fn layer(
        provider: &SdkTracerProvider,
    ) -> tracing_opentelemetry::OpenTelemetryLayer<tracing_subscriber::Registry, opentelemetry_sdk::trace::SdkTracer>
    {
        tracing_opentelemetry::layer().with_tracer(provider.tracer("rcp-server"))
    }

    pub(super) fn traceparent() -> Option<String> {
        let cx = tracing::Span::current().context();
        let span = cx.span();
        let sc = span.span_context();
        sc.is_valid().then(|| format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
    }

    pub(super) fn continue_trace(span: &tracing::Span, trace_id: &str, traceparent: Option<&str>) {
        let parent = traceparent.and_then(parse_traceparent).unwrap_or_else(|| named(trace_id));
        let cx = opentelemetry::Context::new().with_remote_span_context(parent);
        // Err only when no exporting layer is installed: then there is nothing to join.
        let _ = span.set_parent(cx);
    }

    /// A W3C `traceparent` (version 00), when well-formed with non-zero ids.
    pub(crate) fn parse_traceparent(s: &str) -> Option<SpanContext> {
        let mut parts = s.trim().split('-');
        let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
        if parts.next().is_some() || version != "00" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
            return None;
        }
        let (trace, span) = (TraceId::from_hex(trace).ok()?, SpanId::from_hex(span).ok()?);
        let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
        let sc = SpanContext::new(trace, span, flags, true, TraceState::default());
        sc.is_valid().then_some(sc)
    }

    /// A remote parent in the trace `trace_id` names: its 32 hex digits, or a hash of any other
    /// id (the same in every process of one build), under a parent span id derived from it.
    fn named(trace_id: &str) -> SpanContext {
        let parsed = (trace_id.len() == 32).then(|| TraceId::from_hex(trace_id).ok()).flatten();
        let trace = parsed
            .filter(|t| *t != TraceId::INVALID)
            .unwrap_or_else(|| TraceId::from(u128::from(digest(trace_id, 1)) << 64 | u128::from(digest(trace_id, 2))));
        let span = SpanId::from(digest(trace_id, 3).max(1));
        SpanContext::new(trace, span, TraceFlags::SAMPLED, true, TraceState::default())
    }

    fn digest(s: &str, salt: u8) -> u64 {
        let mut h = DefaultHasher::new();
        (salt, s).hash(&mut h);
        h.finish().max(1)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn traceparents_parse_only_when_well_formed() {
            let sc = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").expect("valid");
            assert_eq!(sc.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
            assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
            assert!(sc.is_remote() && sc.is_sampled());
            for bad in [
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                "garbage",
            ] {
                assert!(parse_traceparent(bad).is_none(), "{bad}");
            }
        }

        #[test]
        fn a_trace_id_names_one_trace_in_every_process() {
            let hex = named("4bf92f3577b34da6a3ce929d0e0e4736");
            assert_eq!(hex.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
            let (a, b) = (named("trace-7f3a"), named("trace-7f3a"));
            assert_eq!(a.trace_id(), b.trace_id());
            assert_ne!(a.trace_id(), named("trace-7f3b").trace_id());
            assert!(a.is_valid());
        }
    }
}
