//! The UDP side of the sans-IO quiche connections: one non-blocking socket, a
//! per-connection outbox that releases each packet at its `SendInfo.at`, and a
//! wait that wakes on the socket, the next release time or quiche's timer.
//!
//! Packets are built just in time, as quiche's own tokio-quiche does: no earlier
//! than `max_release_into_future` (1/8 RTT, 1-5 ms) before the pacer's next
//! release time, so quiche's idea of when a packet left stays close to the truth.
//! (In quiche 0.30 only BBR paces; reno and cubic stamp every packet "now".)
//!
//! Waits use ppoll with a nanosecond timeout (and the timer slack lowered in
//! main), because a millisecond-granular wait would cap a paced sender's rate by
//! itself — the defect the suite looks for in stacks must not be ours.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use ll_endpoint_common::Failure;

/// Largest UDP payload we ever read.
pub const MAX_UDP: usize = 65535;
/// Datagrams read per wake before the loop lets connections send again, so
/// ACKs are not held back by a long receive burst.
pub const RECV_BATCH: usize = 64;

pub struct Socket {
    pub socket: UdpSocket,
    pub local: SocketAddr,
}

impl Socket {
    pub fn bind(addr: SocketAddr) -> Result<Socket, Failure> {
        let socket =
            UdpSocket::bind(addr).map_err(|e| Failure::Fatal(format!("bind {addr}: {e}")))?;
        socket.set_nonblocking(true)?;
        ll_endpoint_common::enlarge_socket_buffers(&socket);
        let local = socket.local_addr()?;
        Ok(Socket { socket, local })
    }

    /// Next datagram, or None when the socket has nothing more now.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        match self.socket.recv_from(buf) {
            Ok(got) => Ok(Some(got)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sleeps until the socket is readable (or writable, if `want_write`) or
    /// `deadline` passes; None waits for the socket alone.
    pub fn wait(&self, want_write: bool, deadline: Option<Instant>) -> io::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.socket.as_raw_fd(),
            events: libc::POLLIN | if want_write { libc::POLLOUT } else { 0 },
            revents: 0,
        };
        let timeout = deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            libc::timespec {
                tv_sec: left.as_secs() as libc::time_t,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            }
        });
        let ts_ptr = timeout
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: one pollfd and an optional timespec, both owned by this frame.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, std::ptr::null()) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        Ok(())
    }
}

struct Datagram {
    to: SocketAddr,
    bytes: Vec<u8>,
}

/// Packets quiche has built but whose send time has not come, in release order
/// (time, then build order), so an unpaced ACK never waits behind paced data.
#[derive(Default)]
pub struct Outbox {
    queue: BTreeMap<(Instant, u64), Datagram>,
    built: u64,
    /// The socket refused a write; wait for POLLOUT before the next try.
    pub blocked: bool,
    /// The pacer's next release is too far ahead to build now: build again then.
    build_at: Option<Instant>,
}

impl Outbox {
    /// Moves what quiche wants to send, up to the pacing horizon, into the outbox.
    pub fn pull(
        &mut self,
        conn: &mut quiche::Connection,
        scratch: &mut [u8],
    ) -> Result<(), quiche::Error> {
        self.build_at = None;
        loop {
            let now = Instant::now();
            let ahead = conn.max_release_into_future();
            if let Some(release) = conn.get_next_release_time().and_then(|d| d.time(now)) {
                if release > now + ahead {
                    self.build_at = Some(release - ahead);
                    return Ok(());
                }
            }
            match conn.send(scratch) {
                Ok((n, info)) => {
                    self.queue.insert(
                        (info.at, self.built),
                        Datagram {
                            to: info.to,
                            bytes: scratch[..n].to_vec(),
                        },
                    );
                    self.built += 1;
                }
                Err(quiche::Error::Done) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes every packet whose release time has come.
    pub fn transmit(&mut self, socket: &Socket, now: Instant) -> io::Result<()> {
        self.blocked = false;
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let d = entry.get();
            match socket.socket.send_to(&d.bytes, d.to) {
                Ok(_) => {
                    entry.remove();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// When the outbox needs the loop again: the next held packet's release or
    /// the next build (None if neither waits, or the socket is full).
    pub fn next_release(&self) -> Option<Instant> {
        if self.blocked {
            return None;
        }
        earliest(
            self.queue.first_key_value().map(|((at, _), _)| *at),
            self.build_at,
        )
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// The earlier of two optional instants.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Calls quiche's timer if it has expired.
pub fn fire_timer(conn: &mut quiche::Connection, now: Instant) {
    if conn.timeout_instant().is_some_and(|t| t <= now) {
        conn.on_timeout();
    }
}

/// Next wake-up for a connection: its timer or its outbox.
pub fn deadline(conn: &quiche::Connection, outbox: &Outbox) -> Option<Instant> {
    earliest(conn.timeout_instant(), outbox.next_release())
}
