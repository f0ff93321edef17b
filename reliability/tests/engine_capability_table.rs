//! The capability table of `docs/engines.md` is what each bundled engine's `initialize` says in
//! its default serving mode (`rcp-bm25 serve`, `rcp-dense serve`, `rcp-pg serve` on a fresh
//! database), so the table cannot drift from the code.
//!
//! The table follows the marker `<!-- capability-table -->`; a row names a capability key
//! (`feedback`) or a `retrieve` metadata key (`retrieve.tokenBudget`) and has one cell per
//! engine: `yes` (present, or `true`), `no` (absent, `null` or `false`), or the list it holds
//! (`sparse, dense`). On a mismatch the test prints the table the engines describe.

use std::path::{Path, PathBuf};
use std::process::Command;

use rcp_testkit::pg::PgCluster;
use rcp_testkit::{Engine, workspace_bin};
use serde_json::Value;

const MARKER: &str = "<!-- capability-table -->";

/// The columns of the table, in order.
const ENGINES: [&str; 3] = ["rcp-bm25", "rcp-dense", "rcp-pg"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The table's rows: (key, one cell per engine).
fn documented() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(root().join("docs/engines.md")).expect("read docs/engines.md");
    let (_, after) = text.split_once(MARKER).expect("docs/engines.md has the capability-table marker");
    let cells = |line: &str| -> Vec<String> {
        line.trim().trim_matches('|').split('|').map(|c| c.trim().trim_matches('`').to_owned()).collect()
    };
    after
        .lines()
        .skip_while(|l| !l.trim_start().starts_with('|'))
        .take_while(|l| l.trim_start().starts_with('|'))
        .skip(2)
        .map(|l| {
            let mut c = cells(l);
            let key = c.remove(0);
            (key, c)
        })
        .collect()
}

/// What `caps` say of `key`, as a cell.
fn cell(caps: &Value, key: &str) -> String {
    let v = match key.split_once('.') {
        Some((outer, inner)) => caps.get(outer).and_then(|o| o.get(inner)),
        None => caps.get(key),
    };
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => "no".to_owned(),
        Some(Value::Array(items)) => {
            items.iter().map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned)).collect::<Vec<_>>().join(", ")
        }
        Some(Value::Bool(true)) | Some(Value::Object(_)) => "yes".to_owned(),
        Some(other) => other.to_string(),
    }
}

/// The capabilities of `engine` started by `args`.
fn capabilities(bin: &Path, args: &[&str]) -> Value {
    let mut e = Engine::spawn(bin, args);
    e.initialize()["capabilities"].clone()
}

#[test]
fn the_capability_table_is_what_each_engine_advertises() {
    let rows = documented();
    assert!(rows.len() >= 10, "the table has too few rows: {rows:?}");
    let bm25 = capabilities(&workspace_bin("rcp-bm25", "rcp-bm25"), &["serve"]);
    let dense = capabilities(&workspace_bin("rcp-dense", "rcp-dense"), &["serve", "--fetch-model"]);
    let pg = match PgCluster::shared() {
        Ok(cluster) => {
            let url = cluster.create_database("captable").expect("database");
            Some(capabilities(&workspace_bin("rcp-pg", "rcp-pg"), &["serve", "--fetch-model", "--database-url", &url]))
        }
        Err(e) if Command::new("python3").arg("--version").output().is_err() => {
            eprintln!("SKIP rcp-pg: PostgreSQL cannot be provisioned without python3 ({e})");
            None
        }
        Err(e) => panic!("PostgreSQL could not be started: {e}"),
    };
    let served = [Some(&bm25), Some(&dense), pg.as_ref()];
    let mut wrong = Vec::new();
    let mut actual = vec![format!("| capability | {} |", ENGINES.join(" | ")), "|---|---|---|---|".to_owned()];
    for (key, cells) in &rows {
        assert_eq!(cells.len(), ENGINES.len(), "row {key}: one cell per engine");
        let mut line = vec![format!("`{key}`")];
        for ((engine, caps), documented) in ENGINES.iter().zip(served).zip(cells) {
            let Some(caps) = caps else {
                line.push(documented.clone());
                continue;
            };
            let is = cell(caps, key);
            if &is != documented {
                wrong.push(format!("{key} on {engine}: documented '{documented}', advertised '{is}'"));
            }
            line.push(is);
        }
        actual.push(format!("| {} |", line.join(" | ")));
    }
    assert!(wrong.is_empty(), "{}\n\nthe table the engines describe:\n{}", wrong.join("\n"), actual.join("\n"));
}
