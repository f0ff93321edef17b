//! `retrieve` params (§7.7), one check per subsection of the spec, in the order they run.
//!
//! Each check reads the gating module's finding for its option and either refuses the request
//! (`strict`, the default) or applies the `strict:false` fallback and notes it.

use rcp_corpus::recency::DEFAULT_HALF_LIFE_DAYS;
use rcp_wire::capabilities::{Capabilities, RetrieveCapability};
use rcp_wire::filter::Filter;
use rcp_wire::gating::{self, Finding, Gate};
use rcp_wire::retrieve::{RerankOption, RewriteOption, Unit};
use rcp_wire::{RcpError, RetrieveParams};
use serde_json::Value;

use super::settle;
use crate::handler::{Honours, Passthrough, RecencyDecay, RetrieveRequest};

/// What every check of one `retrieve` request reads and writes.
struct Check<'a> {
    caps: &'a Capabilities,
    rc: &'a RetrieveCapability,
    strict: bool,
    notes: &'a mut Vec<String>,
}

impl Check<'_> {
    /// `Ok(true)` when the option falls back (under `strict:false`), `Err` when refused.
    fn settle(&mut self, finding: Option<Finding>) -> Result<bool, RcpError> {
        settle(finding, self.strict, self.notes)
    }

    /// `k` (§7.7): structurally >= 1; above `maxK` it is clamped, never rejected (§12).
    fn k(&mut self, p: &mut RetrieveParams) -> Result<u64, RcpError> {
        if p.k == 0 {
            return Err(RcpError::invalid_params("k", "k must be an integer >= 1"));
        }
        let max_k = self.rc.max_k_or_unbounded();
        if p.k > max_k {
            self.notes.push(format!("k clamped from {} to maxK {max_k}", p.k));
            p.k = max_k;
        }
        Ok(p.k)
    }

    /// `query` and `modality` (§4.8).
    fn query(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if self.settle(gating::modality(self.rc, p))? {
            p.modality = None;
        }
        super::query_shape(&p.query, "query")?;
        let fell_back =
            self.settle(gating::query_modality(Gate::RetrieveQueryModality, &p.query, self.rc.modalities()))?;
        super::query(&mut p.query, "query", fell_back)
    }

    /// `mode` (§6.1): absent or refused-with-fallback means the default mode.
    fn mode(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if p.mode.is_none() || self.settle(gating::mode(self.rc, p))? {
            p.mode = self.rc.default_mode().cloned();
        }
        Ok(())
    }

    /// `fusion` (§16.3): `alpha` in `[0,1]`, `rrfK` >= 1, an advertised method.
    fn fusion(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        let Some(f) = &p.fusion else { return Ok(()) };
        if let Some(a) = f.alpha
            && !(0.0..=1.0).contains(&a)
        {
            return Err(RcpError::invalid_params("fusion.alpha", "alpha must be in [0,1]"));
        }
        if f.rrf_k == Some(0) {
            return Err(RcpError::invalid_params("fusion.rrfK", "rrfK must be >= 1"));
        }
        if self.settle(gating::fusion_method(self.rc, p))? {
            p.fusion = None;
        }
        Ok(())
    }

    /// Inline rerank and the funnel `candidateK >= rerank.topN >= k` (§3.3, §7.7); returns the
    /// effective `candidateK`.
    fn funnel(&mut self, p: &mut RetrieveParams, k: u64) -> Result<u64, RcpError> {
        let max_k = self.rc.max_k_or_unbounded();
        let mut top_n = None;
        if let Some(mut stage) = p.rerank_stage() {
            if self.settle(gating::inline_rerank(self.rc, p))? {
                p.rerank = None;
            } else {
                if self.settle(gating::inline_rerank_method(self.caps, p))? {
                    stage.method = None;
                }
                if stage.top_n == Some(0) {
                    return Err(RcpError::invalid_params("rerank.topN", "topN must be >= 1"));
                }
                if let Some(n) = stage.top_n {
                    if n < k {
                        return Err(RcpError::invalid_params(
                            "rerank.topN",
                            format!("funnel violated: rerank.topN ({n}) must be >= k ({k})"),
                        ));
                    }
                    let ceiling = self
                        .caps
                        .rerank
                        .as_ref()
                        .and_then(|r| r.max_candidates)
                        .map_or(max_k, |m| u64::from(m).min(max_k));
                    if n > ceiling {
                        self.notes.push(format!("rerank.topN clamped from {n} to {ceiling}"));
                        stage.top_n = Some(ceiling.max(k));
                    }
                    top_n = stage.top_n;
                }
                p.rerank = Some(RerankOption::Stage(stage));
            }
        }
        if let Some(c) = p.candidate_k {
            if c == 0 {
                return Err(RcpError::invalid_params("candidateK", "candidateK must be >= 1"));
            }
            let floor = top_n.unwrap_or(k);
            if c < floor {
                let what = if top_n.is_some() { format!("rerank.topN ({floor})") } else { format!("k ({k})") };
                return Err(RcpError::invalid_params(
                    "candidateK",
                    format!("funnel violated: candidateK ({c}) must be >= {what}"),
                ));
            }
            if c > max_k {
                self.notes.push(format!("candidateK clamped from {c} to maxK {max_k}"));
                p.candidate_k = Some(max_k);
            }
        }
        Ok(p.candidate_k.unwrap_or_else(|| k.max(100).min(max_k)).max(k))
    }

    /// `mmr` (§6.1): `lambda` in `[0,1]`, and the capability flag.
    fn mmr(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        let Some(m) = p.mmr else { return Ok(()) };
        if !(0.0..=1.0).contains(&m.lambda) {
            return Err(RcpError::invalid_params("mmr.lambda", "lambda must be in [0,1]"));
        }
        if self.settle(gating::mmr(self.rc, p))? {
            p.mmr = None;
        }
        Ok(())
    }

    /// Inline `rewrite` (§7.7, §7.8): a transform method or `false`.
    fn rewrite(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if p.rewrite == Some(RewriteOption::Enabled(true)) {
            return Err(RcpError::invalid_params("rewrite", "rewrite must be a transform method or false"));
        }
        if self.settle(gating::rewrite(self.caps, p))? {
            p.rewrite = None;
        }
        Ok(())
    }

    /// `filter` (§8): validated against the advertised fields and operators.
    fn filter(&mut self, p: &mut RetrieveParams) -> Result<Option<Filter>, RcpError> {
        let Some(raw) = p.filter.take() else { return Ok(None) };
        match gating::filter(self.caps, &raw) {
            Ok(f) => {
                p.filter = Some(raw);
                Ok(Some(f))
            }
            Err(finding) => {
                self.settle(Some(finding))?;
                Ok(None)
            }
        }
    }

    /// `recency` (§7.7): `halfLifeDays` > 0, `field` an advertised date field.
    fn recency(&mut self, p: &RetrieveParams) -> Result<(), RcpError> {
        let Some(r) = &p.recency else { return Ok(()) };
        if let Some(h) = r.half_life_days
            && !(h.is_finite() && h > 0.0)
        {
            return Err(RcpError::invalid_params("recency.halfLifeDays", "halfLifeDays must be > 0"));
        }
        self.settle(gating::recency_field(self.caps, p))?;
        Ok(())
    }

    /// The default `recency.halfLifeDays`, filled in (and noted) once `recency` is served.
    fn recency_default(&mut self, p: &mut RetrieveParams) {
        if let Some(r) = p.recency.as_mut()
            && r.half_life_days.is_none()
        {
            r.half_life_days = Some(DEFAULT_HALF_LIFE_DAYS);
            self.notes.push(format!("recency.halfLifeDays defaulted to {DEFAULT_HALF_LIFE_DAYS}"));
        }
    }

    /// The params no capability flag gates (§7.7, [`Honours`]): one the engine does not
    /// declare is refused (`-32005` naming it) or, under `strict:false`, dropped and noted; a
    /// `sessionId` without the `session` capability is a hint (§7.7.3), noted as unused.
    fn honours(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        let rc = self.rc;
        let declared = rc.extra.get(Honours::KEY).and_then(Value::as_array);
        let honoured = |name: &str| declared.is_some_and(|names| names.iter().any(|n| n == name));
        if let Some(r) = &p.recency
            && !honoured("recency")
        {
            self.unhonoured("recency", &r.field)?;
            p.recency = None;
        }
        if p.include_vectors == Some(true) && !honoured("includeVectors") {
            self.unhonoured("includeVectors", "true")?;
            p.include_vectors = None;
        }
        if p.session_id.is_some() && self.caps.session.is_none() {
            self.notes.push("sessionId ignored: this server does not advertise session".to_owned());
        }
        Ok(())
    }

    /// `option` (sent as `value`) is not honoured by this engine: refused under `strict`,
    /// otherwise noted (the caller drops it).
    fn unhonoured(&mut self, option: &str, value: &str) -> Result<(), RcpError> {
        if self.strict {
            let mut e = RcpError::option_unsupported(option, value, &[]);
            e.message =
                format!("{option} is not honoured by this engine (retrieve.{} lists what it honours)", Honours::KEY);
            return Err(e);
        }
        self.notes.push(format!("{option} ignored: not honoured by this engine"));
        Ok(())
    }

    /// `unit` (§7.7.2).
    fn unit(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if self.settle(gating::unit(self.rc, p))? {
            p.unit = None;
        }
        Ok(())
    }

    /// `level` (§7.7.2).
    fn level(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if self.settle(gating::level(self.rc, p))? {
            p.level = None;
        }
        Ok(())
    }

    /// `tokenBudget` (§7.7.2): >= 1, and the capability flag.
    fn token_budget(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if p.token_budget == Some(0) {
            return Err(RcpError::invalid_params("tokenBudget", "tokenBudget must be >= 1"));
        }
        if self.settle(gating::token_budget(self.rc, p))? {
            p.token_budget = None;
        }
        Ok(())
    }

    /// `encoding` of hit vectors (§7.3.1).
    fn encoding(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if self.settle(gating::hit_encoding(p))? {
            p.encoding = None;
        }
        Ok(())
    }

    /// `seed` (§7.7.1): never an error; a note when it cannot be honoured.
    fn seed(&mut self, p: &RetrieveParams) {
        if p.seed.is_some() && !self.rc.offers_determinism() {
            self.notes.push("seed ignored: this server does not advertise retrieve.deterministic".to_owned());
        }
    }

    /// `indexVersion` (§7.7.1).
    fn index_version(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if self.settle(gating::index_version(self.rc, p))? {
            p.index_version = None;
        }
        Ok(())
    }

    /// `cursor` (§10).
    fn cursor(&mut self, p: &mut RetrieveParams) -> Result<(), RcpError> {
        if self.settle(gating::cursor(self.caps, p))? {
            p.cursor = None;
        }
        Ok(())
    }
}

fn min_score(p: &RetrieveParams) -> Result<(), RcpError> {
    match p.min_score {
        Some(s) if !s.is_finite() => Err(RcpError::invalid_params("minScore", "minScore must be a finite number")),
        _ => Ok(()),
    }
}

/// Validates and normalises `retrieve` params (§7.7).
pub(crate) fn retrieve(
    mut p: RetrieveParams,
    caps: &Capabilities,
    notes: &mut Vec<String>,
) -> Result<RetrieveRequest, RcpError> {
    let rc = gating::retrieve_capability(caps);
    let mut c = Check { caps, rc: rc.as_ref(), strict: p.is_strict(), notes };
    let k = c.k(&mut p)?;
    c.query(&mut p)?;
    c.mode(&mut p)?;
    c.fusion(&mut p)?;
    let candidate_k = c.funnel(&mut p, k)?;
    c.mmr(&mut p)?;
    c.rewrite(&mut p)?;
    let filter = c.filter(&mut p)?;
    min_score(&p)?;
    c.recency(&p)?;
    c.honours(&mut p)?;
    c.recency_default(&mut p);
    c.unit(&mut p)?;
    c.level(&mut p)?;
    c.token_budget(&mut p)?;
    c.encoding(&mut p)?;
    c.seed(&p);
    c.index_version(&mut p)?;
    c.cursor(&mut p)?;
    resolve(p, filter, k, candidate_k)
}

/// The resolved request of validated, normalised params: every default applied once.
fn resolve(p: RetrieveParams, filter: Option<Filter>, k: u64, candidate_k: u64) -> Result<RetrieveRequest, RcpError> {
    let unit =
        match p.unit.as_deref() {
            None => None,
            Some(u) => Some(Unit::from_name(u).ok_or_else(|| {
                RcpError::invalid_params("unit", format!("unknown unit '{u}' (§7.7.2 lists the units)"))
            })?),
        };
    let passthrough =
        Passthrough { modality: p.modality, rerank: p.rerank, explicit_candidate_k: p.candidate_k.is_some() };
    let mut req = RetrieveRequest::new(p.query, usize::try_from(k).unwrap_or(usize::MAX));
    req.candidate_k = usize::try_from(candidate_k).unwrap_or(usize::MAX);
    req.mode = p.mode;
    req.fusion = p.fusion;
    req.filter = filter;
    req.min_score = p.min_score;
    req.recency = p
        .recency
        .map(|r| RecencyDecay { field: r.field, half_life_days: r.half_life_days.unwrap_or(DEFAULT_HALF_LIFE_DAYS) });
    req.unit = unit;
    req.level = p.level;
    req.mmr = p.mmr;
    req.rewrite = match p.rewrite {
        Some(RewriteOption::Method(m)) => Some(m),
        Some(RewriteOption::Enabled(_)) | None => None,
    };
    req.include_text = p.include_text != Some(false);
    req.include_vectors = p.include_vectors == Some(true);
    req.encoding = p.encoding;
    req.cursor = p.cursor.filter(|c| !c.is_empty());
    req.session_id = p.session_id;
    req.seed = p.seed;
    req.index_version = p.index_version;
    req.token_budget = p.token_budget;
    req.strict = p.strict != Some(false);
    req.meta = p.meta;
    req.passthrough = passthrough;
    Ok(req)
}
