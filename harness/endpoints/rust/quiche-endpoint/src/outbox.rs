//! The outbox half of io.rs: packets held until quiche's `SendInfo.at`, built just
//! in time. Apart from the socket so quiche-virtual can run it on a virtual one.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use super::Socket;

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
