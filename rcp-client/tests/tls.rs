//! HTTPS end to end (§15): the `tiny_engine` example serving `--http` with `--tls-cert` and
//! `--tls-key` (certificates made by the test), reached by rcp_client with and without the CA
//! that signed them. Every refusal names its cause: an unknown issuer, an expired certificate,
//! a certificate for another host, a missing or untrusted client certificate. A plaintext
//! request to the TLS port gets no HTTP answer, and SIGHUP re-reads the certificate, keeping the
//! old one when the new files are bad.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rcp_client::{Client, ClientCert, ClientOptions, TlsOptions};
use rcp_testkit::pki::{CertFiles, TestPki};
use rcp_testkit::{HttpServer, example_bin};

/// `tiny_engine --http 127.0.0.1:0 --tls-cert CERT --tls-key KEY [EXTRA...]`.
fn https_engine(cert: &CertFiles, extra: &[&Path]) -> HttpServer {
    let mut cmd = Command::new(example_bin("tiny_engine"));
    cmd.args(["--http", "127.0.0.1:0", "--tls-cert"]).arg(&cert.cert).arg("--tls-key").arg(&cert.key);
    if let Some(ca) = extra.first() {
        cmd.arg("--tls-client-ca").arg(ca);
    }
    let server = HttpServer::spawn(cmd);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    server
}

fn trusting(ca: Option<&Path>, client: Option<&CertFiles>) -> ClientOptions {
    ClientOptions {
        tls: TlsOptions {
            ca_cert: ca.map(Path::to_path_buf),
            client_cert: client.map(|c| ClientCert { cert: c.cert.clone(), key: c.key.clone() }),
        },
        connect_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

/// The message of a failed connection.
async fn refusal(url: &str, options: ClientOptions) -> String {
    match Client::connect_http(url, options).await {
        Ok(_) => panic!("{url}: connected, but the connection should have been refused"),
        Err(e) => {
            eprintln!("{url}: refused: {e}");
            e.to_string()
        }
    }
}

#[tokio::test]
async fn an_https_engine_is_reached_with_its_ca_and_refused_with_the_reason_otherwise() {
    let pki = TestPki::new("client-https");
    let engine = https_engine(&pki.server, &[]);
    let client = Client::connect_http(&engine.url, trusting(Some(&pki.ca), None)).await.expect("connect with the CA");
    let hits = client.search("rust", 3).await.expect("search over HTTPS");
    assert!(!hits.hits.is_empty());

    let without_ca = refusal(&engine.url, trusting(None, None)).await;
    assert!(without_ca.contains("UnknownIssuer") || without_ca.contains("unknown issuer"), "{without_ca}");

    let expired = https_engine(&pki.expired, &[]);
    let message = refusal(&expired.url, trusting(Some(&pki.ca), None)).await;
    assert!(message.contains("expired") || message.contains("Expired"), "{message}");

    let wrong_host = https_engine(&pki.wrong_host, &[]);
    let message = refusal(&wrong_host.url, trusting(Some(&pki.ca), None)).await;
    assert!(message.contains("not valid for name") || message.contains("NotValidForName"), "{message}");

    let plain = engine.url.replacen("https://", "http://", 1);
    let message = refusal(&plain, trusting(Some(&pki.ca), None)).await;
    assert!(message.contains("HTTP"), "a plain-HTTP client fails on the TLS port: {message}");
}

#[test]
fn a_plaintext_request_to_the_tls_port_gets_no_http_answer() {
    let pki = TestPki::new("client-plain");
    let engine = https_engine(&pki.server, &[]);
    let addr = engine.url.trim_start_matches("https://").trim_end_matches("/rcp").to_owned();
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let request = format!(
        "POST /rcp/ping HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(!answer.starts_with(b"HTTP/"), "a plaintext request was answered: {}", String::from_utf8_lossy(&answer));
}

#[tokio::test]
async fn with_a_client_ca_only_clients_with_a_certificate_it_signed_get_in() {
    let pki = TestPki::new("client-mtls");
    let engine = https_engine(&pki.server, &[&pki.ca]);
    let message = refusal(&engine.url, trusting(Some(&pki.ca), None)).await;
    assert!(message.contains("CertificateRequired"), "{message}");
    let stranger = refusal(&engine.url, trusting(Some(&pki.ca), Some(&pki.stranger))).await;
    assert!(stranger.contains("UnknownCA"), "{stranger}");
    let client = Client::connect_http(&engine.url, trusting(Some(&pki.ca), Some(&pki.client)))
        .await
        .expect("a client certificate the CA signed is accepted");
    client.search("rust", 1).await.expect("search over mutual TLS");
}

#[tokio::test]
async fn sighup_rereads_the_certificate_and_a_bad_one_keeps_the_old() {
    let pki = TestPki::new("client-reload");
    let live = CertFiles { cert: pki.dir().join("live.pem"), key: pki.dir().join("live-key.pem") };
    let install = |from: &CertFiles| {
        std::fs::copy(&from.cert, &live.cert).expect("copy cert");
        std::fs::copy(&from.key, &live.key).expect("copy key");
    };
    install(&pki.server);
    let engine = https_engine(&live, &[]);
    let hup = || {
        let status = Command::new("kill").args(["-HUP", &engine.pid().to_string()]).status().expect("kill");
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(500));
    };
    std::fs::write(&live.cert, "not a certificate").expect("break the file");
    hup();
    Client::connect_http(&engine.url, trusting(Some(&pki.ca), None))
        .await
        .expect("a reload that fails keeps the certificate in force");
    install(&pki.wrong_host);
    hup();
    let message = refusal(&engine.url, trusting(Some(&pki.ca), None)).await;
    assert!(message.contains("not valid for name") || message.contains("NotValidForName"), "{message}");
}

#[tokio::test]
async fn a_bad_ca_file_is_a_connect_error_naming_it() {
    let pki = TestPki::new("client-badca");
    let missing = pki.dir().join("missing-ca.pem");
    let message = refusal("https://127.0.0.1:9/rcp", trusting(Some(&missing), None)).await;
    assert!(message.contains("missing-ca.pem"), "{message}");
}
