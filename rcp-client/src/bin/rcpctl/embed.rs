//! `rcpctl embed`: texts through an engine's `embed` (§7.3), printed one row per input (its
//! dimension and the first numbers of its vector) or as JSON (`{vectors, dimension}`). With
//! `--registry`, the federation core routes the call to one embedder: `--engine ID`, else the
//! one of highest priority (failing over only to engines of the same model).

use clap::Args;
use rcp_wire::capabilities::Capability;
use rcp_wire::embed::EmbedParams;
use serde_json::json;

use crate::federated;
use crate::out::outln;
use crate::print_json;
use crate::table::clip;
use crate::target::{self, Auth, Target};

/// How many numbers of each vector the table shows.
const SHOWN: usize = 4;

/// `rcpctl embed` flags.
#[derive(Args)]
pub(crate) struct EmbedArgs {
    #[command(flatten)]
    pub target: Target,
    /// The texts, one vector each.
    #[arg(required = true, value_name = "TEXT")]
    pub texts: Vec<String>,
    /// What the texts are, for asymmetric encoders: query or document.
    #[arg(long, value_parser = ["query", "document"])]
    pub kind: Option<String>,
    /// With --registry: the engine (its registry id) that embeds (sent as `_meta.engine`); it
    /// must serve the same model as the registry's default embedder. Without it, the embedder
    /// of highest priority.
    #[arg(long, value_name = "ID", conflicts_with_all = ["stdio", "http"])]
    pub engine: Option<String>,
}

/// Embeds the texts and prints the vectors.
pub(crate) async fn run(args: &EmbedArgs, auth: &Auth, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let params = EmbedParams { kind: args.kind.clone(), ..EmbedParams::texts(args.texts.iter().cloned()) };
    let vectors = match &args.target.registry {
        Some(path) => {
            let fed = federated::open(path, auth).await?;
            let res =
                fed.fed.embed(EmbedParams { meta: federated::engine_meta(args.engine.as_deref()), ..params }).await;
            if let Ok(s) = &res {
                fed.served(&s.notes);
            }
            fed.close().await;
            res?.answer
        }
        None => {
            let c = target::connect(&args.target, auth, Some(Capability::Embed)).await?;
            let res = c.embed(params).await;
            let _ = c.shutdown().await;
            res?
        }
    };
    if json {
        let dimension = vectors.first().map(Vec::len);
        print_json(&json!({"vectors": vectors, "dimension": dimension}));
        return Ok(());
    }
    outln!("{:>5}  {:>5}  {:<48}  text", "input", "dim", "vector");
    for (i, (v, text)) in vectors.iter().zip(&args.texts).enumerate() {
        outln!("{:>5}  {:>5}  {:<48}  {}", i + 1, v.len(), head(v), clip(text, 40));
    }
    Ok(())
}

/// The first numbers of a vector, `[0.1250, -0.5000, …]`.
fn head(v: &[f32]) -> String {
    let mut parts: Vec<String> = v.iter().take(SHOWN).map(|x| format!("{x:.4}")).collect();
    if v.len() > SHOWN {
        parts.push("…".into());
    }
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_is_shown_by_its_first_numbers() {
        assert_eq!(head(&[5.0, 1.0]), "[5.0000, 1.0000]");
        assert_eq!(head(&[0.5, -0.25, 0.0, 1.0, 2.0]), "[0.5000, -0.2500, 0.0000, 1.0000, …]");
        assert_eq!(head(&[]), "[]");
    }
}
