//! rcp-bm25 engine (work in progress).

fn main() {}
