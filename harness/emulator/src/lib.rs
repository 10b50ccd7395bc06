//! longlook-link: a deterministic impairment link between two network namespaces.
//!
//! The library is the sans-IO core (`core::Link`) with its schedule, stages,
//! records and their writers (`output`, shared with the Python bindings in
//! harness/emulator/python); the binary wraps it in an epoll loop over two TUN devices. See
//! docs/emulator.md for the schedule format and the ground-truth log.

pub mod core;
pub mod lateness;
pub mod offload;
pub mod output;
pub mod packet;
pub mod record;
pub mod schedule;
pub mod stages;

pub use crate::core::{Counters, Link, Transmit};
pub use crate::record::{DropReason, Fate, Record};
pub use crate::schedule::{Dir, Schedule, ScheduleError};
