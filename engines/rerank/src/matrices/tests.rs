use std::io::{Seek, SeekFrom, Write};

use super::*;

const MODEL: &str = "answerai-colbert-small-v1@test";

/// A matrix of `rows` unit rows pointing along axis `seed + r`.
fn matrix(rows: usize, seed: usize) -> QuantisedMatrix {
    let mut data = vec![0.0; rows * DIMENSION];
    for r in 0..rows {
        data[r * DIMENSION + (seed + r) % DIMENSION] = 1.0;
    }
    QuantisedMatrix::quantise(&Matrix::from_data(data))
}

#[test]
fn matrices_survive_a_reopen_and_are_found_by_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m");
    let (store, report) = MatrixStore::open(&path, MODEL).unwrap();
    assert_eq!(report, OpenReport { matrices: 0, dropped_bytes: 0 });
    assert!(store.insert("first passage", matrix(3, 0)).unwrap());
    assert!(store.insert("second passage", matrix(5, 7)).unwrap());
    assert!(store.insert("first passage", matrix(9, 9)).unwrap(), "a held text is left as it is");
    store.sync().unwrap();
    drop(store);
    let (store, report) = MatrixStore::open(&path, MODEL).unwrap();
    assert_eq!(report, OpenReport { matrices: 2, dropped_bytes: 0 });
    assert_eq!(store.get("first passage").unwrap().as_ref(), &matrix(3, 0));
    assert_eq!(store.get("second passage").unwrap().as_ref(), &matrix(5, 7));
    assert!(store.get("first passage ").is_none(), "another text is another key");
    assert_eq!(store.rows(), 8);
    assert_eq!(store.bytes(), 8 * (DIMENSION as u64 + 4));
}

#[test]
fn a_torn_tail_is_cut_off_and_reported_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m");
    let (store, _) = MatrixStore::open(&path, MODEL).unwrap();
    store.insert("kept", matrix(2, 1)).unwrap();
    store.insert("torn", matrix(2, 2)).unwrap();
    drop(store);
    let (store, report) = MatrixStore::open(&path, MODEL).unwrap();
    assert_eq!(report, OpenReport { matrices: 2, dropped_bytes: 0 });
    drop(store);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 100).unwrap();
    let (store, report) = MatrixStore::open(&path, MODEL).unwrap();
    let record = 8 + 20 + 2 * (DIMENSION as u64 + 4);
    assert_eq!(report, OpenReport { matrices: 1, dropped_bytes: record - 100 });
    assert!(store.get("kept").is_some());
    assert!(store.get("torn").is_none());
    // The file was cut at the last whole record: appending goes on from there.
    store.insert("torn", matrix(2, 2)).unwrap();
    drop(store);
    let (store, report) = MatrixStore::open(&path, MODEL).unwrap();
    assert_eq!(report, OpenReport { matrices: 2, dropped_bytes: 0 });
    assert_eq!(store.get("torn").unwrap().as_ref(), &matrix(2, 2));
}

#[test]
fn a_record_damaged_after_opening_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m");
    let (store, _) = MatrixStore::open(&path, MODEL).unwrap();
    store.insert("one", matrix(2, 1)).unwrap();
    store.sync().unwrap();
    // Flip a code byte of the only record, behind the open store's back.
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let len = f.metadata().unwrap().len();
    f.seek(SeekFrom::Start(len - 3)).unwrap();
    f.write_all(&[0x55]).unwrap();
    drop(f);
    assert!(store.get("one").is_none());
    assert!(!store.contains("one"), "the damaged record is forgotten, so its passage is encoded again");
    // Reopening finds the damage at once and cuts it off.
    drop(store);
    let (_, report) = MatrixStore::open(&path, MODEL).unwrap();
    assert_eq!(report.matrices, 0);
    assert!(report.dropped_bytes > 0);
}

#[test]
fn another_models_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m");
    drop(MatrixStore::open(&path, MODEL).unwrap());
    let err = MatrixStore::open(&path, "another-model").unwrap_err();
    assert!(matches!(err, MatrixStoreError::Foreign { .. }), "{err}");
    std::fs::write(dir.path().join("x"), b"not a matrix file at all").unwrap();
    assert!(matches!(MatrixStore::open(&dir.path().join("x"), MODEL), Err(MatrixStoreError::Foreign { .. })));
}

#[test]
fn an_in_memory_store_stops_keeping_at_its_limit() {
    let one = matrix(2, 0).bytes() as u64;
    let store = MatrixStore::in_memory(2 * one);
    assert!(store.insert("a", matrix(2, 0)).unwrap());
    assert!(store.insert("b", matrix(2, 1)).unwrap());
    assert!(!store.insert("c", matrix(2, 2)).unwrap());
    assert_eq!((store.len(), store.bytes()), (2, 2 * one));
    assert!(store.get("c").is_none());
    assert_eq!(store.get("b").unwrap().as_ref(), &matrix(2, 1));
}

#[test]
fn damage_inside_the_file_is_found_when_read_and_the_rest_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m");
    let (store, _) = MatrixStore::open(&path, MODEL).unwrap();
    for (i, text) in ["a", "b", "c"].iter().enumerate() {
        store.insert(text, matrix(2, i)).unwrap();
    }
    drop(store);
    // Flip a code byte of the middle record ("b"): its header still agrees with its length.
    let record = 8 + 20 + 2 * (DIMENSION as u64 + 4);
    let len = std::fs::metadata(&path).unwrap().len();
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(len - record - 5)).unwrap();
    f.write_all(&[0x7f]).unwrap();
    drop(f);
    let (store, report) = MatrixStore::open(&path, MODEL).unwrap();
    assert_eq!(report, OpenReport { matrices: 3, dropped_bytes: 0 }, "opening reads headers, not every byte");
    assert!(store.get("b").is_none(), "the damaged matrix is never served");
    assert!(!store.contains("b"), "and forgotten, to be encoded and kept again");
    assert_eq!(store.get("a").unwrap().as_ref(), &matrix(2, 0));
    assert_eq!(store.get("c").unwrap().as_ref(), &matrix(2, 2));
    assert!(store.insert("b", matrix(2, 1)).unwrap());
    assert_eq!(store.get("b").unwrap().as_ref(), &matrix(2, 1));
}

#[test]
fn one_process_holds_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m");
    let (held, _) = MatrixStore::open(&path, MODEL).unwrap();
    let err = MatrixStore::open(&path, MODEL).unwrap_err();
    assert!(matches!(err, MatrixStoreError::Held { .. }), "{err}");
    drop(held);
    assert!(MatrixStore::open(&path, MODEL).is_ok(), "free again once closed");
}

#[test]
fn a_matrix_with_a_non_finite_scale_is_not_kept() {
    let mut data = vec![0.0; DIMENSION];
    data[0] = f32::INFINITY;
    let store = MatrixStore::in_memory(u64::MAX);
    assert!(!store.insert("infinite", QuantisedMatrix::quantise(&Matrix::from_data(data))).unwrap());
    assert!(store.is_empty());
}
