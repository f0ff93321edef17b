use std::io::Write;
use std::path::PathBuf;

use rcp_wire::ErrorCode;
use rcp_wire::feedback::{FeedbackParams, Signal};

use super::*;

/// A fresh directory, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("rcp-feedback-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Self(p)
    }

    fn log(&self) -> PathBuf {
        feedback_dir(&self.0).join("signals.log")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn signal(id: &str) -> Signal {
    Signal {
        hit_id: id.into(),
        used: None,
        cited: None,
        helpful: None,
        reward: None,
        poison_suspected: None,
        injection_suspected: None,
    }
}

fn poison(id: &str) -> Signal {
    Signal { poison_suspected: Some(true), ..signal(id) }
}

fn used(id: &str) -> Signal {
    Signal { used: Some(true), ..signal(id) }
}

fn ids(store: &FeedbackStore) -> Vec<String> {
    store.quarantined().into_iter().map(|q| q.hit_id).collect()
}

fn open(dir: &Dir) -> FeedbackStore {
    FeedbackStore::open(&dir.0, FeedbackOptions::default()).expect("opens")
}

#[test]
fn a_hit_is_quarantined_at_the_threshold_of_integrity_signals_only() {
    let dir = Dir::new("threshold");
    let store = open(&dir);
    assert_eq!(store.record(vec![used("d1"), used("d1"), used("d1"), poison("d1")]).ok(), Some(4));
    let injected = Signal { injection_suspected: Some(true), ..signal("d1") };
    assert_eq!(store.record(vec![injected]).ok(), Some(1));
    assert!(ids(&store).is_empty(), "two integrity signals stay under a threshold of three");
    assert!(store.record(vec![poison("d1")]).is_ok());
    assert_eq!(ids(&store), ["d1"]);
    assert_eq!(store.quarantined()[0].signals, 3);
    assert!(store.quarantine_set().contains("d1"));
}

#[test]
fn a_restart_keeps_signals_and_quarantine_and_release_is_durable() {
    let dir = Dir::new("restart");
    {
        let store = open(&dir);
        assert!(store.record(vec![poison("d1"), poison("d1"), poison("d1"), poison("d2")]).is_ok());
    }
    let store = open(&dir);
    assert_eq!(ids(&store), ["d1"]);
    // d2's one signal was kept too: two more quarantine it.
    assert!(store.record(vec![poison("d2"), poison("d2")]).is_ok());
    assert_eq!(ids(&store), ["d1", "d2"]);
    assert!(store.release("d1").expect("released"));
    assert!(!store.release("d1").expect("no-op"), "releasing what is not quarantined says so");
    drop(store);
    let store = open(&dir);
    assert_eq!(ids(&store), ["d2"]);
    assert_eq!(FeedbackStore::list(&dir.0).ok().map(|l| l.len()), Some(1));
}

#[test]
fn a_torn_last_line_is_cut_off_and_damage_elsewhere_refuses_to_open() {
    let dir = Dir::new("torn");
    {
        let store = open(&dir);
        assert!(store.record(vec![poison("d1"), poison("d1"), poison("d1")]).is_ok());
    }
    let whole = std::fs::metadata(dir.log()).map(|m| m.len()).expect("log");
    let mut f = std::fs::OpenOptions::new().append(true).open(dir.log()).expect("log");
    f.write_all(br#"{"feedback":{"at":1,"signals":[{"hitId":"d"#).expect("write");
    drop(f);
    let store = open(&dir);
    assert_eq!(ids(&store), ["d1"], "every acknowledged signal is still there");
    assert_eq!(std::fs::metadata(dir.log()).map(|m| m.len()).ok(), Some(whole), "the torn tail is gone");
    drop(store);

    let mut f = std::fs::OpenOptions::new().append(true).open(dir.log()).expect("log");
    f.write_all(b"garbage\n").expect("write");
    drop(f);
    let err = FeedbackStore::open(&dir.0, FeedbackOptions::default()).err().map(|e| e.kind());
    assert_eq!(err, Some(io::ErrorKind::InvalidData), "a damaged whole line is never skipped");
}

#[test]
fn a_second_writer_is_refused_while_the_log_is_held() {
    let dir = Dir::new("lock");
    let _held = open(&dir);
    let err = FeedbackStore::open(&dir.0, FeedbackOptions::default()).err().map(|e| e.kind());
    assert_eq!(err, Some(io::ErrorKind::WouldBlock));
}

#[test]
fn a_flood_compacts_the_log_under_its_cap_and_keeps_the_quarantine() {
    let dir = Dir::new("flood");
    let options = FeedbackOptions { max_log_bytes: 4096, ..FeedbackOptions::default() };
    let store = FeedbackStore::open(&dir.0, options.clone()).expect("opens");
    assert!(store.record(vec![poison("bad"), poison("bad"), poison("bad")]).is_ok());
    for i in 0..200 {
        assert!(store.record(vec![used(&format!("doc-{i}"))]).is_ok(), "signal {i}");
        let len = std::fs::metadata(dir.log()).map(|m| m.len()).expect("log");
        assert!(len <= options.max_log_bytes, "log at {len} bytes");
    }
    drop(store);
    let store = FeedbackStore::open(&dir.0, options).expect("reopens");
    assert_eq!(ids(&store), ["bad"]);
}

#[test]
fn tracking_is_bounded_and_a_full_store_answers_32011_with_retry_after() {
    let dir = Dir::new("tracked");
    let options = FeedbackOptions { max_tracked_hits: 2, ..FeedbackOptions::default() };
    let store = FeedbackStore::open(&dir.0, options).expect("opens");
    assert!(store.record(vec![poison("a"), poison("b")]).is_ok());
    let err = store.record(vec![poison("c")]).expect_err("refused");
    assert_eq!(err.code, ErrorCode::RATE_LIMITED);
    assert!(err.data.and_then(|d| d.retry_after_ms).is_some());
    assert!(store.record(vec![poison("a"), used("c")]).is_ok(), "known hits and plain signals still go in");
}

#[test]
fn signals_past_a_bound_are_invalid_params_naming_the_field() {
    let dir = Dir::new("bounds");
    let store = open(&dir);
    let field = |p: FeedbackParams| store.options.check(&p).err().and_then(|e| e.data).and_then(|d| d.field);
    let many = FeedbackParams { signals: vec![used("x"); 257], ..FeedbackParams::default() };
    assert_eq!(field(many).as_deref(), Some("signals"));
    let long = FeedbackParams { signals: vec![used("x"), used(&"y".repeat(513))], ..FeedbackParams::default() };
    assert_eq!(field(long).as_deref(), Some("signals[1].hitId"));
    let empty = FeedbackParams { signals: vec![used("")], ..FeedbackParams::default() };
    assert_eq!(field(empty).as_deref(), Some("signals[0].hitId"));
    let query = FeedbackParams { query: Some("q".repeat(9000)), ..FeedbackParams::default() };
    assert_eq!(field(query).as_deref(), Some("query"));
}

#[test]
fn a_later_threshold_never_rewrites_past_decisions() {
    let dir = Dir::new("rethreshold");
    {
        let store = FeedbackStore::open(&dir.0, FeedbackOptions { threshold: 1, ..FeedbackOptions::default() });
        assert!(store.expect("opens").record(vec![poison("d1")]).is_ok());
    }
    let store = FeedbackStore::open(&dir.0, FeedbackOptions { threshold: 5, ..FeedbackOptions::default() });
    assert_eq!(ids(&store.expect("reopens")), ["d1"], "quarantined at the threshold in force then");
    assert_eq!(FeedbackStore::list(&dir.0).ok().map(|l| l.len()), Some(1));
}

#[test]
fn a_store_in_memory_quarantines_and_releases_without_a_directory() {
    let store = FeedbackStore::open_or_in_memory(None, FeedbackOptions { threshold: 2, ..FeedbackOptions::default() })
        .expect("in memory");
    let poison = Signal { poison_suspected: Some(true), ..signal("a") };
    assert_eq!(store.record(vec![poison.clone(), signal("b")]).expect("recorded"), 2);
    assert!(store.quarantined().is_empty());
    store.record(vec![poison]).expect("recorded");
    assert_eq!(store.quarantined(), [Quarantined { hit_id: "a".into(), signals: 2 }]);
    assert!(store.quarantine_set().contains("a"));
    assert!(store.release("a").expect("released"));
    assert!(store.quarantined().is_empty() && !store.quarantine_set().contains("a"));
}
