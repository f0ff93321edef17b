//! `rcp-rerank`: provision the cross-encoder, serve `rerank`. The command line is
//! [`rcp_rerank::cli`].

fn main() -> std::process::ExitCode {
    rcp_server::cli::main::<rcp_rerank::cli::Cli>()
}
