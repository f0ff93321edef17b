//! Runs `example_federation` end to end: two real engine processes (BM25 and dense), one
//! query, fused output that draws on both engines.

use std::process::Command;

#[test]
fn example_federation_fuses_hits_from_both_engines() {
    let bin = rcp_testkit::example_bin("example_federation");
    let out = Command::new(bin).args(["how do search engines combine ranked lists", "-k", "6"]).output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "example failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("bm25 ranking") && stdout.contains("dense ranking"), "{stdout}");
    let section = |title: &str| -> Vec<Vec<String>> {
        stdout
            .split(title)
            .nth(1)
            .unwrap_or_default()
            .lines()
            .skip(2)
            .take_while(|l| !l.trim().is_empty() && !l.trim_start().starts_with("notes"))
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect()
    };
    for title in ["fused top-6, RRF", "fused top-6, convex"] {
        let rows = section(title);
        assert_eq!(rows.len(), 6, "{title}: {stdout}");
        // Columns: #, id, from, fused, bm25 rank, dense rank.
        assert!(rows.iter().any(|r| r[4] != "-"), "no BM25 contribution in {title}");
        assert!(rows.iter().any(|r| r[5] != "-"), "no dense contribution in {title}");
        assert!(rows.iter().all(|r| r[3].parse::<f64>().is_ok()));
    }
    assert!(stdout.contains("[used: convex]"), "both engines advertise scoreFloor, so convex must not fall back");
    assert!(stdout.contains("(union, what it can do)") && stdout.contains("embed"), "{stdout}");
}
