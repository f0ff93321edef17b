//! The client over HTTP against a real listening server: handshake, gating, SSE progress.

use std::time::Duration;

use rcp_client::{Client, ClientError, ClientOptions};
use rcp_server::http::{HttpOptions, SessionMode};
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveParams, RetrieveResult};

struct Steps;

impl Retrieve for Steps {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(5), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        for i in 0..3 {
            ctx.progress(f64::from(i) / 3.0, "retrieve", format!("step {i}"));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(RetrieveResult::from_hits(vec![Hit::new("d", 1.0).with_text(req.query.text())]))
    }
}

async fn serve(opts: HttpOptions) -> String {
    let server = Server::builder("steps", "0").retrieve(Steps).streaming().build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { rcp_server::http::serve_on(&server, listener, opts, std::future::pending()).await });
    format!("http://{addr}/rcp")
}

#[tokio::test]
async fn http_client_streams_progress_and_follows_sessions() {
    for opts in [
        HttpOptions::default(),
        HttpOptions { sessions: SessionMode::Stateful { ttl: Duration::from_secs(60) }, ..Default::default() },
    ] {
        let url = serve(opts).await;
        let c = Client::connect_http(&url, ClientOptions::default()).await.expect("connect");
        assert_eq!(c.server_info().unwrap().server.name, "steps");
        let res = c.search("hello", 3).await.expect("search");
        assert_eq!(res.hits[0].text.as_deref(), Some("hello"));
        let mut streaming = c.retrieve_streaming(RetrieveParams::new("hi", 1)).expect("gated ok");
        let result = streaming.result.await.expect("result");
        assert_eq!(result.hits.len(), 1);
        let mut frames = Vec::new();
        while let Ok(p) = streaming.progress.try_recv() {
            frames.push(p);
        }
        assert_eq!(frames.len(), 3, "{frames:?}");
        assert!(matches!(c.embed(Default::default()).await, Err(ClientError::CapabilityMissing { .. })));
    }
}

#[tokio::test]
async fn an_expired_stateful_session_is_renewed_transparently() {
    let url = serve(HttpOptions {
        sessions: SessionMode::Stateful { ttl: Duration::from_millis(300) },
        ..Default::default()
    })
    .await;
    let c = Client::connect_http(&url, ClientOptions::default()).await.expect("connect");
    assert!(c.search("one", 1).await.is_ok());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let res = c.search("two", 1).await.expect("the client re-initializes and retries");
    assert_eq!(res.hits[0].text.as_deref(), Some("two"));
}
