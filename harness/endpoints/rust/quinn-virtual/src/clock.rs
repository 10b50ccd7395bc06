//! Virtual time as quinn-proto sees it. Its own module because both the loop
//! (which advances it) and the hosts (which hand it to quinn-proto, rustls and
//! the token clock) need it, and neither may depend on the other for it.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Virtual ns ⇄ the Instants quinn-proto takes.
#[derive(Clone)]
pub struct Clock {
    base: Instant,
    /// The loop's current time, for the hosts' token and TLS clocks.
    pub now_ns: Arc<AtomicU64>,
}

impl Clock {
    /// Virtual time 0 at an arbitrary real Instant: quinn-proto only ever
    /// subtracts Instants, so which one never shows in a run's files.
    pub fn start() -> Clock {
        Clock {
            base: Instant::now(),
            now_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn at(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    /// Exact: Instants and Durations are whole ns, and every Instant quinn-proto
    /// hands back is one of ours plus a Duration.
    pub fn ns(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.base);
        d.as_nanos() as u64
    }
}
