//! The retrieval features the framework adds around an engine's `retrieve` (and `graph`)
//! handler, so that an engine gets them by a builder switch instead of writing them:
//!
//! - [`rerank`]: the inline rerank stage (§3.3): the funnel `candidateK >= rerank.topN >= k`
//!   planned once ([`Funnel`](rerank::Funnel)), a registered reranker run around the handler
//!   within the request's deadline, its scores fused with the first stage's;
//! - [`session_dedup`]: the `session` capability (§7.7.3): calls sharing a `sessionId` never
//!   return a hit twice;
//! - [`budget`]: `tokenBudget` packing (§7.7.2) with the engine's own tokenizer;
//! - [`cursor`]: pagination cursors (§10), one token format and one request fingerprint;
//! - [`feedback`]: durable `feedback` (§7.16) and the quarantine later results obey.
//!
//! Each is written once, here, because each is easy to get subtly wrong (a reranker that
//! ranks worse than its input, a page that repeats a hit, a packed list that is not a prefix
//! of the ranking), and an engine's handler sees none of them: it ranks, the framework does
//! the rest.

pub mod budget;
pub mod cursor;
pub mod feedback;
pub(crate) mod rerank;
pub(crate) mod session_dedup;
