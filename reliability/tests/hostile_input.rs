//! Hostile but well-formed input, through the real dispatcher: the server answers precisely
//! and never amplifies what it was sent.

use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};

struct Echo;

impl Retrieve for Echo {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, _req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

/// Sends `frames` in order on one initialised session; returns the last answer.
fn answer(frame: &Value) -> (Value, usize) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let _g = rt.enter();
    let server = Server::builder("echo", "0").retrieve(Echo).build();
    let connection = server.connect(|_| {});
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    rt.block_on(connection.handle(hello.to_string().as_bytes())).expect("initialized");
    let bytes = rt.block_on(connection.handle(frame.to_string().as_bytes())).expect("an answer");
    (serde_json::from_slice(&bytes).expect("json"), bytes.len())
}

#[test]
fn a_megabyte_method_name_is_not_echoed_whole() {
    let method = "x".repeat(1 << 20);
    let (v, len) = answer(&json!({"jsonrpc": "2.0", "id": 1, "method": method}));
    assert_eq!(v["error"]["code"], -32004, "{v}");
    assert!(len < 4096, "a 1 MiB method name produced a {len}-byte answer");
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("1048576 bytes")), "{v}");
}

#[test]
fn a_megabyte_option_value_is_not_echoed_whole() {
    let mode = "y".repeat(1 << 20);
    let (v, len) = answer(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "retrieve", "params": {"query": "q", "k": 1, "mode": mode}}),
    );
    assert_eq!(v["error"]["code"], -32005, "{v}");
    assert!(len < 4096, "a 1 MiB mode produced a {len}-byte answer");
}

#[test]
fn a_megabyte_unknown_key_path_is_not_echoed_whole() {
    let field = "z".repeat(1 << 20);
    let (v, len) =
        answer(&json!({"jsonrpc": "2.0", "id": 3, "method": "retrieve", "params": {"query": "q", "k": field}}));
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(len < 8192, "a 1 MiB value produced a {len}-byte answer");
}
