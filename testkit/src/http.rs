//! A server process serving RCP over HTTP on a port it picks itself, for tests that go through
//! the real binaries' HTTP front end.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A reqwest client builder for tests: rcp-client's ([`rcp_client::TlsOptions::http_client_builder`]),
/// since reqwest's rustls backend, compiled in by rcp-client's `tls` feature, has no crypto
/// provider of its own and panics in a client built without a TLS configuration.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    rcp_client::TlsOptions::default().http_client_builder().expect("a TLS configuration without files")
}

/// A reqwest client for tests ([`http_client_builder`]).
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().expect("reqwest client")
}

/// A server child serving HTTP; killed (and reaped) when dropped.
#[derive(Debug)]
pub struct HttpServer {
    child: Child,
    /// The server's RCP endpoint, `http://ADDR/rcp` (`https://` when it logs that it serves
    /// HTTPS).
    pub url: String,
}

impl HttpServer {
    /// Spawns `cmd`, which must serve HTTP on `127.0.0.1:0` (or any address) and log the bound
    /// address as `addr=...` at `info` level, as every server of this workspace does; waits for
    /// that line. `RUST_LOG=info` is set and `RCP_LOG` removed so the line is written; the rest
    /// of stderr is drained in the background.
    ///
    /// Panics (it is a test harness) when the process cannot start or exits before serving.
    pub fn spawn(mut cmd: Command) -> Self {
        cmd.env("RUST_LOG", "info").env_remove("RCP_LOG");
        let described = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {described}: {e}"));
        let err = child.stderr.take().expect("stderr is piped");
        let mut server = Self { child, url: String::new() };
        let mut lines = BufReader::new(err).lines();
        let addr = loop {
            let line = match lines.next() {
                Some(Ok(line)) => line,
                _ => panic!("{described} exited before serving"),
            };
            if let Some(at) = line.find("addr=") {
                let scheme = if line.contains("https") { "https" } else { "http" };
                break (scheme, line[at + 5..].split_whitespace().next().unwrap_or("").trim_matches('"').to_owned());
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        let (scheme, addr) = addr;
        server.url = format!("{scheme}://{addr}/rcp");
        server
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
