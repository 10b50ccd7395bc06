//! quiche-endpoint's `io` module on a virtual socket: the same Socket API
//! (bind, recv, wait, `socket.send_to`) over world.rs, and the endpoint's own
//! outbox (outbox.rs, included), so client.rs and server.rs run unchanged.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use ll_endpoint_common::Failure;

#[path = "../../quiche-endpoint/src/outbox.rs"]
mod outbox;
pub use outbox::*;

use crate::world;

/// As quiche-endpoint's io.rs.
pub const MAX_UDP: usize = 65535;
pub const RECV_BATCH: usize = 64;

pub struct Socket {
    pub socket: VirtualUdp,
    pub local: SocketAddr,
}

/// A host's end of the virtual link.
pub struct VirtualUdp {
    host: usize,
}

impl VirtualUdp {
    pub fn send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        world::send(self.host, buf, to)?;
        Ok(buf.len())
    }
}

impl Socket {
    /// The calling host's address (the plan's, whatever `_addr` asks for: a
    /// client binds 0.0.0.0:0 as in real time).
    pub fn bind(_addr: SocketAddr) -> Result<Socket, Failure> {
        let host = world::current_host();
        Ok(Socket {
            socket: VirtualUdp { host },
            local: SocketAddr::V4(world::local_addr(host)),
        })
    }

    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        Ok(world::recv(self.socket.host).map(|(bytes, from)| {
            let n = bytes.len().min(buf.len());
            buf[..n].copy_from_slice(&bytes[..n]);
            (n, SocketAddr::V4(from))
        }))
    }

    /// Hands the turn back to the loop until a datagram arrives or `deadline`
    /// (virtual) comes; the virtual socket is never full, so `_want_write` is moot.
    pub fn wait(&self, _want_write: bool, deadline: Option<Instant>) -> io::Result<()> {
        world::wait(self.socket.host, deadline.map(world::instant_ns));
        Ok(())
    }
}
