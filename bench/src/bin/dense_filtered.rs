//! `dense_filtered`: filtered dense search at 0.1%, 1%, 10% and 50% selectivity, each plan of
//! the dense store's filter planner forced in turn and the planner's own choice, beside an
//! unfiltered search, in one run.
//!
//! The collection is semi-synthetic: 100,000 vectors, each `normalize(a + b/2 + noise)` for two
//! random Cranfield abstracts `a`, `b` embedded with the engine's model (so the vectors keep
//! the model's geometry at a realistic scale), with four keyword fields that say `in` for
//! 0.1%, 1%, 10% and 50% of the documents (drawn independently of the vectors). The queries
//! are Cranfield's 225, embedded one at a time as `retrieve` does. Each search asks for
//! `candidateK` 100 with `ef` 100, as a default `retrieve`; recall@10 is measured against the
//! exact filtered top 10 computed beside it. Latencies are single-threaded, search only, and
//! with the query's own embedding time added (`+embed`), p50 / p99 over the queries of every
//! pass.
//!
//! With `--svg FILE` the run also draws the search-only latency by selectivity: p50 and p99 of
//! the planner's choice against the unfiltered search's, with each forced plan's p50 beside.
//!
//! ```sh
//! cargo build --release -p rcp-bench --bin dense_filtered && target/release/dense_filtered
//! target/release/dense_filtered --docs 20000 --passes 1 --svg /tmp/filtered.svg     # smoke run
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use rcp_bench::quality::{Collection, cranfield_dir, percentile};
use rcp_bench::synthetic::Rng;
use rcp_corpus::read_jsonl;
use rcp_dense::ann::Scored;
use rcp_dense::embedder::{Embedder, EmbedderOptions, normalize};
use rcp_dense::model::{self, DIMENSION};
use rcp_dense::store::{Plan, PlannerOptions, Store, StoreOptions, Table, stored};
use rcp_dense::wal::Origin;
use rcp_wire::Meta;
use rcp_wire::filter::{FieldType, Filter};
use serde_json::json;

#[derive(Debug, Parser)]
#[command(about = "Dense engine: filtered search by plan at 0.1%, 1%, 10% and 50% selectivity")]
struct Args {
    /// Documents in the semi-synthetic collection.
    #[arg(long, default_value_t = 100_000)]
    docs: usize,
    /// Passes over the queries (latencies pooled).
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// Gaussian noise per dimension added before normalising.
    #[arg(long, default_value_t = 0.02)]
    noise: f32,
    /// The planner's `scan_factor` (scan the matches while matches² ≤ factor · ef · live).
    #[arg(long, default_value_t = PlannerOptions::default().scan_factor)]
    scan_factor: f64,
    /// The planner's `post_filter_from` (post-filter a plain walk from this selectivity on).
    #[arg(long, default_value_t = PlannerOptions::default().post_filter_from)]
    post_filter_from: f64,
    /// Also draw the search-only latency by selectivity into this SVG file: p50 and p99 of the
    /// planner's plan and of the unfiltered search, each forced plan's p50 beside.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

/// The selectivities measured, with their field names.
const LEVELS: [(&str, f64); 4] = [("p0_1", 0.001), ("p1", 0.01), ("p10", 0.10), ("p50", 0.50)];
/// `candidateK` and `ef` of a default `retrieve`.
const CANDIDATES: usize = 100;
const K: usize = 10;

fn main() -> ExitCode {
    rcp_bench::exit::finish(env!("CARGO_BIN_NAME"), run(&Args::parse()))
}

/// One search's results and the plan that produced them.
type Searched = (Vec<Scored>, Plan);

/// How one configuration did over every query and pass.
struct Measured {
    recall: f64,
    search_ms: Vec<f64>,
    total_ms: Vec<f64>,
    plans: Vec<&'static str>,
}

fn run(args: &Args) -> anyhow::Result<()> {
    let files = model::locate(&model::default_dir()).context("no model (rcp-dense fetch-model provisions it)")?;
    let embedder = Embedder::load(&files, EmbedderOptions::default()).context("load the model")?;
    let c = Collection::load(&cranfield_dir()).context("load Cranfield")?;
    let docs: Vec<_> = read_jsonl(&c.corpus).and_then(|d| d.collect::<Result<_, _>>()).context("read the corpus")?;
    let texts: Vec<String> = docs.iter().map(rcp_dense::passage).collect();
    eprintln!("embedding {} abstracts ...", texts.len());
    let base = embedder.embed(&texts).context("embed the abstracts")?;

    // Queries one at a time, as `retrieve` embeds them; the time is kept per query.
    let mut queries = Vec::new();
    let mut embed_ms = Vec::new();
    for (_, q) in &c.queries {
        let t = Instant::now();
        let v = embedder.embed(&[q.as_str()]).context("embed a query")?;
        embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
        queries.extend(v.into_iter().next().context("no query vector")?);
    }

    eprintln!("building {} semi-synthetic documents ...", args.docs);
    let planner = PlannerOptions {
        full_scan_threshold: 0,
        scan_factor: args.scan_factor,
        post_filter_from: args.post_filter_from,
    };
    let store = Store::in_memory(StoreOptions { planner, ..StoreOptions::default() });
    store.set_fields(LEVELS.iter().map(|(f, _)| ((*f).to_owned(), FieldType::Keyword)).collect())?;
    let t = Instant::now();
    store.upsert(semi_synthetic(&base, args.docs, args.noise)).context("index")?;
    eprintln!("indexed in {:.1} s", t.elapsed().as_secs_f64());
    let table = store.read();

    println!(
        "\n## Filtered search, {} docs, {} queries x {} passes, candidateK {CANDIDATES}",
        args.docs,
        c.queries.len(),
        args.passes
    );
    println!(
        "planner: scan while matches² ≤ {} · ef · live, post-filter from {:.0}% | query embedding p50 {:.2} ms",
        planner.scan_factor,
        planner.post_filter_from * 100.0,
        percentile(&mut embed_ms.clone(), 50.0)
    );
    println!("\n| filter | matches | plan | recall@10 | p50 ms | p99 ms | p50 ms +embed | p99 ms +embed |");
    println!("|---|---|---|---|---|---|---|---|");
    let auto = |f: Option<&Filter>, q: &[f32]| {
        let (found, route) = table.search(q, CANDIDATES, CANDIDATES, f, &planner);
        (found, route.ran)
    };
    let truth = exact_truth(&table, &queries, None);
    let none = measure(&queries, &embed_ms, &truth, args.passes, &|q| auto(None, q));
    print_row("none", table.live(), "planner: hnsw", &none);
    let mut picture = chart::Picture {
        docs: table.live(),
        queries: c.queries.len(),
        passes: args.passes.max(1),
        unfiltered: chart::Latency::of(&none.search_ms),
        levels: Vec::new(),
    };
    let mut p50s = Vec::new();
    for (field, rate) in LEVELS {
        let filter = Filter::eq(field, "in");
        let matches = table.meta_index().candidates(&filter).map_or(0, |c| c.len());
        let truth = exact_truth(&table, &queries, Some(&filter));
        let chosen = measure(&queries, &embed_ms, &truth, args.passes, &|q| auto(Some(&filter), q));
        let mut plans = chosen.plans.clone();
        plans.sort_unstable();
        plans.dedup();
        print_row(field, matches, &format!("planner: {}", plans.join(", ")), &chosen);
        let mut level = chart::Level { rate, planner: chart::Latency::of(&chosen.search_ms), forced: Vec::new() };
        let widened = (CANDIDATES as f64 * table.live() as f64 / matches.max(1) as f64) as usize;
        let forced = [
            Plan::MatchScan { candidates: matches },
            Plan::FilteredWalk { ef: CANDIDATES },
            Plan::PostFilter { ef: widened },
            Plan::FullScan,
        ];
        for plan in forced {
            if matches!(plan, Plan::PostFilter { ef } if ef > 20_000) {
                continue; // a beam of most of the collection: not a plan anyone would run
            }
            let m = measure(&queries, &embed_ms, &truth, args.passes, &|q| {
                let candidates = table.meta_index().candidates(&filter);
                (table.run(plan, q, CANDIDATES, Some(&filter), candidates.as_ref()), plan)
            });
            print_row(field, matches, &plan.describe(), &m);
            level.forced.push((plan.name(), chart::Latency::of(&m.search_ms)));
            p50s.push((field, matches, plan.name(), percentile(&mut m.search_ms.clone(), 50.0)));
        }
        picture.levels.push(level);
    }
    print_calibration(&p50s, table.live());
    if let Some(path) = &args.svg {
        chart::draw(path, &picture)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// `n` documents: `normalize(a + b/2 + noise)` of two random abstracts, with the keyword
/// fields of [`LEVELS`] set to `in` at their rates.
fn semi_synthetic(base: &[Vec<f32>], n: usize, noise: f32) -> Vec<(rcp_dense::wal::StoredDoc, Vec<f32>)> {
    let mut rng = Rng(0x5EED_F11E);
    let pick = |rng: &mut Rng| &base[(rng.uniform() * base.len() as f64) as usize % base.len()];
    (0..n)
        .map(|i| {
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let mut v: Vec<f32> = a.iter().zip(b).map(|(x, y)| x + 0.5 * y + noise * rng.gauss()).collect();
            normalize(&mut v);
            let mut meta = Meta::new();
            for (field, rate) in LEVELS {
                meta.insert(field.to_owned(), json!(if rng.uniform() < rate { "in" } else { "out" }));
            }
            (stored(format!("s{i}"), String::new(), meta, Origin::Corpus), v)
        })
        .collect()
}

/// The exact top 10 of every query among the documents `filter` accepts.
fn exact_truth(table: &Table, queries: &[f32], filter: Option<&Filter>) -> Vec<Vec<usize>> {
    let keep = |s: usize| table.doc(s).is_some_and(|d| filter.is_none_or(|f| f.matches(&d.meta)));
    queries
        .chunks_exact(DIMENSION)
        .map(|q| table.vectors().exact(q, K, None, &keep).iter().map(|s| s.slot).collect())
        .collect()
}

/// Runs `search` over every query `passes` times: recall@10 against `truth`, latencies with
/// and without the query's embedding time, and the plan that ran.
fn measure(
    queries: &[f32],
    embed_ms: &[f64],
    truth: &[Vec<usize>],
    passes: usize,
    search: &dyn Fn(&[f32]) -> Searched,
) -> Measured {
    let mut m = Measured { recall: 0.0, search_ms: Vec::new(), total_ms: Vec::new(), plans: Vec::new() };
    let (mut hit, mut total) = (0usize, 0usize);
    for _ in 0..passes.max(1) {
        for ((q, want), embed) in queries.chunks_exact(DIMENSION).zip(truth).zip(embed_ms) {
            let t = Instant::now();
            let (found, plan) = search(q);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            m.search_ms.push(ms);
            m.total_ms.push(ms + embed);
            m.plans.push(plan.name());
            hit += found.iter().take(K).filter(|s| want.contains(&s.slot)).count();
            total += want.len();
        }
    }
    m.recall = hit as f64 / total.max(1) as f64;
    m
}

/// The planner's `scan_factor` each selectivity implies: the scan costs `a · m`, the walk
/// `b · ef · live / m`, so they cost the same at `m² = (b / a) · ef · live`, and `b / a` is
/// `walk · m² / (scan · ef · live)` from the two measured p50s.
fn print_calibration(p50s: &[(&str, usize, &str, f64)], live: usize) {
    let p50 = |field: &str, name: &str| p50s.iter().find(|r| r.0 == field && r.2 == name).map(|r| (r.1, r.3));
    println!("\n| filter | scan p50 / walk p50 | implied scan_factor |");
    println!("|---|---|---|");
    for (field, _) in LEVELS {
        let scan = p50(field, Plan::MatchScan { candidates: 0 }.name());
        let walk = p50(field, Plan::FilteredWalk { ef: 0 }.name());
        if let (Some((m, scan)), Some((_, walk))) = (scan, walk) {
            let factor = walk * (m as f64).powi(2) / (scan * CANDIDATES as f64 * live as f64);
            println!("| {field} | {:.3} | {factor:.1} |", scan / walk);
        }
    }
}

fn print_row(filter: &str, matches: usize, plan: &str, m: &Measured) {
    let (mut s, mut t) = (m.search_ms.clone(), m.total_ms.clone());
    println!(
        "| {filter} | {matches} | {plan} | {:.4} | {:.3} | {:.3} | {:.2} | {:.2} |",
        m.recall,
        percentile(&mut s, 50.0),
        percentile(&mut s, 99.0),
        percentile(&mut t, 50.0),
        percentile(&mut t, 99.0),
    );
}

/// The latency picture of `--svg`, drawn with plotters' SVG backend. Its text goes into the
/// file as SVG `<text>` for the viewer to set in its own sans-serif; plotters sizes it with a
/// built-in estimate, so no font is read at build or run time.
mod chart {
    use rcp_bench::chart::{log_ticks, marker, thousands, today};
    use std::path::Path;

    use anyhow::anyhow;
    use plotters::coord::Shift;
    use plotters::prelude::*;
    use rcp_bench::quality::percentile;

    use super::{CANDIDATES, K};

    /// p50 and p99 of a set of latencies, in ms.
    #[derive(Debug, Clone, Copy)]
    pub(super) struct Latency {
        p50: f64,
        p99: f64,
    }

    impl Latency {
        pub(super) fn of(ms: &[f64]) -> Self {
            let mut ms = ms.to_vec();
            Latency { p50: percentile(&mut ms, 50.0), p99: percentile(&mut ms, 99.0) }
        }
    }

    /// One selectivity: the planner's latency and each forced plan's.
    #[derive(Debug)]
    pub(super) struct Level {
        pub(super) rate: f64,
        pub(super) planner: Latency,
        pub(super) forced: Vec<(&'static str, Latency)>,
    }

    /// What the run measured, as drawn.
    #[derive(Debug)]
    pub(super) struct Picture {
        pub(super) docs: usize,
        pub(super) queries: usize,
        pub(super) passes: usize,
        pub(super) unfiltered: Latency,
        pub(super) levels: Vec<Level>,
    }

    /// A curve: label, colour, line width, dashed, marker (see [`marker`]) and its points.
    struct Curve {
        label: String,
        colour: RGBColor,
        width: u32,
        dashed: bool,
        marker: Option<usize>,
        points: Vec<(f64, f64)>,
    }

    const BLUE: RGBColor = RGBColor(31, 119, 180);
    const GREY: RGBColor = RGBColor(60, 60, 60);
    /// The forced plans' colours (matplotlib's `tab10` after its blue).
    const FORCED: [RGBColor; 4] =
        [RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189)];

    /// Draws search-only latency (y, ms, log scale) by selectivity (x, log scale).
    pub(super) fn draw(path: &Path, p: &Picture) -> anyhow::Result<()> {
        let (x_lo, x_hi) = (0.0006, 1.0);
        let at = |l: &Level, ms: f64| (l.rate, ms);
        let mut curves = vec![
            Curve {
                label: "filtered, the planner's plan: p50".to_owned(),
                colour: BLUE,
                width: 3,
                dashed: false,
                marker: Some(0),
                points: p.levels.iter().map(|l| at(l, l.planner.p50)).collect(),
            },
            Curve {
                label: "filtered, the planner's plan: p99".to_owned(),
                colour: BLUE,
                width: 2,
                dashed: true,
                marker: Some(1),
                points: p.levels.iter().map(|l| at(l, l.planner.p99)).collect(),
            },
            Curve {
                label: format!("unfiltered: p50 ({:.2} ms)", p.unfiltered.p50),
                colour: GREY,
                width: 2,
                dashed: false,
                marker: None,
                points: vec![(x_lo, p.unfiltered.p50), (x_hi, p.unfiltered.p50)],
            },
            Curve {
                label: format!("unfiltered: p99 ({:.2} ms)", p.unfiltered.p99),
                colour: GREY,
                width: 2,
                dashed: true,
                marker: None,
                points: vec![(x_lo, p.unfiltered.p99), (x_hi, p.unfiltered.p99)],
            },
        ];
        let mut plans: Vec<&str> = p.levels.iter().flat_map(|l| l.forced.iter().map(|f| f.0)).collect();
        plans.sort_unstable();
        plans.dedup();
        for (i, plan) in plans.iter().enumerate() {
            curves.push(Curve {
                label: format!("{}, forced: p50", if *plan == "exact scan" { "exact scan of all" } else { plan }),
                colour: FORCED[i % FORCED.len()],
                width: 1,
                dashed: false,
                marker: Some(2 + i),
                points: p
                    .levels
                    .iter()
                    .filter_map(|l| l.forced.iter().find(|f| f.0 == *plan).map(|f| at(l, f.1.p50)))
                    .collect(),
            });
        }
        let values = || curves.iter().flat_map(|c| c.points.iter().map(|q| q.1)).filter(|v| v.is_finite() && *v > 0.0);
        let y_lo = values().fold(f64::INFINITY, f64::min) / 1.5;
        let y_hi = values().fold(0.0, f64::max) * 1.5;
        if !y_lo.is_finite() || y_hi <= 0.0 {
            anyhow::bail!("no latency to draw");
        }
        let x_ticks: Vec<f64> = p.levels.iter().map(|l| l.rate).collect();

        let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
        let plotting = || -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
            root.fill(&WHITE)?;
            let area = root
                .titled("Filtered against unfiltered dense search: latency by selectivity", ("sans-serif", 24))?
                .titled(
                    &format!(
                        "{} semi-synthetic docs (Cranfield abstracts), {} queries × {} pass{}, candidateK {CANDIDATES}, ef {CANDIDATES}, \
                         top {K}, one thread, search only · {}",
                        thousands(p.docs as f64),
                        p.queries,
                        p.passes,
                        if p.passes == 1 { "" } else { "es" },
                        today()
                    ),
                    ("sans-serif", 17).into_font().color(&RGBColor(90, 90, 90)),
                )?;
            let (plot, legend) = area.split_horizontally(700);
            let mut chart =
                ChartBuilder::on(&plot).margin(16).x_label_area_size(52).y_label_area_size(72).build_cartesian_2d(
                    (x_lo..x_hi).log_scale().with_key_points(x_ticks),
                    (y_lo..y_hi).log_scale().with_key_points(log_ticks(y_lo, y_hi)),
                )?;
            chart
                .configure_mesh()
                .x_desc(format!("share of the {} documents the filter accepts (log scale)", thousands(p.docs as f64)))
                .y_desc("latency, ms (log scale)")
                .x_label_formatter(&|x| format!("{}%", short(x * 100.0)))
                .y_label_formatter(&|y| short(*y))
                .label_style(("sans-serif", 16))
                .axis_desc_style(("sans-serif", 18))
                .light_line_style(TRANSPARENT)
                .bold_line_style(RGBColor(225, 225, 225))
                .draw()?;
            // Last drawn is on top: the planner's curves, listed first, go over the rest.
            for c in curves.iter().rev() {
                let style = c.colour.stroke_width(c.width);
                if c.dashed {
                    chart.draw_series(DashedLineSeries::new(c.points.iter().copied(), 8, 5, style))?;
                } else {
                    chart.draw_series(LineSeries::new(c.points.iter().copied(), style))?;
                }
                if let Some(m) = c.marker {
                    chart.draw_series(
                        c.points.iter().map(|&q| EmptyElement::at(q) + Polygon::new(marker(m), c.colour.filled())),
                    )?;
                }
            }
            draw_legend(&legend, &curves)
        };
        plotting().map_err(|e| anyhow!("draw {}: {e}", path.display()))?;
        root.present().map_err(|e| anyhow!("write {}: {e}", path.display()))
    }

    /// The legend, beside the plot: a sample of each curve's line and marker, then its label.
    fn draw_legend<DB: DrawingBackend>(
        area: &DrawingArea<DB, Shift>,
        curves: &[Curve],
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let top = 40;
        for (i, c) in curves.iter().enumerate() {
            let y = top + 30 * i as i32;
            let style = c.colour.stroke_width(c.width);
            if c.dashed {
                area.draw(&PathElement::new(vec![(4, y), (14, y)], style))?;
                area.draw(&PathElement::new(vec![(20, y), (30, y)], style))?;
            } else {
                area.draw(&PathElement::new(vec![(4, y), (30, y)], style))?;
            }
            if let Some(m) = c.marker {
                area.draw(&(EmptyElement::at((17, y)) + Polygon::new(marker(m), c.colour.filled())))?;
            }
            area.draw(&Text::new(c.label.as_str(), (40, y - 8), ("sans-serif", 15)))?;
        }
        Ok(())
    }

    /// A tick value without trailing zeros: `0.001`, `0.5`, `20`.
    fn short(v: f64) -> String {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}
