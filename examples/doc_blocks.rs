//! The Rust blocks of the docs, compiled as doctests so they cannot rot (`cargo test
//! -p rcp-examples --doc`). `.ci/docs-check` refuses a Rust block in a file not listed here.

#[doc = include_str!("../README.md")]
pub struct Readme;

#[doc = include_str!("../docs/writing-an-engine.md")]
pub struct WritingAnEngine;

#[doc = include_str!("../rcp-client/README.md")]
pub struct ClientReadme;

#[doc = include_str!("../docs/scheduling.md")]
pub struct Scheduling;
