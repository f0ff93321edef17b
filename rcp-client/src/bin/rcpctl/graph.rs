//! `rcpctl graph`: one `graph` op (§7.9) against an engine, or with `--registry` against every
//! engine of the registry that offers the op, the answers merged by the federation core (hits
//! fused, nodes and edges united, communities kept per engine as `<engine>:<id>`); printed per
//! op (nodes and edges, hits with their provenance, communities, the drift follow-ups) or as
//! the result's JSON.

use clap::Args;
use rcp_wire::capabilities::Capability;
use rcp_wire::graph::{Community, GraphParams, GraphResult};
use serde_json::Value;

use crate::federated;
use crate::out::outln;
use crate::print_json;
use crate::table::{self, clip, plain};
use crate::target::{self, Auth, Target};

/// The ops of §7.9; the engine's `graph.ops` says which it serves.
const OPS: [&str; 5] = ["neighbors", "local", "global", "drift", "communities"];

/// `rcpctl graph` flags.
#[derive(Args)]
pub(crate) struct GraphArgs {
    #[command(flatten)]
    pub target: Target,
    /// The op: neighbors, local, global, drift or communities (one the engine lists in graph.ops).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(OPS))]
    pub op: String,
    /// The query (local, global and drift start from it; neighbors from its best matches when
    /// no --seed is given).
    #[arg(long, short = 'q')]
    pub query: Option<String>,
    /// An entry node id (repeatable): the seeds of neighbors, local and drift.
    #[arg(long = "seed", value_name = "ID")]
    pub seeds: Vec<String>,
    /// Expansion depth of neighbors.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub hops: Option<u32>,
    /// How many nodes, hits or communities.
    #[arg(short, long, value_parser = clap::value_parser!(u64).range(1..))]
    pub k: Option<u64>,
    /// The community level (communities; 0 is the finest).
    #[arg(long)]
    pub level: Option<u32>,
    /// The trajectory this call belongs to (§7.7.3): an opaque id of your choosing.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

impl GraphArgs {
    /// The `graph` params these flags describe.
    fn params(&self) -> GraphParams {
        GraphParams {
            op: self.op.clone(),
            query: self.query.clone(),
            k: self.k,
            seed_ids: (!self.seeds.is_empty()).then(|| self.seeds.clone()),
            hops: self.hops,
            level: self.level,
            session_id: self.session.clone(),
            ..Default::default()
        }
    }
}

/// Runs the op and prints its result.
pub(crate) async fn run(args: &GraphArgs, auth: &Auth, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(path) = &args.target.registry {
        let fed = federated::open(path, auth).await?;
        let res = fed.fed.graph(args.params()).await;
        if let Ok(m) = &res {
            fed.merged(m.answer.meta.as_ref(), &m.notes);
        }
        fed.close().await;
        let mut res = res?.answer;
        if json {
            print_json(&res);
        } else {
            // The core's notes are already on stderr.
            if let Some(u) = res.usage.as_mut() {
                u.notes.clear();
            }
            print(&res);
        }
        return Ok(());
    }
    let c = target::connect(&args.target, auth, Some(Capability::Graph)).await?;
    let res = c.graph(args.params()).await;
    let _ = c.shutdown().await;
    let res = res?;
    if json {
        print_json(&res);
    } else {
        print(&res);
    }
    Ok(())
}

/// Whatever the result holds, in the order of §7.9: hits and follow-ups, the summary and
/// communities, nodes and edges.
fn print(res: &GraphResult) {
    let mut printed = false;
    if let Some(hits) = &res.hits {
        table::print_hits(hits);
        for h in hits {
            if let Some(path) = h.provenance.as_ref().and_then(|p| p.nodes.as_ref()).filter(|n| n.len() > 1) {
                outln!("  {}: via {}", h.key(), path.join(" → "));
            }
        }
        printed = true;
    }
    if let Some(f) = res.followups.as_ref().filter(|f| !f.is_empty()) {
        outln!("follow-ups:");
        for q in f {
            outln!("  {q}");
        }
    }
    if let Some(s) = &res.summary {
        outln!("summary: {s}");
        printed = true;
    }
    if let Some(cs) = &res.communities {
        print_communities(cs);
        printed = true;
    }
    if let Some(nodes) = &res.nodes {
        outln!("{:>4}  {:<24} {:>10}", "rank", "node", "score");
        for (i, n) in nodes.iter().enumerate() {
            let score = n.score.map(|s| format!("{s:.4}")).unwrap_or_else(|| "-".into());
            outln!("{:>4}  {:<24} {:>10}", i + 1, plain(&serde_json::to_value(&n.id).unwrap_or(Value::Null)), score);
        }
        let edges = res.edges.as_deref().unwrap_or_default();
        outln!("edges ({}):", edges.len());
        for e in edges {
            let w = e.weight.map(|w| format!("  {w:.3}")).unwrap_or_default();
            outln!("  {} — {}{w}", plain(&e.src), plain(&e.dst));
        }
        printed = true;
    }
    if !printed {
        outln!("(the result holds none of hits, summary, communities or nodes)");
    }
    if let Some(line) = res.usage.as_ref().and_then(table::usage_line) {
        outln!("{line}");
    }
}

fn print_communities(cs: &[Community]) {
    outln!("{:<12} {:>5} {:>8}  summary", "community", "level", "score");
    for c in cs {
        let id = plain(&serde_json::to_value(&c.id).unwrap_or(Value::Null));
        let level = c.level.map(|l| l.to_string()).unwrap_or_else(|| "-".into());
        let score = c.score.map(|s| format!("{s:.3}")).unwrap_or_else(|| "-".into());
        outln!("{:<12} {:>5} {:>8}  {}", clip(&id, 12), level, score, clip(c.summary.as_deref().unwrap_or(""), 90));
    }
}
