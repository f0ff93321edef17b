//! rcp-dense engine (work in progress).

fn main() {}
