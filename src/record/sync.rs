//! The one place that names the concurrency primitives: `std` and
//! `parking_lot` in a normal build, `loom` under `cfg(specdec_loom)`, so the loom
//! models in `loom-tests/` check the code that ships.
//!
//! Stand-ins under loom:
//!
//! - [`SetOnce`] is a `std::sync::OnceLock` normally. Loom cannot see
//!   inside `OnceLock`, so under loom the value sits in a `OnceLock` and a
//!   loom `AtomicBool` says whether it is published: set with Release after
//!   the value is stored, read with Acquire before the value is returned.
//!   That is exactly the edge `OnceLock` promises (its initialisation
//!   happens-before every `get` that returns the value) and nothing more,
//!   so the models would catch code that needed more. The stand-in does not
//!   model two racing `set`s; the recorder sets cells under its registry
//!   mutex only.
//! - [`Mutex`] is a `parking_lot::Mutex` normally, a `loom::sync::Mutex`
//!   under loom.
//! - [`Arc`] is `std::sync::Arc` in both builds. Reference counts only decide
//!   when memory is freed (and shards are never freed while the recorder
//!   lives); what the models check (counts, the free list, `live`, the
//!   publication of shards) all goes through the atomics and locks above,
//!   which loom does track.

pub(crate) use std::sync::Arc;

#[cfg(specdec_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(specdec_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A mutex whose `lock` returns the guard directly.
pub(crate) struct Mutex<T> {
    #[cfg(not(specdec_loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(specdec_loom)]
    inner: loom::sync::Mutex<T>,
}

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(not(specdec_loom))]
            inner: parking_lot::Mutex::new(value),
            #[cfg(specdec_loom)]
            inner: loom::sync::Mutex::new(value),
        }
    }

    #[cfg(not(specdec_loom))]
    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.inner.lock()
    }

    #[cfg(specdec_loom)]
    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        // A loom mutex is poisoned only if a model thread panicked, which
        // already fails the model.
        self.inner.lock().expect("loom mutex poisoned")
    }
}

/// A cell set at most once, then read without a lock: a
/// [`std::sync::OnceLock`] normally. `set` is Release and a `get` that
/// returns the value is Acquire, so whatever was written before the value
/// was set is visible through it.
pub(crate) struct SetOnce<T> {
    #[cfg(not(specdec_loom))]
    inner: std::sync::OnceLock<T>,
    /// Under loom: whether the value is published, the flag loom tracks.
    #[cfg(specdec_loom)]
    published: AtomicBool,
    /// Under loom: the storage, written before `published` is set.
    #[cfg(specdec_loom)]
    value: std::sync::OnceLock<T>,
}

impl<T> SetOnce<T> {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(specdec_loom))]
            inner: std::sync::OnceLock::new(),
            #[cfg(specdec_loom)]
            published: AtomicBool::new(false),
            #[cfg(specdec_loom)]
            value: std::sync::OnceLock::new(),
        }
    }

    /// The value, if set (Acquire).
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        #[cfg(not(specdec_loom))]
        {
            self.inner.get()
        }
        #[cfg(specdec_loom)]
        {
            // Acquire: pairs with the Release store in `set`/`get_or_init`.
            if self.published.load(Ordering::Acquire) {
                self.value.get()
            } else {
                None
            }
        }
    }

    /// Sets the value unless already set (Release). Under loom, callers
    /// must not race two `set`s of one cell (the recorder sets cells under
    /// its registry mutex only).
    pub(crate) fn set(&self, value: T) -> Result<(), T> {
        #[cfg(not(specdec_loom))]
        {
            self.inner.set(value)
        }
        #[cfg(specdec_loom)]
        {
            self.value.set(value)?;
            // Release: pairs with the Acquire load in `get`.
            self.published.store(true, Ordering::Release);
            Ok(())
        }
    }

    /// The value, set by `init` first if there is none yet. Same caveat as
    /// [`set`](Self::set) under loom.
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        #[cfg(not(specdec_loom))]
        {
            self.inner.get_or_init(init)
        }
        #[cfg(specdec_loom)]
        {
            if let Some(value) = self.get() {
                return value;
            }
            let value = self.value.get_or_init(init);
            // Release: pairs with the Acquire load in `get`.
            self.published.store(true, Ordering::Release);
            value
        }
    }
}

/// Lets another thread run while this one waits for a state change.
pub(crate) fn yield_now() {
    #[cfg(not(specdec_loom))]
    std::thread::yield_now();
    #[cfg(specdec_loom)]
    loom::thread::yield_now();
}

/// A small per-thread number, the same on every call from one thread and
/// different for threads that started apart; used to spread the any-thread
/// path over stripes. Under loom it is always 0, so the models put both
/// threads on one stripe: the contended case.
#[inline]
pub(crate) fn thread_hint() -> usize {
    #[cfg(not(specdec_loom))]
    {
        use std::cell::Cell;
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        thread_local! {
            static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
        }
        HINT.with(|h| {
            let v = h.get();
            if v != usize::MAX {
                return v;
            }
            // Relaxed: only distinctness matters, not ordering with anything.
            let v = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & (usize::MAX >> 1);
            h.set(v);
            v
        })
    }
    #[cfg(specdec_loom)]
    {
        0
    }
}

/// The machine's parallelism (1 if unknown); 1 under loom.
pub(crate) fn parallelism() -> usize {
    #[cfg(not(specdec_loom))]
    {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
    #[cfg(specdec_loom)]
    {
        1
    }
}

#[cfg(all(test, not(specdec_loom)))]
mod tests {
    use super::thread_hint;

    /// What the stripes rely on for staying uncontended: a thread keeps its
    /// hint, and threads started one after the other get consecutive hints,
    /// so they land on different stripes.
    #[test]
    fn thread_hints_are_stable_and_consecutive_threads_differ() {
        let hints: Vec<usize> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    let first = thread_hint();
                    assert_eq!(thread_hint(), first, "a thread changed its hint");
                    first
                })
                .join()
                .unwrap()
            })
            .collect();
        assert!(hints.iter().all(|&h| h <= usize::MAX >> 1), "{hints:?}");
        assert!(hints.windows(2).all(|w| w[0] < w[1]), "{hints:?}");
        // Other tests may take hints in between, so four different stripes
        // are certain only when the four hints came out consecutive.
        if hints.windows(2).all(|w| w[1] == w[0] + 1) {
            let mut stripes: Vec<usize> = hints.iter().map(|h| h & 3).collect();
            stripes.sort_unstable();
            stripes.dedup();
            assert_eq!(stripes.len(), 4, "{hints:?}");
        }
    }
}
