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

/// Three topical groups of four documents (`wing-*`, `heat-*`, `cook-*`), each titled with its
/// text.
pub(crate) fn topical_documents() -> serde_json::Value {
    let groups = [
        (
            "wing",
            [
                "Supersonic flow over a swept wing and its shock waves.",
                "Lift and drag of a thin wing in supersonic flight.",
                "Flutter of aircraft wings at high Mach numbers.",
                "Pressure distribution on a delta wing at supersonic speed.",
            ],
        ),
        (
            "heat",
            [
                "Heat transfer in a laminar boundary layer on a flat plate.",
                "Skin friction and heat transfer in turbulent boundary layers.",
                "Boundary layer transition and surface heating in hypersonic flow.",
                "Cooling of a heated plate by a laminar boundary layer.",
            ],
        ),
        (
            "cook",
            [
                "Slow roasting vegetables with olive oil and garlic.",
                "A recipe for fresh pasta dough with eggs and flour.",
                "Baking sourdough bread with a crisp crust.",
                "Simmering a tomato sauce with basil for pasta.",
            ],
        ),
    ];
    let docs: Vec<serde_json::Value> = groups
        .iter()
        .flat_map(|(g, texts)| {
            texts
                .iter()
                .enumerate()
                .map(move |(i, t)| serde_json::json!({"id": format!("{g}-{i}"), "text": t, "meta": {"title": t}}))
        })
        .collect();
    serde_json::json!(docs)
}
