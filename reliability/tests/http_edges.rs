//! The HTTP transport at its edges (§15.5, §15.6), over real sockets on 127.0.0.1 with short
//! configured timeouts: slow or idle peers are cut off, a connection flood beyond the cap is
//! refused while a valid request still gets through, one client flooding connections does not
//! starve another (per-client shares of the cap), stalled bodies take no in-flight slots, an
//! unauthenticated body is refused unread, and a token source without a token does not start a
//! server without authentication.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use clap::Parser;
use rcp_server::cli::ServeArgs;
use rcp_server::http::HttpOptions;
use rcp_server::{HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::RetrieveCapability;
use rcp_wire::{Hit, RetrieveResult};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::oneshot;

const TOKEN: &str = "edge-token";

struct Echo;

impl Retrieve for Echo {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability { max_k: Some(10), modes: Some(vec![rcp_wire::Mode::Sparse]), ..Default::default() }
    }

    /// `k: 2` is slow: it holds its client's in-flight slot for 1.5 s.
    async fn retrieve(&self, req: RetrieveRequest, _ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        if req.k == 2 {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        Ok(RetrieveResult::from_hits(vec![Hit::new("a", 1.0)]))
    }
}

/// A server on an ephemeral port; it stops when the returned sender is dropped.
async fn start(opts: HttpOptions) -> (SocketAddr, oneshot::Sender<()>) {
    let server = Server::builder("edges", "0").retrieve(Echo).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = rcp_server::http::serve_on(&server, listener, opts, async move {
            let _ = stopped.await;
        })
        .await;
    });
    (addr, stop)
}

fn head(method: &str, content_length: usize, auth: bool) -> String {
    let auth = if auth { format!("authorization: Bearer {TOKEN}\r\n") } else { String::new() };
    format!(
        "POST /rcp/{method} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n{auth}\
         content-length: {content_length}\r\n\r\n"
    )
}

/// Everything the server sends until it closes the connection, or `None` if it is still open
/// after `within`.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| String::from_utf8_lossy(&got).into_owned())
}

/// One complete request on a fresh connection; the status code and the JSON body.
async fn call(addr: SocketAddr, method: &str, id: i64, auth: bool) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"query": "q", "k": 1}}).to_string();
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let request = head(method, body.len(), auth).replace("\r\n\r\n", "\r\nconnection: close\r\n\r\n") + &body;
    s.write_all(request.as_bytes()).await.expect("write");
    let text = until_closed(&mut s, Duration::from_secs(5)).await.expect("an answer");
    status_and_body(&text)
}

fn status_and_body(text: &str) -> (u16, Value) {
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn edges() -> HttpOptions {
    HttpOptions {
        bearer_tokens: vec![TOKEN.into()],
        header_read_timeout: Duration::from_millis(300),
        body_read_timeout: Duration::from_millis(300),
        ..HttpOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_header_and_idle_connections_are_closed_by_the_header_timeout() {
    let (addr, _stop) = start(edges()).await;
    let mut conns = Vec::new();
    for i in 0..50 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        if i % 2 == 0 {
            // Half a request line, then nothing: a slow-header client.
            s.write_all(b"POST /rcp/ping HTTP/1.1\r\nhost: 127.0").await.expect("write");
        }
        conns.push(s);
    }
    let started = Instant::now();
    for s in &mut conns {
        assert!(until_closed(s, Duration::from_secs(3)).await.is_some(), "a slow or idle connection was kept open");
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    let (status, v) = call(addr, "ping", 1, true).await;
    assert_eq!((status, &v["result"]), (200, &json!({})), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_is_cut_off_by_the_body_timeout() {
    let (addr, _stop) = start(edges()).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(head("ping", 100, true).as_bytes()).await.expect("write");
    s.write_all(b"{\"jsonrpc\":").await.expect("write");
    let text = until_closed(&mut s, Duration::from_secs(3)).await.expect("closed by the body timeout");
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_beyond_the_connection_cap_is_refused_and_a_valid_request_still_served() {
    let opts = HttpOptions { max_connections: 8, max_connections_per_client: Some(8), ..edges() };
    let (addr, _stop) = start(opts).await;
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(TcpStream::connect(addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    for _ in 0..40 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let text = until_closed(&mut s, Duration::from_secs(1)).await.expect("refused at once");
        assert!(text.starts_with("HTTP/1.1 503") && text.contains("retry-after: 1"), "{text}");
    }
    assert!(started.elapsed() < Duration::from_millis(1500), "refusals must not wait for the idle connections");
    // The idle holders are cut off by the header timeout; a fresh, valid ping is then served.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (status, v) = call(addr, "ping", 2, true).await;
        if status == 200 {
            assert_eq!(v["result"], json!({}), "{v}");
            break;
        }
        assert_eq!(status, 503, "{v}");
        assert!(Instant::now() < deadline, "the idle connections were never released");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A connection to `addr` from the local address `source` (any 127.0.0.0/8 address is routed
/// to loopback on Linux without setup, so two of them are two clients).
async fn connect_from(source: IpAddr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    socket.connect(addr).await
}

/// A ping from `source` on a fresh connection: whether it was answered `200` with a result.
async fn ping_from(source: IpAddr, addr: SocketAddr, id: i64) -> bool {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string();
    let Ok(mut s) = connect_from(source, addr).await else { return false };
    let request = head("ping", body.len(), true).replace("\r\n\r\n", "\r\nconnection: close\r\n\r\n") + &body;
    if s.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let Some(text) = until_closed(&mut s, Duration::from_secs(5)).await else { return false };
    let (status, v) = status_and_body(&text);
    status == 200 && v["result"] == json!({})
}

/// Issue #29, case 6: one client holding every connection it can open (idle, "half-open")
/// took the whole connection cap, and another client's pings were refused `503` (3 of 60
/// served). With per-client shares the flooder is refused on its own share and the other
/// client's pings are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_flooding_connections_does_not_starve_another() {
    const FLOODER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    // Idle connections are kept for the whole test (a long header timeout), as in the
    // campaign; the cap is small so the flood exceeds it many times over.
    let opts = HttpOptions { max_connections: 64, header_read_timeout: Duration::from_secs(30), ..edges() };
    let (addr, _stop) = start(opts).await;
    let (stop_flood, mut flood_stopped) = oneshot::channel::<()>();
    let flood = tokio::spawn(async move {
        let mut held = std::collections::VecDeque::new();
        let mut opened = 0usize;
        for attempt in 1usize.. {
            match connect_from(FLOODER, addr).await {
                Ok(s) => {
                    opened += 1;
                    held.push_back(s);
                    // Keeps the newest 300: far more than the cap, fewer than the fd limit.
                    if held.len() > 300 {
                        held.pop_front();
                    }
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
            if attempt.is_multiple_of(16) {
                tokio::select! {
                    _ = &mut flood_stopped => break,
                    () = tokio::time::sleep(Duration::from_millis(1)) => {}
                }
            }
        }
        opened
    });
    // Let the flood take everything it can before the other client starts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut served = 0;
    let pings = 100;
    for id in 0..pings {
        if ping_from(CLIENT, addr, id).await {
            served += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop_flood.send(());
    let opened = flood.await.expect("flood task");
    eprintln!("{served} of {pings} pings served while another client opened {opened} connections");
    assert!(opened > 200, "the flood opened only {opened} connections");
    assert!(served * 100 >= pings * 99, "{served} of {pings} pings served while another client flooded connections");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_take_no_in_flight_slot() {
    let opts = HttpOptions { max_in_flight_per_client: 4, body_read_timeout: Duration::from_secs(5), ..edges() };
    let (addr, _stop) = start(opts).await;
    let mut stalled = Vec::new();
    for _ in 0..12 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(head("retrieve", 1000, true).as_bytes()).await.expect("write");
        s.write_all(b"{\"jsonrpc\":").await.expect("write");
        stalled.push(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, v) = call(addr, "ping", 3, true).await;
    assert_eq!((status, &v["result"]), (200, &json!({})), "{v}");
    let (status, v) = call(addr, "retrieve", 4, true).await;
    assert_eq!(status, 200);
    assert!(v["result"]["hits"].is_array(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_at_its_in_flight_cap_still_gets_ping_info_and_cancel_through() {
    let (addr, _stop) = start(HttpOptions { max_in_flight_per_client: 2, ..edges() }).await;
    let slow = |id: i64| {
        tokio::spawn(async move {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "retrieve", "params": {"query": "q", "k": 2}});
            let body = body.to_string();
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let request =
                head("retrieve", body.len(), true).replace("\r\n\r\n", "\r\nconnection: close\r\n\r\n") + &body;
            s.write_all(request.as_bytes()).await.expect("write");
            status_and_body(&until_closed(&mut s, Duration::from_secs(5)).await.expect("an answer"))
        })
    };
    let held = [slow(10), slow(11)];
    tokio::time::sleep(Duration::from_millis(300)).await;
    // At the cap: a third retrieve is refused, the methods answered at once are not.
    let (status, v) = call(addr, "retrieve", 12, true).await;
    assert_eq!((status, &v["error"]["code"]), (200, &json!(-32011)), "{v}");
    let (status, v) = call(addr, "ping", 13, true).await;
    assert_eq!((status, &v["result"]), (200, &json!({})), "{v}");
    let (status, v) = call(addr, "info", 14, true).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["server"]["name"], json!("edges"), "{v}");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancel", "params": {"requestId": 10}}).to_string();
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let request =
        head("notifications/cancel", cancel.len(), true).replace("\r\n\r\n", "\r\nconnection: close\r\n\r\n") + &cancel;
    s.write_all(request.as_bytes()).await.expect("write");
    let text = until_closed(&mut s, Duration::from_secs(5)).await.expect("an answer");
    assert!(text.starts_with("HTTP/1.1 2"), "a cancel at the cap is accepted, not refused: {text}");
    for h in held {
        let (status, v) = h.await.expect("join");
        assert_eq!((status, &v["result"]["hits"][0]["id"]), (200, &json!("a")), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_large_body_is_refused_unread() {
    let (addr, _stop) = start(HttpOptions { body_read_timeout: Duration::from_secs(30), ..edges() }).await;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(head("retrieve", 8 << 20, false).as_bytes()).await.expect("write");
    s.write_all(&[b' '; 1024]).await.expect("write");
    // Only 1 KiB of the announced 8 MiB was sent: the answer must not wait for the rest.
    let text = until_closed(&mut s, Duration::from_secs(2)).await.expect("answered and closed without the body");
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert!(text.to_ascii_lowercase().contains("www-authenticate: bearer"), "{text}");
    // A small unauthenticated request is still answered -32012 with its id.
    let (status, v) = call(addr, "ping", 5, false).await;
    assert_eq!((status, &v["id"], &v["error"]["code"]), (200, &json!(5), &json!(-32012)), "{v}");
}

/// Set only in the child processes of the test below.
const CHILD: &str = "RCP_EDGES_TOKEN_CHILD";
const TOKENS: &str = "RCP_EDGES_TOKENS";

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
}

/// Runs in a child process with `TOKENS` set (or unset) by the parent: the token source must
/// be refused at start-up, naming the variable.
#[test]
fn token_source_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let cli = Cli::try_parse_from(["serve", "--http", "127.0.0.1:0", "--tokens-env", TOKENS]).expect("arguments");
    match cli.serve.http_options() {
        Ok(opts) => panic!("started with tokens {:?}", opts.bearer_tokens),
        Err(e) => assert!(e.to_string().contains(TOKENS), "{e}"),
    }
}

#[test]
fn a_token_source_without_a_token_does_not_start_an_open_server() {
    let exe = std::env::current_exe().expect("test binary");
    for value in [None, Some(""), Some(","), Some(" , ")] {
        let mut child = std::process::Command::new(&exe);
        child.args(["--exact", "token_source_child", "--quiet", "--test-threads", "1"]).env(CHILD, "1");
        match value {
            Some(v) => child.env(TOKENS, v),
            None => child.env_remove(TOKENS),
        };
        let out = child.output().expect("run the child");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "{value:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
