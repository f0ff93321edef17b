//! The exit codes of every command-line tool of this workspace (`rcpctl`, the engines, the
//! gateway, the inspector): one rule, kept here so no binary picks its own.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | the command did everything it was asked |
//! | 1 | it did not: an I/O, network, database or model failure, an error from a peer, or an `index` run that left lines out (each named as `FILE:LINE`) |
//! | 2 | usage: the arguments were not understood (clap's code; nothing was done) |
//!
//! A failure always prints `<program>: <what happened>` on stderr first.

/// The command did everything it was asked.
pub const SUCCESS: u8 = 0;

/// The command failed, or did part of its work (an `index` run that skipped lines).
pub const FAILURE: u8 = 1;

/// The arguments were not understood; nothing was done (clap exits with this code).
pub const USAGE: u8 = 2;
