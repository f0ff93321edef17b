//! Collection grants through the gateway (§15.6): a `read@fruit,write@fruit` token reaches only
//! the `fruit` collection — its hits, its catalog entry, its writes — and is never told that
//! another collection exists; a plain token still reaches every collection.

mod common;

use std::process::Command;

use common::{bm25_bin, gateway_bin, write_registry};
use rcp_testkit::HttpServer;
use serde_json::{Value, json};

const TOKENS: &str = "\
read@fruit,write@fruit  fruit-secret
read,write              all-secret
";

struct Gateway {
    server: HttpServer,
    client: reqwest::Client,
}

impl Gateway {
    async fn rpc(&self, token: &str, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = self.client.post(&self.server.url).bearer_auth(token).json(&body).send().await.expect("send");
        assert_eq!(r.status(), 200, "{method}");
        let v: Value = r.json().await.expect("json");
        rcp_testkit::assert_valid_frame(&v);
        v
    }
}

fn code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().unwrap_or(0)
}

fn hit_ids(v: &Value) -> Vec<String> {
    v["result"]["hits"]
        .as_array()
        .map(|h| h.iter().filter_map(|h| h["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fruit_token_reaches_only_the_fruit_collection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bm25 = bm25_bin();
    let engine = |id: &str| {
        let data = dir.path().join(id);
        json!({"id": id, "collection": id, "command": [bm25.clone(), "serve", "--data-dir", data.to_string_lossy(), "--create"]})
    };
    let registry = write_registry(dir.path(), "rcp.json", vec![engine("fruit"), engine("veg")]);
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, TOKENS).expect("tokens");
    let mut cmd = Command::new(gateway_bin());
    cmd.args(["serve", "--http", "127.0.0.1:0", "--registry"]).arg(&registry).arg("--tokens-file").arg(&tokens);
    let gw = Gateway { server: HttpServer::spawn(cmd), client: rcp_testkit::http_client() };

    // The plain token writes to both collections.
    let add = |collection: &str, id: &str, text: &str| json!({"documents": [{"id": id, "text": text}], "_meta": {"collection": collection}});
    for (collection, id, text) in [("fruit", "apple", "apple pie recipe"), ("veg", "carrot", "carrot soup recipe")] {
        let r = gw.rpc("all-secret", "index/add", add(collection, id, text)).await;
        assert_eq!(code(&r), 0, "{r}");
    }
    let everything = gw.rpc("all-secret", "retrieve", json!({"query": "recipe", "k": 10})).await;
    let mut all = hit_ids(&everything);
    all.sort();
    assert_eq!(all, ["apple", "carrot"], "{everything}");

    // The fruit token: fruit's hits only, whatever it names.
    let r = gw.rpc("fruit-secret", "retrieve", json!({"query": "recipe", "k": 10})).await;
    assert_eq!(hit_ids(&r), ["apple"], "{r}");
    assert!(!r.to_string().contains("veg"), "the answer names another collection: {r}");
    for named in [json!(["veg"]), json!(["no-such-collection"]), json!(["veg", "fruit"])] {
        let r = gw
            .rpc("fruit-secret", "retrieve", json!({"query": "recipe soup", "k": 10, "_meta": {"collections": named}}))
            .await;
        assert_eq!(code(&r), 0, "{named}: {r}");
        let want: Vec<&str> = if named.to_string().contains("fruit") { vec!["apple"] } else { vec![] };
        assert_eq!(hit_ids(&r), want, "{named}: {r}");
        assert!(!r.to_string().contains("carrot"), "{r}");
    }
    // An unknown collection is still an error for a caller who may read everything.
    let r = gw.rpc("all-secret", "retrieve", json!({"query": "q", "k": 1, "_meta": {"collections": ["nope"]}})).await;
    assert_eq!(code(&r), -32602, "{r}");

    // Writes: its own collection, by default or by name; any other is -32012 and stores nothing.
    let r =
        gw.rpc("fruit-secret", "index/add", json!({"documents": [{"id": "pear", "text": "pear tart recipe"}]})).await;
    assert_eq!(code(&r), 0, "the default collection is the first the token may write to: {r}");
    for collection in ["veg", "no-such-collection"] {
        let r = gw.rpc("fruit-secret", "index/add", add(collection, "intruder", "intruder recipe")).await;
        assert_eq!(code(&r), -32012, "{collection}: {r}");
        let r = gw
            .rpc("fruit-secret", "index/delete", json!({"ids": ["carrot"], "_meta": {"collection": collection}}))
            .await;
        assert_eq!(code(&r), -32012, "{collection}: {r}");
    }
    let everything = gw.rpc("all-secret", "retrieve", json!({"query": "recipe", "k": 10})).await;
    let mut all = hit_ids(&everything);
    all.sort();
    assert_eq!(all, ["apple", "carrot", "pear"], "a refused write changed something: {everything}");

    // The catalog lists what the token reaches.
    let list = gw.rpc("fruit-secret", "catalog/list", json!({})).await;
    let engines: Vec<&str> =
        list["result"]["engines"].as_array().expect("engines").iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(engines, ["fruit"], "{list}");
    assert_eq!(list["result"]["_meta"]["collections"], json!({"fruit": ["fruit"]}), "{list}");
    assert!(!list.to_string().contains("veg"), "{list}");
    let list = gw.rpc("all-secret", "catalog/list", json!({})).await;
    assert_eq!(list["result"]["engines"].as_array().map(Vec::len), Some(2), "{list}");
}
