//! Transports: they only frame bytes. Every protocol rule lives in the dispatcher.

pub mod http;
mod lines;
pub mod stdio;

pub(crate) use lines::{Line, LineSplitter};
