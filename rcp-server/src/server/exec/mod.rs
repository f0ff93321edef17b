//! The bounded CPU executor: where handlers run CPU-bound work (search, embedding, index
//! builds) instead of on an unbounded pool of blocking threads.
//!
//! A fixed number of worker threads (sized to the cores unless configured) serve two
//! [`Lane`]s, each with its own bounded FIFO queue. Writes may occupy at most half of the
//! threads (at least one), and when both lanes have work the workers alternate between them,
//! so a queue of writes never starves reads and a stream of reads never starves writes. A
//! job submitted to a full lane is refused at once with `-32011` and a `retryAfterMs`
//! estimated from the lane's recent job durations, instead of growing memory; through a
//! [`Executor::waiting`] handle (a pipe's one peer) it waits for room instead, while that
//! peer's transport stops reading. A queued job
//! whose request is cancelled or past its deadline never runs, and leaves the queue when its
//! request is answered. Ahead of both lanes, a finishing queue serialises large answers
//! (a `retrieve` with k=100 full texts) whose search already ran: such a job is never refused
//! and waits for no queued search, and the async runtime's threads keep to reading, pings and
//! writing. Lifecycle methods (`ping`, `info`, `notifications/cancel`) never come
//! here: the dispatcher answers them on the transport's own task.
//!
//! Handlers reach it through [`crate::RequestContext::run_cpu`]. The executor leaves its
//! threads' scheduling alone unless the server is configured otherwise ([`ExecOptions::nice`]);
//! [`Scheduling`] is what an embedding binary may ask for the threads that read and write.

mod lane;
mod pool;
mod sched;
#[cfg(test)]
mod tests;

pub use lane::{ExecOptions, Lane};
pub use pool::{ExecStats, Executor};
#[cfg(feature = "tuning")]
pub use sched::Scheduling;
