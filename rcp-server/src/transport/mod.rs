//! Transports: they only frame bytes. Every protocol rule lives in the dispatcher.

#[cfg(feature = "http")]
pub mod http;
mod lines;
mod pipeline;
mod queue;
mod stdio;

pub(crate) use lines::{Line, LineSplitter};
