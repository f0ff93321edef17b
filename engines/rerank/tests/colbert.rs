//! ColBERT's matrices and MaxSim scores against values computed once in Python (onnxruntime
//! 1.32 + `tokenizers`, the same model.onnx and tokenizer.json, each text run alone and
//! unpadded, the layout built by hand as the ColBERT papers describe it):
//!
//! ```text
//! tok = Tokenizer.from_file("tokenizer.json"); tok.no_padding(); tok.no_truncation()
//! words = tok.encode(text, add_special_tokens=False).ids
//! query:    ids = [101, 1] + words[:29] + [102], padded to 32 with 103 ([MASK]),
//!           attention mask 0 on the padding; every row kept
//! document: ids = [101, 2] + words[:509] + [102]; rows of string.punctuation tokens dropped
//! rows = session.run(["last_hidden_state"], {..., "token_type_ids": zeros})[0][0]
//! rows /= norm(rows, axis=1); maxsim = (Q @ D.T).max(axis=1).sum()
//! ```
//!
//! Tolerances: 1e-4 on a vector entry, 1e-3 on a MaxSim (a sum of 32 cosines).

use std::sync::OnceLock;

use rcp_rerank::colbert::QUERY_LENGTH;
use rcp_rerank::matrices::{DIMENSION, DOCUMENT_LENGTH};
use rcp_rerank::{COLBERT_MODEL, Colbert, EncoderError, EncoderOptions, Kind};

fn colbert() -> &'static Colbert {
    static MODEL: OnceLock<Colbert> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = COLBERT_MODEL.default_dir();
        let files =
            COLBERT_MODEL.locate_or_fetch(&dir, &mut |m| eprintln!("provision: {m}")).expect("provision ColBERT");
        Colbert::load(&files, EncoderOptions::default()).expect("load ColBERT")
    })
}

fn long_passage() -> String {
    vec!["the boundary layer of a flat plate in supersonic flow"; 80].join(" ")
}

const Q: &str = "what is the capital of france";
const PARIS: &str = "Paris is the capital and most populous city of France.";

fn close(got: &[f32], expected: &[f32], tolerance: f32) -> bool {
    got.len() == expected.len() && got.iter().zip(expected).all(|(g, e)| (g - e).abs() < tolerance)
}

#[test]
fn max_sim_matches_python_onnxruntime() {
    let long = long_passage();
    // (query, passage, rows of the passage's matrix, MaxSim)
    let cases: [(&str, &str, usize, f32); 6] = [
        (Q, PARIS, 13, 28.089195),
        (Q, "The Eiffel Tower was completed in 1889.", 12, 26.858734),
        (
            "how do vaccines work",
            "Vaccines train the immune system to recognise a pathogen by exposing it to a harmless antigen.",
            19,
            27.862402,
        ),
        ("boundary layer transition at supersonic speeds", &long, 512, 26.884667),
        // Empty texts are encoded and scored, not refused.
        ("", "An empty query is still a pair.", 10, 30.321407),
        (Q, "", 3, 24.434025),
    ];
    let tolerance = rcp_testkit::int8_tolerance(1e-3, 0.25);
    let mut alone = Vec::new();
    for (query, passage, rows, expected) in cases {
        let got = colbert().score(query, &[passage], &|| false).expect("score");
        assert!((got[0] - expected).abs() < tolerance, "{query:?} / {passage:.40}: {} vs Python {expected}", got[0]);
        if query == Q {
            alone.push(got[0]);
        }
        let m = colbert().encode(&[passage], Kind::Document, &|| false).expect("encode").remove(0);
        assert_eq!(m.len(), rows, "{passage:.40}: rows after dropping punctuation");
    }
    // Several passages at once on parallel sessions: scores in passage order, each as alone.
    let passages: Vec<&str> = cases.iter().filter(|c| c.0 == Q).map(|c| c.1).collect();
    let together = colbert().score(Q, &passages, &|| false).expect("score");
    assert!(close(&together, &alone, 1e-3), "{together:?} vs {alone:?}");
}

#[test]
fn matrices_match_python_onnxruntime() {
    let entry = rcp_testkit::int8_tolerance(1e-4, 0.02);
    let q = colbert().encode(&[Q], Kind::Query, &|| false).expect("encode").remove(0);
    assert_eq!(q.len(), QUERY_LENGTH, "a query matrix always has the [MASK]-augmented length");
    let rows: Vec<&[f32]> = q.rows().collect();
    assert!(close(&rows[0][..4], &[-0.009196385, 0.004804555, 0.0157619, -0.01873107], entry), "{:?}", &rows[0][..4]);
    // A [MASK] row: not attended to, still encoded and kept.
    assert!(
        close(&rows[31][..4], &[-0.02731764, 0.002924758, 0.002928982, -0.03100774], entry),
        "{:?}",
        &rows[31][..4]
    );
    let d = colbert().encode(&[PARIS], Kind::Document, &|| false).expect("encode").remove(0);
    let rows: Vec<&[f32]> = d.rows().collect();
    assert_eq!(rows.len(), 13, "[CLS] [D] 11 words [SEP], the final '.' dropped");
    assert!(close(&rows[1][..4], &[-0.03555784, 0.001513183, 0.01196719, -0.002200852], entry), "{:?}", &rows[1][..4]);
    assert!(
        close(&rows[12][..4], &[-0.009868235, -0.0007535022, 0.01713529, -0.01363487], entry),
        "{:?}",
        &rows[12][..4]
    );
    for row in q.rows().chain(d.rows()) {
        assert_eq!(row.len(), DIMENSION);
        let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "rows are unit vectors: {norm}");
    }
}

#[test]
fn the_layout_carries_the_markers_and_the_windows() {
    let query = colbert().input(Q, Kind::Query).expect("input");
    assert_eq!(&query.ids[..2], &[101, 1], "[CLS] [unused0]");
    assert_eq!(query.ids.len(), QUERY_LENGTH);
    assert_eq!(query.ids[query.attended - 1], 102, "[SEP] closes the attended part");
    assert!(query.ids[query.attended..].iter().all(|&id| id == 103), "[MASK] padding");
    let long_query = colbert().input(&"supersonic flow ".repeat(40), Kind::Query).expect("input");
    assert_eq!((long_query.ids.len(), long_query.attended), (QUERY_LENGTH, QUERY_LENGTH), "cut to 32, no padding");
    let doc = colbert().input(&long_passage(), Kind::Document).expect("input");
    assert_eq!(&doc.ids[..2], &[101, 2], "[CLS] [unused1]");
    assert_eq!((doc.ids.len(), doc.attended), (DOCUMENT_LENGTH, DOCUMENT_LENGTH));
    assert_eq!(doc.ids.last(), Some(&102));
}

#[test]
fn cancellation_stops_between_texts() {
    let err = colbert().score("q", &["a", "b"], &|| true).unwrap_err();
    assert!(matches!(err, EncoderError::Cancelled), "{err}");
}

#[test]
fn stored_matrices_score_like_encoded_ones_and_spare_the_encoding() {
    use rcp_rerank::MatrixStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("colbert-matrices");
    let passages = [PARIS, "The Eiffel Tower was completed in 1889.", "Rome is the capital of Italy.", PARIS];
    let exact = colbert().score(Q, &passages, &|| false).unwrap();
    {
        let (store, _) = MatrixStore::open(&path, COLBERT_MODEL.identity).unwrap();
        // At indexing: each distinct text encoded once.
        assert_eq!(colbert().store_documents(&passages, &store, &|| false).unwrap(), 3);
        assert_eq!(colbert().store_documents(&passages, &store, &|| false).unwrap(), 0);
        store.sync().unwrap();
    }
    let (store, report) = MatrixStore::open(&path, COLBERT_MODEL.identity).unwrap();
    assert_eq!(report.matrices, 3);
    // The rows of the stored PARIS matrix are those Python counts (13), 388 bytes each.
    assert_eq!(store.get(PARIS).unwrap().len(), 13);
    let stored = colbert().score_stored(Q, &passages, &store, false, &|| false).unwrap();
    // int8 rows: each of the 32 cosines within ~0.002, the sum within 0.05 of the float MaxSim,
    // and the order kept.
    assert!(close(&stored, &exact, 0.05), "{stored:?} vs {exact:?}");
    let order = |s: &[f32]| {
        let mut o: Vec<usize> = (0..3).collect();
        o.sort_by(|&a, &b| s[b].total_cmp(&s[a]));
        o
    };
    assert_eq!(order(&stored), order(&exact));
    assert_eq!(stored[0], stored[3]);
    // A passage the store lacks is encoded, scored alike, and kept only when asked.
    let other = ["Berlin is the capital of Germany."];
    let fresh = colbert().score_stored(Q, &other, &store, false, &|| false).unwrap();
    assert!(!store.contains(other[0]));
    let kept = colbert().score_stored(Q, &other, &store, true, &|| false).unwrap();
    assert!(store.contains(other[0]));
    assert_eq!(fresh, kept);
    assert_eq!(colbert().score_stored(Q, &other, &store, false, &|| false).unwrap(), kept);
}
