//! The HTTP transport's options (§5.2): sessions, limits, authentication, CORS, operations.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::ops::OpsPaths;
use super::tokens::AccessTokens;

/// The header carrying a stateful session token (§5.2).
pub const SESSION_HEADER: &str = "rcp-session";

/// How HTTP requests map to sessions (§5.2).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionMode {
    /// Every request is served on its own at the advertised capabilities, with no handshake;
    /// `initialize`/`info` answer idempotently. Any replica can answer any request.
    Stateless,
    /// `initialize` returns `_meta.session`; later requests carry it in the `RCP-Session`
    /// header. Sessions idle for longer than `ttl` expire (then `-32001`).
    Stateful {
        /// Idle time after which a session expires.
        ttl: Duration,
    },
}

/// A per-client token bucket: a sustained rate with bounded bursts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests per second admitted in the long run.
    pub per_second: f64,
    /// Largest burst admitted at once.
    pub burst: f64,
}

/// Options of the HTTP transport. Its `Debug` shows how many bearer tokens there are, never
/// the tokens.
#[derive(Clone)]
pub struct HttpOptions {
    /// Base path (default `/rcp`).
    pub base: String,
    /// Session handling.
    pub sessions: SessionMode,
    /// Accepted bearer tokens, each granting every scope (`--tokens-env`); with these and
    /// `tokens` both empty there is no authentication.
    pub bearer_tokens: Vec<String>,
    /// Scoped bearer tokens (`--tokens-file`, §15.6): each grants the scopes its line names.
    /// Shared with the caller: [`AccessTokens::reload`] on a clone takes effect here.
    pub tokens: Option<AccessTokens>,
    /// Largest accepted request body, in bytes (larger: `-32013`).
    pub body_limit: usize,
    /// Most requests one client (IP address) may have in flight (more: `-32011`).
    pub max_in_flight_per_client: usize,
    /// Per-client request rate (exceeded: HTTP `429` with `Retry-After`).
    pub rate_limit: Option<RateLimit>,
    /// Allowed CORS origins (`"*"` for any); `None` disables CORS headers.
    pub cors_origins: Option<Vec<String>>,
    /// Stateful mode only: whether a request without `RCP-Session` is refused (`-32001`)
    /// instead of served statelessly at the advertised capabilities (§5.2). Clients that
    /// never send the header (the public SDKs) interoperate only when this is `false`, as it
    /// is by default on the command line; this library default keeps the strict behaviour.
    pub require_session: bool,
    /// Most connections open at once (§15.5); more are answered `503` with `Retry-After`.
    pub max_connections: usize,
    /// Most connections one client (IP address; an IPv6 /64) may hold open at once, so one
    /// client cannot take every place under `max_connections`; more are answered `503` with
    /// `Retry-After` at once. `None` (the default): half of `max_connections`
    /// ([`HttpOptions::connections_per_client`]). Behind a reverse proxy every client has the
    /// proxy's address: set it to `max_connections` there.
    pub max_connections_per_client: Option<usize>,
    /// Time a connection has to send a request's complete headers, counted from when it is
    /// ready for a request (accepted, or its previous response sent): it is also the idle
    /// keep-alive timeout. Expired: the connection is closed.
    pub header_read_timeout: Duration,
    /// Time a request has to send its complete body once its headers are in (expired: `408`,
    /// and the connection is closed).
    pub body_read_timeout: Duration,
    /// The operations endpoints (`/healthz`, `/readyz`, `/metrics`), served outside `base`.
    pub ops: OpsPaths,
    /// Whether `/metrics` is served without the bearer tokens (by default it needs a token with
    /// the `admin` scope, which every `bearer_tokens` token has).
    pub metrics_public: bool,
    /// After the shutdown signal, how long the server keeps accepting and serving while
    /// `/readyz` already answers `503`, so load balancers stop routing to it before the
    /// listener closes; then in-flight requests are drained.
    pub drain_grace: Duration,
    /// Serve HTTPS only, with this certificate (feature `tls`); `None`: plain HTTP. Shared with
    /// the caller: [`super::ServerTls::reload`] on a clone takes effect for new connections.
    #[cfg(feature = "tls")]
    pub tls: Option<super::ServerTls>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("HttpOptions");
        f.field("base", &self.base)
            .field("sessions", &self.sessions)
            .field("bearer_tokens", &format_args!("[{} redacted]", self.bearer_tokens.len()))
            .field("tokens", &self.tokens)
            .field("body_limit", &self.body_limit)
            .field("max_in_flight_per_client", &self.max_in_flight_per_client)
            .field("rate_limit", &self.rate_limit)
            .field("cors_origins", &self.cors_origins)
            .field("require_session", &self.require_session)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_client", &self.max_connections_per_client)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("body_read_timeout", &self.body_read_timeout)
            .field("ops", &self.ops)
            .field("metrics_public", &self.metrics_public)
            .field("drain_grace", &self.drain_grace);
        #[cfg(feature = "tls")]
        f.field("tls", &self.tls);
        f.finish()
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            base: "/rcp".into(),
            sessions: SessionMode::Stateless,
            bearer_tokens: Vec::new(),
            tokens: None,
            body_limit: 8 * 1024 * 1024,
            max_in_flight_per_client: 256,
            rate_limit: None,
            cors_origins: None,
            require_session: true,
            max_connections: 1024,
            max_connections_per_client: None,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            ops: OpsPaths::default(),
            metrics_public: false,
            drain_grace: Duration::ZERO,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl HttpOptions {
    /// The connections one client may hold: `max_connections_per_client`, or half of
    /// `max_connections` when unset; at least 1, at most `max_connections`.
    pub fn connections_per_client(&self) -> usize {
        let cap = self.max_connections.max(1);
        self.max_connections_per_client.unwrap_or(cap / 2).clamp(1, cap)
    }
}

/// The default bind address: loopback only (§15).
pub const DEFAULT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_token() {
        let opts = HttpOptions { bearer_tokens: vec!["s3cret-token".into()], ..HttpOptions::default() };
        let shown = format!("{opts:?}");
        assert!(!shown.contains("s3cret") && shown.contains("[1 redacted]"), "{shown}");
    }

    #[test]
    fn a_client_gets_half_the_cap_unless_told_otherwise() {
        let opts = HttpOptions::default();
        assert_eq!(opts.connections_per_client(), 512);
        let opts = HttpOptions { max_connections: 1, ..HttpOptions::default() };
        assert_eq!(opts.connections_per_client(), 1);
        let opts = HttpOptions { max_connections: 8, max_connections_per_client: Some(3), ..HttpOptions::default() };
        assert_eq!(opts.connections_per_client(), 3);
        let opts = HttpOptions { max_connections: 8, max_connections_per_client: Some(80), ..HttpOptions::default() };
        assert_eq!(opts.connections_per_client(), 8);
    }
}
