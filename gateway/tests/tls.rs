//! The gateway reaches an `https://` engine that requires client certificates: the CA from
//! `--ca-cert` or from the entry's `caCert`, the client certificate from `--client-cert` and
//! `--client-key` (certificates made by the test).

mod common;

use std::process::Command;

use rcp_testkit::pki::TestPki;
use rcp_testkit::{HttpServer, example_bin};
use serde_json::json;

#[tokio::test]
async fn the_gateway_reaches_an_mtls_engine_with_its_ca_and_client_certificate() {
    let pki = TestPki::new("gateway-mtls");
    let mut cmd = Command::new(example_bin("tiny_engine"));
    cmd.args(["--http", "127.0.0.1:0", "--tls-cert"])
        .arg(&pki.server.cert)
        .arg("--tls-key")
        .arg(&pki.server.key)
        .arg("--tls-client-ca")
        .arg(&pki.ca);
    let engine = HttpServer::spawn(cmd);
    assert!(engine.url.starts_with("https://"), "{}", engine.url);
    let client_cert = pki.client.cert.to_string_lossy().into_owned();
    let client_key = pki.client.key.to_string_lossy().into_owned();
    let ca = pki.ca.to_string_lossy().into_owned();

    let flags = common::write_registry(pki.dir(), "flags.json", vec![json!({"id": "tiny", "url": engine.url})]);
    let gateway =
        common::gateway(&flags, &["--ca-cert", &ca, "--client-cert", &client_cert, "--client-key", &client_key]).await;
    let hits = gateway.search("rust", 3).await.expect("search through the gateway");
    assert!(!hits.hits.is_empty(), "{hits:?}");

    let entry = json!({"id": "tiny", "url": engine.url, "caCert": "ca.pem"});
    let own = common::write_registry(pki.dir(), "own.json", vec![entry]);
    let gateway = common::gateway(&own, &["--client-cert", &client_cert, "--client-key", &client_key]).await;
    let hits = gateway.search("rust", 3).await.expect("the entry's caCert, relative to the registry");
    assert!(!hits.hits.is_empty(), "{hits:?}");
}
