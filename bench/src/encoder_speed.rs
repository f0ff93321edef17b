//! What the encoder speed benchmarks (`embed_bench`, `rerank_speed`) share: the
//! `SESSIONSxTHREADS` layouts they sweep, and running the Python onnxruntime reference on the
//! same model and texts in the same run.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

/// Parses one `SESSIONSxTHREADS` layout, e.g. `2x1`.
pub fn layout(spec: &str) -> anyhow::Result<(usize, usize)> {
    let (s, t) = spec.split_once('x').with_context(|| format!("layout '{spec}': expected SESSIONSxTHREADS"))?;
    let n = |v: &str| v.parse::<usize>().with_context(|| format!("layout '{spec}'"));
    Ok((n(s)?, n(t)?))
}

/// Runs the Python `script` with `py -c SCRIPT MODEL_DIR INPUT ARGS...`, where `INPUT` is a
/// scratch file holding `payload` as JSON (removed afterwards); returns the JSON the script
/// prints on stdout. `name` labels the scratch file.
pub fn run_python(
    py: &Path,
    script: &str,
    name: &str,
    model_dir: &Path,
    payload: &Value,
    args: &[String],
) -> anyhow::Result<Value> {
    let scratch = std::env::temp_dir().join(format!("{name}_{}.json", std::process::id()));
    std::fs::write(&scratch, payload.to_string()).with_context(|| format!("write {}", scratch.display()))?;
    let out = Command::new(py)
        .arg("-c")
        .arg(script)
        .arg(model_dir)
        .arg(&scratch)
        .args(args)
        .output()
        .with_context(|| format!("run {}", py.display()));
    let _ = std::fs::remove_file(&scratch);
    let out = out?;
    if !out.status.success() {
        bail!("python failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    serde_json::from_slice(&out.stdout).context("python output")
}

#[cfg(test)]
mod tests {
    use super::layout;

    #[test]
    fn layouts_parse_and_refuse() {
        assert_eq!(layout("2x1").ok(), Some((2, 1)));
        assert!(layout("2").is_err());
        assert!(layout("ax1").is_err());
    }
}
