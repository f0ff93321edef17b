//! [`Dispatcher`]: what the dispatcher serves from, built once by the server's builder.

use super::routes::Routes;
use super::rules::lifecycle::Identity;
use crate::exec::Executor;
use crate::options::ServerOptions;

/// The parts every request is served from: who the server is and what it enables (for the
/// lifecycle methods), the registered methods, the limits and deadlines, and the CPU executor
/// handlers run on. Shared, behind an `Arc`, by the server and every transport serving it.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    /// Identity and capabilities.
    pub identity: Identity,
    /// The registered method families.
    pub routes: Routes,
    /// Limits and deadlines.
    pub options: ServerOptions,
    /// The bounded pool CPU-bound handler work runs on.
    pub executor: Executor,
}
