//! `tokenBudget` packing (§7.7.2) as one framework rule: after the engine has ranked, hits are
//! packed in rank order until their bodies reach the budget, and `usage.tokens` reports the
//! packed total. An engine opts in by supplying its own tokenizer
//! ([`ServerBuilder::token_counter`](crate::ServerBuilder::token_counter)); only then is
//! `retrieve.tokenBudget: true` advertised.
//!
//! - **Rank order, never reordered.** The packed hits are always a prefix of the ranking:
//!   packing stops at the first hit whose body would take the total past the budget, so
//!   `usage.tokens <= tokenBudget` always holds. `k` still caps the count: whichever of `k`
//!   and `tokenBudget` binds first wins.
//! - **A first hit larger than the whole budget** is not returned (nor any after it): the
//!   result is empty, `usage.tokens` is 0 and `usage.notes` names the hit's size, so the
//!   client can raise the budget or ask for a smaller `unit`. Returning it would break the
//!   budget the client set; cutting its text would return a body the engine never ranked.
//! - **The body** is the hit's `text`. When the client sets `includeText:false` the engine is
//!   still asked for text, which is counted and then left out of the answer, so the budget
//!   means the same with and without it. A hit without text (a non-text `content` body)
//!   counts 0 tokens, and a note says so.

use std::fmt;
use std::sync::Arc;

use rcp_wire::RetrieveResult;

/// Counts the tokens of hit bodies with an engine's own tokenizer (§7.7.2).
pub trait TokenCounter: Send + Sync + 'static {
    /// What counts, for `usage.notes` (e.g. "the all-MiniLM-L6-v2 WordPiece tokenizer").
    fn name(&self) -> String;

    /// Tokens in `text`.
    fn count(&self, text: &str) -> usize;
}

impl<T: TokenCounter + ?Sized> TokenCounter for Arc<T> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn count(&self, text: &str) -> usize {
        (**self).count(text)
    }
}

/// A shared token counter, as the `retrieve` route holds it.
#[derive(Clone)]
pub(crate) struct Counter(pub(crate) Arc<dyn TokenCounter>);

impl fmt::Debug for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Counter").field(&self.0.name()).finish()
    }
}

/// One `retrieve` with a `tokenBudget`, from the request to the packed answer.
#[derive(Debug)]
pub(crate) struct Packing {
    counter: Counter,
    budget: u64,
    /// Whether the client wants the hits' text in the answer.
    keep_text: bool,
}

impl Packing {
    /// The packing of a request with `budget` (validated `>= 1`), whose client asked for text
    /// unless `include_text` is `Some(false)`.
    pub(crate) fn new(counter: Counter, budget: u64, include_text: bool) -> Self {
        Self { counter, budget, keep_text: include_text }
    }

    /// Keeps the longest prefix of the first `k` hits whose bodies fit in the budget, sets
    /// `usage.tokens`, notes which tokenizer counted, and strips text the client did not ask
    /// for. A cut page's `nextCursor` is withheld (it would skip the cut hits).
    pub(crate) fn pack(&self, res: &mut RetrieveResult, k: usize, notes: &mut Vec<String>) {
        let mut total = 0u64;
        let mut kept = 0;
        let mut textless = 0;
        let mut overflow = None;
        for hit in res.hits.iter().take(k) {
            let tokens = match &hit.text {
                Some(t) => self.counter.0.count(t) as u64,
                None => {
                    textless += 1;
                    0
                }
            };
            if total + tokens > self.budget {
                overflow = Some((hit.key(), tokens));
                break;
            }
            total += tokens;
            kept += 1;
        }
        let cut = res.hits.len() > kept;
        res.hits.truncate(kept);
        if !self.keep_text {
            res.hits.iter_mut().for_each(|h| h.text = None);
        }
        notes.push(format!(
            "tokenBudget: {kept} hits packed, {total} of {} tokens, counted with {}",
            self.budget,
            self.counter.0.name()
        ));
        if let Some((id, tokens)) = overflow
            && kept == 0
        {
            notes.push(format!(
                "tokenBudget: the top hit '{id}' alone has {tokens} tokens, more than the budget of {}; nothing packed",
                self.budget
            ));
        }
        if textless > 0 {
            notes.push(format!("tokenBudget: {textless} hits without text counted as 0 tokens"));
        }
        if cut && res.next_cursor.take().is_some() {
            notes.push("tokenBudget: nextCursor withheld, as it would skip hits cut by the budget".into());
        }
        res.usage.get_or_insert_with(Default::default).tokens = Some(total);
    }
}

#[cfg(test)]
mod tests {
    use rcp_wire::Hit;

    use super::*;

    /// Whitespace-separated words.
    struct Words;

    impl TokenCounter for Words {
        fn name(&self) -> String {
            "words".into()
        }
        fn count(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    fn packing(budget: u64, include_text: Option<bool>) -> Packing {
        Packing::new(Counter(Arc::new(Words)), budget, include_text != Some(false))
    }

    fn result(bodies: &[&str]) -> RetrieveResult {
        let hits = bodies.iter().enumerate().map(|(i, b)| Hit::new(format!("d{i}").as_str(), 1.0).with_text(*b));
        RetrieveResult::from_hits(hits.collect())
    }

    fn ids(res: &RetrieveResult) -> Vec<String> {
        res.hits.iter().map(Hit::key).collect()
    }

    #[test]
    fn hits_are_packed_in_rank_order_until_the_budget_is_reached() {
        let mut res = result(&["a b c", "d e", "f g h i", "j"]);
        let mut notes = Vec::new();
        packing(6, None).pack(&mut res, 10, &mut notes);
        assert_eq!(ids(&res), ["d0", "d1"], "the third hit would take 5 + 4 past 6; the fourth is not reached");
        assert_eq!(res.usage.as_ref().and_then(|u| u.tokens), Some(5));
        assert!(notes[0].contains("2 hits packed, 5 of 6 tokens, counted with words"), "{notes:?}");
    }

    #[test]
    fn a_budget_met_exactly_keeps_the_hit_that_meets_it() {
        let mut res = result(&["a b c", "d e f", "g"]);
        packing(6, None).pack(&mut res, 10, &mut Vec::new());
        assert_eq!(ids(&res), ["d0", "d1"]);
        assert_eq!(res.usage.and_then(|u| u.tokens), Some(6));
    }

    #[test]
    fn k_binds_when_it_comes_first() {
        let mut res = result(&["a", "b", "c", "d"]);
        packing(100, None).pack(&mut res, 2, &mut Vec::new());
        assert_eq!(ids(&res), ["d0", "d1"]);
        assert_eq!(res.usage.and_then(|u| u.tokens), Some(2));
    }

    #[test]
    fn a_first_hit_larger_than_the_budget_packs_nothing_and_says_why() {
        let mut res = result(&["a b c d e", "f"]);
        res.next_cursor = Some("next".into());
        let mut notes = Vec::new();
        packing(3, None).pack(&mut res, 10, &mut notes);
        assert!(res.hits.is_empty(), "a smaller later hit is not packed past the top one");
        assert_eq!(res.usage.as_ref().and_then(|u| u.tokens), Some(0));
        assert!(notes.iter().any(|n| n.contains("'d0' alone has 5 tokens")), "{notes:?}");
        assert_eq!(res.next_cursor, None, "the cursor would skip the cut hits");
    }

    #[test]
    fn text_is_counted_then_dropped_when_the_client_did_not_ask_for_it() {
        let mut res = result(&["a b", "c d", "e f"]);
        packing(4, Some(false)).pack(&mut res, 10, &mut Vec::new());
        assert_eq!(ids(&res), ["d0", "d1"]);
        assert!(res.hits.iter().all(|h| h.text.is_none()));
        assert_eq!(res.usage.and_then(|u| u.tokens), Some(4));
    }

    #[test]
    fn hits_without_text_count_zero_and_are_noted() {
        let mut res = RetrieveResult::from_hits(vec![Hit::new("img", 1.0), Hit::new("t", 0.5).with_text("a b")]);
        let mut notes = Vec::new();
        packing(2, None).pack(&mut res, 10, &mut notes);
        assert_eq!(ids(&res), ["img", "t"]);
        assert!(notes.iter().any(|n| n.contains("1 hits without text")), "{notes:?}");
    }
}
