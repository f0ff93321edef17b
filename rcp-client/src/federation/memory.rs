//! Memory across engines (§7.17), every rule of it once, for [`Federation`] and rcp-gateway:
//! a memory belongs to the engine that built it, so
//! - `memory/build` is routed to one engine (the one owning the `memoryId` it rebuilds, else
//!   `_meta.engine`, else by scope and priority) and the memory id comes back as
//!   `<engine>:<id>`;
//! - `memory/recall` with such an id goes back to that engine alone; without one it is asked
//!   of every engine with memory, the clues ordered by weight (ties in engine order) with
//!   their seeds namespaced like every other id, and the hits fused with RRF like
//!   `retrieve`'s. Every hit is recorded in the origin ledger, so `feedback` on it goes back
//!   to its engine.

use std::time::Duration;

use rcp_wire::memory::{Clue, MemoryBuildParams, MemoryBuildResult, MemoryRecallParams, MemoryRecallResult};
use rcp_wire::methods::Method;
use rcp_wire::request;
use rcp_wire::{Meta, RcpError};
use serde_json::json;

use super::Federation;
use super::exec::{Engines, Merged, Served, ask_all, call_routed};
use super::merge::{Answer, engines_meta, fuse_hits};
use super::origin::{NAMESPACE_SEPARATOR, Namespaces, OriginLedger};
use super::route::{Need, chosen_engine};
use crate::client::Client;
use crate::error::ClientError;

/// A federated `memory/build`: to the engine owning `params.memoryId` (a federated id), else
/// the one `_meta.engine` names, else by scope and priority; the answer's memory id qualified
/// with the engine's registry id. `meta` is the `_meta` each engine receives.
pub async fn build<E: Engines + ?Sized>(
    engines: &E,
    params: &MemoryBuildParams,
    meta: Meta,
    budget: Duration,
) -> Result<Served<MemoryBuildResult>, RcpError> {
    let (chosen, local) = match params.memory_id.as_deref() {
        Some(id) => {
            let (engine, local) = memory_owner(ids(engines), id)?;
            (Some(engine), Some(local.to_owned()))
        }
        None => (chosen_engine(params.meta.as_ref())?, None),
    };
    let p = MemoryBuildParams { memory_id: local, meta: Some(meta), ..params.clone() };
    let mut served = call_routed(engines, Need::MemoryBuild(params.scope.as_deref()), chosen, budget, |client| {
        let p = p.clone();
        async move { client.memory_build(p).await }
    })
    .await?;
    served.answer.memory_id = qualify_memory(&engines.spec(served.index).id, &served.answer.memory_id);
    Ok(served)
}

/// A federated `memory/recall`: with a federated `memoryId`, by the engine that built it;
/// without, asked of every engine with memory and merged ([`merge_recall`]). Every hit is
/// recorded in `ledger`. `meta` is the `_meta` each engine receives.
pub async fn recall<E: Engines + ?Sized>(
    engines: &E,
    ns: &Namespaces,
    ledger: &OriginLedger,
    params: &MemoryRecallParams,
    meta: Meta,
    budget: Duration,
) -> Result<Merged<MemoryRecallResult>, RcpError> {
    let n = params.n.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let ask = |client: Client, p: MemoryRecallParams| async move { client.request::<request::MemoryRecall>(&p).await };
    let (answers, notes, degraded) = match params.memory_id.as_deref() {
        Some(id) => {
            let (engine, local) = memory_owner(ids(engines), id)?;
            let p = MemoryRecallParams { memory_id: Some(local.to_owned()), meta: Some(meta), ..params.clone() };
            let served = call_routed(engines, Need::Method(Method::MemoryRecall), Some(engine), budget, |client| {
                ask(client, p.clone())
            })
            .await?;
            (vec![(served.index, served.answer)], served.notes, Vec::new())
        }
        None => {
            ask_all(
                engines,
                Need::Method(Method::MemoryRecall),
                budget,
                |_| Ok(MemoryRecallParams { meta: Some(meta.clone()), ..params.clone() }),
                ask,
            )
            .await?
        }
    };
    let answers: Vec<Answer<MemoryRecallResult>> = answers
        .into_iter()
        .map(|(index, result)| {
            let owner = engines.namespace(index).unwrap_or(index);
            for h in result.hits.iter().flatten() {
                ledger.record(&ns.qualify(owner, &h.key()), index);
            }
            Answer { name: engines.spec(index).id.clone(), index: owner, result }
        })
        .collect();
    let fanned_out = params.memory_id.is_none();
    let mut answer = merge_recall(answers, ns, n)?;
    if fanned_out {
        answer.meta.get_or_insert_with(Meta::new).insert("degraded".into(), json!(degraded));
    }
    Ok(Merged { answer, notes, degraded })
}

fn ids<E: Engines + ?Sized>(engines: &E) -> impl Iterator<Item = &str> + Clone {
    (0..engines.count()).map(|i| engines.spec(i).id.as_str())
}

/// Merges the `memory/recall` answers of several engines: clues by weight (ties in engine
/// order) with namespaced seeds, at most `n`; hits fused with RRF.
pub fn merge_recall(
    answers: Vec<Answer<MemoryRecallResult>>,
    ns: &Namespaces,
    n: usize,
) -> Result<MemoryRecallResult, RcpError> {
    let meta = engines_meta(&answers);
    let mut clues: Vec<(usize, Clue)> = Vec::new();
    let mut hit_lists = Vec::new();
    for (position, a) in answers.into_iter().enumerate() {
        for mut c in a.result.clues {
            if let Some(seeds) = c.seed_ids.as_mut() {
                for s in seeds.iter_mut() {
                    *s = ns.qualify(a.index, s);
                }
            }
            clues.push((position, c));
        }
        if let Some(h) = a.result.hits {
            hit_lists.push((a.name, a.index, h));
        }
    }
    clues.sort_by(|(pa, a), (pb, b)| {
        b.weight.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.weight.unwrap_or(f64::NEG_INFINITY)).then(pa.cmp(pb))
    });
    let hits = if hit_lists.is_empty() { None } else { Some(fuse_hits(hit_lists, ns, n.max(1))?) };
    Ok(MemoryRecallResult { clues: clues.into_iter().map(|(_, c)| c).take(n.max(1)).collect(), hits, meta: Some(meta) })
}

/// A memory id as a federation returns it: `<engine>:<id>`, always, since a memory belongs to
/// the engine that built it.
pub fn qualify_memory(engine: &str, memory_id: &str) -> String {
    format!("{engine}{NAMESPACE_SEPARATOR}{memory_id}")
}

/// The engine a federated memory id names (one of `engines`, by registry id) and that
/// engine's own id: the inverse of [`qualify_memory`]. `-32602` on `memoryId` when the id is
/// not `<engine>:<id>` or names no engine of `engines`.
pub fn memory_owner<'e, 'm>(
    engines: impl IntoIterator<Item = &'e str> + Clone,
    memory_id: &'m str,
) -> Result<(&'e str, &'m str), RcpError> {
    let known = || engines.clone().into_iter().collect::<Vec<_>>().join(", ");
    let bad = |why: String| RcpError::invalid_params("memoryId", why);
    let (engine, local) = memory_id.split_once(NAMESPACE_SEPARATOR).ok_or_else(|| {
        bad(format!("'{memory_id}' is not a federated memory id ('<engine>:<id>', engine among: {})", known()))
    })?;
    let owner = engines.clone().into_iter().find(|e| *e == engine);
    let owner = owner.ok_or_else(|| bad(format!("no engine '{engine}' in this federation; engines: {}", known())))?;
    Ok((owner, local))
}

impl Federation {
    /// `memory/build` (§7.17) by one engine (see [`build`]); the memory id comes back as
    /// `<engine>:<id>`, which [`Self::memory_recall`] routes back to that engine.
    pub async fn memory_build(&self, params: MemoryBuildParams) -> Result<Served<MemoryBuildResult>, ClientError> {
        let engines = self.connected_engines().await;
        let meta = self.forwarded(params.meta.as_ref());
        build(&engines, &params, meta, self.options.engine_timeout).await.map_err(ClientError::Rpc)
    }

    /// `memory/recall` (§7.17): with a memory id, by the engine that built it; without, asked of
    /// every engine with memory and the clues and hits merged (see [`recall`]).
    pub async fn memory_recall(&self, params: MemoryRecallParams) -> Result<Merged<MemoryRecallResult>, ClientError> {
        let engines = self.connected_engines().await;
        let meta = self.forwarded(params.meta.as_ref());
        recall(&engines, &self.namespaces, &self.ledger, &params, meta, self.options.engine_timeout)
            .await
            .map_err(ClientError::Rpc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Corpora;

    #[test]
    fn recall_orders_clues_by_weight_and_namespaces_seeds() {
        let ns = Namespaces::new(Corpora::Distinct, ["a".to_owned(), "b".to_owned()]);
        let a = Answer {
            name: "a".into(),
            index: 0,
            result: serde_json::from_value(json!({"clues": [{"query": "q1", "seedIds": ["x"], "weight": 0.2}]}))
                .unwrap(),
        };
        let b = Answer {
            name: "b".into(),
            index: 1,
            result: serde_json::from_value(json!({"clues": [{"query": "q2", "seedIds": ["x"], "weight": 0.9}]}))
                .unwrap(),
        };
        let m = merge_recall(vec![a, b], &ns, 5).unwrap();
        assert_eq!(m.clues[0].query.as_deref(), Some("q2"));
        assert_eq!(m.clues[0].seed_ids, Some(vec!["b:x".to_owned()]));
        assert_eq!(m.clues[1].seed_ids, Some(vec!["a:x".to_owned()]));
        assert_eq!(qualify_memory("dense", "m1"), "dense:m1");
    }
}
