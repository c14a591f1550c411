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
    //! The threads are detached (`thread::spawn`, not a scope), and every
    //! wait for them has a timeout: a broken implementation fails a test
    //! instead of hanging it.
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn meets_repeatedly() {
        let barrier = Arc::new(Barrier::new(3));
        let passed = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            let (barrier, passed, tx) = (barrier.clone(), passed.clone(), tx.clone());
            thread::spawn(move || {
                for round in 0..50 {
                    barrier.wait().unwrap();
                    // Relaxed: counted, then checked after the next
                    // meeting, which orders it.
                    passed.fetch_add(1, Ordering::Relaxed);
                    barrier.wait().unwrap();
                    if passed.load(Ordering::Relaxed) != 3 * (round + 1) {
                        tx.send(Err(round)).unwrap();
                        return;
                    }
                    barrier.wait().unwrap();
                }
                tx.send(Ok(())).unwrap();
            });
        }
        for _ in 0..3 {
            assert_eq!(rx.recv_timeout(LONG).expect("hung"), Ok(()));
        }
        assert_eq!(passed.load(Ordering::Relaxed), 150);
    }

    #[test]
    fn nobody_leaves_before_everyone_arrives() {
        let barrier = Arc::new(Barrier::new(2));
        let (tx, rx) = mpsc::channel();
        let other = barrier.clone();
        thread::spawn(move || {
            tx.send(other.wait()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        let (tx2, rx2) = mpsc::channel();
        thread::spawn(move || tx2.send(barrier.wait()).unwrap());
        assert_eq!(rx.recv_timeout(LONG).expect("hung"), Ok(()));
        assert_eq!(rx2.recv_timeout(LONG).expect("hung"), Ok(()));
    }

    /// A thread that panics instead of arriving releases the waiters with
    /// `Broken` (with `std::sync::Barrier` they would wait forever), and
    /// runs the extra action.
    #[test]
    fn a_panicking_thread_breaks_it() {
        let barrier = Arc::new(Barrier::new(3));
        let flagged = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            let (barrier, tx) = (barrier.clone(), tx.clone());
            thread::spawn(move || {
                barrier.wait().unwrap();
                tx.send(barrier.wait()).unwrap();
            });
        }
        let bad = {
            let (barrier, flagged) = (barrier.clone(), flagged.clone());
            thread::spawn(move || {
                let _guard = BreakOnPanic::new(&barrier, || {
                    // Relaxed: read after the join.
                    flagged.store(true, Ordering::Relaxed)
                });
                barrier.wait().unwrap();
                panic!("a bug in a policy");
            })
        };
        for _ in 0..2 {
            assert_eq!(rx.recv_timeout(LONG).expect("hung"), Err(Broken));
        }
        let panicked = bad.join().unwrap_err();
        assert_eq!(panic_message(&*panicked), "a bug in a policy");
        assert!(flagged.load(Ordering::Relaxed));
        assert_eq!(barrier.wait(), Err(Broken));
    }

    #[test]
    fn a_barrier_of_zero_or_one_never_waits() {
        for n in [0, 1] {
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                let barrier = Barrier::new(n);
                tx.send((barrier.wait(), barrier.wait())).unwrap();
            });
            assert_eq!(rx.recv_timeout(LONG).expect("hung"), (Ok(()), Ok(())));
        }
    }

    #[test]
    fn a_guard_without_panic_does_nothing() {
        let barrier = Barrier::new(2);
        let called = AtomicBool::new(false);
        // Relaxed: single thread.
        drop(BreakOnPanic::new(&barrier, || {
            called.store(true, Ordering::Relaxed)
        }));
        assert!(!called.into_inner());
        assert!(!barrier.lock().broken);
    }

    #[test]
    fn panic_messages_of_both_payload_kinds() {
        let text = thread::spawn(|| panic!("{}", String::from("owned")))
            .join()
            .unwrap_err();
        assert_eq!(panic_message(&*text), "owned");
        let other = thread::spawn(|| std::panic::panic_any(7))
            .join()
            .unwrap_err();
        assert_eq!(panic_message(&*other), "(a panic without a message)");
    }
}
