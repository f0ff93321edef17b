//! `rcpctl transform`: one query through an engine's `query/transform` (§7.8), printed one
//! query per line (or the result as JSON). With `--registry`, the federation core routes the
//! call to one engine offering the method: `--engine ID`, else the one of highest priority.

use rcp_wire::capabilities::Capability;
use rcp_wire::transform::{TransformParams, TransformResult};

use crate::federated;
use crate::out::outln;
use crate::print_json;
use crate::target::{self, Auth, Target};

/// Transforms `query` with `method` (and `n`, for methods that make several queries).
pub(crate) async fn run(
    target: &Target,
    auth: &Auth,
    params: TransformParams,
    engine: Option<&str>,
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let res = match &target.registry {
        Some(path) => {
            let fed = federated::open(path, auth).await?;
            let res = fed.fed.transform(TransformParams { meta: federated::engine_meta(engine), ..params }).await;
            if let Ok(s) = &res {
                fed.served(&s.notes);
            }
            fed.close().await;
            res?.answer
        }
        None => {
            let c = target::connect(target, auth, Some(Capability::Transform)).await?;
            let res = c.transform(params).await;
            let _ = c.shutdown().await;
            res?
        }
    };
    if json {
        print_json(&res);
    } else {
        print(&res);
    }
    Ok(())
}

fn print(res: &TransformResult) {
    for q in &res.queries {
        outln!("{q}");
    }
    if let Some(h) = &res.hypothetical {
        outln!("hypothetical: {h}");
    }
}
