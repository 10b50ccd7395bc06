//! One non-blocking UDP socket and a nanosecond-precise wait on it, shared by the
//! endpoints whose stacks are sans-IO (quiche, tquic).
//!
//! Waits use ppoll with a nanosecond timeout (and the timer slack lowered by
//! `exit::tight_timers`), because a millisecond-granular wait would cap a paced
//! sender's rate by itself — the defect the suite looks for in stacks must not be ours.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use crate::Failure;

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
        crate::enlarge_socket_buffers(&socket);
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
