//! Params validation against the session's capabilities, done once for every engine:
//! option values (§7.7 `strict`), funnel (§7.7), filters (§8), limits (§4.7, §15.5).

use rcp_protocol::capabilities::Capabilities;
use rcp_protocol::content::{InputItem, QueryInput};
use rcp_protocol::embed::EmbedParams;
use rcp_protocol::filter;
use rcp_protocol::rerank::RerankParams;
use rcp_protocol::retrieve::{RerankOption, RewriteOption};
use rcp_protocol::{ErrorCode, RcpError, RetrieveParams};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::handler::{EmbedRequest, RerankRequest, RetrieveRequest};

/// Parses params into `T`, turning serde errors into `-32602` with `error.data.field` set to the
/// offending path (`filter.and[1].value`, `k`, `documents[2].id`).
pub(crate) fn parse<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, RcpError> {
    let text = params.map(RawValue::get).unwrap_or("{}");
    let text = if text.trim() == "null" { "{}" } else { text };
    // Fast path; only a failure pays for tracking the path to the offending field.
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let mut path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.to_string();
        // Strip serde's " at line L column C" suffix: positions mean nothing to the peer.
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_owned();
        if let Some(name) = msg.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
            path = if path == "." { name.to_owned() } else { format!("{path}.{name}") };
        }
        let path = path.trim_end_matches(".?").trim_end_matches('?').to_owned();
        let path = if path.is_empty() || path == "." { "params".to_owned() } else { path };
        RcpError::invalid_params(path, msg)
    })
}

/// Applies the `strict` rule (§7.7): an unadvertised option value is `-32005` when strict,
/// otherwise a note and `Ok(false)` (the caller falls back).
fn option_allowed(
    strict: bool,
    notes: &mut Vec<String>,
    option: &str,
    value: &str,
    advertised: &[String],
    fallback: &str,
) -> Result<bool, RcpError> {
    if advertised.iter().any(|a| a == value) {
        return Ok(true);
    }
    let list: Vec<&str> = advertised.iter().map(String::as_str).collect();
    if strict {
        return Err(RcpError::option_unsupported(option, value, &list));
    }
    notes.push(format!("{option} '{value}' not advertised; {fallback}"));
    Ok(false)
}

fn flag_unsupported(strict: bool, notes: &mut Vec<String>, option: &str, what: &str) -> Result<(), RcpError> {
    if strict {
        let mut e = RcpError::new(ErrorCode::OPTION_UNSUPPORTED, format!("{option} is not supported: {what}"));
        e.data.get_or_insert_with(Default::default).option = Some(option.to_owned());
        return Err(e);
    }
    notes.push(format!("{option} ignored: {what}"));
    Ok(())
}

fn check_query(
    query: &QueryInput,
    field: &str,
    modalities: &[String],
    strict: bool,
    notes: &mut Vec<String>,
) -> Result<(), RcpError> {
    match query {
        QueryInput::Text(t) if t.trim().is_empty() => {
            return Err(RcpError::invalid_params(field, "query must not be empty"));
        }
        QueryInput::Block(b) => b.check().map_err(|d| RcpError::invalid_params(field, d))?,
        QueryInput::Blocks(bs) => {
            if bs.is_empty() {
                return Err(RcpError::invalid_params(field, "query must not be empty"));
            }
            for (i, b) in bs.iter().enumerate() {
                b.check().map_err(|d| RcpError::invalid_params(format!("{field}[{i}]"), d))?;
            }
        }
        QueryInput::Text(_) => {}
    }
    let modality = query.modality();
    if !option_allowed(strict, notes, "modality", modality, modalities, "using the text part of the query")?
        && query.text().trim().is_empty()
    {
        let list: Vec<&str> = modalities.iter().map(String::as_str).collect();
        return Err(RcpError::option_unsupported("modality", modality, &list));
    }
    Ok(())
}

fn text_only() -> Vec<String> {
    vec!["text".to_owned()]
}

/// Validates and normalises `retrieve` params (§7.7).
pub(crate) fn retrieve(
    mut p: RetrieveParams,
    caps: &Capabilities,
    notes: &mut Vec<String>,
) -> Result<RetrieveRequest, RcpError> {
    let rc = caps.retrieve.clone().unwrap_or_default();
    let strict = p.is_strict();

    // k: structurally >= 1; above maxK is clamped, never rejected (§12).
    if p.k == 0 {
        return Err(RcpError::invalid_params("k", "k must be an integer >= 1"));
    }
    let max_k = rc.max_k.unwrap_or(u64::MAX).max(1);
    if p.k > max_k {
        notes.push(format!("k clamped from {} to maxK {max_k}", p.k));
        p.k = max_k;
    }
    let k = p.k;

    // query and modality (§4.8)
    let modalities = rc.modalities.clone().unwrap_or_else(text_only);
    if let Some(m) = p.modality.clone()
        && !option_allowed(strict, notes, "modality", &m, &modalities, "using text")?
    {
        p.modality = None;
    }
    check_query(&p.query, "query", &modalities, strict, notes)?;

    // mode
    let modes = rc.modes.clone().unwrap_or_default();
    let default_mode = rc.default_mode.clone().or_else(|| modes.first().cloned());
    match p.mode.clone() {
        Some(m) => {
            let fallback = format!("using '{}'", default_mode.as_deref().unwrap_or("the default"));
            if !option_allowed(strict, notes, "mode", &m, &modes, &fallback)? {
                p.mode = default_mode;
            }
        }
        None => p.mode = default_mode,
    }

    // fusion
    if let Some(f) = p.fusion.clone() {
        if let Some(a) = f.alpha
            && !(0.0..=1.0).contains(&a)
        {
            return Err(RcpError::invalid_params("fusion.alpha", "alpha must be in [0,1]"));
        }
        if f.rrf_k == Some(0) {
            return Err(RcpError::invalid_params("fusion.rrfK", "rrfK must be >= 1"));
        }
        if let Some(m) = &f.method
            && !option_allowed(
                strict,
                notes,
                "fusion.method",
                m,
                rc.fusion.as_deref().unwrap_or(&[]),
                "using the server's default fusion",
            )?
        {
            p.fusion = None;
        }
    }

    // inline rerank and the funnel candidateK >= topN >= k
    let mut top_n = None;
    if let Some(stage) = p.rerank_stage() {
        if rc.rerank_builtin != Some(true) {
            flag_unsupported(strict, notes, "rerank", "server does not advertise retrieve.rerankBuiltin")?;
            p.rerank = None;
        } else {
            let mut stage = stage;
            if let (Some(m), Some(rr)) = (&stage.method, &caps.rerank)
                && !option_allowed(
                    strict,
                    notes,
                    "rerank.method",
                    m,
                    &rr.methods,
                    "using the server's default reranker",
                )?
            {
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
                let ceiling =
                    caps.rerank.as_ref().and_then(|r| r.max_candidates).map_or(max_k, |m| (m as u64).min(max_k));
                if n > ceiling {
                    notes.push(format!("rerank.topN clamped from {n} to {ceiling}"));
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
            notes.push(format!("candidateK clamped from {c} to maxK {max_k}"));
            p.candidate_k = Some(max_k);
        }
    }
    let candidate_k = p.candidate_k.unwrap_or_else(|| k.max(100).min(max_k)).max(k);

    // mmr
    if let Some(m) = p.mmr {
        if !(0.0..=1.0).contains(&m.lambda) {
            return Err(RcpError::invalid_params("mmr.lambda", "lambda must be in [0,1]"));
        }
        if rc.mmr != Some(true) {
            flag_unsupported(strict, notes, "mmr", "server does not advertise retrieve.mmr")?;
            p.mmr = None;
        }
    }

    // inline rewrite
    match p.rewrite.clone() {
        Some(RewriteOption::Enabled(true)) => {
            return Err(RcpError::invalid_params("rewrite", "rewrite must be a transform method or false"));
        }
        Some(RewriteOption::Method(m)) => {
            let methods = caps.transform.as_ref().map(|t| t.methods.clone()).unwrap_or_default();
            if !option_allowed(strict, notes, "rewrite", &m, &methods, "query used as given")? {
                p.rewrite = None;
            }
        }
        _ => {}
    }

    // filter (§8)
    let mut filter = None;
    if let Some(raw) = p.filter.take() {
        match &caps.filter {
            None => flag_unsupported(strict, notes, "filter", "server does not advertise filter")?,
            Some(fc) => match filter::validate(&raw, fc) {
                Ok(f) => {
                    filter = Some(f);
                    p.filter = Some(raw);
                }
                Err(e) if e.code == ErrorCode::OPTION_UNSUPPORTED && !strict => {
                    notes.push(format!("filter dropped: {}", e.message));
                }
                Err(e) => return Err(e),
            },
        }
    }

    if let Some(s) = p.min_score
        && !s.is_finite()
    {
        return Err(RcpError::invalid_params("minScore", "minScore must be a finite number"));
    }

    if let Some(r) = &p.recency {
        if let Some(h) = r.half_life_days
            && !(h.is_finite() && h > 0.0)
        {
            return Err(RcpError::invalid_params("recency.halfLifeDays", "halfLifeDays must be > 0"));
        }
        if let Some(fc) = &caps.filter {
            match fc.field_type(&r.field) {
                None => {
                    return Err(RcpError::invalid_params(
                        "recency.field",
                        format!("field '{}' is not an advertised filter field", r.field),
                    ));
                }
                Some(Some(t)) if *t != filter::FieldType::Date => {
                    return Err(RcpError::invalid_params(
                        "recency.field",
                        format!("field '{}' is not a date field", r.field),
                    ));
                }
                _ => {}
            }
        }
    }

    if let Some(u) = p.unit.clone() {
        let units = rc.units.clone().unwrap_or_else(|| vec!["chunk".to_owned(), "passage".to_owned()]);
        if !option_allowed(strict, notes, "unit", &u, &units, "returning the default unit")? {
            p.unit = None;
        }
    }

    if let Some(level) = p.level {
        let levels = rc.levels.unwrap_or(1);
        if level >= levels {
            flag_unsupported(strict, notes, "level", &format!("server advertises {levels} level(s)"))?;
            p.level = None;
        }
    }

    if let Some(tb) = p.token_budget {
        if tb == 0 {
            return Err(RcpError::invalid_params("tokenBudget", "tokenBudget must be >= 1"));
        }
        if rc.token_budget != Some(true) {
            flag_unsupported(strict, notes, "tokenBudget", "server does not advertise retrieve.tokenBudget")?;
            p.token_budget = None;
        }
    }

    if let Some(enc) = p.encoding.clone() {
        // §7.3.1 lets `hit.vector` use a binary encoding, but the normative schema types it as
        // an array of numbers; following the schema, hit vectors are always JSON numbers.
        if !option_allowed(
            strict,
            notes,
            "encoding",
            &enc,
            &["json".to_owned()],
            "hit vectors are sent as JSON numbers",
        )? {
            p.encoding = None;
        }
    }

    if p.seed.is_some() && rc.deterministic != Some(true) {
        notes.push("seed ignored: this server does not advertise retrieve.deterministic".to_owned());
    }

    if p.index_version.is_some() && rc.snapshots != Some(true) {
        flag_unsupported(strict, notes, "indexVersion", "server does not advertise retrieve.snapshots")?;
        p.index_version = None;
    }

    if p.cursor.is_some() && caps.pagination.is_none() {
        flag_unsupported(strict, notes, "cursor", "server does not advertise pagination")?;
        p.cursor = None;
    }

    let k = usize::try_from(k).unwrap_or(usize::MAX);
    let candidate_k = usize::try_from(candidate_k).unwrap_or(usize::MAX);
    Ok(RetrieveRequest { params: p, filter, k, candidate_k })
}

/// Validates the inputs of `embed`, `embed/sparse` and `embed/multi` (§7.3–§7.5).
pub(crate) fn inputs(
    items: &[InputItem],
    field: &str,
    batch_limit: Option<u32>,
    modalities: &[String],
) -> Result<(), RcpError> {
    if let Some(limit) = batch_limit
        && items.len() > limit as usize
    {
        return Err(RcpError::invalid_params(field, format!("{} inputs exceed batchLimit {limit}", items.len())));
    }
    for (i, item) in items.iter().enumerate() {
        if let InputItem::Block(b) = item {
            b.check().map_err(|d| RcpError::invalid_params(format!("{field}[{i}]"), d))?;
        }
        let m = item.modality();
        if !modalities.iter().any(|a| a == m) {
            let list: Vec<&str> = modalities.iter().map(String::as_str).collect();
            let mut e = RcpError::option_unsupported("modality", m, &list);
            e.data.get_or_insert_with(Default::default).field = Some(format!("{field}[{i}]"));
            return Err(e);
        }
    }
    Ok(())
}

fn check_kind(kind: &Option<String>) -> Result<(), RcpError> {
    match kind.as_deref() {
        None | Some("query") | Some("document") => Ok(()),
        Some(other) => Err(RcpError::invalid_params("kind", format!("kind '{other}' must be 'query' or 'document'"))),
    }
}

/// Validates `embed`/`embed/multi` params; returns the request and the encoding to use.
pub(crate) fn embed(
    p: EmbedParams,
    batch_limit: Option<u32>,
    modalities: Option<&Vec<String>>,
    encodings: Option<&Vec<String>>,
    notes: &mut Vec<String>,
) -> Result<(EmbedRequest, String), RcpError> {
    if p.inputs.is_none() && p.texts.is_none() {
        return Err(RcpError::invalid_params("inputs", "missing field `inputs` (or legacy `texts`)"));
    }
    let field = p.items_field();
    let modalities = modalities.cloned().unwrap_or_else(text_only);
    inputs(p.items(), field, batch_limit, &modalities)?;
    check_kind(&p.kind)?;
    let strict = p.strict.unwrap_or(true);
    let mut encoding = p.encoding.clone().unwrap_or_else(|| "json".to_owned());
    if encoding != "json" {
        let advertised = encodings.cloned().unwrap_or_else(|| vec!["json".to_owned()]);
        if !option_allowed(strict, notes, "encoding", &encoding, &advertised, "using json")? {
            encoding = "json".to_owned();
        }
    }
    let inputs = p.items().to_vec();
    Ok((EmbedRequest { inputs, kind: p.kind, meta: p.meta }, encoding))
}

/// Validates `rerank` params (§7.6); returns the request and `topN`.
pub(crate) fn rerank(
    p: RerankParams,
    caps: &Capabilities,
    notes: &mut Vec<String>,
) -> Result<(RerankRequest, Option<usize>), RcpError> {
    let rc = caps.rerank.clone().unwrap_or_default();
    let strict = p.strict.unwrap_or(true);
    check_query(&p.query, "query", &text_only(), true, notes)?;
    if let Some(max) = rc.max_candidates
        && p.passages.len() > max as usize
    {
        return Err(RcpError::invalid_params(
            "passages",
            format!("{} passages exceed rerank.maxCandidates {max}", p.passages.len()),
        ));
    }
    inputs(&p.passages, "passages", None, &text_only())?;
    let default = rc.methods.first().cloned().unwrap_or_else(|| "cross-encoder".to_owned());
    let method = match p.method {
        Some(m) if option_allowed(strict, notes, "method", &m, &rc.methods, &format!("using '{default}'"))? => m,
        _ => default,
    };
    let top_n = match p.top_n {
        Some(0) => return Err(RcpError::invalid_params("topN", "topN must be >= 1")),
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None => None,
    };
    Ok((RerankRequest { query: p.query, passages: p.passages, method, model: p.model, meta: p.meta }, top_n))
}

/// Checks that `value` is one of `advertised` (no `strict` fallback for this method).
pub(crate) fn one_of(option: &str, value: &str, advertised: &[String]) -> Result<(), RcpError> {
    if advertised.iter().any(|a| a == value) {
        Ok(())
    } else {
        let list: Vec<&str> = advertised.iter().map(String::as_str).collect();
        Err(RcpError::option_unsupported(option, value, &list))
    }
}
