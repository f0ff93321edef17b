//! A deliberately broken aggregator, the fixture that proves the federation checks can fail.
//!
//! ```sh
//! cargo run -p rcp-conformance --example broken_aggregator -- <mode> <registry>
//! ```
//!
//! It serves `retrieve` by fanning out to the engines of `<registry>` with rcp-client's
//! client-side `Federation`, which originates a federation: it neither reads the incoming
//! `_meta.federation` nor forwards `_meta.deadlineMs`. So in every mode the hop budget is not
//! kept (a request arriving with depth 0 is still forwarded, and engines receive a fresh budget
//! with an empty path). Modes:
//!
//! - `plain`: only that defect
//! - `empty-on-failure`: also answers an empty success when no engine answered

use rcp_client::federation::Federation;
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::RetrieveResult;
use rcp_wire::capabilities::RetrieveCapability;

struct Broken {
    federation: Federation,
    empty_on_failure: bool,
}

impl Retrieve for Broken {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(100), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        let mut params = req.to_params();
        params.meta = None;
        match self.federation.retrieve(params).await {
            Ok(out) => Ok(out.result),
            Err(_) if self.empty_on_failure => Ok(RetrieveResult::default()),
            Err(e) => Err(e.to_rcp()),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(mode), Some(registry)) = (args.next(), args.next()) else {
        return Err("usage: broken_aggregator <plain|empty-on-failure> <registry>".into());
    };
    let federation = Federation::from_registry_file(&registry)?;
    let broken = Broken { federation, empty_on_failure: mode == "empty-on-failure" };
    let server = Server::builder("broken-aggregator", "0").retrieve(broken).build();
    server.serve_stdio().await?;
    Ok(())
}
