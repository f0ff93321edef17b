//! The normative basis of every check: the section, the spec's own sentence (quoted, shortened
//! with `…`) and its RFC 2119 keyword. The keyword decides what a miss costs (FAIL for MUST,
//! MUST NOT and REQUIRED; WARN for SHOULD; INFO for MAY and for interop probes of what the spec
//! does not define), so an SDK author can read why a verdict was given.
//!
//! A few checks rest on a sentence that defines the protocol rather than carrying a keyword
//! (listed in the tests): §6 "presence ⇒ supported" for the checks that an advertised feature is
//! served, and the result shapes of §7 (one vector per input, `scores[i]` for `passages[i]`).
//! They are MUSTs: a server breaking them breaks the contract every client is built on.

use crate::report::{Basis, Keyword};

use Keyword::{Interop, May, Must, MustNot, Required, Should};

const fn b(section: &'static str, keyword: Keyword, quote: &'static str) -> Basis {
    Basis { section, keyword, quote }
}

const PRESENCE: &str = "A capability object's presence means the method/feature is offered";
const NOT_ANSWERED: &str = "A message with no `id` is a notification and MUST NOT be answered.";
const PRE_INIT: &str = "A server MUST reject any request before a successful `initialize` with `-32001`, except `info`, `ping`, and `shutdown`";
const ECHO_ID: &str = "Servers MUST echo the request `id` unchanged (same JSON type and value) in the response.";
const PARAMS_602: &str =
    "An L0 server MUST: … validate params and return `-32602` on malformed input instead of crashing";
const OPTION_005: &str = "If a client requests an unsupported `mode`/`method`, the server MUST return `-32005`";
const UNKNOWN_FIELDS: &str = "Unknown fields in any object MUST be ignored by the receiver, never rejected";
const BATCH: &str = "the server MUST reply with an array containing one response object per request in the batch";
const NDJSON: &str = "A reader MUST tolerate blank lines between messages (ignore them) and MUST NOT assume messages arrive one per `read()`";
const INTEGERS: &str = "Integers (`k`, …) are JSON numbers with no fractional part";
const NO_OPT_IN: &str = "it MUST NOT emit a notification a client did not opt into";
const FILTER_TYPE: &str = "A server MUST return `-32602` (with `error.data.field`) if a value's JSON type is incompatible with the field type or the operator is not allowed for that field";
const PROGRESS: &str = "the server MUST echo it verbatim in every `notifications/progress` frame for that request and MUST NOT emit progress for a request that carried none";
const CANCEL_NOOP: &str = "Cancelling an unknown or already-answered `id` is a no-op the server MUST ignore.";
const UPSERT: &str = "re-adding the same `id` MUST replace the prior document and MUST NOT create a duplicate or fail";
const LIMITS: &str = "Servers MUST enforce `maxK` / `maxCandidates` / `batchLimit`";
const FUNNEL: &str = "The three result-size knobs form a funnel and MUST satisfy `candidateK ≥ rerank.topN ≥ k`";
const CLAMP: &str = "A server MUST clamp each value to `retrieve.maxK` / `rerank.maxCandidates`";
const MODALITY: &str =
    "Servers MUST reject a block whose `type`/`mimeType` is outside the modalities they advertised with `-32005`";
const INIT_RESULT: &str = "An L0 server MUST: … Answer `initialize` with negotiated `protocolVersion` ≥ 1, and answer `info` and `ping` at any time";
const GATING: &str = "An L0 server MUST: … Reject un-advertised capability methods with `-32003`, undefined methods with `-32004`, and unsupported advertised-method options with `-32005`.";
const PING_ECHO: &str = "The server MUST echo any `nonce` it received.";
const SESSION_HINT: &str =
    "The `sessionId` is a hint, never a requirement: a server that ignores it MUST still answer correctly";
const SHUTDOWN: &str = "`shutdown` — REQUIRED … Params `{}` · Result `{}`";

/// The basis of every finding of the malformed-params sweep ([`crate::sweep`]), whose ids are
/// made at run time (`sweep.<method>`, `sweep.<method>.<path>`).
pub(crate) const SWEEP: Basis = b("§14.1, §12.1", Must, PARAMS_602);

/// Every check id with its basis.
pub(crate) const TABLE: &[(&str, Basis)] = &[
    ("ping.pre-init.string", b("§7.15, §14.1", Must, PING_ECHO)),
    ("ping.pre-init.number", b("§7.15, §14.1", Must, PING_ECHO)),
    ("ping.no-nonce", b("§7.15, §14.1", Must, INIT_RESULT)),
    ("info.pre-init", b("§7.2, §14.1", Must, INIT_RESULT)),
    ("notify.pre-init", b("§4.5, §13", MustNot, NOT_ANSWERED)),
    ("lifecycle.pre-init-gated", b("§13, §14.1", Must, PRE_INIT)),
    (
        "initialize.version-mismatch",
        b("§7.1", Must, "The server MUST return `-32002` (`VersionMismatch`) only if it cannot satisfy the floor"),
    ),
    (
        "lifecycle.failed-init-locked",
        b(
            "§13",
            Must,
            "an `initialize` that fails version negotiation (`-32002`) leaves the session uninitialized, and the server MUST continue to reject gated methods with `-32001`",
        ),
    ),
    ("initialize.retry", b("§13", Must, "a server MUST accept a repeated `initialize` before any successful one")),
    (
        "initialize.repeat-rejected",
        b("§13", Must, "After a successful `initialize`, a second `initialize` MUST be rejected with `-32600`"),
    ),
    ("initialize.missing-version", b("§14.1", Must, PARAMS_602)),
    (
        "initialize.tolerates-unknown",
        b(
            "§4.6, §7.1, §14.1",
            Must,
            "A server MUST treat the client's capabilities as hints and MUST NOT require any client capability to be present",
        ),
    ),
    (
        "initialize.negotiates-min",
        b(
            "§7.1",
            Must,
            "The negotiated version is `min(client.protocolVersion, server.protocolVersion)` and is what the server returns",
        ),
    ),
    ("initialize.minimal", b("§7.1", MustNot, "MUST NOT require any client capability to be present")),
    ("shutdown.pre-init", b("§7.12, §13", Must, PRE_INIT)),
    ("initialize.main", b("§7.1, §14.1", Must, INIT_RESULT)),
    (
        "http.session-per-client",
        b("§5.2", May, "A stateful HTTP server MAY issue a session token in `initialize.result._meta.session`"),
    ),
    (
        "http.sessionless-gating",
        b("§5.2", Must, "such a server MUST still reject capability-gated methods it does not advertise with `-32003`"),
    ),
    (
        "conformance.declared",
        b("§14", Must, "A server MUST state its level in `info`/`initialize` via `_meta.conformance`"),
    ),
    (
        "capabilities.retrieval",
        b(
            "§14.1",
            Must,
            "An L0 server MUST: … Advertise at least one retrieval capability (`embed`, `rerank`, `retrieve`, or `graph`).",
        ),
    ),
    (
        "info.matches-session",
        b(
            "§13.2",
            Must,
            "`info` … MUST report the same capability set as the session's `initialize` once one has succeeded.",
        ),
    ),
    ("ping.post-init", b("§7.15", Must, PING_ECHO)),
    ("method.unknown", b("§14.1", Must, GATING)),
    ("method.unadvertised", b("§14.1", Must, GATING)),
    ("option.unsupported", b("§7.7, §14.1", Must, OPTION_005)),
    ("id.string", b("§4.7", Must, ECHO_ID)),
    ("id.integer", b("§4.7", Must, ECHO_ID)),
    ("id.negative", b("§4.7", Must, ECHO_ID)),
    ("id.large", b("§4.7, §4.6", Must, ECHO_ID)),
    ("id.on-error", b("§4.7", Must, ECHO_ID)),
    (
        "envelope.parse-error",
        b("§14.1, §12", Must, "An L0 server MUST: … Return well-formed JSON-RPC 2.0 for every request"),
    ),
    ("envelope.invalid-request", b("§4.1, §14.1", Must, "`method` MUST be a method name from §7.")),
    (
        "envelope.params-not-object",
        b("§4.1", Must, "`params` MUST be an object (RCP does not use positional parameters)."),
    ),
    ("envelope.cancel-with-id", b("§13.1, App. E", Must, "Every request MUST eventually be answered exactly once")),
    (
        "batch.empty",
        b(
            "§11",
            Must,
            "An empty array is an invalid request: the server MUST reply with a single (non-array) `-32600` error, `id: null`.",
        ),
    ),
    ("batch.notifications-only", b("§11, §4.5", MustNot, NOT_ANSWERED)),
    ("batch.mixed", b("§11", Must, BATCH)),
    (
        "batch.invalid-member",
        b(
            "§11",
            Must,
            "A member that is not a well-formed request yields a `-32600` entry with `id: null`; well-formed members are still processed.",
        ),
    ),
    ("notify.gated", b("§4.5", MustNot, NOT_ANSWERED)),
    ("notify.open", b("§4.5", MustNot, NOT_ANSWERED)),
    ("notify.unknown-method", b("§4.5", MustNot, NOT_ANSWERED)),
    ("notify.cancel-unknown", b("§7.14", Must, CANCEL_NOOP)),
    (
        "notify.unknown-namespace",
        b("§4.5", Must, "peers MUST silently ignore any `notifications/*` method they do not recognise"),
    ),
    ("notify.cancel-answered", b("§7.14", Must, CANCEL_NOOP)),
    ("cancel.exactly-once", b("§7.14", Must, "It then MUST still send exactly one response for the cancelled request")),
    (
        "progress.none-when-unadvertised",
        b(
            "§9",
            May,
            "When the client attaches `_meta.progressToken` and the server advertised `streaming`, the server MAY send … progress",
        ),
    ),
    ("tolerance.params", b("§4.6, §14.1", Must, UNKNOWN_FIELDS)),
    ("tolerance.null-as-absent", b("§4.6", Must, "elsewhere a peer MUST treat `null` as absent")),
    ("params.missing-query", b("§14.1", Must, PARAMS_602)),
    ("params.k-negative", b("§12, §14.1", Must, PARAMS_602)),
    ("params.k-fractional", b("§4.6, §14.1", Must, PARAMS_602)),
    ("params.k-string", b("§4.6", MustNot, "Implementations MUST NOT emit them as strings.")),
    ("params.embed-missing-inputs", b("§14.1", Must, PARAMS_602)),
    ("params.rerank-missing-passages", b("§14.1", Must, PARAMS_602)),
    ("stdio.blank-lines", b("§5.1", Must, NDJSON)),
    ("stdio.split-frame", b("§5.1", MustNot, NDJSON)),
    ("stdio.two-frames-one-write", b("§5.1", MustNot, NDJSON)),
    (
        "http.error-status-200",
        b(
            "§5.2",
            Must,
            "A well-formed JSON-RPC response — including one carrying a JSON-RPC `error` — MUST be returned with HTTP `200`.",
        ),
    ),
    (
        "http.path-mismatch",
        b(
            "§5.2",
            Must,
            "The method in the URL path MUST match the `method` in the body; on mismatch the server MUST return `-32600`.",
        ),
    ),
    (
        "http.buffered-json",
        b("§5.2", Must, "If the client did not request SSE, the server MUST return a single buffered JSON response."),
    ),
    (
        "http.unauthorized",
        b(
            "§15.6",
            Must,
            "A server that rejects a caller MUST answer `-32012` (`Unauthorized`) rather than a bare transport error",
        ),
    ),
    (
        "http.cors-preflight",
        b(
            "§5.2",
            Should,
            "A browser-facing server SHOULD set appropriate `Access-Control-Allow-*` headers and handle `OPTIONS` preflight",
        ),
    ),
    (
        "http.sse-framing",
        b(
            "§5.2",
            Must,
            "… emit zero or more `notifications/progress` frames followed by exactly one final frame carrying the JSON-RPC response. Each frame is one SSE `data:` line whose payload is a compact JSON object, terminated by a blank line. The stream ends after the final response frame.",
        ),
    ),
    ("http.retry-after", b("§5.2", Should, "`429` | Transport-level rate limiting; SHOULD carry `Retry-After`.")),
    ("retrieve.basic", b("§7.7, §6", Must, PRESENCE)),
    (
        "retrieve.hit-shape",
        b("§4.6", MustNot, "Special values (`NaN`, `Infinity`) are NOT valid JSON and MUST NOT be emitted"),
    ),
    ("retrieve.unique-ids", b("§7.7", Must, "clients fusing across servers key on the stringified `id`")),
    (
        "retrieve.scores-descending",
        b("§4.6", Must, "`Hit.score` and `rerank` scores are … guaranteed monotonic (higher = more relevant)"),
    ),
    ("retrieve.k-ceiling", b("§7.7", MustNot, "it MUST NOT return more than `k` hits")),
    (
        "retrieve.maxk-clamp",
        b(
            "§12",
            Must,
            "A value that is well-formed but larger than an advertised limit (`k > maxK`) is not an error at all: the server MUST clamp it",
        ),
    ),
    ("retrieve.min-score", b("§14.2", Should, "An L1 server … SHOULD … honour `k`/`minScore`.")),
    ("retrieve.funnel", b("§7.7", Must, FUNNEL)),
    ("retrieve.funnel-valid", b("§7.7", Must, FUNNEL)),
    ("retrieve.candidatek-clamp", b("§7.7", Must, CLAMP)),
    ("params.k-integral-number", b("§4.6", Interop, INTEGERS)),
    ("retrieve.rerank-funnel", b("§7.7", Must, FUNNEL)),
    (
        "retrieve.strict-false",
        b(
            "§7.7",
            May,
            "unless the client set `\"strict\": false`, in which case the server MAY fall back and note it in `usage.notes`",
        ),
    ),
    ("retrieve.modes-served", b("§6, §6.1", Must, PRESENCE)),
    (
        "retrieve.unit-unadvertised",
        b("§7.7.2", Interop, "all are gated by `retrieve` capability metadata (§6.1) and safely ignorable"),
    ),
    (
        "retrieve.mmr-unadvertised",
        b(
            "§7.7",
            Interop,
            "Every option beyond `query`/`k` is optional and MUST be ignored-or-rejected only per the advertised `retrieve` capability",
        ),
    ),
    (
        "retrieve.unicode",
        b("§4.6", Must, "Servers MUST accept the full Unicode range in `query`/`text` and MUST NOT assume ASCII."),
    ),
    ("retrieve.modality-unadvertised", b("§4.8", Must, MODALITY)),
    (
        "federation.all-failed",
        b(
            "§16.2",
            Must,
            "If *every* engine fails, the aggregator MUST return `-32010` (`BackendUnavailable`) rather than an empty success",
        ),
    ),
    (
        "federation.partial",
        b("§16.2", Must, "A federated query **succeeds** as long as at least one engine returned hits."),
    ),
    (
        "federation.partial-noted",
        b(
            "§16.2",
            Should,
            "Engines that errored or timed out are skipped, and the aggregator SHOULD record them in `usage.notes`",
        ),
    ),
    (
        "federation.required",
        b(
            "§16.2",
            Must,
            "If a `required` engine fails, the federated query MUST fail as a whole, surfacing that engine's error code.",
        ),
    ),
    (
        "federation.hop-forwarded",
        b(
            "§16.2",
            Must,
            "An aggregator forwarding a request MUST decrement `depth`, MUST append its own identity to `path`",
        ),
    ),
    (
        "federation.hop-exhausted",
        b("§16.2", MustNot, "and MUST NOT forward when `depth` reaches `0` — it answers from its own index only."),
    ),
    (
        "federation.deadline",
        b(
            "§16.2",
            Should,
            "An aggregator SHOULD forward a strictly smaller value to its downstreams, reserving time for its own fusion",
        ),
    ),
    (
        "federation.dedup",
        b(
            "§16.3",
            Must,
            "Document identity across engines is the stringified `Hit.id` (RRF(d) sums each engine's contribution to one document)",
        ),
    ),
    (
        "federation.richest-body",
        b(
            "§16.3",
            Should,
            "When two hits collapse to one identity, the fused hit SHOULD retain the richest body (longest `text` / most `content`)",
        ),
    ),
    (
        "federation.origin",
        b("§16.3", Should, "Each fused hit SHOULD carry its origin in `meta.engine` (the registry `id`)"),
    ),
    (
        "retrieve.uri-unfetchable",
        b(
            "§4.8",
            Must,
            "Servers … MUST treat a `uri` they will not or cannot fetch as `-32602` rather than silently ignoring it.",
        ),
    ),
    (
        "retrieve.text-data",
        b(
            "§4.8",
            Interop,
            "A block carries its payload inline as base64 `data` or by reference as `uri` (an inline text payload read as nothing is a silent ignore)",
        ),
    ),
    (
        "session.hint",
        b(
            "§7.7.3",
            Must,
            "The `sessionId` is a hint, never a requirement: a server that ignores it MUST still answer correctly",
        ),
    ),
    ("retrieve.seed-never-errors", b("§7.7.1", Must, "one that cannot MUST ignore it (never error)")),
    (
        "retrieve.confidence-range",
        b("§6.1, §7.7.2", Must, "`confidence` — whether hits carry a normalised `[0,1]` `confidence`"),
    ),
    ("retrieve.citations", b("§6", Must, PRESENCE)),
    (
        "filter.unadvertised-field",
        b("§8", Must, "Servers MUST reject filters referencing unadvertised fields with `-32602`."),
    ),
    (
        "filter.unadvertised-operator",
        b("§8", Must, "MUST reject an operator outside its advertised `filter.operators` with `-32005`"),
    ),
    ("filter.empty-and", b("§8", Must, "an empty `and`/`or` array is `-32602`")),
    ("filter.empty-or", b("§8", Must, "an empty `and`/`or` array is `-32602`")),
    ("filter.type-mismatch", b("§8", Must, FILTER_TYPE)),
    ("filter.operator-type", b("§8", Must, FILTER_TYPE)),
    ("filter.nested", b("§8", Must, "Boolean combinators `and`/`or`/`not` nest arbitrarily")),
    ("filter.valid", b("§8, §6", Must, PRESENCE)),
    ("progress.requires-token", b("§9", MustNot, PROGRESS)),
    ("progress.echoes-token", b("§9", Must, PROGRESS)),
    ("progress.integer-token", b("§9", Must, PROGRESS)),
    ("log.silent-without-opt-in", b("§7.1, §17.1", MustNot, NO_OPT_IN)),
    (
        "log.opt-in",
        b(
            "§17.1",
            Must,
            "`level` is a syslog-style severity: `\"debug\"`, `\"info\"`, `\"notice\"`, `\"warning\"`, `\"error\"`",
        ),
    ),
    // §10 defines following a cursor; it states no rule that the pages match one request for
    // as many hits, so the check reports that comparison as a WARN (pagination.rs).
    (
        "pagination.covers-once",
        b(
            "§10",
            Must,
            "To fetch the next page, the client repeats the request with `cursor` set to that value. A missing/empty `nextCursor` means no more results.",
        ),
    ),
    // The MUST NOT itself bounds a page from above; its parenthesis is the only licence for a
    // page short of `k`, and §10 gives a missing `nextCursor` its meaning ("no more results"):
    // read together, a short page is the last one, so it carries no `nextCursor`.
    (
        "pagination.min-score",
        b(
            "§7.7, §10",
            MustNot,
            "it MUST NOT return more than `k` hits (fewer is allowed when the corpus or `minScore` yields fewer)",
        ),
    ),
    (
        "retrieve.deterministic",
        b(
            "§7.7.1",
            Must,
            "A server that honours `seed` MUST return identical results for identical `(query, params, seed, indexVersion)`",
        ),
    ),
    (
        "retrieve.snapshot-echo",
        b(
            "§7.7.1",
            Must,
            "when a client pins a specific `indexVersion`, MUST either serve that snapshot or fail with `-32010`",
        ),
    ),
    ("retrieve.mmr-served", b("§6, §6.1", Must, PRESENCE)),
    ("retrieve.rerank-builtin", b("§6, §6.1", Must, PRESENCE)),
    ("retrieve.fusion-served", b("§6, §6.1", Must, PRESENCE)),
    ("embed.dimension", b("§7.3", Must, "returns one vector per input in the same order")),
    ("embed.default-json", b("§7.3.1", MustNot, "MUST NOT use an encoding the client did not request")),
    ("embed.batch-limit", b("§15.5", Must, LIMITS)),
    (
        "embed.legacy-texts",
        b("§7.3", Must, "a server MUST also accept the legacy field name `texts` as a synonym for `inputs`"),
    ),
    ("embed.f32-base64", b("§7.3.1", Must, "each decoded blob MUST be exactly `dimension × 4` bytes")),
    ("embed.encoding-unadvertised", b("§7.3.1, §14.1", Must, GATING)),
    ("embed.modality-unadvertised", b("§4.8", Must, MODALITY)),
    ("sparse.shape", b("§7.4, §6", Must, PRESENCE)),
    ("multi.dimension", b("§7.5, §6", Must, PRESENCE)),
    ("rerank.scores", b("§7.6", Must, "`scores[i]` corresponds to `passages[i]`")),
    ("rerank.method-unadvertised", b("§7.6", Must, "`method` MUST be in `rerank.methods`.")),
    ("rerank.max-candidates", b("§15.5", Must, LIMITS)),
    ("rerank.documents-synonym", b("§7.6", Interop, "`scores[i]` corresponds to `passages[i]`")),
    ("graph.op-unadvertised", b("§7.9", Must, "`op` MUST be in `graph.ops`.")),
    ("graph.ops-served", b("§7.9, §6", Must, PRESENCE)),
    (
        "graph.result-shape",
        b(
            "§7.9",
            Must,
            "**Result** — op-specific: … `local` → `{ \"hits\": [Hit] }` … `neighbors` → `{ \"nodes\": … }`",
        ),
    ),
    (
        "graph.result-fields",
        b(
            "§7.9",
            Interop,
            "`global` → `{ \"summary\": \"…\", \"communities\": [ { \"id\", \"summary\", \"score\" } ] }` … `communities` → `{ \"communities\": [ { \"id\", \"level\", \"summary\" } ] }`",
        ),
    ),
    (
        "graph.neighbors-edges",
        b(
            "§7.9",
            Interop,
            "`neighbors` → `{ \"nodes\": [ { \"id\", \"score\" } ], \"edges\": [ { \"src\",\"dst\",\"weight\" } ] }`",
        ),
    ),
    (
        "graph.non-empty",
        b("§7.9", Interop, "`local` → `{ \"hits\": [Hit] }` (entity-anchored subgraph, PPR-expanded)."),
    ),
    ("session.graph-hint", b("§7.7.3", Must, SESSION_HINT)),
    (
        "session.graph-dedup",
        b(
            "§7.7.3",
            May,
            "A server that advertises `session` MAY use it to … deduplicate hits already returned earlier in the trajectory",
        ),
    ),
    (
        "memory.build-shape",
        b("§7.17", Must, "**`memory/build`** … **Result** `{ \"memoryId\": \"opaque\", \"tokens\"?: int }`"),
    ),
    (
        "memory.recall-shape",
        b(
            "§7.17",
            Must,
            "**`memory/recall`** … **Result** `{ \"clues\": [ { \"query\"?: \"…\", \"seedIds\"?: [string], \"weight\"?: 0.9 } ], \"hits\"?: [ Hit ] }`",
        ),
    ),
    ("memory.scope-unadvertised", b("§7.17, §14.1", Must, GATING)),
    (
        "feedback.accepted",
        b("§7.16", Must, "**Result** `{ \"accepted\": int }` — how many signals the server recorded."),
    ),
    ("session.feedback-hint", b("§7.7.3", Must, SESSION_HINT)),
    ("retrieve.unit-served", b("§7.7.2, §6", Must, PRESENCE)),
    (
        "retrieve.unit-echo",
        b(
            "§7.7.2",
            Interop,
            "A server advertises the units it can return in `retrieve.units`; each `Hit` echoes its own `unit`.",
        ),
    ),
    ("retrieve.token-budget", b("§7.7.2, §6", Must, PRESENCE)),
    (
        "retrieve.token-usage",
        b(
            "§7.7.2",
            Should,
            "When set, the server packs top-ranked hits until their bodies reach the budget and SHOULD report the packed total in `usage.tokens`.",
        ),
    ),
    ("transform.method-unadvertised", b("§14.1", Must, GATING)),
    ("transform.methods-served", b("§7.8, §6", Must, PRESENCE)),
    ("retrieve.rewrite-unadvertised", b("§3.1, §7.7", Must, OPTION_005)),
    (
        "retrieve.rewrite-served",
        b(
            "§3.1",
            Interop,
            "Transform | Rewrite, expand, or decompose the query … | `query/transform`, or `retrieve.rewrite` | `transform`",
        ),
    ),
    (
        "session.dedup",
        b(
            "§7.7.3",
            May,
            "A server that advertises `session` MAY use it to … deduplicate hits already returned earlier in the trajectory",
        ),
    ),
    ("catalog.list", b("§7.13, §6", Must, PRESENCE)),
    ("index.add-readonly", b("§7", Must, "calling an un-advertised one yields `-32003` (`CapabilityMissing`)")),
    (
        "index.add-positional",
        b(
            "§7.10",
            Must,
            "`ids` MUST be returned in the same order as the input `documents`, one entry per input document",
        ),
    ),
    ("index.upsert", b("§7.10", Must, UPSERT)),
    ("index.minted-ids-fresh", b("§7.10", MustNot, UPSERT)),
    (
        "index.delete-idempotent",
        b("§7.11", MustNot, "deleting an `id` that is absent (or already deleted) MUST NOT be an error"),
    ),
    ("envelope.jsonrpc", b("§4", Must, "The `jsonrpc` member MUST be `\"2.0\"`.")),
    ("stdio.stdout-clean", b("§5.1", MustNot, "A server MUST NOT write anything but framed JSON-RPC to stdout.")),
    ("notify.no-unsolicited", b("§7.1", MustNot, NO_OPT_IN)),
    ("shutdown.main", b("§7.12", Required, SHUTDOWN)),
    (
        "shutdown.nothing-after",
        b(
            "§13.1",
            MustNot,
            "it MUST NOT begin processing a request received after the `shutdown` response was written",
        ),
    ),
];

/// The basis of check `id`; a check missing from the table (a test forbids it) rests on
/// nothing quoted.
pub(crate) fn of(id: &str) -> Basis {
    TABLE.iter().find(|(k, _)| *k == id).map_or(b("§14.5", Must, ""), |(_, basis)| *basis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{missed, own_verdict};
    use crate::report::{Status, Strength};
    use crate::verdict::{fail, warn};

    /// The checks whose sentence is a definition of the protocol, not a keyworded requirement.
    const DEFINITIONAL: &[&str] = &[
        "initialize.negotiates-min",
        "batch.invalid-member",
        "retrieve.basic",
        "retrieve.unique-ids",
        "retrieve.scores-descending",
        "retrieve.modes-served",
        "retrieve.confidence-range",
        "retrieve.citations",
        "filter.empty-and",
        "filter.empty-or",
        "filter.nested",
        "filter.valid",
        "log.opt-in",
        "pagination.covers-once",
        "retrieve.mmr-served",
        "retrieve.rerank-builtin",
        "retrieve.fusion-served",
        "embed.dimension",
        "sparse.shape",
        "multi.dimension",
        "rerank.scores",
        "graph.ops-served",
        "graph.result-shape",
        "memory.build-shape",
        "memory.recall-shape",
        "feedback.accepted",
        "retrieve.unit-served",
        "retrieve.token-budget",
        "transform.methods-served",
        "catalog.list",
        "index.add-readonly",
        // §5.2 defines the stream a server that chooses SSE sends (the MAY is whether to stream).
        "http.sse-framing",
        // §16.2/§16.3 define a federated query: one answering engine makes it a success, and
        // one document is one fused entry (RRF sums over the engines for a document d).
        "federation.partial",
        "federation.dedup",
    ];

    /// Every id the catalogue (`checks/mod.rs`) runs.
    fn catalogue_ids() -> Vec<String> {
        let src = include_str!("mod.rs");
        src.lines()
            .filter(|l| l.trim_start().starts_with("check!(cx,") || l.trim_start().starts_with("on_main!(cx,"))
            .filter_map(|l| l.split('"').nth(1).map(str::to_owned))
            .collect()
    }

    #[test]
    fn every_check_has_a_quoted_basis_with_its_keyword() {
        let ids = catalogue_ids();
        assert!(ids.len() > 120, "only {} checks found", ids.len());
        for id in &ids {
            let (_, basis) = TABLE.iter().find(|(k, _)| k == id).unwrap_or_else(|| panic!("{id} has no basis"));
            assert!(basis.section.starts_with('§'), "{id}: section {}", basis.section);
            assert!(!basis.quote.is_empty(), "{id}: no quoted sentence");
            let word = basis.keyword.as_str();
            let carried = basis.keyword == Keyword::Interop || basis.quote.contains(word);
            assert!(
                carried || DEFINITIONAL.contains(&id.as_str()),
                "{id}: the quote does not carry its keyword {word}: {}",
                basis.quote
            );
            if DEFINITIONAL.contains(&id.as_str()) {
                assert_eq!(basis.keyword, Keyword::Must, "{id}: a definition is binding");
            }
        }
        for (id, _) in TABLE {
            assert!(ids.iter().any(|i| i == id), "{id} is in the basis table but no check runs it");
        }
    }

    #[test]
    fn no_should_or_may_check_can_fail() {
        for keyword in [Keyword::Should, Keyword::ShouldNot, Keyword::Recommended, Keyword::May, Keyword::Interop] {
            let strength = keyword.strength();
            assert_ne!(strength, Strength::Must);
            for outcome in [fail("missed"), warn("detail"), Err("transport".to_owned())] {
                let (status, _) = own_verdict(strength, outcome);
                assert_ne!(status, Status::Fail, "{keyword:?}");
            }
            assert_ne!(missed(strength), Status::Fail);
        }
        assert_eq!(missed(Keyword::MustNot.strength()), Status::Fail);
    }
}
