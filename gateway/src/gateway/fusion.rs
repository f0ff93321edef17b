//! The answers of a fan-out made into one ranking (§16.3): the shards of a collection merged
//! (by score when their scores are comparable: one engine kind, one `scoreScale`; by RRF
//! otherwise), then the collections fused with the request's fusion.

use std::collections::BTreeMap;
use std::time::Instant;

use rcp_client::Client;
use rcp_client::federation::{Gathered, Reply, Snapshot, fusion_method, no_answer};
use rcp_server::HandlerResult;
use rcp_wire::fusion::{self, EngineList, FusionMethod};
use rcp_wire::{Hit, Meta, RcpError, RetrieveParams, RetrieveResult, Usage};
use serde_json::{Value, json};

use super::startup::{Collection, Gateway};
use crate::shard;

impl Gateway {
    /// Merges the shards of each collection and fuses the collections (§16.3); the answer names
    /// the snapshot served, which must be `pin` when the request pinned one.
    pub(super) fn fuse(
        &self,
        gathered: Gathered<usize>,
        mut notes: Vec<String>,
        started: Instant,
        params: &RetrieveParams,
        pin: Option<&Snapshot>,
        k: usize,
    ) -> HandlerResult<RetrieveResult> {
        let Gathered { mut replies, clients, asked } = gathered;
        // Registry order, whatever order the collections were asked in.
        replies.sort_by_key(|(index, _)| *index);
        let clients: BTreeMap<usize, Client> = clients.into_iter().collect();
        let clients = &clients;
        let mut degraded: Vec<String> = Vec::new();
        let mut answers: BTreeMap<usize, RetrieveResult> = BTreeMap::new();
        let mut latencies = Meta::new();
        let mut failures = Vec::new();
        for (index, reply) in replies {
            let id = self.pool.entries()[index].spec.id.clone();
            match reply {
                Reply::Answered { result: r, latency } => {
                    latencies.insert(id.clone(), json!(latency.as_micros() as u64));
                    for n in r.usage.iter().flat_map(|u| u.notes.iter()) {
                        notes.push(format!("engine '{id}': {n}"));
                    }
                    answers.insert(index, r);
                }
                Reply::Skipped(why) => {
                    notes.push(format!("engine '{id}' skipped: {why}"));
                    degraded.push(id);
                }
                Reply::Failed(e) => {
                    notes.push(format!("engine '{id}' failed: {e}"));
                    degraded.push(id.clone());
                    failures.push((id, e));
                }
            }
        }
        if answers.is_empty() {
            if !failures.is_empty() || asked > 0 {
                return Err(no_answer(failures.iter().map(|(id, e)| (id.as_str(), e))));
            }
            return Ok(empty_result(notes, &degraded, started));
        }
        let index_version = self.snapshot_served(&answers, pin)?;
        let mut lists = Vec::new();
        let mut candidates = 0u64;
        for (owner, c) in self.collections.iter().enumerate() {
            // Ids as the client sees them (namespaced by collection when the corpora are
            // distinct), each recorded with the shard that returned it, for `feedback`.
            let shard_answers: Vec<(String, Vec<Hit>)> = c
                .shards
                .iter()
                .filter_map(|i| {
                    let hits: Vec<Hit> = answers
                        .get(i)?
                        .hits
                        .iter()
                        .map(|h| {
                            let mut h = h.clone();
                            if self.namespaces.enabled() {
                                h.id = rcp_wire::RequestId::String(self.namespaces.qualify(owner, &h.key()));
                            }
                            self.ledger.record(&h.key(), *i);
                            h
                        })
                        .collect();
                    Some((self.pool.entries()[*i].spec.id.clone(), hits))
                })
                .collect();
            if shard_answers.is_empty() {
                continue;
            }
            candidates += c
                .shards
                .iter()
                .filter_map(|i| answers.get(i))
                .map(|r| r.usage.as_ref().and_then(|u| u.candidates).unwrap_or(r.hits.len() as u64))
                .sum::<u64>();
            let weight = self.pool.entries()[c.shards[0]].spec.weight;
            let hits = if c.shards.len() == 1 {
                shard_answers.into_iter().flat_map(|(_, h)| h).collect()
            } else if comparable_scores(c, clients) {
                shard::merge_by_score(shard_answers, k.saturating_mul(self.options.k_multiplier.max(1) as usize))
            } else {
                notes.push(format!(
                    "collection '{}': shards differ in engine or scoreScale; merged by RRF instead of score",
                    c.name
                ));
                let shard_lists: Vec<EngineList> =
                    shard_answers.into_iter().map(|(id, h)| EngineList::new(id, h)).collect();
                fusion::fuse(&shard_lists, &FusionMethod::rrf(), k.saturating_mul(2)).map_err(RcpError::from)?
            };
            let mut list = EngineList::new(c.name.clone(), hits).with_weight(weight);
            if let Some(floor) = common_floor(c, clients) {
                list = list.with_score_floor(floor);
            }
            lists.push(list);
        }
        let method = fusion_method(&self.options.fusion, params);
        let mut fused = fusion::fuse_or_fallback(&lists, &method, k).map_err(RcpError::from)?;
        notes.extend(fused.note.clone());
        if let Some(min) = params.min_score {
            fused.hits.retain(|h| h.score >= min);
        }
        let mut meta = Meta::new();
        meta.insert("degraded".into(), json!(degraded));
        meta.insert("fusion".into(), json!(fused.method.name()));
        meta.insert("gateway".into(), json!(self.options.identity));
        meta.insert("engineLatencyUs".into(), Value::Object(latencies));
        let usage = Usage {
            candidates: Some(candidates),
            latency_ms: Some(started.elapsed().as_millis() as u64),
            notes,
            ..Usage::default()
        };
        Ok(RetrieveResult {
            hits: fused.hits,
            usage: Some(usage),
            meta: Some(meta),
            index_version,
            ..RetrieveResult::default()
        })
    }

    /// The `indexVersion` of the answers (§7.7.1): the snapshot each engine served, when the
    /// gateway offers snapshots and every answer echoed one; a request pinned to `pin` fails
    /// (`-32010`) unless that is exactly the pinned snapshot ([`Snapshot::settle`]).
    fn snapshot_served(
        &self,
        answers: &BTreeMap<usize, RetrieveResult>,
        pin: Option<&Snapshot>,
    ) -> HandlerResult<Option<String>> {
        let offered = self.retrieval.as_ref().is_some_and(|f| f.retrieve.snapshots == Some(true));
        if !offered {
            return Ok(None);
        }
        let served = Snapshot::of(
            answers.iter().map(|(i, r)| (self.pool.entries()[*i].spec.id.as_str(), r.index_version.as_deref())),
        );
        Snapshot::settle(pin, served)
    }
}

/// Whether the connected shards of `c` run one engine kind with one `scoreScale`.
fn comparable_scores(c: &Collection, clients: &BTreeMap<usize, Client>) -> bool {
    let mut seen: Option<(String, Option<String>)> = None;
    for i in &c.shards {
        let Some(client) = clients.get(i) else { continue };
        let kind = (
            client.server_info().map(|s| s.server.name.clone()).unwrap_or_default(),
            client.capabilities().retrieve.and_then(|r| r.score_scale),
        );
        match &seen {
            None => seen = Some(kind),
            Some(k) if *k == kind => {}
            Some(_) => return false,
        }
    }
    true
}

/// The `scoreFloor` all connected shards of `c` share, if any (enables convex fusion).
fn common_floor(c: &Collection, clients: &BTreeMap<usize, Client>) -> Option<f64> {
    let floors: Vec<Option<f64>> = c
        .shards
        .iter()
        .filter_map(|i| clients.get(i))
        .map(|cl| cl.capabilities().retrieve.and_then(|r| r.score_floor))
        .collect();
    let first = (*floors.first()?)?;
    floors.iter().all(|f| *f == Some(first)).then_some(first)
}

/// A successful answer with no hits: what a request that is not forwarded (cycle, depth
/// exhausted) or reaches no engine gets, with the notes saying why.
pub(super) fn empty_result(notes: Vec<String>, degraded: &[String], started: Instant) -> RetrieveResult {
    let mut meta = Meta::new();
    meta.insert("degraded".into(), json!(degraded));
    let usage = Usage {
        candidates: Some(0),
        latency_ms: Some(started.elapsed().as_millis() as u64),
        notes,
        ..Usage::default()
    };
    RetrieveResult { hits: Vec::new(), usage: Some(usage), meta: Some(meta), ..RetrieveResult::default() }
}
