//! IPv4/UDP framing of datagrams, as the kernel would hand them to the link's TUN
//! device (and as `longlook_link.udp4` builds them for the aioquic backend): TTL 64,
//! DF set, valid checksums, the ECN codepoint the stack asked for.

use std::net::{Ipv4Addr, SocketAddrV4};

pub const HEADERS: usize = 28;

/// The link crate's own framing, so both virtual-time backends frame alike.
pub use link_core::packet::udp4;

/// (source, destination, ECN bits, UDP payload) of a datagram built by `udp4`
/// (the link may have changed its ECN bits to CE, nothing else).
pub fn parse(p: &[u8]) -> Option<(SocketAddrV4, SocketAddrV4, u8, &[u8])> {
    if p.len() < HEADERS || p[0] != 0x45 || p[9] != 17 {
        return None;
    }
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
    let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
    let sport = u16::from_be_bytes([p[20], p[21]]);
    let dport = u16::from_be_bytes([p[22], p[23]]);
    Some((
        SocketAddrV4::new(src, sport),
        SocketAddrV4::new(dst, dport),
        p[1] & 3,
        &p[HEADERS..],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips_the_link_crates_framing() {
        let (a, b) = (
            "198.18.0.1:40000".parse().unwrap(),
            "198.19.0.1:4433".parse().unwrap(),
        );
        let p = udp4(a, b, 2, b"hello, link");
        assert_eq!(parse(&p), Some((a, b, 2, &b"hello, link"[..])));
    }
}
