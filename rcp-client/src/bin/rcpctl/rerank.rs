//! `rcpctl rerank`: passages scored against a query by an engine's `rerank` (§7.6), printed in
//! the engine's order (`order`, else by score) with their scores, or as the result's JSON. With
//! `--registry`, the federation core routes the call to one engine offering the method:
//! `--engine ID`, else the one of highest priority.

use clap::Args;
use rcp_wire::capabilities::Capability;
use rcp_wire::rerank::{RerankParams, RerankResult};

use crate::federated;
use crate::out::outln;
use crate::print_json;
use crate::table::clip;
use crate::target::{self, Auth, Target};

/// `rcpctl rerank` flags.
#[derive(Args)]
pub(crate) struct RerankArgs {
    #[command(flatten)]
    pub target: Target,
    /// The query the passages are scored against.
    #[arg(long, short = 'q')]
    pub query: String,
    /// The passages, in order (the engine's scores refer to their positions).
    #[arg(required = true, value_name = "PASSAGE")]
    pub passages: Vec<String>,
    /// The method: one the engine advertises in `rerank.methods` (cross-encoder, colbert, llm)
    /// [default: the engine's own].
    #[arg(long, short = 'm')]
    pub method: Option<String>,
    /// Keep only the best N passages.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub top_n: Option<u64>,
    /// With --registry: the engine (its registry id) that reranks (sent as `_meta.engine`);
    /// without it, the engine of highest priority offering the method.
    #[arg(long, value_name = "ID", conflicts_with_all = ["stdio", "http"])]
    pub engine: Option<String>,
}

impl RerankArgs {
    fn params(&self) -> RerankParams {
        RerankParams {
            query: self.query.clone().into(),
            passages: self.passages.iter().map(|p| p.clone().into()).collect(),
            method: self.method.clone(),
            model: None,
            top_n: self.top_n,
            strict: None,
            meta: None,
        }
    }
}

/// Reranks the passages and prints them best first.
pub(crate) async fn run(args: &RerankArgs, auth: &Auth, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let params = args.params();
    let res = match &args.target.registry {
        Some(path) => {
            let fed = federated::open(path, auth).await?;
            let meta = federated::engine_meta(args.engine.as_deref());
            let res = fed.fed.rerank(RerankParams { meta, ..params }).await;
            if let Ok(s) = &res {
                fed.served(&s.notes);
            }
            fed.close().await;
            res?.answer
        }
        None => {
            let c = target::connect(&args.target, auth, Some(Capability::Rerank)).await?;
            let res = c.rerank(params).await;
            let _ = c.shutdown().await;
            res?
        }
    };
    if json {
        print_json(&res);
        return Ok(());
    }
    outln!("{:>4}  {:>7}  {:>10}  passage", "rank", "passage", "score");
    for (rank, i) in ranked(&res, args.passages.len(), args.top_n).into_iter().enumerate() {
        let score = res.scores.get(i).map(|s| format!("{s:.4}")).unwrap_or_else(|| "-".into());
        let text = args.passages.get(i).map(String::as_str).unwrap_or("");
        outln!("{:>4}  {:>7}  {:>10}  {}", rank + 1, i + 1, score, clip(text, 80));
    }
    if let Some(line) = res.usage.as_ref().and_then(crate::table::usage_line) {
        outln!("{line}");
    }
    Ok(())
}

/// The passage indices best first: the engine's `order` when it sent one, else by descending
/// score (passage order on ties), cut to `top_n`; indices beyond the passages are dropped.
fn ranked(res: &RerankResult, passages: usize, top_n: Option<u64>) -> Vec<usize> {
    let mut order: Vec<usize> = match &res.order {
        Some(o) => o.iter().copied().filter(|i| *i < passages).collect(),
        None => {
            let mut all: Vec<usize> = (0..res.scores.len().min(passages)).collect();
            all.sort_by(|a, b| res.scores[*b].total_cmp(&res.scores[*a]));
            all
        }
    };
    if let Some(n) = top_n {
        order.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_order_wins_else_scores_rank() {
        let by_score = RerankResult { scores: vec![0.1, 0.9, 0.5], ..Default::default() };
        assert_eq!(ranked(&by_score, 3, None), [1, 2, 0]);
        assert_eq!(ranked(&by_score, 3, Some(2)), [1, 2]);
        let ordered = RerankResult { scores: vec![0.1, 0.9, 0.5], order: Some(vec![2, 7, 0]), ..Default::default() };
        assert_eq!(ranked(&ordered, 3, None), [2, 0], "the engine's order, an index out of range dropped");
    }
}
