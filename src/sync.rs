//! The one place that names the concurrency primitives: `std`,
//! `parking_lot` and `arc-swap` in a normal build, `loom` under `cfg(loom)`,
//! so the loom models in `loom-tests/` check the code that ships.
//!
//! Stand-ins under loom:
//!
//! - [`Published`] is an [`arc_swap::ArcSwap`] normally. Under loom it is a
//!   `loom::sync::Mutex<Arc<T>>`: loom cannot see inside arc-swap's hazard
//!   pointers. The mutex gives the one edge we rely on (a `store`
//!   happens-before every `load` that returns the stored value) and is
//!   strictly stronger (it also orders loads with each other), so the models
//!   cannot catch code that would need those extra edges; the recorder uses
//!   none.
//! - [`Mutex`] is a `parking_lot::Mutex` normally, a `loom::sync::Mutex`
//!   under loom.
//! - [`Arc`] is `std::sync::Arc` in both builds. Reference counts only decide
//!   when memory is freed; what the models check (counts, the `claimed`
//!   flag, publication of the shard list) all goes through the atomics and
//!   locks above, which loom does track.

pub(crate) use std::sync::Arc;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A mutex whose `lock` returns the guard directly.
pub(crate) struct Mutex<T> {
    #[cfg(not(loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(not(loom))]
            inner: parking_lot::Mutex::new(value),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
        }
    }

    #[cfg(not(loom))]
    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.inner.lock()
    }

    #[cfg(loom)]
    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        // A loom mutex is poisoned only if a model thread panicked, which
        // already fails the model.
        self.inner.lock().expect("loom mutex poisoned")
    }
}

/// An atomically replaceable `Arc<T>`: readers take the current value
/// without locking, a writer swaps in a new one.
pub(crate) struct Published<T> {
    #[cfg(not(loom))]
    inner: arc_swap::ArcSwap<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<Arc<T>>,
}

impl<T> Published<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(not(loom))]
            inner: arc_swap::ArcSwap::from_pointee(value),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(Arc::new(value)),
        }
    }

    /// The current value. Acquire: pairs with the release in [`store`]
    /// (arc-swap's load is at least `Acquire`), so everything written before
    /// the value was stored is visible through it.
    ///
    /// [`store`]: Published::store
    pub(crate) fn load(&self) -> Arc<T> {
        #[cfg(not(loom))]
        {
            self.inner.load_full()
        }
        #[cfg(loom)]
        {
            Arc::clone(&self.inner.lock().expect("loom mutex poisoned"))
        }
    }

    /// Replaces the value. Release: pairs with the acquire in [`load`].
    ///
    /// [`load`]: Published::load
    pub(crate) fn store(&self, value: Arc<T>) {
        #[cfg(not(loom))]
        {
            self.inner.store(value);
        }
        #[cfg(loom)]
        {
            *self.inner.lock().expect("loom mutex poisoned") = value;
        }
    }
}

/// Lets another thread run while this one waits for a state change.
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// A small per-thread number, the same on every call from one thread and
/// different for threads that started apart; used to spread the any-thread
/// path over stripes. Under loom it is always 0, so the models put both
/// threads on one stripe: the contended case.
#[inline]
pub(crate) fn thread_hint() -> usize {
    #[cfg(not(loom))]
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
    #[cfg(loom)]
    {
        0
    }
}

/// The machine's parallelism (1 if unknown); 1 under loom.
pub(crate) fn parallelism() -> usize {
    #[cfg(not(loom))]
    {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
    #[cfg(loom)]
    {
        1
    }
}
