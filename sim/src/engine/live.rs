//! Live counters: what each engine thread has done so far, for the
//! interval lines.

use super::*;

/// Running totals one engine thread publishes after every step. Each field
/// has one writer (its engine thread); the coordinator reads them.
pub(super) struct Live {
    pub(super) steps: AtomicU64,
    /// `f64` bits.
    pub(super) budget_sum: AtomicU64,
    pub(super) tokens: AtomicU64,
    pub(super) switches: AtomicU64,
    /// `f64` bits.
    pub(super) cost_units: AtomicU64,
    pub(super) chosen: AtomicUsize,
    /// Virtual time: the engine thread's clock at the latest barrier
    /// (`f64` bits).
    pub(super) clock: AtomicU64,
    /// Replaying each traced request once: this thread has none left.
    pub(super) drained: AtomicBool,
}

impl Live {
    pub(super) fn new(chosen: usize) -> Self {
        Self {
            steps: AtomicU64::new(0),
            budget_sum: AtomicU64::new(0.0f64.to_bits()),
            tokens: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            cost_units: AtomicU64::new(0.0f64.to_bits()),
            chosen: AtomicUsize::new(chosen),
            clock: AtomicU64::new(0.0f64.to_bits()),
            drained: AtomicBool::new(false),
        }
    }

    pub(super) fn publish_drained(&self, drained: bool) {
        // Relaxed: stored before the barrier, read after it.
        self.drained.store(drained, Ordering::Relaxed);
    }

    pub(super) fn drained(&self) -> bool {
        // Relaxed: see `publish_drained`.
        self.drained.load(Ordering::Relaxed)
    }

    pub(super) fn publish_clock(&self, clock: f64) {
        // Relaxed: stored before the barrier, read after it.
        self.clock.store(clock.to_bits(), Ordering::Relaxed);
    }

    pub(super) fn clock(&self) -> f64 {
        // Relaxed: see `publish_clock`.
        f64::from_bits(self.clock.load(Ordering::Relaxed))
    }

    pub(super) fn publish(&self, counts: &Counts, chosen: usize) {
        // Relaxed: figures for a log line. In virtual time the barrier
        // (a mutex inside) orders them before the coordinator's reads; in
        // real time a read may see one field a step ahead of another,
        // which a log line can live with.
        self.steps.store(counts.steps, Ordering::Relaxed);
        self.budget_sum
            .store(counts.budget_sum.to_bits(), Ordering::Relaxed);
        self.tokens.store(counts.tokens, Ordering::Relaxed);
        self.switches.store(counts.switches, Ordering::Relaxed);
        self.cost_units
            .store(counts.cost_units.to_bits(), Ordering::Relaxed);
        self.chosen.store(chosen, Ordering::Relaxed);
    }

    /// The counts an interval line shows (steps, budgets, tokens,
    /// switches, cost).
    pub(super) fn read(&self) -> (Counts, usize) {
        // Relaxed: see `publish`.
        (
            Counts {
                steps: self.steps.load(Ordering::Relaxed),
                budget_sum: f64::from_bits(self.budget_sum.load(Ordering::Relaxed)),
                tokens: self.tokens.load(Ordering::Relaxed),
                switches: self.switches.load(Ordering::Relaxed),
                cost_units: f64::from_bits(self.cost_units.load(Ordering::Relaxed)),
                ..Counts::default()
            },
            self.chosen.load(Ordering::Relaxed),
        )
    }
}
