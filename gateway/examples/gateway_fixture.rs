//! A configurable engine for the gateway's tests: its own corpus, a delay, a failure, and an
//! events file recording what it received. Not an example to copy.
//!
//! Flags: `--name N` (server name), `--doc id:text` (repeatable), `--sleep-ms MS`, `--fail`,
//! `--events FILE` (appends `<name> start`, `<name> meta <_meta json>`, `<name> cancelled`),
//! `--filter-field NAME` (advertises a keyword filter field; hits carry `meta.NAME = "x"`),
//! `--exit-after N` (exits when asked an (N+1)th retrieve or embed), `--mode M` (the one
//! retrieval mode advertised; default `sparse`), `--embed DIM` (also serves `embed`: identity
//! `fixture-DIM`, each vector `[len(text), 1, 0, ...]` of DIM numbers, `fail` and `exit-after`
//! apply to it too), `--score-floor F` (advertises `retrieve.scoreFloor`), `--units U,V` (advertises
//! `retrieve.units`).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use std::sync::Arc;

use rcp_server::{Embed, EmbedRequest, HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::{EmbedCapability, RetrieveCapability};
use rcp_wire::filter::{FieldType, FilterCapability};
use rcp_wire::{Hit, RcpError, RetrieveResult};
use serde_json::json;

#[derive(Default)]
struct Fixture {
    name: String,
    docs: Vec<(String, String)>,
    sleep_ms: u64,
    fail: bool,
    events: Option<String>,
    filter_field: Option<String>,
    exit_after: Option<usize>,
    served: AtomicUsize,
    mode: Option<String>,
    embed: Option<u32>,
    score_floor: Option<f64>,
    units: Option<Vec<String>>,
}

impl Fixture {
    fn event(&self, line: &str) {
        if let Some(path) = &self.events
            && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
        {
            let _ = writeln!(f, "{} {line}", self.name);
        }
    }
}

/// Records a cancellation: the framework drops a cancelled handler's future.
struct Abandoned<'a> {
    fixture: &'a Fixture,
    done: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.fixture.event("cancelled");
        }
    }
}

impl Embed for Fixture {
    fn capability(&self) -> EmbedCapability {
        let dimension = self.embed.unwrap_or(2);
        EmbedCapability { dimension, identity: format!("fixture-{dimension}"), ..Default::default() }
    }

    async fn embed(&self, req: EmbedRequest, _ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        if self.exit_after.is_some_and(|n| self.served.fetch_add(1, Ordering::SeqCst) >= n) {
            std::process::exit(3);
        }
        self.event("embed");
        if self.fail {
            return Err(RcpError::backend_unavailable(format!("{} is configured to fail", self.name)));
        }
        let dim = self.embed.unwrap_or(2) as usize;
        Ok(req
            .inputs
            .iter()
            .map(|i| {
                let mut v = vec![0.0f32; dim];
                v[0] = i.text().len() as f32;
                if dim > 1 {
                    v[1] = 1.0;
                }
                v
            })
            .collect())
    }
}

impl Retrieve for Fixture {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability {
            max_k: Some(100),
            modes: Some(vec![self.mode.as_deref().map_or(rcp_wire::Mode::Sparse, rcp_wire::Mode::from)]),
            score_floor: self.score_floor,
            units: self.units.clone(),
            ..Default::default()
        }
    }

    fn filter(&self) -> Option<FilterCapability> {
        self.filter_field.as_ref().map(|f| FilterCapability::typed([(f.clone(), FieldType::Keyword)]))
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        if self.exit_after.is_some_and(|n| self.served.fetch_add(1, Ordering::SeqCst) >= n) {
            std::process::exit(3);
        }
        self.event(&format!("meta {}", serde_json::to_string(&req.meta).unwrap_or_default()));
        let mut guard = Abandoned { fixture: self, done: false };
        if self.sleep_ms > 0 {
            ctx.progress(0.5, "sleeping", format!("{} sleeps {} ms", self.name, self.sleep_ms));
            tokio::time::sleep(Duration::from_millis(self.sleep_ms)).await;
        }
        guard.done = true;
        if self.fail {
            return Err(RcpError::backend_unavailable(format!("{} is configured to fail", self.name)));
        }
        let query = req.query.text().to_lowercase();
        let words: Vec<&str> = query.split_whitespace().collect();
        let mut hits: Vec<Hit> = self
            .docs
            .iter()
            .map(|(id, text)| {
                let lower = text.to_lowercase();
                let score = words.iter().filter(|w| lower.split_whitespace().any(|t| t == **w)).count() as f64;
                let mut hit = Hit::new(id.as_str(), score).with_text(text.clone());
                if let Some(f) = &self.filter_field {
                    hit.meta = Some([(f.clone(), json!("x"))].into_iter().collect());
                }
                hit
            })
            .filter(|h| h.score > 0.0)
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key().cmp(&b.key())));
        hits.truncate(req.k);
        Ok(RetrieveResult::from_hits(hits))
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut f = Fixture { name: "fixture".into(), ..Default::default() };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_default();
        match a.as_str() {
            "--name" => f.name = val(),
            "--doc" => {
                let v = val();
                let (id, text) = v.split_once(':').unwrap_or((v.as_str(), ""));
                f.docs.push((id.to_owned(), text.to_owned()));
            }
            "--sleep-ms" => f.sleep_ms = val().parse().unwrap_or(0),
            "--fail" => f.fail = true,
            "--events" => f.events = Some(val()),
            "--filter-field" => f.filter_field = Some(val()),
            "--exit-after" => f.exit_after = val().parse().ok(),
            "--mode" => f.mode = Some(val()),
            "--score-floor" => f.score_floor = val().parse().ok(),
            "--units" => f.units = Some(val().split(',').map(str::to_owned).collect()),
            "--embed" => f.embed = val().parse().ok(),
            other => eprintln!("fixture: ignoring unknown flag {other}"),
        }
    }
    f.event("start");
    let name = f.name.clone();
    let embeds = f.embed.is_some();
    let f = Arc::new(f);
    let mut builder = Server::builder(name, "0").retrieve(Arc::clone(&f)).streaming();
    if embeds {
        builder = builder.embed(f);
    }
    builder.build().serve_stdio().await
}
