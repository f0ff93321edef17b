//! Why the inspector, or one of its engines, could not start; each error keeps its cause.

use std::io;
use std::sync::Arc;

use rcp_client::ConnectError;
use rcp_client::registry::{RegistryError, TokenError};

/// Why the inspector could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectorError {
    /// `--stdio` named no program.
    #[error("--stdio: the command is empty")]
    EmptyCommand,
    /// `--http` is not an http(s) URL.
    #[error("--http {0}: expected a URL such as http://127.0.0.1:8080/rcp")]
    NotAUrl(String),
    /// The `--registry` file could not be loaded.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The page's port could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Listen {
        /// The port asked for (0: any).
        port: u16,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

/// Why a stdio engine could not be started; the page shows it with the engine's last stderr
/// lines.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The program could not be spawned.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The process could not be set up (an empty command, a missing pipe).
    #[error("{0}")]
    Connect(#[source] ConnectError),
    /// No `initialize` answer within the handshake timeout.
    #[error("no initialize answer within {secs} s")]
    HandshakeTimeout {
        /// The timeout.
        secs: u64,
        /// The engine's last stderr lines.
        stderr: Vec<String>,
    },
    /// The engine ended before answering `initialize`.
    #[error("the engine ended before answering initialize")]
    Ended {
        /// The engine's last stderr lines.
        stderr: Vec<String>,
    },
    /// The engine answered `initialize` with an error.
    #[error("initialize failed: {message}")]
    Refused {
        /// The error's message.
        message: String,
        /// The engine's last stderr lines.
        stderr: Vec<String>,
    },
}

impl StartError {
    /// The engine's last stderr lines, which usually say why it failed.
    pub fn stderr(&self) -> &[String] {
        match self {
            Self::HandshakeTimeout { stderr, .. } | Self::Ended { stderr } | Self::Refused { stderr, .. } => stderr,
            Self::Spawn { .. } | Self::Connect(_) => &[],
        }
    }
}

impl From<ConnectError> for StartError {
    fn from(e: ConnectError) -> Self {
        match e {
            ConnectError::Spawn { program, source } => Self::Spawn { program, source },
            other => Self::Connect(other),
        }
    }
}

/// Why an HTTP engine could not be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpTargetError {
    /// Its bearer token could not be read.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// Its TLS settings could not be applied (a CA or client certificate file).
    #[error("TLS: {0}")]
    Tls(#[from] rcp_client::TlsError),
}
