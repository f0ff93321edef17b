//! A configurable engine for the client's tests: several instances with different corpora,
//! one that sleeps, one that fails, one that exits mid-session. Not an example to copy.
//!
//! Flags: `--name N`, `--doc id:text` (repeatable), `--sleep-ms MS`, `--fail`,
//! `--exit-after N` (exit after answering N retrieves), `--embed-only`, `--score-floor F`,
//! `--events FILE` (appends `start`, `cancelled <id>` lines).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rcp_server::{EmbedRequest, HandlerResult, RequestContext, Retrieve, RetrieveRequest, Server};
use rcp_wire::capabilities::{EmbedCapability, RetrieveCapability};
use rcp_wire::{Hit, RcpError, RetrieveResult};

#[derive(Default)]
struct Fixture {
    name: String,
    docs: Vec<(String, String)>,
    sleep_ms: u64,
    fail: bool,
    exit_after: Option<usize>,
    score_floor: Option<f64>,
    events: Option<String>,
    served: AtomicUsize,
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

struct Abandoned<'a> {
    fixture: &'a Fixture,
    id: String,
    done: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.fixture.event(&format!("cancelled {}", self.id));
        }
    }
}

impl Retrieve for Fixture {
    fn capability(&self) -> RetrieveCapability {
        RetrieveCapability {
            max_k: Some(100),
            modes: Some(vec![rcp_wire::Mode::Sparse]),
            score_floor: self.score_floor,
            ..Default::default()
        }
    }

    async fn retrieve(&self, req: RetrieveRequest, ctx: RequestContext) -> HandlerResult<RetrieveResult> {
        // The framework stops awaiting a cancelled handler (its future is dropped), so the
        // fixture records cancellation from a drop guard.
        let mut guard = Abandoned { fixture: self, id: ctx.request_id().to_string(), done: false };
        if self.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.sleep_ms)).await;
        }
        guard.done = true;
        let n = self.served.fetch_add(1, Ordering::SeqCst) + 1;
        if self.exit_after.is_some_and(|limit| n > limit) {
            std::process::exit(3);
        }
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
                Hit::new(id.as_str(), score).with_text(text.clone())
            })
            .filter(|h| h.score > 0.0)
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key().cmp(&b.key())));
        hits.truncate(req.k);
        Ok(RetrieveResult::from_hits(hits))
    }
}

impl rcp_server::Embed for Fixture {
    fn capability(&self) -> EmbedCapability {
        EmbedCapability { dimension: 2, identity: "fixture/len".into(), ..Default::default() }
    }

    async fn embed(&self, req: EmbedRequest, _ctx: RequestContext) -> HandlerResult<Vec<Vec<f32>>> {
        Ok(req.inputs.iter().map(|i| vec![i.text().len() as f32, 1.0]).collect())
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut f = Fixture { name: "fixture".into(), ..Default::default() };
    let mut embed_only = false;
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
            "--exit-after" => f.exit_after = val().parse().ok(),
            "--embed-only" => embed_only = true,
            "--score-floor" => f.score_floor = val().parse().ok(),
            "--events" => f.events = Some(val()),
            other => eprintln!("fixture: ignoring unknown flag {other}"),
        }
    }
    f.event("start");
    let name = f.name.clone();
    let f = std::sync::Arc::new(f);
    let builder = Server::builder(name, "0");
    let builder = if embed_only { builder.embed(f) } else { builder.retrieve(f.clone()).embed(f) };
    builder.build().serve_stdio().await
}
