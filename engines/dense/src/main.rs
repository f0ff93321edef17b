//! `rcp-dense`: provision the model, index a corpus, serve it. The command line is
//! [`rcp_dense::cli`]; this file adds the allocator.

/// jemalloc (feature `jemalloc`, on by default); see the crate's Cargo.toml.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    rcp_server::cli::main::<rcp_dense::cli::Cli>()
}
