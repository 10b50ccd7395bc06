//! The UDP side: tquic's `PacketSendHandler` writing to our one non-blocking
//! socket, and the loop that feeds tquic what arrives and fires its timers.
//!
//! tquic paces with its own timer (`Endpoint::timeout` includes the pacer's next
//! release), so packets handed to `on_packets_send` go out at once.

use std::io;
use std::rc::Rc;
use std::time::Instant;

use ll_endpoint_common::udp::{Socket, MAX_UDP, RECV_BATCH};
use ll_endpoint_common::Failure;
use tquic::{Endpoint, PacketInfo, PacketSendHandler};

/// Writes tquic's packets to the socket; a full socket buffer stops the batch
/// (tquic offers the rest again on its next call).
pub struct Sender {
    pub socket: Rc<Socket>,
}

impl PacketSendHandler for Sender {
    fn on_packets_send(&self, pkts: &[(Vec<u8>, PacketInfo)]) -> tquic::Result<usize> {
        let mut sent = 0;
        for (pkt, info) in pkts {
            match self.socket.socket.send_to(pkt, info.dst) {
                Ok(_) => sent += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(tquic::Error::IoError(e.to_string())),
            }
        }
        Ok(sent)
    }
}

/// One turn of the loop: every datagram waiting (up to a batch), tquic's expired
/// timers, then every connection's events and sends.
pub fn turn(endpoint: &mut Endpoint, socket: &Socket, buf: &mut [u8]) -> Result<(), Failure> {
    for _ in 0..RECV_BATCH {
        let Some((n, from)) = socket.recv(buf)? else {
            break;
        };
        let info = PacketInfo {
            src: from,
            dst: socket.local,
            time: Instant::now(),
        };
        if let Err(e) = endpoint.recv(&mut buf[..n], &info) {
            eprintln!("recv: {e:?}");
        }
    }
    endpoint.on_timeout(Instant::now());
    endpoint
        .process_connections()
        .map_err(|e| Failure::Fatal(format!("tquic: {e:?}")))
}

/// Sleeps until a datagram arrives, tquic's next timer, or `also` (the
/// application's own deadline), whichever is first.
pub fn wait(endpoint: &Endpoint, socket: &Socket, also: Option<Instant>) -> Result<(), Failure> {
    let now = Instant::now();
    let tquic_at = endpoint.timeout().map(|d| now + d);
    let wake = match (tquic_at, also) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    socket.wait(false, wake)?;
    Ok(())
}

pub fn buffer() -> Vec<u8> {
    vec![0u8; MAX_UDP]
}
