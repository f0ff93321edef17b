//! [`FanOut`]: one call sent to several engines at once (§16.2, §16.4), the mechanism under
//! both [`super::Federation`] and rcp-gateway's aggregator, for `retrieve` ([`FanOut::run`],
//! relaying progress) and for every other fanned-out method ([`FanOut::run_with`]: `graph`,
//! `memory/recall`, `catalog/list`).
//!
//! A fan-out takes each engine's connection outcome, asks a caller-supplied plan whether (and
//! with which params) to ask it, calls every planned engine concurrently under one per-engine
//! deadline, and gathers what each contributed. A `required` engine that cannot be connected
//! or fails ends the fan-out at once with its error; the others' calls are dropped, which
//! cancels them downstream (§7.14). Fusion is not its business: the caller fuses what it
//! gathered as its own rules say.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rcp_wire::{ErrorCode, RetrieveParams, RetrieveResult};

use crate::client::Client;
use crate::error::ClientError;

/// Where a fan-out reports progress (§9): the overall fraction done in `[0, 1]`, a stage and
/// a message. Per engine it relays the engine's own progress frames as
/// `"<engine>:<stage>"`, and reports `"fan-out"` each time an engine finishes.
pub type ProgressSink = Arc<dyn Fn(f64, &str, String) + Send + Sync>;

/// One engine a fan-out may ask.
#[derive(Debug)]
pub struct Target<K> {
    /// The caller's key for the engine (its registry id, or its position).
    pub key: K,
    /// The engine's registry id, for messages.
    pub id: String,
    /// Whether the engine's failure fails the whole fan-out (`required` in `rcp.json`).
    pub required: bool,
    /// The engine's connection, or why there is none.
    pub client: Result<Client, ClientError>,
}

/// What one engine contributed to a fan-out.
#[derive(Debug, Clone)]
pub enum Reply<R = RetrieveResult> {
    /// It answered.
    Answered {
        /// Its own result.
        result: R,
        /// From the call to its answer.
        latency: Duration,
    },
    /// The plan chose not to ask it; the reason says why.
    Skipped(String),
    /// It could not be connected, failed or timed out.
    Failed(ClientError),
}

/// Everything a fan-out gathered.
#[derive(Debug)]
pub struct Gathered<K, R = RetrieveResult> {
    /// Per target, in the order the targets were given.
    pub replies: Vec<(K, Reply<R>)>,
    /// The connected engines, in target order (whether asked or skipped).
    pub clients: Vec<(K, Client)>,
    /// How many engines were sent the query.
    pub asked: usize,
}

/// A `required` engine could not be connected or failed: the fan-out's answer is its error.
#[derive(Debug)]
pub struct RequiredFailed<K> {
    /// The engine's key.
    pub key: K,
    /// The engine's registry id.
    pub id: String,
    /// Its error.
    pub error: ClientError,
}

/// How a fan-out calls its engines.
#[derive(Clone, Default)]
pub struct FanOut {
    /// Client-side deadline of each engine's call. When the plan forwards it to the engine as
    /// `_meta.deadlineMs`, the engine's own timeout error is reported as this one: both clocks
    /// measure one budget.
    pub timeout: Duration,
    /// Where progress goes; `None` calls engines without asking for progress.
    pub progress: Option<ProgressSink>,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanOut").field("timeout", &self.timeout).field("progress", &self.progress.is_some()).finish()
    }
}

impl FanOut {
    /// A fan-out with this per-engine deadline and no progress.
    pub fn new(timeout: Duration) -> Self {
        Self { timeout, progress: None }
    }

    /// Asks every connected target that `plan` accepts (`Ok`: the params it receives; `Err`:
    /// why it is skipped), concurrently, with `retrieve`, and gathers the replies.
    pub async fn run<K: Clone>(
        &self,
        targets: Vec<Target<K>>,
        plan: impl FnMut(&K, &Client) -> Result<RetrieveParams, String>,
    ) -> Result<Gathered<K>, RequiredFailed<K>> {
        let total = targets.len();
        let done = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&done);
        self.run_counted(targets, plan, counter, |id, client, params| {
            let done = Arc::clone(&done);
            async move { self.call(&client, params, &id, &done, total).await }
        })
        .await
    }

    /// The fan-out of any method: every connected target `plan` accepts is sent its params
    /// through `call` (given the engine's id, its client and the params), concurrently, each
    /// under this fan-out's deadline; the replies are gathered in target order. A `required`
    /// target's failure ends the fan-out with its error.
    pub async fn run_with<K, P, R, Fut>(
        &self,
        targets: Vec<Target<K>>,
        plan: impl FnMut(&K, &Client) -> Result<P, String>,
        call: impl Fn(String, Client, P) -> Fut,
    ) -> Result<Gathered<K, R>, RequiredFailed<K>>
    where
        K: Clone,
        Fut: Future<Output = Result<R, ClientError>>,
    {
        self.run_counted(targets, plan, Arc::new(AtomicUsize::new(0)), call).await
    }

    /// [`Self::run_with`], counting finished engines in `done` (which `retrieve`'s progress
    /// relay reads to place an engine's own progress within the whole).
    async fn run_counted<K, P, R, Fut>(
        &self,
        targets: Vec<Target<K>>,
        mut plan: impl FnMut(&K, &Client) -> Result<P, String>,
        done: Arc<AtomicUsize>,
        call: impl Fn(String, Client, P) -> Fut,
    ) -> Result<Gathered<K, R>, RequiredFailed<K>>
    where
        K: Clone,
        Fut: Future<Output = Result<R, ClientError>>,
    {
        let total = targets.len();
        let mut replies: Vec<(usize, K, Reply<R>)> = Vec::with_capacity(total);
        let mut clients = Vec::new();
        let mut calls = FuturesUnordered::new();
        for (position, target) in targets.into_iter().enumerate() {
            let Target { key, id, required, client } = target;
            let client = match client {
                Ok(c) => c,
                Err(error) if required => return Err(RequiredFailed { key, id, error }),
                Err(e) => {
                    replies.push((position, key, Reply::Failed(e)));
                    continue;
                }
            };
            clients.push((key.clone(), client.clone()));
            // One span per engine call: the params are planned inside it, so what they carry of
            // the trace (`_meta.traceparent`) names this call.
            let span = tracing::info_span!("engine", engine = %id);
            let params = match span.in_scope(|| plan(&key, &client)) {
                Ok(p) => p,
                Err(reason) => {
                    replies.push((position, key, Reply::Skipped(reason)));
                    continue;
                }
            };
            let pending = call(id.clone(), client, params);
            let done = &done;
            let call = async move {
                let started = Instant::now();
                let r = match tokio::time::timeout(self.timeout, pending).await {
                    Ok(r) => r,
                    Err(_) => Err(ClientError::Timeout(self.timeout.as_millis() as u64)),
                };
                let latency = started.elapsed();
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(progress) = &self.progress {
                    progress(n as f64 / total.max(1) as f64, "fan-out", format!("engine '{id}' done"));
                }
                (position, key, id, required, r.map(|result| (result, latency)))
            };
            calls.push(tracing::Instrument::instrument(call, span));
        }
        let asked = calls.len();
        while let Some((position, key, id, required, r)) = calls.next().await {
            let reply = match r {
                Ok((result, latency)) => Reply::Answered { result, latency },
                Err(error) if required => return Err(RequiredFailed { key, id, error }),
                Err(e) => Reply::Failed(e),
            };
            replies.push((position, key, reply));
        }
        replies.sort_by_key(|(position, _, _)| *position);
        Ok(Gathered { replies: replies.into_iter().map(|(_, k, r)| (k, r)).collect(), clients, asked })
    }

    /// One engine's `retrieve` (the deadline is the caller's), relaying its progress when there
    /// is a sink.
    async fn call(
        &self,
        client: &Client,
        params: RetrieveParams,
        id: &str,
        done: &AtomicUsize,
        total: usize,
    ) -> Result<RetrieveResult, ClientError> {
        let shares_deadline = params.meta.as_ref().is_some_and(|m| m.contains_key("deadlineMs"));
        let timed_out = ClientError::Timeout(self.timeout.as_millis() as u64);
        let share = Share { id, done, total };
        match self.relay(client, params, share).await {
            // The engine was given this budget as its `deadlineMs`: whether its clock or ours
            // fired first, it is one outcome and is reported as one.
            Err(ClientError::Rpc(e)) if shares_deadline && e.code == ErrorCode::TIMEOUT => Err(timed_out),
            r => r,
        }
    }

    /// One downstream `retrieve`; with a progress sink, the engine's progress frames are
    /// reported as the fan-out's own, scaled into the share of this engine.
    async fn relay(
        &self,
        client: &Client,
        params: RetrieveParams,
        share: Share<'_>,
    ) -> Result<RetrieveResult, ClientError> {
        let Share { id, done, total } = share;
        let Some(sink) = &self.progress else {
            return client.retrieve(params).await;
        };
        let streaming = client.retrieve_streaming(params)?;
        let mut progress = streaming.progress;
        let mut result = streaming.result;
        loop {
            tokio::select! {
                r = &mut result => return r,
                Some(p) = progress.recv() => {
                    let finished = done.load(Ordering::Relaxed) as f64;
                    let overall = (finished + p.progress.unwrap_or(0.0).clamp(0.0, 1.0)) / total.max(1) as f64;
                    let stage = p.stage.unwrap_or_else(|| "retrieve".into());
                    let message = p.message.unwrap_or_default();
                    sink(overall, &format!("{id}:{stage}"), format!("engine '{id}': {message}"));
                }
            }
        }
    }
}

/// One engine's share of a fan-out's progress: its id, how many engines are done, of how many.
#[derive(Clone, Copy)]
struct Share<'a> {
    id: &'a str,
    done: &'a AtomicUsize,
    total: usize,
}
