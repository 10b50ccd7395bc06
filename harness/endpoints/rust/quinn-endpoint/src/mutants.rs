//! Deliberately broken controllers for the mutant zoo (issue 7): quinn's stock
//! NewReno with one bug planted, so the suite's kills are not aioquic-only.
//!
//! Each bug is a wrapper that lies to the stock controller about one input; the
//! stock code then does the wrong thing for the right reasons. Selected by name
//! (`mutant-…` in `cc::REGISTRY`), listed under "mutants" in caps.json so the
//! harness never offers them as conformant choices.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics, NewRenoConfig};
use quinn_proto::RttEstimator;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// Every congestion event is passed on as if its lost packet had been sent
    /// now, so packets sent before recovery began cut the window again
    /// (RFC 9002 §7.3.2: one reduction per recovery period).
    ReduceEveryLoss,
    /// Persistent congestion is reported as an ordinary loss: no collapse to
    /// kMinimumWindow (RFC 9002 §7.6.2; findings F2 quic-go, F3 quiche).
    IgnorePersistentCongestion,
    /// Acknowledgements always claim the sender was not application-limited, so
    /// the window grows while it is (RFC 9002 §7.8).
    GrowWhileAppLimited,
}

pub struct MutantFactory {
    pub inner: Arc<NewRenoConfig>,
    pub bug: Bug,
}

impl ControllerFactory for MutantFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Mutant {
            inner: self.inner.clone().build(now, current_mtu),
            bug: self.bug,
        })
    }
}

struct Mutant {
    inner: Box<dyn Controller>,
    bug: Bug,
}

impl Controller for Mutant {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.inner.on_sent(now, bytes, last_packet_number)
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, rtt: &RttEstimator) {
        let app_limited = app_limited && self.bug != Bug::GrowWhileAppLimited;
        self.inner.on_ack(now, sent, bytes, app_limited, rtt)
    }

    fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool, largest: Option<u64>) {
        let app_limited = app_limited && self.bug != Bug::GrowWhileAppLimited;
        self.inner.on_end_acks(now, in_flight, app_limited, largest)
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, is_persistent_congestion: bool, lost_bytes: u64) {
        let sent = if self.bug == Bug::ReduceEveryLoss { now } else { sent };
        let persistent = is_persistent_congestion && self.bug != Bug::IgnorePersistentCongestion;
        self.inner.on_congestion_event(now, sent, persistent, lost_bytes)
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.on_mtu_update(new_mtu)
    }

    fn window(&self) -> u64 {
        self.inner.window()
    }

    fn metrics(&self) -> ControllerMetrics {
        self.inner.metrics()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Mutant { inner: self.inner.clone_box(), bug: self.bug })
    }

    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
