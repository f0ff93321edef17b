//! The checks, in the order they run. Each is one MUST of the spec (or one item of §14.1), with a
//! stable id, its level and the section it enforces. This file is the catalogue; the modules
//! beside it hold the bodies, which reach their verdicts with [`crate::verdict`] on the session
//! of [`crate::session`]; [`crate::record`] turns each verdict into a result.

mod envelope;
mod features;
mod filter;
mod index;
mod lifecycle;
mod methods;
mod notify;
mod retrieve;
mod streaming;
mod transport;

use serde_json::{Value, json};

use crate::config::Target;
use crate::conn::{Conn, Env};
use crate::record::{Ctx, MUST, Meta, SHOULD, meta};
use crate::report::Level;
use crate::session::{Caps, Main};
use crate::verdict::{Res, fail, pass, skip};
use lifecycle::Sessions;

/// Runs a check if its level is wanted.
macro_rules! check {
    ($cx:ident, $level:ident, $strength:ident, $id:literal, $section:literal, $name:literal, $body:expr) => {
        if $cx.wants(Level::$level) {
            let outcome: Res = $body.await;
            $cx.record(meta!($level, $strength, $id, $section, $name), outcome);
        }
    };
}

/// Runs a check on the main session (skipped if it could not be initialized).
macro_rules! on_main {
    ($cx:ident, $main:ident, $level:ident, $strength:ident, $id:literal, $section:literal, $name:literal, $f:path) => {
        if $cx.wants(Level::$level) {
            let outcome: Res = match $main.as_mut() {
                Some(m) => {
                    m.ensure_alive().await;
                    $f(m).await
                }
                None => skip("the main session could not be initialized"),
            };
            $cx.record(meta!($level, $strength, $id, $section, $name), outcome);
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
    check!(cx, L0, MUST, "ping.pre-init.string", "§7.15, §14.1", "ping before initialize echoes a string nonce", lifecycle::ping_nonce(env, &mut s1, json!("nönce-1 ✓")));
    check!(cx, L0, MUST, "ping.pre-init.number", "§7.15, §14.1", "ping before initialize echoes a numeric nonce", lifecycle::ping_nonce(env, &mut s1, json!(4242)));
    check!(cx, L0, MUST, "ping.no-nonce", "§7.15", "ping without a nonce is answered with a result object", lifecycle::ping_plain(env, &mut s1));
    check!(cx, L0, MUST, "info.pre-init", "§7.2, §13.2, §14.1", "info answers before initialize with protocolVersion, server and capabilities", lifecycle::info_pre_init(env, &mut s1, pre_caps));
    check!(cx, L0, MUST, "notify.pre-init", "§4.5, §13", "a notification before initialize is not answered (not even with -32001)", lifecycle::notify_pre_init(env, &mut s1, pre_caps));
    check!(cx, L0, MUST, "lifecycle.pre-init-gated", "§13, §14.1", "a gated request before initialize is rejected with -32001", lifecycle::pre_init_gated(env, &mut s1, pre_caps, sessions));
    close(&mut s1).await;

    let mut s2 = None;
    check!(cx, L0, MUST, "initialize.version-mismatch", "§7.1, §12", "initialize with protocolVersion 0 fails with -32002", lifecycle::version_zero(env, &mut s2, sessions));
    check!(cx, L0, MUST, "lifecycle.failed-init-locked", "§13", "after a failed initialize, gated requests are still rejected with -32001", lifecycle::locked_after_failure(env, &mut s2, pre_caps, sessions));
    check!(cx, L0, MUST, "initialize.retry", "§13", "initialize can be retried after a failed one", lifecycle::retry_after_failure(env, &mut s2, sessions));
    check!(cx, L0, MUST, "initialize.repeat-rejected", "§13", "a second initialize after a successful one is rejected with -32600", lifecycle::repeat_rejected(env, &mut s2, sessions));
    close(&mut s2).await;

    let mut s3 = None;
    check!(cx, L0, MUST, "initialize.missing-version", "§7.1, §12, §14.1", "initialize without protocolVersion is rejected with -32602", lifecycle::missing_version(env, &mut s3, sessions));
    close(&mut s3).await;

    let mut s4 = None;
    check!(cx, L0, MUST, "initialize.tolerates-unknown", "§4.4, §6.2, §14.1", "initialize tolerates unknown fields, x- keys, unknown client capabilities and _meta", lifecycle::tolerant_init(env, &mut s4, sessions));
    close(&mut s4).await;

    let mut s5 = None;
    check!(cx, L0, MUST, "initialize.negotiates-min", "§7.1", "the negotiated protocolVersion is min(client, server)", lifecycle::negotiates_min(env, &mut s5, sessions));
    close(&mut s5).await;

    let mut s7 = None;
    check!(cx, L0, MUST, "initialize.minimal", "§7.1", "initialize with only protocolVersion succeeds (no client capability is required)", lifecycle::minimal_init(env, &mut s7, sessions));
    close(&mut s7).await;

    let mut s6 = None;
    check!(cx, L0, MUST, "shutdown.pre-init", "§7.12, §13", "shutdown before initialize is answered with {} (the process SHOULD then exit 0)", lifecycle::shutdown_pre_init(env, &mut s6, stdio));
    close(&mut s6).await;
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
    check!(cx, L0, MUST, "initialize.main", "§7.1, §14.1", "initialize (protocolVersion 1) answers with protocolVersion 1 (= min(1, server)), server and capabilities", open_main(&env, query, &mut main));
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
        check!(cx, L0, SHOULD, "http.session-per-client", "§5.2", "a second HTTP client can initialize while the first holds its session (no process-wide session)", lifecycle::session_model(&env, m, &mut sessions));
        let caps = m.caps.clone();
        if !stdio {
            check!(cx, L0, MUST, "http.sessionless-gating", "§5.2", "a token-less request for an unadvertised capability is -32003 on a server that serves token-less requests statelessly", lifecycle::sessionless_gating(&env, &caps, sessions));
        }
    }
    if let Some(m) = main.as_mut() {
        m.global_session = sessions == Sessions::Global;
    }
    if !stdio {
        lifecycle_checks(cx, &env, &mut pre_caps, sessions).await;
    }

    // ---- Base protocol on the main session (L0) ----
    on_main!(cx, main, L0, MUST, "conformance.declared", "§14", "initialize and info declare _meta.conformance as L0, L1 or L2", methods::declared);
    on_main!(cx, main, L0, MUST, "capabilities.retrieval", "§14.1", "at least one retrieval capability is advertised (embed, rerank, retrieve or graph)", methods::retrieval_capability);
    on_main!(cx, main, L0, MUST, "info.matches-session", "§7.2, §13.2", "info after initialize reports exactly the session's capabilities", methods::info_matches);
    on_main!(cx, main, L0, MUST, "ping.post-init", "§7.15", "ping after initialize echoes its nonce", methods::ping_after_init);
    on_main!(cx, main, L0, MUST, "method.unknown", "§7, §12, §14.1", "an undefined method is rejected with -32004", methods::unknown_method);
    on_main!(cx, main, L0, MUST, "method.unadvertised", "§7, §12, §14.1", "a core method whose capability is not advertised is rejected with -32003", methods::unadvertised_method);
    on_main!(cx, main, L0, MUST, "option.unsupported", "§7.7, §12, §14.1", "an unadvertised option value is rejected with -32005 (error.data.option recommended)", methods::option_unsupported);
    on_main!(cx, main, L0, MUST, "id.string", "§4.7, §14.1", "a string id is echoed unchanged", envelope::id_string);
    on_main!(cx, main, L0, MUST, "id.integer", "§4.7, §14.1", "an integer id is echoed unchanged", envelope::id_integer);
    on_main!(cx, main, L0, MUST, "id.negative", "§4.7, §14.1", "a negative integer id is echoed unchanged", envelope::id_negative);
    on_main!(cx, main, L0, MUST, "id.large", "§4.7, §4.6, §14.1", "a large integer id (2^53-1) is echoed unchanged", envelope::id_large);
    on_main!(cx, main, L0, MUST, "id.on-error", "§4.3, §4.7", "error responses echo the request id too", envelope::id_on_error);
    on_main!(cx, main, L0, MUST, "envelope.parse-error", "§12, §5.2", "invalid JSON is answered with -32700 and id null", envelope::parse_error);
    on_main!(cx, main, L0, MUST, "envelope.invalid-request", "§12, §4.1", "a request object without a method is rejected with -32600", envelope::invalid_request);
    on_main!(cx, main, L0, MUST, "envelope.params-not-object", "§4.1, §14.1", "params that are not an object are rejected (-32602/-32600), and the server stays up", envelope::params_not_object);
    on_main!(cx, main, L0, MUST, "envelope.cancel-with-id", "§7.14, App. E", "notifications/cancel sent with an id is rejected as malformed", envelope::cancel_with_id);
    on_main!(cx, main, L0, MUST, "batch.empty", "§11", "an empty batch is answered with a single -32600 object with id null", envelope::batch_empty);
    on_main!(cx, main, L0, MUST, "batch.notifications-only", "§11", "a batch of notifications only produces no output", envelope::batch_notifications_only);
    on_main!(cx, main, L0, MUST, "batch.mixed", "§11", "a mixed batch is answered with one response per request, none for notifications", envelope::batch_mixed);
    on_main!(cx, main, L0, MUST, "batch.invalid-member", "§11", "an invalid batch member yields -32600 with id null; the others are still answered", envelope::batch_invalid_member);
    on_main!(cx, main, L0, MUST, "notify.gated", "§4.5, §14.1", "a notification for a gated method is not answered", notify::gated);
    on_main!(cx, main, L0, MUST, "notify.open", "§4.5", "a notification for an open method (ping) is not answered", notify::open);
    on_main!(cx, main, L0, MUST, "notify.unknown-method", "§4.5, §14.1", "a notification for an undefined method is not answered", notify::unknown_method);
    on_main!(cx, main, L0, MUST, "notify.cancel-unknown", "§7.14, §14.1", "notifications/cancel for an unknown id is a silent no-op", notify::cancel_unknown);
    on_main!(cx, main, L0, MUST, "notify.unknown-namespace", "§4.5, §14.1", "an unrecognised notifications/* method is silently ignored", notify::unknown_namespace);
    on_main!(cx, main, L0, MUST, "notify.cancel-answered", "§7.14", "notifications/cancel for an already-answered id is a silent no-op", notify::cancel_answered);
    on_main!(cx, main, L0, MUST, "cancel.exactly-once", "§7.14, §13.1", "a cancelled request is answered exactly once (result or -32006)", notify::cancel_exactly_once);
    on_main!(cx, main, L0, MUST, "progress.none-when-unadvertised", "§7.1, §9", "without the streaming capability, no progress frames even when a token is sent", notify::progress_unadvertised);
    on_main!(cx, main, L0, MUST, "tolerance.params", "§4.6, §6.2, §14.1", "unknown fields, x- keys and _meta in method params are ignored", methods::tolerant_params);
    on_main!(cx, main, L0, MUST, "tolerance.null-as-absent", "§4.6", "an explicit null for an optional field is treated as absent", methods::null_as_absent);
    on_main!(cx, main, L0, MUST, "params.missing-query", "§7.7, §12, §14.1", "retrieve without query is -32602 (error.data.field recommended)", methods::missing_query);
    on_main!(cx, main, L0, MUST, "params.k-negative", "§12, §14.1", "k = -1 is -32602 (error.data.field 'k' recommended)", methods::k_negative);
    on_main!(cx, main, L0, MUST, "params.k-fractional", "§12, §4.6", "k = 2.5 is -32602 (error.data.field 'k' recommended)", methods::k_fractional);
    on_main!(cx, main, L0, MUST, "params.k-string", "§4.6, §12", "k sent as a string is -32602 (error.data.field 'k' recommended)", methods::k_string);
    on_main!(cx, main, L0, MUST, "params.embed-missing-inputs", "§7.3, §12", "embed without inputs is -32602 (error.data.field recommended)", methods::embed_missing_inputs);
    on_main!(cx, main, L0, MUST, "params.rerank-missing-passages", "§7.6, §12", "rerank without passages is -32602 (error.data.field recommended)", methods::rerank_missing_passages);
    on_main!(cx, main, L0, MUST, "stdio.blank-lines", "§5.1", "blank lines between messages are ignored", transport::blank_lines);
    on_main!(cx, main, L0, MUST, "stdio.split-frame", "§5.1", "a message split across several writes is reassembled", transport::split_frame);
    on_main!(cx, main, L0, MUST, "stdio.two-frames-one-write", "§5.1", "two messages in one write are both answered", transport::two_frames);
    on_main!(cx, main, L0, MUST, "http.error-status-200", "§5.2", "a JSON-RPC error is returned with HTTP 200", transport::http_error_200);
    on_main!(cx, main, L0, MUST, "http.path-mismatch", "§5.2", "a path method that differs from the body method is -32600", transport::http_path_mismatch);
    on_main!(cx, main, L0, MUST, "http.buffered-json", "§5.2", "without Accept: text/event-stream the answer is one application/json body", transport::http_buffered);
    on_main!(cx, main, L0, MUST, "http.unauthorized", "§15.6, §5.2", "a request without the configured credentials is answered with -32012, not a bare transport error", transport::http_unauthorized);

    // ---- Retrieval behaviour (L1) ----
    on_main!(cx, main, L1, MUST, "retrieve.basic", "§7.7, §14.2", "retrieve answers with a hits array", retrieve::basic);
    on_main!(cx, main, L1, MUST, "retrieve.hit-shape", "§7.7, §4.6", "every hit has a string-or-number id and a finite numeric score", retrieve::hit_shape);
    on_main!(cx, main, L1, MUST, "retrieve.unique-ids", "§7.7", "hit ids are unique within a response", retrieve::unique_ids);
    on_main!(cx, main, L1, MUST, "retrieve.scores-descending", "§7.7, §14.2", "hits are ordered by descending score", retrieve::scores_descending);
    on_main!(cx, main, L1, MUST, "retrieve.k-ceiling", "§7.7, §14.2", "never more than k hits (k = 1, 2, 3)", retrieve::k_ceiling);
    on_main!(cx, main, L1, MUST, "retrieve.maxk-clamp", "§7.7, §12", "k = maxK×10 is clamped, not rejected: at most maxK hits", retrieve::maxk_clamp);
    on_main!(cx, main, L1, SHOULD, "retrieve.min-score", "§7.7, §14.2", "minScore is honoured: no hit scores below it", retrieve::min_score);
    on_main!(cx, main, L1, MUST, "retrieve.funnel", "§3.3, §7.7", "candidateK < k violates the funnel and is rejected with -32602", retrieve::funnel);
    on_main!(cx, main, L1, MUST, "retrieve.funnel-valid", "§3.3, §7.7", "candidateK ≥ k is accepted", retrieve::funnel_valid);
    on_main!(cx, main, L1, MUST, "retrieve.candidatek-clamp", "§7.7", "candidateK above maxK is clamped, not rejected", retrieve::candidate_k_clamp);
    on_main!(cx, main, L1, MUST, "params.k-integral-number", "§4.6, §12 (interop)", "k = 3.0 (integral, valid against the schema) is accepted (interop probe)", retrieve::k_integral_number);
    on_main!(cx, main, L1, MUST, "retrieve.rerank-funnel", "§3.3, §7.7", "rerank.topN < k is rejected with -32602 (inline rerank)", retrieve::rerank_funnel);
    on_main!(cx, main, L1, SHOULD, "retrieve.strict-false", "§7.7", "strict:false with an unadvertised mode falls back instead of failing", retrieve::strict_false);
    on_main!(cx, main, L1, MUST, "retrieve.modes-served", "§6.1, §7.7", "every advertised mode is served", retrieve::modes_served);
    on_main!(cx, main, L1, MUST, "retrieve.unit-unadvertised", "§7.7.2, §7.7", "an unadvertised unit is rejected with -32005 (strict default)", retrieve::unit_unadvertised);
    on_main!(cx, main, L1, MUST, "retrieve.mmr-unadvertised", "§6.1, §7.7", "mmr without retrieve.mmr is rejected with -32005 (strict default)", retrieve::mmr_unadvertised);
    on_main!(cx, main, L1, MUST, "retrieve.unicode", "§4.6", "a query using the full Unicode range is accepted", retrieve::unicode);
    on_main!(cx, main, L1, MUST, "retrieve.modality-unadvertised", "§4.8", "a query block outside retrieve.modalities is rejected (-32005)", retrieve::modality_unadvertised);
    on_main!(cx, main, L1, MUST, "retrieve.seed-never-errors", "§7.7.1", "seed is honoured or ignored, never an error", retrieve::seed_never_errors);
    on_main!(cx, main, L1, MUST, "retrieve.confidence-range", "§7.7.2", "hits carry confidence in [0,1] (retrieve.confidence)", retrieve::confidence);
    on_main!(cx, main, L1, MUST, "retrieve.citations", "§6, §7.7", "hits carry citation or trust (citations)", retrieve::citations);
    on_main!(cx, main, L1, MUST, "filter.unadvertised-field", "§8, §15.4", "a filter on an unadvertised field is -32602 (error.data.field recommended)", filter::unadvertised_field);
    on_main!(cx, main, L1, MUST, "filter.unadvertised-operator", "§8", "an operator outside filter.operators is -32005", filter::unadvertised_operator);
    on_main!(cx, main, L1, MUST, "filter.empty-and", "§8", "an empty and is -32602", filter::empty_and);
    on_main!(cx, main, L1, MUST, "filter.empty-or", "§8", "an empty or is -32602", filter::empty_or);
    on_main!(cx, main, L1, MUST, "filter.type-mismatch", "§8", "a value whose JSON type does not fit the field type is -32602 (error.data.field recommended)", filter::type_mismatch);
    on_main!(cx, main, L1, MUST, "filter.operator-type", "§8", "an ordered operator on a keyword/text/bool field is -32602 (error.data.field recommended)", filter::operator_type);
    on_main!(cx, main, L1, MUST, "filter.nested", "§8", "and/or/not nest arbitrarily", filter::nested);
    on_main!(cx, main, L1, MUST, "filter.valid", "§8", "a valid filter on an advertised field succeeds and the hits satisfy it", filter::valid);

    // ---- SOTA features (L2) ----
    on_main!(cx, main, L2, MUST, "progress.requires-token", "§9", "no notifications/progress for a request without _meta.progressToken", streaming::requires_token);
    on_main!(cx, main, L2, MUST, "progress.echoes-token", "§9", "progress frames echo a string token verbatim and precede the final response", streaming::echoes_string_token);
    on_main!(cx, main, L2, MUST, "progress.integer-token", "§9", "progress frames echo an integer token verbatim", streaming::echoes_integer_token);
    on_main!(cx, main, L2, MUST, "log.silent-without-opt-in", "§7.1, §17.1", "no notifications/log unless the client opted in", streaming::log_silent);
    if !stdio {
        on_main!(cx, main, L2, MUST, "log.opt-in", "§17.1", "after opting in (capabilities.log, _meta.logLevel) log frames are well-formed", streaming::log_opt_in);
    }
    on_main!(cx, main, L2, MUST, "pagination.covers-once", "§10", "up to 5 pages by cursor are disjoint, stable per cursor and match one unpaged request", streaming::pagination);
    on_main!(cx, main, L2, MUST, "retrieve.deterministic", "§7.7.1", "identical requests with the same seed return identical results (retrieve.deterministic)", retrieve::deterministic);
    on_main!(cx, main, L2, MUST, "retrieve.snapshot-echo", "§7.7.1", "the served indexVersion is echoed and can be pinned (retrieve.snapshots)", retrieve::snapshots);
    on_main!(cx, main, L2, MUST, "retrieve.mmr-served", "§6.1, §7.7", "mmr is served when retrieve.mmr is advertised", retrieve::mmr_served);
    on_main!(cx, main, L2, MUST, "retrieve.rerank-builtin", "§6.1, §7.7", "inline rerank is served when retrieve.rerankBuiltin is advertised", retrieve::rerank_builtin);
    on_main!(cx, main, L2, MUST, "retrieve.fusion-served", "§6.1, §16.3", "every advertised fusion method is served in hybrid mode", retrieve::fusion_served);
    on_main!(cx, main, L2, MUST, "embed.dimension", "§7.3", "embed returns one vector per input, each of embed.dimension floats", features::embed_dimension);
    on_main!(cx, main, L2, MUST, "embed.default-json", "§7.3.1", "without encoding, vectors are JSON number arrays", features::embed_default_json);
    on_main!(cx, main, L2, MUST, "embed.batch-limit", "§4.7, §15.5", "batchLimit + 1 inputs are rejected with -32602", features::embed_batch_limit);
    on_main!(cx, main, L2, MUST, "embed.legacy-texts", "§7.3", "the legacy field texts is accepted as a synonym of inputs", features::embed_legacy_texts);
    on_main!(cx, main, L2, MUST, "embed.f32-base64", "§7.3.1", "f32-base64 blobs decode to dimension×4 bytes equal to the JSON vectors", features::embed_f32_base64);
    on_main!(cx, main, L2, MUST, "embed.encoding-unadvertised", "§7.3.1", "an unadvertised encoding is rejected with -32005", features::embed_encoding_unadvertised);
    on_main!(cx, main, L2, MUST, "embed.modality-unadvertised", "§4.8", "an input block outside embed.modalities is rejected (-32005)", features::embed_modality_unadvertised);
    on_main!(cx, main, L2, MUST, "sparse.shape", "§7.4", "embed/sparse returns one sparse vector per text with matching indices/values", features::sparse_shape);
    on_main!(cx, main, L2, MUST, "multi.dimension", "§7.5", "embed/multi returns one matrix per input with rows of multiVector.dimension", features::multi_dimension);
    on_main!(cx, main, L2, MUST, "rerank.scores", "§7.6", "rerank returns one score per passage", features::rerank_scores);
    on_main!(cx, main, L2, MUST, "rerank.method-unadvertised", "§7.6", "a rerank method outside rerank.methods is rejected with -32005", features::rerank_method_unadvertised);
    on_main!(cx, main, L2, MUST, "rerank.max-candidates", "§15.5, §4.7", "more passages than rerank.maxCandidates are rejected", features::rerank_max_candidates);
    on_main!(cx, main, L2, SHOULD, "rerank.documents-synonym", "§7.6 (interop)", "rerank accepts documents as a synonym of passages (interop probe)", features::rerank_documents);
    on_main!(cx, main, L2, MUST, "graph.op-unadvertised", "§7.9", "a graph op outside graph.ops is rejected with -32005", features::graph_op_unadvertised);
    on_main!(cx, main, L2, MUST, "graph.ops-served", "§7.9", "every advertised graph op answers", features::graph_ops_served);
    on_main!(cx, main, L2, MUST, "transform.method-unadvertised", "§7.8", "a transform method outside transform.methods is rejected with -32005", features::transform_unadvertised);
    on_main!(cx, main, L2, MUST, "transform.methods-served", "§7.8", "every advertised transform method returns queries", features::transform_served);
    on_main!(cx, main, L2, MUST, "catalog.list", "§7.13", "catalog/list returns the federated engines", features::catalog_list);
    on_main!(cx, main, L2, MUST, "index.add-readonly", "§7, §7.10", "index/add is rejected with -32003 when index.writable is false", index::readonly);
    on_main!(cx, main, L2, MUST, "index.add-positional", "§7.10", "index/add returns one id per document, in input order", index::positional);
    on_main!(cx, main, L2, MUST, "index.upsert", "§7.10", "re-adding an explicit id replaces the document: no error, no duplicate", index::upsert);
    on_main!(cx, main, L2, MUST, "index.minted-ids-fresh", "§7.10", "a document without id never replaces an existing document", index::minted_fresh);
    on_main!(cx, main, L2, MUST, "index.delete-idempotent", "§7.11", "deleting the same id twice returns deleted 1, then 0", index::delete_idempotent);

    // ---- Whole-session properties, then the orderly close ----
    on_main!(cx, main, L0, MUST, "envelope.jsonrpc", "§4, §14.1", "every frame received carried jsonrpc \"2.0\"", envelope::jsonrpc_everywhere);
    on_main!(cx, main, L0, MUST, "stdio.stdout-clean", "§5.1", "stdout carried only JSON-RPC frames", transport::stdout_clean);
    on_main!(cx, main, L0, MUST, "notify.no-unsolicited", "§7.1, §9, §17.1", "the server sent no notification the client did not opt into", notify::no_unsolicited);
    on_main!(cx, main, L0, MUST, "shutdown.main", "§7.12", "shutdown is answered with {} (stdio: the process SHOULD then exit 0)", lifecycle::shutdown_main);
    on_main!(cx, main, L0, MUST, "shutdown.nothing-after", "§13.1", "nothing is answered after the shutdown response", lifecycle::nothing_after_shutdown);

    // ---- Checks that need their own process, once the main one is gone (stdio) ----
    if stdio {
        on_main!(cx, main, L2, MUST, "log.opt-in", "§17.1", "after opting in (capabilities.log, _meta.logLevel) log frames are well-formed", streaming::log_opt_in);
    }
    if let Some(m) = main.as_mut() {
        m.conn.close().await;
    }
}
