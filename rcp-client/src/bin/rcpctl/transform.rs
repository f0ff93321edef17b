//! `rcpctl transform`: one query through an engine's `query/transform` (§7.8), printed one
//! query per line (or the result as JSON).

use rcp_wire::capabilities::Capability;
use rcp_wire::transform::TransformParams;

use crate::out::outln;
use crate::print_json;
use crate::target::{self, Auth, Target};

/// Transforms `query` with `method` (and `n`, for methods that make several queries).
pub(crate) async fn run(
    target: &Target,
    auth: &Auth,
    query: String,
    method: String,
    n: Option<u32>,
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let c = target::connect(target, auth, Some(Capability::Transform)).await?;
    let res = c.transform(TransformParams { query, method, n, meta: None }).await?;
    if json {
        print_json(&res);
    } else {
        for q in &res.queries {
            outln!("{q}");
        }
        if let Some(h) = &res.hypothetical {
            outln!("hypothetical: {h}");
        }
    }
    let _ = c.shutdown().await;
    Ok(())
}
