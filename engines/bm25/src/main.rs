//! `rcp-bm25`: build a BM25 index from JSONL and serve it over RCP. The command line is
//! [`rcp_bm25::cli`]; this file adds the allocator.

/// jemalloc (feature `jemalloc`, on by default); see the crate's Cargo.toml.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    rcp_server::cli::main::<rcp_bm25::cli::Cli>()
}
