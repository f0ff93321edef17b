//! SPLADE-tiny's term weights against values computed once in Python: numpy on the same
//! `model.safetensors` (float32 tensors; GELU through `math.erf`), the text tokenised by
//! `tokenizers` with the shipped `tokenizer.json` (truncation at 512, no padding), then
//! `w = log1p(relu(logits)).max(axis=0)`:
//!
//! ```text
//! x = LayerNorm(E_word[ids] + E_pos[:n] + E_type[0])
//! for each layer: x = LN(x + Attn(x)); x = LN(x + W2·gelu(W1·x))
//! t = LN(gelu(W_t·x)); logits = t · E_wordᵀ + b
//! ```
//!
//! Each case keeps the Python vector's number of nonzero terms, the sum of its weights and
//! its six heaviest terms (id, word piece, weight).

#![cfg(feature = "splade")]

use std::sync::OnceLock;

use rcp_embedder::models::SPLADE_TINY;
use rcp_embedder::splade::{MAX_LENGTH, Splade, SpladeError};

fn splade() -> &'static Splade {
    static SPLADE: OnceLock<Splade> = OnceLock::new();
    SPLADE.get_or_init(|| {
        let dir = SPLADE_TINY.default_dir();
        let files = SPLADE_TINY.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision SPLADE");
        Splade::load(&files, Some(2)).expect("load SPLADE")
    })
}

struct Case {
    text: String,
    tokens: usize,
    nonzero: usize,
    sum: f32,
    top: [(u32, &'static str, f32); 6],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            text:
                "what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft"
                    .into(),
            tokens: 19,
            nonzero: 30,
            sum: 18.381,
            top: [
                (14402, "similarity", 1.80072),
                (18440, "aero", 1.603115),
                (10581, "##ela", 1.495601),
                (2948, "aircraft", 1.494249),
                (4277, "laws", 1.328168),
                (3177, "speed", 1.270599),
            ],
        },
        Case {
            text: "Paris is the capital of France.".into(),
            tokens: 9,
            nonzero: 16,
            sum: 15.8016,
            top: [
                (3007, "capital", 2.671925),
                (3000, "paris", 2.429515),
                (2605, "france", 1.984287),
                (2103, "city", 1.295729),
                (2413, "french", 1.289186),
                (2073, "where", 1.029137),
            ],
        },
        // 80 repetitions: cut to the model's 512 tokens.
        Case {
            text: vec!["the boundary layer of a flat plate in supersonic flow"; 80].join(" "),
            tokens: MAX_LENGTH,
            nonzero: 26,
            sum: 17.7543,
            top: [
                (5127, "plate", 1.77811),
                (6192, "boundary", 1.770912),
                (4257, "flat", 1.701888),
                (6741, "layer", 1.619034),
                (3565, "super", 1.580515),
                (4834, "flow", 1.339072),
            ],
        },
    ]
}

#[test]
fn weights_match_the_python_forward_of_the_same_file() {
    let s = splade();
    assert_eq!(s.vocabulary(), 30_522);
    let texts: Vec<String> = cases().into_iter().map(|c| c.text).collect();
    // All at once: the parallel workers must return the vectors in text order.
    let vectors = s.encode_all(&texts, &|| false).expect("encode");
    for (case, v) in cases().iter().zip(&vectors) {
        let label = &case.text[..case.text.len().min(40)];
        assert_eq!(s.input(&case.text).expect("tokenise").len(), case.tokens, "{label}");
        assert!(v.indices.windows(2).all(|w| w[0] < w[1]), "{label}: ascending ids");
        assert!(v.values.iter().all(|w| *w > 0.0 && w.is_finite()), "{label}");
        assert!(v.len().abs_diff(case.nonzero) <= 1, "{label}: {} terms vs Python {}", v.len(), case.nonzero);
        let sum: f32 = v.values.iter().sum();
        assert!((sum - case.sum).abs() < 1e-2, "{label}: sum {sum} vs Python {}", case.sum);
        let mut by_weight: Vec<(u32, f32)> = v.iter().collect();
        by_weight.sort_by(|a, b| b.1.total_cmp(&a.1));
        for ((id, w), (want_id, piece, want)) in by_weight.iter().zip(case.top) {
            assert_eq!((*id, s.token(*id).as_deref()), (want_id, Some(piece)), "{label}: {by_weight:?}");
            assert!((w - want).abs() < 2e-3, "{label}: {piece} weighs {w}, Python {want}");
        }
    }
}

#[test]
fn a_text_without_word_pieces_has_no_terms() {
    for text in ["", "   ", "\n\t"] {
        assert!(splade().encode(text).expect("encode").is_empty(), "{text:?}");
    }
}

#[test]
fn expansion_brings_related_terms_and_relevance_shows_in_the_dot_product() {
    let s = splade();
    let query = s.encode("capital of France").expect("encode");
    let paris = s.encode("Paris is the capital of France.").expect("encode");
    let bananas = s.encode("Bananas are rich in potassium.").expect("encode");
    assert!(query.dot(&paris) > 2.0 * query.dot(&bananas), "{} vs {}", query.dot(&paris), query.dot(&bananas));
    // "city" is not in the text; SPLADE adds it.
    assert!(paris.indices.contains(&2103));
}

#[test]
fn cancellation_stops_between_texts() {
    let err = splade().encode_all(&["a", "b"], &|| true).unwrap_err();
    assert!(matches!(err, SpladeError::Cancelled), "{err}");
}
