//! The UDP side of the sans-IO quiche connections: one non-blocking socket, a
//! per-connection outbox that releases each packet at its `SendInfo.at`, and a
//! wait that wakes on the socket, the next release time or quiche's timer.
//!
//! Packets are built just in time, as quiche's own tokio-quiche does: no earlier
//! than `max_release_into_future` (1/8 RTT, 1-5 ms) before the pacer's next
//! release time, so quiche's idea of when a packet left stays close to the truth.
//! (In quiche 0.30 only BBR paces; reno and cubic stamp every packet "now".)
//!
//! The socket and its wait are the common crate's (`udp`), shared with tquic.

#[path = "outbox.rs"]
mod outbox;
pub use ll_endpoint_common::udp::{Socket, MAX_UDP, RECV_BATCH};
pub use outbox::*;

