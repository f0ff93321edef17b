//! The checks, in the order they run. Each has a stable id, its level and what it verifies; the
//! sentence of the spec it rests on, with its keyword, is in [`basis`]. This file is the
//! catalogue; the modules beside it hold the bodies, which reach their verdicts with [`crate::verdict`] on the session
//! of [`crate::session`]; [`crate::record`] turns each verdict into a result.

pub(crate) mod clauses;
mod content;
mod envelope;
mod features;
pub(crate) mod federation;
mod filter;
mod granularity;
mod graph;
mod http;
mod index;
mod lifecycle;
mod memory;
mod methods;
mod notify;
mod pagination;
mod retrieve;
mod stdio;
mod streaming;
mod trajectory;

use serde_json::{Value, json};

use crate::config::{Aggregator, Target};
use crate::conn::{Conn, Env};
use crate::record::{Ctx, Meta, intern};
use crate::report::Level;
use crate::session::{Caps, Main};
use crate::sweep::{self, MethodSweep};
use crate::verdict::{Res, fail, pass, pass_note, skip, warn};
use lifecycle::Sessions;

/// The catalogue entry of a check; its basis comes from the basis table.
macro_rules! meta {
    ($level:ident, $id:literal, $name:literal) => {
        Meta { level: Level::$level, id: $id, name: $name, basis: clauses::of($id) }
    };
}

/// Runs a check if its level is wanted. Each check's future is boxed: inline, the states of
/// the ~190 checks would make the catalogue's one future larger than a thread's stack.
macro_rules! check {
    ($cx:ident, $level:ident, $id:literal, $name:literal, $body:expr) => {
        if $cx.wants(Level::$level) {
            let outcome: Res = Box::pin($body).await;
            $cx.record(meta!($level, $id, $name), outcome);
        }
    };
}

/// Runs a check on the main session (skipped if it could not be initialized).
macro_rules! on_main {
    ($cx:ident, $main:ident, $level:ident, $id:literal, $name:literal, $f:path) => {
        if $cx.wants(Level::$level) {
            let outcome: Res = match $main.as_mut() {
                Some(m) => {
                    m.ensure_alive().await;
                    m.current = $id;
                    let outcome = Box::pin($f(m)).await;
                    $cx.shared = m.shared_from.take();
                    outcome
                }
                None => skip("the main session could not be initialized"),
            };
            $cx.record(meta!($level, $id, $name), outcome);
        }
    };
}

async fn open_main(env: &Env, query: Option<String>, slot: &mut Option<Main>) -> Res {
    let m = Main::open(env, query).await?;
    let mut problems = lifecycle::result_shape(&m.init);
    let version = m.init.get("protocolVersion").and_then(Value::as_i64);
    if version.is_some_and(|v| v != 1) {
        problems.push("protocolVersion 1 (= min(1, server), §7.1)");
    }
    *slot = Some(m);
    if problems.is_empty() { pass() } else { fail(format!("initialize result lacks {}", problems.join(", "))) }
}

/// The lifecycle checks (§7.1, §13), each group on a fresh process or session. Over stdio they
/// run before the main session is opened and every process is stopped before the next starts, so
/// a server holding an exclusive resource (a data directory) certifies.
#[rustfmt::skip]
async fn lifecycle_checks(cx: &mut Ctx, env: &Env, pre_caps: &mut Caps, sessions: Sessions) {
    let stdio = matches!(env.target, Target::Stdio { .. });

    let mut s1 = None;
    check!(cx, L0, "ping.pre-init.string", "ping before initialize echoes a string nonce", lifecycle::ping_nonce(env, &mut s1, json!("nönce-1 ✓")));
    check!(cx, L0, "ping.pre-init.number", "ping before initialize echoes a numeric nonce", lifecycle::ping_nonce(env, &mut s1, json!(4242)));
    check!(cx, L0, "ping.no-nonce", "ping without a nonce is answered with a result object", lifecycle::ping_plain(env, &mut s1));
    check!(cx, L0, "info.pre-init", "info answers before initialize with protocolVersion, server and capabilities", lifecycle::info_pre_init(env, &mut s1, pre_caps));
    check!(cx, L0, "notify.pre-init", "a notification before initialize is not answered (not even with -32001)", lifecycle::notify_pre_init(env, &mut s1, pre_caps));
    check!(cx, L0, "lifecycle.pre-init-gated", "a gated request before initialize is rejected with -32001", lifecycle::pre_init_gated(env, &mut s1, pre_caps, sessions));
    close(&mut s1).await;

    let mut s2 = None;
    check!(cx, L0, "initialize.version-mismatch", "initialize with protocolVersion 0 fails with -32002", lifecycle::version_zero(env, &mut s2, sessions));
    check!(cx, L0, "lifecycle.failed-init-locked", "after a failed initialize, gated requests are still rejected with -32001", lifecycle::locked_after_failure(env, &mut s2, pre_caps, sessions));
    check!(cx, L0, "initialize.retry", "initialize can be retried after a failed one", lifecycle::retry_after_failure(env, &mut s2, sessions));
    check!(cx, L0, "initialize.repeat-rejected", "a second initialize after a successful one is rejected with -32600", lifecycle::repeat_rejected(env, &mut s2, sessions));
    close(&mut s2).await;

    let mut s3 = None;
    check!(cx, L0, "initialize.missing-version", "initialize without protocolVersion is rejected with -32602", lifecycle::missing_version(env, &mut s3, sessions));
    close(&mut s3).await;

    let mut s4 = None;
    check!(cx, L0, "initialize.tolerates-unknown", "initialize tolerates unknown fields, x- keys, unknown client capabilities and _meta", lifecycle::tolerant_init(env, &mut s4, sessions));
    close(&mut s4).await;

    let mut s5 = None;
    check!(cx, L0, "initialize.negotiates-min", "the negotiated protocolVersion is min(client, server)", lifecycle::negotiates_min(env, &mut s5, sessions));
    close(&mut s5).await;

    let mut s7 = None;
    check!(cx, L0, "initialize.minimal", "initialize with only protocolVersion succeeds (no client capability is required)", lifecycle::minimal_init(env, &mut s7, sessions));
    close(&mut s7).await;

    let mut s6 = None;
    check!(cx, L0, "shutdown.pre-init", "shutdown before initialize is answered with {} (the process SHOULD then exit 0)", lifecycle::shutdown_pre_init(env, &mut s6, stdio));
    close(&mut s6).await;

    if cx.wants(Level::L0) {
        let swept = sweep::initialize(env, &mut cx.sweep).await;
        record_sweep(cx, swept);
    }
}

/// The checks of the sweep that probe one path each: a defect they already failed on is the
/// sweep's defect too, reported once (by the sweep, which shares their verdict).
const SWEPT_ELSEWHERE: &[(&str, &str, &[&str])] = &[
    ("retrieve", "k", &["params.k-string", "params.k-fractional", "params.k-negative"]),
    ("retrieve", "filter.and", &["filter.empty-and"]),
    ("retrieve", "filter.or", &["filter.empty-or"]),
    ("retrieve", "rewrite", &["retrieve.rewrite-unadvertised"]),
];

/// Records one method's sweep: a summary (`sweep.<method>`: PASS, or WARN when `-32602` came
/// without `error.data.field` naming the path, a SHOULD of §12.1), then one FAIL per defective
/// path (`sweep.<method>.<path>`) with the first request that showed it and its answer.
fn record_sweep(cx: &mut Ctx, s: MethodSweep) {
    let method = s.method;
    let meta =
        |id: String, name: String| Meta { level: Level::L0, id: intern(id), name: intern(name), basis: clauses::SWEEP };
    let cut = if s.cut > 0 { format!("; {} more not sent (sweep budget)", s.cut) } else { String::new() };
    let summary = match s.skipped {
        Some(why) => skip(why),
        None if !s.unnamed.is_empty() => {
            let list: Vec<String> = s.unnamed.iter().take(6).map(|(p, said)| format!("{p} ({said})")).collect();
            let more = if s.unnamed.len() > 6 { format!(" and {} more", s.unnamed.len() - 6) } else { String::new() };
            warn(format!(
                "-32602 returned, but error.data.field does not name the path for {}{more} (SHOULD, §12.1); {} malformed calls over {} paths{cut}",
                list.join(", "),
                s.sent,
                s.paths.len()
            ))
        }
        None => {
            let defects = match s.defects.len() {
                0 => String::new(),
                n => format!("; {n} defective paths, each reported as its own check"),
            };
            let refused = match s.refused.first() {
                None => String::new(),
                Some(first) => format!(
                    "; not swept: the paths inside {} valid alternative call(s) it refused, e.g. {first}",
                    s.refused.len()
                ),
            };
            pass_note(format!("{} malformed calls over {} paths{defects}{cut}{refused}", s.sent, s.paths.len()))
        }
    };
    // Violations with an owner (a result's shape, an id echoed with another type) belong to the
    // checks named after them, which make the same calls; a result to a malformed call is
    // already this sweep's finding. Only the ownerless ones stay with the sweep.
    for v in cx.env.take_violations().into_iter().filter(|v| v.owner.is_none()) {
        cx.env.record(v);
    }
    let name =
        format!("{method}: malformed-params sweep of every schema-typed path (a defective path is its own check)");
    cx.record(meta(format!("sweep.{method}"), name), summary);
    for d in s.defects {
        let also = match d.also {
            0 => String::new(),
            n => format!(" ({n} more malformed values at this path had a defective answer too)"),
        };
        let detail = format!("{}: {} — sent {}; {}{also}", d.key, d.kind, d.request, d.answer);
        let shared = SWEPT_ELSEWHERE
            .iter()
            .filter(|(m, k, _)| *m == method && *k == d.key)
            .flat_map(|(_, _, ids)| ids.iter().copied())
            .find(|id| cx.failed(id));
        cx.shared = shared;
        let name = format!("{method}: params.{} given a value the schema forbids is -32602", d.key);
        cx.record(meta(format!("sweep.{method}.{}", d.key), name), fail(detail));
    }
}

/// Stops the process of a fresh-session slot (if one was opened) before the next one starts.
async fn close(slot: &mut Option<Conn>) {
    if let Some(mut c) = slot.take() {
        c.close().await;
    }
}

/// Runs every check, in order. One line per check: level, MUST/SHOULD, id, section, what it verifies.
#[rustfmt::skip]
pub(crate) async fn run_all(cx: &mut Ctx) {
    let env = cx.env.clone();
    let stdio = matches!(env.target, Target::Stdio { .. });
    let mut pre_caps = Caps::default();

    // Over stdio, the fresh-process checks run first, while no main session exists: never two
    // processes of the server at once (an engine may hold its data directory exclusively).
    if stdio {
        lifecycle_checks(cx, &env, &mut pre_caps, Sessions::PerConnection).await;
    }

    // The main session. Over HTTP it comes first: its handshake, and a second client's, tell a
    // stateless, a per-client and a process-wide session apart (§5.2).
    let mut main: Option<Main> = None;
    let query = cx.query.clone();
    check!(cx, L0, "initialize.main", "initialize (protocolVersion 1) answers with protocolVersion 1 (= min(1, server)), server and capabilities", open_main(&env, query, &mut main));
    if let Some(m) = &main {
        cx.server = m.init.get("server").cloned();
        cx.declared = m.init.get("_meta").and_then(|x| x.get("conformance")).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
    let main_has_token = main.as_ref().is_some_and(|m| !m.stateless);
    let mut sessions = if stdio || main_has_token { Sessions::PerConnection } else { Sessions::Stateless };
    if let Some(m) = &main {
        check!(cx, L0, "http.session-per-client", "HTTP sessions are per client or stateless, not one for the whole process", lifecycle::session_model(&env, m, &mut sessions));
        let caps = m.caps.clone();
        if !stdio {
            check!(cx, L0, "http.sessionless-gating", "a token-less request for an unadvertised capability is -32003 on a server that serves token-less requests statelessly", lifecycle::sessionless_gating(&env, &caps, sessions));
        }
    }
    if let Some(m) = main.as_mut() {
        m.global_session = sessions == Sessions::Global;
    }
    if !stdio {
        lifecycle_checks(cx, &env, &mut pre_caps, sessions).await;
    }

    // ---- Base protocol on the main session (L0) ----
    on_main!(cx, main, L0, "conformance.declared", "initialize and info declare _meta.conformance as L0, L1 or L2", methods::declared);
    on_main!(cx, main, L0, "capabilities.retrieval", "at least one retrieval capability is advertised (embed, rerank, retrieve or graph)", methods::retrieval_capability);
    on_main!(cx, main, L0, "info.matches-session", "info after initialize reports exactly the session's capabilities", methods::info_matches);
    on_main!(cx, main, L0, "ping.post-init", "ping after initialize echoes its nonce", methods::ping_after_init);
    on_main!(cx, main, L0, "method.unknown", "an undefined method is rejected with -32004", methods::unknown_method);
    on_main!(cx, main, L0, "method.unadvertised", "a core method whose capability is not advertised is rejected with -32003", methods::unadvertised_method);
    on_main!(cx, main, L0, "option.unsupported", "an unadvertised option value is rejected with -32005 (error.data.option recommended)", methods::option_unsupported);
    on_main!(cx, main, L0, "id.string", "a string id is echoed unchanged", envelope::id_string);
    on_main!(cx, main, L0, "id.integer", "an integer id is echoed unchanged", envelope::id_integer);
    on_main!(cx, main, L0, "id.negative", "a negative integer id is echoed unchanged", envelope::id_negative);
    on_main!(cx, main, L0, "id.large", "a large integer id (2^53-1) is echoed unchanged", envelope::id_large);
    on_main!(cx, main, L0, "id.on-error", "error responses echo the request id too", envelope::id_on_error);
    on_main!(cx, main, L0, "envelope.parse-error", "invalid JSON is answered with -32700 and id null", envelope::parse_error);
    on_main!(cx, main, L0, "envelope.invalid-request", "a request object without a method is rejected with -32600", envelope::invalid_request);
    on_main!(cx, main, L0, "envelope.params-not-object", "params that are not an object are rejected (-32602/-32600), and the server stays up", envelope::params_not_object);
    on_main!(cx, main, L0, "envelope.cancel-with-id", "notifications/cancel sent with an id is rejected as malformed", envelope::cancel_with_id);
    on_main!(cx, main, L0, "batch.empty", "an empty batch is answered with a single -32600 object with id null", envelope::batch_empty);
    on_main!(cx, main, L0, "batch.notifications-only", "a batch of notifications only produces no output", envelope::batch_notifications_only);
    on_main!(cx, main, L0, "batch.mixed", "a mixed batch is answered with one response per request, none for notifications", envelope::batch_mixed);
    on_main!(cx, main, L0, "batch.invalid-member", "an invalid batch member yields -32600 with id null; the others are still answered", envelope::batch_invalid_member);
    on_main!(cx, main, L0, "notify.gated", "a notification for a gated method is not answered", notify::gated);
    on_main!(cx, main, L0, "notify.open", "a notification for an open method (ping) is not answered", notify::open);
    on_main!(cx, main, L0, "notify.unknown-method", "a notification for an undefined method is not answered", notify::unknown_method);
    on_main!(cx, main, L0, "notify.cancel-unknown", "notifications/cancel for an unknown id is a silent no-op", notify::cancel_unknown);
    on_main!(cx, main, L0, "notify.unknown-namespace", "an unrecognised notifications/* method is silently ignored", notify::unknown_namespace);
    on_main!(cx, main, L0, "notify.cancel-answered", "notifications/cancel for an already-answered id is a silent no-op", notify::cancel_answered);
    on_main!(cx, main, L0, "cancel.exactly-once", "a cancelled request is answered exactly once (result or -32006)", notify::cancel_exactly_once);
    on_main!(cx, main, L0, "progress.none-when-unadvertised", "without the streaming capability, no progress frames even when a token is sent", notify::progress_unadvertised);
    on_main!(cx, main, L0, "tolerance.params", "unknown fields, x- keys and _meta in method params are ignored", methods::tolerant_params);
    on_main!(cx, main, L0, "tolerance.null-as-absent", "an explicit null for an optional field is treated as absent", methods::null_as_absent);
    on_main!(cx, main, L0, "params.missing-query", "retrieve without query is -32602 (error.data.field recommended)", methods::missing_query);
    on_main!(cx, main, L0, "params.k-negative", "k = -1 is -32602 (error.data.field 'k' recommended)", methods::k_negative);
    on_main!(cx, main, L0, "params.k-fractional", "k = 2.5 is -32602 (error.data.field 'k' recommended)", methods::k_fractional);
    on_main!(cx, main, L0, "params.k-string", "k sent as a string is -32602 (error.data.field 'k' recommended)", methods::k_string);
    on_main!(cx, main, L0, "params.embed-missing-inputs", "embed without inputs is -32602 (error.data.field recommended)", methods::embed_missing_inputs);
    on_main!(cx, main, L0, "params.rerank-missing-passages", "rerank without passages is -32602 (error.data.field recommended)", methods::rerank_missing_passages);
    on_main!(cx, main, L0, "stdio.blank-lines", "blank lines between messages are ignored", stdio::blank_lines);
    on_main!(cx, main, L0, "stdio.split-frame", "a message split across several writes is reassembled", stdio::split_frame);
    on_main!(cx, main, L0, "stdio.two-frames-one-write", "two messages in one write are both answered", stdio::two_frames);
    on_main!(cx, main, L0, "http.error-status-200", "a JSON-RPC error is returned with HTTP 200", http::error_200);
    on_main!(cx, main, L0, "http.path-mismatch", "a path method that differs from the body method is -32600", http::path_mismatch);
    on_main!(cx, main, L0, "http.buffered-json", "without Accept: text/event-stream the answer is one application/json body", http::buffered);
    on_main!(cx, main, L0, "http.unauthorized", "a request without the configured credentials is answered with -32012, not a bare transport error", http::unauthorized);
    on_main!(cx, main, L0, "http.cors-preflight", "a browser-facing server answers the CORS preflight of a cross-origin POST", http::cors_preflight);

    // ---- Retrieval behaviour (L1) ----
    on_main!(cx, main, L1, "retrieve.basic", "retrieve answers with a hits array", retrieve::basic);
    on_main!(cx, main, L1, "retrieve.hit-shape", "every hit has a string-or-number id and a finite numeric score", retrieve::hit_shape);
    on_main!(cx, main, L1, "retrieve.unique-ids", "hit ids are unique within a response", retrieve::unique_ids);
    on_main!(cx, main, L1, "retrieve.scores-descending", "hits are ordered by descending score", retrieve::scores_descending);
    on_main!(cx, main, L1, "retrieve.k-ceiling", "never more than k hits (k = 1, 2, 3)", retrieve::k_ceiling);
    on_main!(cx, main, L1, "retrieve.maxk-clamp", "k = maxK×10 is clamped, not rejected: at most maxK hits", retrieve::maxk_clamp);
    on_main!(cx, main, L1, "retrieve.min-score", "minScore is honoured: no hit scores below it", retrieve::min_score);
    on_main!(cx, main, L1, "retrieve.funnel", "candidateK < k violates the funnel and is rejected with -32602", retrieve::funnel);
    on_main!(cx, main, L1, "retrieve.funnel-valid", "candidateK ≥ k is accepted", retrieve::funnel_valid);
    on_main!(cx, main, L1, "retrieve.candidatek-clamp", "candidateK above maxK is clamped, not rejected", retrieve::candidate_k_clamp);
    on_main!(cx, main, L1, "params.k-integral-number", "k = 3.0 (integral, valid against the schema) is accepted (interop probe)", retrieve::k_integral_number);
    on_main!(cx, main, L1, "retrieve.rerank-funnel", "rerank.topN < k is rejected with -32602 (inline rerank)", retrieve::rerank_funnel);
    on_main!(cx, main, L1, "retrieve.strict-false", "strict:false with an unadvertised mode falls back instead of failing", retrieve::strict_false);
    on_main!(cx, main, L1, "retrieve.modes-served", "every advertised mode is served", retrieve::modes_served);
    on_main!(cx, main, L1, "retrieve.unit-unadvertised", "an unadvertised unit is rejected with -32005 (strict default)", retrieve::unit_unadvertised);
    on_main!(cx, main, L1, "retrieve.mmr-unadvertised", "mmr without retrieve.mmr is rejected with -32005 (strict default)", retrieve::mmr_unadvertised);
    on_main!(cx, main, L1, "retrieve.rewrite-unadvertised", "retrieve.rewrite with a method outside transform.methods (any, without transform) is rejected with -32005", features::rewrite_unadvertised);
    on_main!(cx, main, L1, "retrieve.unicode", "a query using the full Unicode range is accepted", retrieve::unicode);
    on_main!(cx, main, L1, "retrieve.modality-unadvertised", "a query block outside retrieve.modalities is rejected (-32005)", retrieve::modality_unadvertised);
    on_main!(cx, main, L1, "retrieve.uri-unfetchable", "a query block by a uri the server cannot fetch is -32602, never an empty query", content::uri_unfetchable);
    on_main!(cx, main, L1, "retrieve.text-data", "a text/plain data block is searched as its string (or refused)", content::text_data);
    on_main!(cx, main, L1, "session.hint", "a fresh sessionId, then the same one again, is answered like any retrieve (advertised or not)", trajectory::hint);
    on_main!(cx, main, L1, "retrieve.seed-never-errors", "seed is honoured or ignored, never an error", retrieve::seed_never_errors);
    on_main!(cx, main, L1, "retrieve.confidence-range", "hits carry confidence in [0,1] (retrieve.confidence)", retrieve::confidence);
    on_main!(cx, main, L1, "retrieve.citations", "hits carry citation or trust (citations)", retrieve::citations);
    on_main!(cx, main, L1, "filter.unadvertised-field", "a filter on an unadvertised field is -32602 (error.data.field recommended)", filter::unadvertised_field);
    on_main!(cx, main, L1, "filter.unadvertised-operator", "an operator outside filter.operators is -32005", filter::unadvertised_operator);
    on_main!(cx, main, L1, "filter.empty-and", "an empty and is -32602", filter::empty_and);
    on_main!(cx, main, L1, "filter.empty-or", "an empty or is -32602", filter::empty_or);
    on_main!(cx, main, L1, "filter.type-mismatch", "a value whose JSON type does not fit the field type is -32602 (error.data.field recommended)", filter::type_mismatch);
    on_main!(cx, main, L1, "filter.operator-type", "an ordered operator on a keyword/text/bool field is -32602 (error.data.field recommended)", filter::operator_type);
    on_main!(cx, main, L1, "filter.nested", "and/or/not nest arbitrarily", filter::nested);
    on_main!(cx, main, L1, "filter.valid", "a valid filter on an advertised field succeeds and the hits satisfy it", filter::valid);

    // ---- SOTA features (L2) ----
    on_main!(cx, main, L2, "progress.requires-token", "no notifications/progress for a request without _meta.progressToken", streaming::requires_token);
    on_main!(cx, main, L2, "progress.echoes-token", "progress frames echo a string token verbatim and precede the final response", streaming::echoes_string_token);
    on_main!(cx, main, L2, "progress.integer-token", "progress frames echo an integer token verbatim", streaming::echoes_integer_token);
    on_main!(cx, main, L2, "http.sse-framing", "an SSE answer is one data: line per frame, notifications, then exactly one final response", http::sse_framing);
    on_main!(cx, main, L2, "log.silent-without-opt-in", "no notifications/log unless the client opted in", streaming::log_silent);
    if !stdio {
        on_main!(cx, main, L2, "log.opt-in", "after opting in (capabilities.log, _meta.logLevel) log frames are well-formed", streaming::log_opt_in);
    }
    on_main!(cx, main, L2, "pagination.covers-once", "up to 5 pages by cursor are disjoint and stable per cursor (and, a WARN if not, match one unpaged request)", pagination::covers_once);
    on_main!(cx, main, L2, "pagination.min-score", "with minScore, a page of fewer than k hits is the last one (no nextCursor), and the pages match one request for as many", pagination::min_score);
    on_main!(cx, main, L2, "retrieve.deterministic", "identical requests with the same seed return identical results (retrieve.deterministic)", retrieve::deterministic);
    on_main!(cx, main, L2, "retrieve.snapshot-echo", "the served indexVersion is echoed and can be pinned (retrieve.snapshots)", retrieve::snapshots);
    on_main!(cx, main, L2, "retrieve.mmr-served", "mmr is served when retrieve.mmr is advertised", retrieve::mmr_served);
    on_main!(cx, main, L2, "retrieve.rerank-builtin", "inline rerank is served when retrieve.rerankBuiltin is advertised", retrieve::rerank_builtin);
    on_main!(cx, main, L2, "retrieve.fusion-served", "every advertised fusion method is served in hybrid mode", retrieve::fusion_served);
    on_main!(cx, main, L2, "embed.dimension", "embed returns one vector per input, each of embed.dimension floats", features::embed_dimension);
    on_main!(cx, main, L2, "embed.default-json", "without encoding, vectors are JSON number arrays", features::embed_default_json);
    on_main!(cx, main, L2, "embed.batch-limit", "batchLimit + 1 inputs are rejected with -32602", features::embed_batch_limit);
    on_main!(cx, main, L2, "embed.legacy-texts", "the legacy field texts is accepted as a synonym of inputs", features::embed_legacy_texts);
    on_main!(cx, main, L2, "embed.f32-base64", "f32-base64 blobs decode to dimension×4 bytes equal to the JSON vectors", features::embed_f32_base64);
    on_main!(cx, main, L2, "embed.encoding-unadvertised", "an unadvertised encoding is rejected with -32005", features::embed_encoding_unadvertised);
    on_main!(cx, main, L2, "embed.modality-unadvertised", "an input block outside embed.modalities is rejected (-32005)", features::embed_modality_unadvertised);
    on_main!(cx, main, L2, "sparse.shape", "embed/sparse returns one sparse vector per text with matching indices/values", features::sparse_shape);
    on_main!(cx, main, L2, "multi.dimension", "embed/multi returns one matrix per input with rows of multiVector.dimension", features::multi_dimension);
    on_main!(cx, main, L2, "rerank.scores", "rerank returns one score per passage", features::rerank_scores);
    on_main!(cx, main, L2, "rerank.method-unadvertised", "a rerank method outside rerank.methods is rejected with -32005", features::rerank_method_unadvertised);
    on_main!(cx, main, L2, "rerank.max-candidates", "more passages than rerank.maxCandidates are rejected", features::rerank_max_candidates);
    on_main!(cx, main, L2, "rerank.documents-synonym", "rerank accepts documents as a synonym of passages (interop probe)", features::rerank_documents);
    on_main!(cx, main, L2, "graph.op-unadvertised", "a graph op outside graph.ops is rejected with -32005", features::graph_op_unadvertised);
    on_main!(cx, main, L2, "graph.ops-served", "every advertised graph op answers", features::graph_ops_served);
    on_main!(cx, main, L2, "graph.result-shape", "each advertised graph op answers with the key its result requires (hits, communities or nodes)", graph::result_shape);
    on_main!(cx, main, L2, "graph.result-fields", "each advertised graph op answers with the fields §7.9 lists for it (interop probe)", graph::result_fields);
    on_main!(cx, main, L2, "graph.neighbors-edges", "neighbors edges join nodes the answer lists (interop probe)", graph::neighbors_edges);
    on_main!(cx, main, L2, "graph.non-empty", "over a corpus retrieve finds documents in, each graph op answers with something (interop probe)", graph::non_empty);
    on_main!(cx, main, L2, "session.graph-hint", "a graph call carrying a fresh sessionId, then the same one again, is answered", graph::session_hint);
    on_main!(cx, main, L2, "session.graph-dedup", "two local/drift calls in one fresh trajectory return no hit twice (session.dedup)", graph::session_dedup);
    on_main!(cx, main, L2, "memory.build-shape", "memory/build over inline documents answers with a memoryId (and tokens, an integer, if any)", memory::build_shape);
    on_main!(cx, main, L2, "memory.recall-shape", "memory/recall from the memory just built answers with a clues array", memory::recall_shape);
    on_main!(cx, main, L2, "memory.scope-unadvertised", "a memory/build scope outside memory.scopes is rejected with -32005", memory::scope_unadvertised);
    on_main!(cx, main, L2, "feedback.accepted", "feedback answers accepted: an integer no larger than the signals sent", memory::accepted);
    on_main!(cx, main, L2, "session.feedback-hint", "a feedback call carrying a fresh sessionId is answered", memory::session_hint);
    on_main!(cx, main, L2, "retrieve.unit-served", "every advertised unit is served, with at most k hits", granularity::unit_served);
    on_main!(cx, main, L2, "retrieve.unit-echo", "each hit echoes the unit requested; chunk hits carry chunk.docId and chunk.index (interop probe)", granularity::unit_echo);
    on_main!(cx, main, L2, "retrieve.token-budget", "tokenBudget 1 leaves at most one hit; a budget beyond k hits changes nothing (retrieve.tokenBudget)", granularity::token_budget);
    on_main!(cx, main, L2, "retrieve.token-usage", "a tokenBudget answer reports usage.tokens, within the budget", granularity::token_usage);
    on_main!(cx, main, L2, "transform.method-unadvertised", "a transform method outside transform.methods is rejected with -32005", features::transform_unadvertised);
    on_main!(cx, main, L2, "transform.methods-served", "every advertised transform method returns queries", features::transform_served);
    on_main!(cx, main, L2, "retrieve.rewrite-served", "retrieve.rewrite with each advertised transform method is served (interop probe)", features::rewrite_served);
    on_main!(cx, main, L2, "session.dedup", "two retrieves in one fresh trajectory return no hit twice (session.dedup)", trajectory::dedup);
    on_main!(cx, main, L2, "catalog.list", "catalog/list returns the federated engines", features::catalog_list);
    on_main!(cx, main, L2, "index.add-readonly", "index/add is rejected with -32003 when index.writable is false", index::readonly);
    on_main!(cx, main, L2, "index.add-positional", "index/add returns one id per document, in input order", index::positional);
    on_main!(cx, main, L2, "index.upsert", "re-adding an explicit id replaces the document: no error, no duplicate", index::upsert);
    on_main!(cx, main, L2, "index.minted-ids-fresh", "a document without id never replaces an existing document", index::minted_fresh);
    on_main!(cx, main, L2, "index.delete-idempotent", "deleting the same id twice returns deleted 1, then 0", index::delete_idempotent);

    // ---- The malformed-params sweep (§14.1), last: index/add may leave a document behind ----
    if cx.wants(Level::L0)
        && let Some(m) = main.as_mut()
    {
        m.ensure_alive().await;
        m.current = "sweep";
        for planned in sweep::plan(m) {
            let swept = sweep::method(m, planned, &mut cx.sweep).await;
            record_sweep(cx, swept);
        }
    }

    // ---- Whole-session properties, then the orderly close ----
    on_main!(cx, main, L0, "envelope.jsonrpc", "every frame received carried jsonrpc \"2.0\"", envelope::jsonrpc_everywhere);
    on_main!(cx, main, L0, "stdio.stdout-clean", "stdout carried only JSON-RPC frames", stdio::stdout_clean);
    on_main!(cx, main, L0, "http.retry-after", "HTTP 429 (rate limiting) carries Retry-After", http::retry_after_429);
    on_main!(cx, main, L0, "notify.no-unsolicited", "the server sent no notification the client did not opt into", notify::no_unsolicited);
    on_main!(cx, main, L0, "shutdown.main", "shutdown is answered with {} (stdio: the process SHOULD then exit 0)", lifecycle::shutdown_main);
    on_main!(cx, main, L0, "shutdown.nothing-after", "nothing is answered after the shutdown response", lifecycle::nothing_after_shutdown);

    // ---- Checks that need their own process, once the main one is gone (stdio) ----
    if stdio {
        on_main!(cx, main, L2, "log.opt-in", "after opting in (capabilities.log, _meta.logLevel) log frames are well-formed", streaming::log_opt_in);
    }
    if let Some(m) = main.as_mut() {
        m.conn.close().await;
    }
}

/// The federation duties of an aggregator (§16.2, §16.3), each case over the suite's own probe
/// engines; skipped, with the reason, when no aggregator command was given.
#[rustfmt::skip]
pub(crate) async fn run_federation(cx: &mut Ctx, agg: Option<&Aggregator>) {
    let env = cx.env.clone();
    let Some(agg) = agg else { return };
    check!(cx, L1, "federation.all-failed", "every engine failing is -32010, not an empty success", federation::all_failed(&env, agg));
    check!(cx, L1, "federation.partial", "one engine answering is a successful federated query", federation::partial(&env, agg));
    check!(cx, L1, "federation.partial-noted", "a failed engine is recorded in usage.notes", federation::partial_noted(&env, agg));
    check!(cx, L1, "federation.required", "a required engine failing fails the query with its error code", federation::required(&env, agg));
    check!(cx, L1, "federation.hop-forwarded", "a forwarded request carries depth - 1 and the path with the aggregator appended", federation::hop_forwarded(&env, agg));
    check!(cx, L1, "federation.hop-exhausted", "a request arriving with depth 0 is answered and not forwarded", federation::hop_exhausted(&env, agg));
    check!(cx, L1, "federation.deadline", "engines receive a strictly smaller _meta.deadlineMs", federation::deadline(&env, agg));
    check!(cx, L1, "federation.dedup", "a document two engines return is one fused hit", federation::dedup(&env, agg));
    check!(cx, L1, "federation.richest-body", "the fused hit keeps the richest body", federation::richest_body(&env, agg));
    check!(cx, L1, "federation.origin", "fused hits carry meta.engine", federation::origin(&env, agg));
}
