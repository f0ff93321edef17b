//! Running many jobs on a few model sessions: each worker takes a free session (or waits for
//! its own), then takes the next job whenever it is free, so long and short jobs balance out.
//! The caller's thread is one of the workers, so a single job (a query) spawns nothing. One
//! mechanism for every ONNX model here (the embedder's batches, the cross-encoder's pairs).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `job(session, i)` for every `i` in `0..jobs` on at most `sessions.len()` threads and
/// returns the results in job order; the first error ends the run. A poisoned session lock
/// only means another run panicked mid-job: the session itself is intact and is used.
pub fn run_jobs<S, T, E>(
    sessions: &[Mutex<S>],
    jobs: usize,
    job: impl Fn(&mut S, usize) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E>
where
    S: Send,
    T: Send,
    E: Send,
{
    if sessions.is_empty() || jobs == 0 {
        return Ok(Vec::new());
    }
    let next = AtomicUsize::new(0);
    let work = |first: usize| -> Result<Vec<(usize, T)>, E> {
        let mut done = Vec::new();
        // A free session if there is one, else wait for this worker's own.
        let session =
            sessions.iter().find_map(|s| s.try_lock().ok()).map_or_else(|| sessions[first % sessions.len()].lock(), Ok);
        let mut session = session.unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= jobs {
                return Ok(done);
            }
            done.push((i, job(&mut session, i)?));
        }
    };
    let workers = sessions.len().min(jobs);
    let mut parts = std::thread::scope(|s| {
        let work = &work;
        let others: Vec<_> = (1..workers).map(|w| s.spawn(move || work(w))).collect();
        let mut parts = work(0)?;
        for o in others {
            parts.extend(o.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?);
        }
        Ok::<_, E>(parts)
    })?;
    parts.sort_unstable_by_key(|(i, _)| *i);
    Ok(parts.into_iter().map(|(_, t)| t).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_runs_once_and_results_keep_job_order() {
        let sessions: Vec<Mutex<usize>> = (0..3).map(Mutex::new).collect();
        let out = run_jobs(&sessions, 50, |s, i| Ok::<_, ()>((i * 2, *s))).expect("runs");
        assert_eq!(out.iter().map(|(v, _)| *v).collect::<Vec<_>>(), (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert!(out.iter().all(|(_, s)| *s < 3));
    }

    #[test]
    fn the_first_error_ends_the_run() {
        let sessions = vec![Mutex::new(()), Mutex::new(())];
        let out = run_jobs(&sessions, 10, |_, i| if i == 4 { Err(i) } else { Ok(i) });
        assert_eq!(out, Err(4));
        assert_eq!(run_jobs(&sessions, 0, |_, i| Ok::<_, ()>(i)), Ok(vec![]));
    }
}
