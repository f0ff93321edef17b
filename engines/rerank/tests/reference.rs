//! The cross-encoder's logits against values computed once in Python (onnxruntime 1.x +
//! `tokenizers`, the same model.onnx, each pair run alone and unpadded, the passage side
//! truncated to 512 tokens):
//!
//! ```text
//! tok = Tokenizer.from_file("tokenizer.json")
//! tok.enable_truncation(512, strategy="only_second")
//! e = tok.encode(query, passage)
//! session.run(["logits"], {"input_ids": [e.ids], "attention_mask": [e.attention_mask],
//!                          "token_type_ids": [e.type_ids]})
//! ```

use std::sync::OnceLock;

use rcp_rerank::{CrossEncoder, EncoderOptions, MAX_LENGTH, MODEL};

fn encoder() -> &'static CrossEncoder {
    static ENCODER: OnceLock<CrossEncoder> = OnceLock::new();
    ENCODER.get_or_init(|| {
        let dir = MODEL.default_dir();
        let files = MODEL.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the model");
        CrossEncoder::load(&files, EncoderOptions::default()).expect("load the cross-encoder")
    })
}

fn long_passage() -> String {
    vec!["the boundary layer of a flat plate in supersonic flow"; 80].join(" ")
}

#[test]
fn logits_match_python_onnxruntime() {
    let long = long_passage();
    let q = "what is the capital of france";
    let cases: [(&str, &str, f32); 6] = [
        (q, "Paris is the capital and most populous city of France.", 8.047616),
        (q, "The Eiffel Tower was completed in 1889.", -10.935596),
        (
            "how do vaccines work",
            "Vaccines train the immune system to recognise a pathogen by exposing it to a harmless antigen.",
            7.226149,
        ),
        ("boundary layer transition at supersonic speeds", &long, 5.676153),
        // Empty texts are scored, not refused.
        ("", "An empty query is still a pair.", 0.462297),
        (q, "", -9.690441),
    ];
    let tolerance = rcp_testkit::int8_tolerance(1e-3, 0.5);
    let mut alone = Vec::new();
    for (query, passage, expected) in cases {
        let got = encoder().score(query, &[passage], &|| false).expect("score");
        assert!((got[0] - expected).abs() < tolerance, "{query:?} / {:.40}: {} vs Python {expected}", passage, got[0]);
        if query == q {
            alone.push(got[0]);
        }
    }
    // All at once, so the parallel sessions' results must come back in passage order too, each
    // as it scored alone.
    let passages: Vec<&str> = cases.iter().filter(|c| c.0 == q).map(|c| c.1).collect();
    let together = encoder().score(q, &passages, &|| false).expect("score");
    for (g, e) in together.iter().zip(&alone) {
        assert!((g - e).abs() < 1e-3, "{together:?} vs {alone:?}: a pair's score depends on its neighbours");
    }
}

#[test]
fn only_the_passage_is_truncated() {
    let query = "boundary layer transition at supersonic speeds";
    let e = encoder().encode(query, &long_passage()).expect("encode");
    assert_eq!(e.get_ids().len(), MAX_LENGTH);
    let alone = encoder().encode(query, "").expect("encode");
    let query_part = alone.get_ids().len() - 1; // [CLS] query [SEP], without the passage's [SEP]
    assert_eq!(&e.get_ids()[..query_part], &alone.get_ids()[..query_part], "the query is kept whole");
    assert_eq!(e.get_type_ids().iter().filter(|&&t| t == 0).count(), query_part);
    assert_eq!(e.get_type_ids().last(), Some(&1));
    // A long query beside a longer passage: truncating the longer side first would cut the
    // query too; only the passage loses tokens.
    let long_query = "shock wave boundary layer interaction ".repeat(60);
    let e = encoder().encode(&long_query, &long_passage()).expect("encode");
    let alone = encoder().encode(&long_query, "").expect("encode");
    let query_part = alone.get_ids().len() - 1;
    assert!(query_part > MAX_LENGTH / 2 + 10, "{query_part} query tokens: more than half the window");
    assert_eq!(e.get_ids().len(), MAX_LENGTH);
    let kept = e.get_type_ids().iter().filter(|&&t| t == 0).count();
    assert!(
        e.get_ids()[..query_part] == alone.get_ids()[..query_part],
        "the long query is kept whole: {kept} of its {query_part} tokens kept"
    );
    // A query longer than the model's window leaves no room: both sides are cut instead of failing.
    let huge = "supersonic ".repeat(1000);
    let both = encoder().encode(&huge, "a passage").expect("encode a huge query");
    assert_eq!(both.get_ids().len(), MAX_LENGTH);
    assert!(both.get_type_ids().contains(&1), "the passage keeps tokens");
}

#[test]
fn cancellation_stops_between_pairs() {
    let err = encoder().score("q", &["a", "b"], &|| true).unwrap_err();
    assert!(matches!(err, rcp_rerank::EncoderError::Cancelled), "{err}");
}

#[test]
fn a_shorter_window_cuts_the_passage_and_is_clamped() {
    let dir = MODEL.default_dir();
    let files = MODEL.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision the model");
    let query = "boundary layer transition at supersonic speeds";
    let cut = CrossEncoder::load_window(&files, EncoderOptions::default(), 128).expect("load");
    let e = cut.encode(query, &long_passage()).expect("encode");
    assert_eq!(e.get_ids().len(), 128);
    let short = "Paris is the capital and most populous city of France.";
    let whole = encoder().encode(query, short).expect("encode").get_ids().to_vec();
    assert_eq!(cut.encode(query, short).expect("encode").get_ids(), whole.as_slice(), "a short pair is not cut");
    let long = long_passage();
    assert!(cut.score(query, &[long.as_str()], &|| false).expect("score")[0].is_finite());
    let tiny = CrossEncoder::load_window(&files, EncoderOptions::default(), 1).expect("load");
    assert_eq!(tiny.encode(query, &long).expect("encode").get_ids().len(), rcp_rerank::cross_encoder::MIN_WINDOW);
    let huge = CrossEncoder::load_window(&files, EncoderOptions::default(), 10_000).expect("load");
    assert_eq!(huge.encode(query, &long).expect("encode").get_ids().len(), MAX_LENGTH);
}
