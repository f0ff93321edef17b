//! Shared helpers of the integration tests: the model, provisioned once per test binary
//! through the engine's own provisioning code, and engine processes.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use rcp_dense::model;
use rcp_testkit::Engine;

/// The model directory (`RCP_MODEL_DIR` or the default cache), provisioned if needed.
pub(crate) fn model_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = model::default_dir();
        model::locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the model");
        dir
    })
    .clone()
}

/// The engine binary.
pub(crate) fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rcp-dense"))
}

/// Spawns `rcp-dense serve ARGS` with the provisioned model and runs `initialize`.
pub(crate) fn serve(args: &[&str]) -> Engine {
    let dir = model_dir();
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    let mut e = Engine::spawn_env(&bin(), &all, &[("RCP_MODEL_DIR", dir.to_str().expect("utf-8 path"))]);
    e.initialize();
    e
}

/// The Euclidean norm.
pub(crate) fn norm(v: &[f32]) -> f64 {
    v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt()
}

/// A JSON array of numbers as `f32`s.
pub(crate) fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number") as f32).collect()
}
