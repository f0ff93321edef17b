//! `rcp-pg`: migrate a PostgreSQL database, index a corpus into it, serve it. The command line
//! is [`rcp_pg::cli`]; this file adds the allocator.

/// jemalloc (feature `jemalloc`, on by default); see the crate's Cargo.toml.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    rcp_server::cli::main::<rcp_pg::cli::Cli>()
}
