//! The `rcp` command line against real fixture engines.

use std::process::Command;

fn fixture() -> String {
    let exe = std::env::current_exe().expect("exe");
    let bin = exe.parent().and_then(|d| d.parent()).expect("target dir").join("examples").join("fixture_engine");
    bin.to_string_lossy().into_owned()
}

#[test]
fn info_retrieve_and_federate_print_tables_and_json() {
    let rcp = env!("CARGO_BIN_EXE_rcp");
    let stdio = format!("{} --name one --doc a:wing --doc b:lift", fixture());
    let out = Command::new(rcp).args(["info", "--stdio", &stdio]).output().expect("run rcp");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("server:       one") && text.contains("retrieve"), "{text}");

    let out = Command::new(rcp).args(["retrieve", "--stdio", &stdio, "lift", "-k", "1", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json output");
    assert_eq!(v["hits"][0]["id"], "b");
    assert_eq!(v["hits"].as_array().map(Vec::len), Some(1));

    let dir = std::env::temp_dir().join(format!("rcp-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let reg = dir.join("rcp.json");
    let f = fixture();
    let registry = serde_json::json!({"engines": [
        {"id": "one", "command": [f, "--doc", "a:wing", "--doc", "b:wing lift"]},
        {"id": "two", "command": [f, "--doc", "b:lift", "--doc", "c:wing"]}
    ]});
    std::fs::write(&reg, registry.to_string()).unwrap();
    let out = Command::new(rcp).args(["federate", reg.to_str().unwrap(), "wing lift", "-k", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("== one") && text.contains("== two") && text.contains("== fused (rrf)"), "{text}");
    let out =
        Command::new(rcp).args(["federate", reg.to_str().unwrap(), "wing lift", "-k", "3", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["fused"]["hits"][0]["id"], "b", "b is ranked by both engines");
    let out = Command::new(rcp).args(["retrieve", "--stdio", "/nonexistent/x", "q"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("spawn"));
}
