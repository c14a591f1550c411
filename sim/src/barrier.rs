//! A barrier that a panicking thread breaks, so the others stop waiting.
//!
//! A virtual-time run meets its engine threads and its coordinator at a
//! barrier twice per tick. With `std::sync::Barrier`, a thread that panics
//! between two meetings never arrives, and every other thread waits for it
//! forever: the run hangs instead of failing. Here each thread holds a
//! [`BreakOnPanic`] guard; when the thread unwinds, the guard breaks the
//! barrier, every waiter (now and later) gets [`Broken`], and the run ends
//! with the panic reported by the join.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

/// A barrier for `n` threads that can be broken.
#[derive(Debug)]
pub struct Barrier {
    n: usize,
    state: Mutex<State>,
    woken: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Threads waiting in the current generation.
    arrived: usize,
    /// Meetings completed so far: a waiter leaves once it changes.
    generation: u64,
    broken: bool,
}

/// The barrier was broken: a thread of the run panicked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken;

impl Barrier {
    /// A barrier that lets threads go once `n` of them wait (`n` of 0
    /// behaves as 1: every wait returns at once).
    pub fn new(n: usize) -> Barrier {
        Barrier {
            n: n.max(1),
            state: Mutex::new(State::default()),
            woken: Condvar::new(),
        }
    }

    /// Waits until `n` threads wait, or the barrier is broken.
    pub fn wait(&self) -> Result<(), Broken> {
        let mut state = self.lock();
        if state.broken {
            return Err(Broken);
        }
        state.arrived += 1;
        if state.arrived == self.n {
            state.arrived = 0;
            state.generation += 1;
            self.woken.notify_all();
            return Ok(());
        }
        let generation = state.generation;
        while state.generation == generation && !state.broken {
            state = self
                .woken
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.generation == generation {
            Err(Broken)
        } else {
            Ok(())
        }
    }

    /// Breaks the barrier: every wait, now and later, returns [`Broken`]
    /// (but a meeting already complete).
    pub fn break_it(&self) {
        self.lock().broken = true;
        self.woken.notify_all();
    }

    /// The state, whether or not a thread panicked holding the lock (none
    /// can: no code that may panic runs under it, but a poisoned lock must
    /// not turn into a second panic while unwinding).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Breaks its barrier when dropped by a panicking thread (and calls
/// `also`, e.g. to set the flag that real-time threads poll).
pub struct BreakOnPanic<'a, F: Fn()> {
    barrier: &'a Barrier,
    also: F,
}

impl<'a, F: Fn()> BreakOnPanic<'a, F> {
    /// A guard for the current thread.
    pub fn new(barrier: &'a Barrier, also: F) -> BreakOnPanic<'a, F> {
        BreakOnPanic { barrier, also }
    }
}

impl<F: Fn()> Drop for BreakOnPanic<'_, F> {
    fn drop(&mut self) {
        if thread::panicking() {
            (self.also)();
            self.barrier.break_it();
        }
    }
}

/// The message of a panic payload, as the default hook prints it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic without a message)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn meets_repeatedly() {
        let barrier = Barrier::new(3);
        let passed = AtomicUsize::new(0);
        thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for round in 0..50 {
                        barrier.wait().unwrap();
                        // Relaxed: counted, then checked after the next
                        // meeting, which orders it.
                        passed.fetch_add(1, Ordering::Relaxed);
                        barrier.wait().unwrap();
                        assert_eq!(passed.load(Ordering::Relaxed), 3 * (round + 1));
                        barrier.wait().unwrap();
                    }
                });
            }
        });
        assert_eq!(passed.into_inner(), 150);
    }

    #[test]
    fn nobody_leaves_before_everyone_arrives() {
        let barrier = Barrier::new(2);
        let (tx, rx) = mpsc::channel();
        thread::scope(|s| {
            s.spawn(|| {
                barrier.wait().unwrap();
                tx.send(()).unwrap();
            });
            assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
            barrier.wait().unwrap();
            rx.recv_timeout(Duration::from_secs(10)).unwrap();
        });
    }

    /// A thread that panics instead of arriving releases the waiters with
    /// `Broken` (with `std::sync::Barrier` this test never ends), and runs
    /// the extra action.
    #[test]
    fn a_panicking_thread_breaks_it() {
        let barrier = Barrier::new(3);
        let flagged = AtomicBool::new(false);
        let (tx, rx) = mpsc::channel();
        let panicked = thread::scope(|s| {
            for _ in 0..2 {
                let tx = tx.clone();
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait().unwrap();
                    tx.send(barrier.wait()).unwrap();
                });
            }
            let bad = s.spawn(|| {
                let _guard = BreakOnPanic::new(&barrier, || {
                    // Relaxed: read after the join.
                    flagged.store(true, Ordering::Relaxed)
                });
                barrier.wait().unwrap();
                panic!("a bug in a policy");
            });
            let results: Vec<_> = (0..2)
                .map(|_| rx.recv_timeout(Duration::from_secs(10)).expect("hung"))
                .collect();
            assert_eq!(results, [Err(Broken), Err(Broken)]);
            bad.join().unwrap_err()
        });
        assert_eq!(panic_message(&*panicked), "a bug in a policy");
        assert!(flagged.into_inner());
        assert_eq!(barrier.wait(), Err(Broken));
    }

    #[test]
    fn a_guard_without_panic_does_nothing() {
        let barrier = Barrier::new(1);
        let called = AtomicBool::new(false);
        // Relaxed: single thread.
        drop(BreakOnPanic::new(&barrier, || {
            called.store(true, Ordering::Relaxed)
        }));
        assert!(!called.into_inner());
        assert_eq!(barrier.wait(), Ok(()));
    }
}
