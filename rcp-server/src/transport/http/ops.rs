//! The operations endpoints, outside the RCP base path, for orchestrators and dashboards:
//! `GET /healthz` (the process is up; no authentication), `GET /readyz` (`200` when the engine
//! can serve, `503` while draining or when the engine reports not ready) and `GET /metrics`
//! (Prometheus text; for tokens with the `admin` scope unless made public).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::auth::Credentials;
use crate::operations::observe::{self, Rejection};
use crate::server::Server;
use crate::service::access::Scope;

/// Where the operations endpoints are served; a `None` path turns that endpoint off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpsPaths {
    /// Liveness (default `/healthz`).
    pub healthz: Option<String>,
    /// Readiness (default `/readyz`).
    pub readyz: Option<String>,
    /// Prometheus metrics (default `/metrics`).
    pub metrics: Option<String>,
}

impl Default for OpsPaths {
    fn default() -> Self {
        Self { healthz: Some("/healthz".into()), readyz: Some("/readyz".into()), metrics: Some("/metrics".into()) }
    }
}

impl OpsPaths {
    /// No operations endpoint at all.
    pub fn none() -> Self {
        Self { healthz: None, readyz: None, metrics: None }
    }

    /// Checks that every path is absolute, distinct, and outside the RCP base path `base`.
    pub fn check(&self, base: &str) -> Result<(), String> {
        let base = format!("/{}", base.trim_matches('/'));
        let mut seen: Vec<&str> = Vec::new();
        for path in [&self.healthz, &self.readyz, &self.metrics].into_iter().flatten() {
            if !path.starts_with('/') || path.len() < 2 {
                return Err(format!("operations path '{path}' must start with '/' and name something"));
            }
            if path == &base || path.starts_with(&format!("{base}/")) || base == "/" {
                return Err(format!("operations path '{path}' must lie outside the RCP base path '{base}'"));
            }
            if seen.contains(&path.as_str()) {
                return Err(format!("operations path '{path}' is used twice"));
            }
            seen.push(path);
        }
        Ok(())
    }
}

/// What the operations handlers share.
struct OpsState {
    server: Server,
    credentials: Arc<Credentials>,
    metrics_public: bool,
}

/// The routes of `paths`, or an empty router (with a warning) when they are invalid.
pub(super) fn routes(
    server: &Server,
    base: &str,
    paths: &OpsPaths,
    credentials: Arc<Credentials>,
    metrics_public: bool,
) -> Router {
    if let Err(e) = paths.check(base) {
        tracing::warn!(target: "rcp_server", error = %e, "operations endpoints disabled");
        return Router::new();
    }
    let state = Arc::new(OpsState { server: server.clone(), credentials, metrics_public });
    let mut router = Router::new();
    if let Some(p) = &paths.healthz {
        router = router.route(p, get(healthz));
    }
    if let Some(p) = &paths.readyz {
        router = router.route(p, get(readyz));
    }
    if let Some(p) = &paths.metrics {
        #[cfg(feature = "metrics")]
        let _ = observe::handle();
        router = router.route(p, get(metrics));
    }
    router.with_state(state)
}

fn text(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], body).into_response()
}

async fn healthz() -> Response {
    text(StatusCode::OK, "ok\n".into())
}

async fn readyz(State(state): State<Arc<OpsState>>) -> Response {
    match state.server.readiness() {
        Ok(()) => text(StatusCode::OK, "ready\n".into()),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

async fn metrics(State(state): State<Arc<OpsState>>, headers: HeaderMap) -> Response {
    if !state.metrics_public {
        match state.credentials.grant(&headers) {
            Some(grant) if grant.scopes().contains(Scope::Admin) => {}
            Some(_) => {
                observe::reject(Rejection::Auth);
                return text(StatusCode::FORBIDDEN, "the metrics need a token with the 'admin' scope\n".into());
            }
            None => {
                observe::reject(Rejection::Auth);
                return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")]).into_response();
            }
        }
    }
    #[cfg(feature = "metrics")]
    if let Some(body) =
        observe::render(&state.server.info().name, &state.server.engine_stats(), state.server.readiness().is_ok())
    {
        let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
        return (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response();
    }
    text(StatusCode::SERVICE_UNAVAILABLE, "metrics are not recorded by this server\n".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_be_absolute_distinct_and_outside_the_base() {
        assert!(OpsPaths::default().check("/rcp").is_ok());
        assert!(OpsPaths::none().check("/").is_ok());
        let under = OpsPaths { metrics: Some("/rcp/metrics".into()), ..OpsPaths::default() };
        assert!(under.check("/rcp").is_err());
        let relative = OpsPaths { healthz: Some("healthz".into()), ..OpsPaths::default() };
        assert!(relative.check("/rcp").is_err());
        let twice = OpsPaths { readyz: Some("/healthz".into()), ..OpsPaths::default() };
        assert!(twice.check("/rcp").is_err());
        assert!(OpsPaths::default().check("/").is_err(), "a root base path leaves no room outside it");
    }
}
