//! The connection pool: a `postgres://` URL (TLS when the server offers it, `sslmode=require`
//! to insist), pooled by deadpool, and the mapping of database failures to protocol errors.
//!
//! Credentials come only from the URL (the `--database-url` flag or `DATABASE_URL`); the URL
//! is never logged, [`redact`] shows it without its password.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use rcp_wire::{ErrorCode, RcpError};
use tokio_postgres::Config;
use tokio_postgres::error::SqlState;

/// Why the database could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// The URL does not parse.
    #[error("invalid database URL: {0}")]
    Url(#[source] tokio_postgres::Error),
    /// TLS could not be configured.
    #[error("TLS setup: {0}")]
    Tls(#[source] rustls::Error),
    /// The pool could not be built.
    #[error("connection pool: {0}")]
    Pool(#[source] deadpool_postgres::BuildError),
    /// No connection could be obtained (the database is down or unreachable). The message
    /// carries the cause (see [`explain_pool`]), so the pool's error is not also a `source`.
    #[error("database unavailable: {}", explain_pool(.0))]
    Unavailable(deadpool_postgres::PoolError),
    /// A statement (or the connection's start-up) failed; the message is PostgreSQL's own
    /// (see [`explain`]).
    #[error("database error: {}", explain(.0))]
    Sql(tokio_postgres::Error),
    /// The encoder failed while preparing a write.
    #[error("embedding: {0}")]
    Embed(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The schema is missing, newer than this binary, or damaged.
    #[error("schema: {0}")]
    Schema(String),
    /// The request's filter compiles to more bind parameters than one statement takes; the
    /// statement was not sent.
    #[error("{0} bind parameters; PostgreSQL takes at most {max}", max = crate::input::MAX_BIND_PARAMS)]
    TooManyParams(usize),
}

/// How long a caller should wait before retrying after the database went away.
pub const RETRY_AFTER_MS: u64 = 1000;

impl DbError {
    /// Whether this is the database being down or unreachable (as opposed to a bad statement).
    pub fn is_outage(&self) -> bool {
        match self {
            DbError::Unavailable(_) => true,
            DbError::Sql(e) => is_outage(e),
            _ => false,
        }
    }
}

/// Whether a driver error means the server is unavailable: a closed or refused connection,
/// or the server shutting down / starting up / out of connections.
fn is_outage(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => {
            [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::TOO_MANY_CONNECTIONS,
            ]
            .contains(code)
                || code.code().starts_with("08")
        }
        // No SQLSTATE: an I/O or protocol failure on the connection.
        None => true,
    }
}

impl DbError {
    /// Whether the request's own values are at fault: too many parameters, or a value
    /// PostgreSQL refuses to hold (SQLSTATE 22021, 22P05: U+0000 in text or jsonb) or a
    /// statement beyond its limits (class 54: too complex, too deep). Retrying cannot help.
    pub fn is_client_input(&self) -> bool {
        match self {
            DbError::TooManyParams(_) => true,
            DbError::Sql(e) => e.code().is_some_and(|c| {
                *c == SqlState::CHARACTER_NOT_IN_REPERTOIRE
                    || *c == SqlState::UNTRANSLATABLE_CHARACTER
                    || c.code().starts_with("54")
            }),
            _ => false,
        }
    }
}

impl From<DbError> for RcpError {
    /// An outage is `-32010` (backend unavailable) with `retryAfterMs`; the request's own
    /// values at fault are `-32602` (see [`DbError::is_client_input`]); anything else is an
    /// internal error whose message names the failure (never the URL).
    fn from(e: DbError) -> Self {
        if e.is_outage() {
            RcpError::new(ErrorCode::BACKEND_UNAVAILABLE, format!("the database is unavailable: {e}"))
                .with_retry_after_ms(RETRY_AFTER_MS)
        } else if let DbError::TooManyParams(n) = e {
            crate::input::too_many_params(n)
        } else if e.is_client_input() {
            RcpError::invalid_params("params", format!("PostgreSQL refused the request's values: {e}"))
        } else {
            RcpError::internal(e.to_string())
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError::Sql(e)
    }
}

/// A driver error in PostgreSQL's own words: the server's message with its SQLSTATE, detail
/// and hint (`database "nosuchdb" does not exist (SQLSTATE 3D000)`), or, for a failure on the
/// connection itself, the driver's message with its causes (`error connecting to server:
/// Connection refused (os error 111)`). tokio-postgres alone prints `db error`.
pub fn explain(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut out = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            out.push_str(&format!("; {detail}"));
        }
        if let Some(hint) = db.hint() {
            out.push_str(&format!("; hint: {hint}"));
        }
        return out;
    }
    chain(e)
}

/// [`explain`] for the pool's errors: a driver error as PostgreSQL said it, a timeout as one.
pub fn explain_pool(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => explain(e),
        other => chain(other),
    }
}

/// An error and its causes, joined by `": "`, each once.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// What to do about a start-up failure the database reported, when PostgreSQL's words leave
/// it open.
pub fn hint(e: &DbError) -> Option<&'static str> {
    let code = match e {
        DbError::Sql(e) => e.code(),
        DbError::Unavailable(deadpool_postgres::PoolError::Backend(e)) => e.code(),
        _ => None,
    };
    match code {
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => {
            Some("create it (CREATE DATABASE ...) or name an existing database in the URL")
        }
        Some(c) if *c == SqlState::INVALID_PASSWORD || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            Some("check the user and password in the URL (or PGPASSWORD)")
        }
        None if e.is_outage() => Some("is PostgreSQL running and listening at the URL's host and port?"),
        _ => None,
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) if !is_outage(&e) => DbError::Sql(e),
            other => DbError::Unavailable(other),
        }
    }
}

/// Pool settings.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Most connections held open.
    pub max_size: usize,
    /// How long a request waits for a connection (including connecting) before failing.
    pub wait_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self { max_size: 8, wait_timeout: Duration::from_secs(5) }
    }
}

/// The database: a pool of connections to one PostgreSQL server.
#[derive(Clone)]
pub struct Database {
    pool: Pool,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("Database").field("size", &status.size).field("available", &status.available).finish()
    }
}

impl Database {
    /// A pool for `url` (`postgres://user:password@host:port/db?sslmode=...`). Nothing is
    /// connected until the first use, so a database that is down at start-up is not fatal.
    pub fn new(url: &str, options: &PoolOptions) -> Result<Self, DbError> {
        let mut config: Config = url.parse().map_err(DbError::Url)?;
        // Server notices ("already exists, skipping") are not worth a log line each.
        let server_options = format!("{} -c client_min_messages=warning", config.get_options().unwrap_or_default());
        config.options(server_options.trim());
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = Manager::from_config(config, tls()?, manager_config);
        let timeouts = deadpool_postgres::Timeouts {
            wait: Some(options.wait_timeout),
            create: Some(options.wait_timeout),
            recycle: Some(options.wait_timeout),
        };
        let pool = Pool::builder(manager)
            .max_size(options.max_size.max(1))
            .timeouts(timeouts)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(DbError::Pool)?;
        Ok(Self { pool })
    }

    /// A pooled connection.
    pub async fn client(&self) -> Result<deadpool_postgres::Client, DbError> {
        Ok(self.pool.get().await?)
    }
}

/// TLS with the system's root certificates: used when the server offers it (`sslmode=prefer`,
/// the default) or required (`sslmode=require`).
fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, DbError> {
    let mut roots = rustls::RootCertStore::empty();
    let loaded = rustls_native_certs::load_native_certs();
    for cert in loaded.certs {
        // A certificate the store cannot parse is skipped, as browsers do.
        let _ = roots.add(cert);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(DbError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// `url` with its password replaced by `***`, for logs and messages.
pub fn redact(url: &str) -> String {
    // postgres://user:password@host/... : blank what lies between the first ':' after the
    // scheme and the '@'.
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return "<database url>".to_owned();
    };
    let rest = &url[scheme_end..];
    match (rest.find('@'), rest.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!("{}{}:***{}", &url[..scheme_end], &rest[..colon], &rest[at..]),
        _ => url.split('?').next().unwrap_or(url).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password_only() {
        assert_eq!(redact("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(redact("postgres://u@h/db?password=x"), "postgres://u@h/db");
        assert_eq!(redact("host=h password=x"), "<database url>");
    }

    #[test]
    fn urls_parse_or_fail_cleanly() {
        assert!(Database::new("postgres://u:p@127.0.0.1:1/db?sslmode=require", &PoolOptions::default()).is_ok());
        assert!(matches!(Database::new("postgres://u:p@h:notaport/db", &PoolOptions::default()), Err(DbError::Url(_))));
    }
}
