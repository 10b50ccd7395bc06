//! IPv4/UDP framing of datagrams, as the kernel would hand them to the link's TUN
//! device (and as `longlook_link.udp4` builds them for the aioquic backend): TTL 64,
//! DF set, valid checksums, the ECN codepoint the stack asked for.

use std::net::{Ipv4Addr, SocketAddrV4};

pub const HEADERS: usize = 28;

fn checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum = 0u32;
    let mut odd: Option<u8> = None;
    for c in chunks {
        for &b in c.iter() {
            match odd.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u32::from(hi) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

pub fn udp4(src: SocketAddrV4, dst: SocketAddrV4, ecn: u8, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let (s, d) = (src.ip().octets(), dst.ip().octets());
    let mut p = vec![0u8; 20 + udp_len];
    p[0] = 0x45;
    p[1] = ecn & 3;
    p[2..4].copy_from_slice(&((udp_len + 20) as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&s);
    p[16..20].copy_from_slice(&d);
    let c = checksum(&[&p[..20]]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&src.port().to_be_bytes());
    p[22..24].copy_from_slice(&dst.port().to_be_bytes());
    p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    let len = (udp_len as u16).to_be_bytes();
    let pseudo = [
        s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3], 0, 17, len[0], len[1],
    ];
    let c = match checksum(&[&pseudo, &p[20..]]) {
        0 => 0xffff, // 0 would mean "no checksum" in UDP over IPv4
        c => c,
    };
    p[26..28].copy_from_slice(&c.to_be_bytes());
    p
}

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
    fn checksums_verify_to_zero_and_parse_round_trips() {
        let (a, b) = (
            "198.18.0.1:40000".parse().unwrap(),
            "198.19.0.1:4433".parse().unwrap(),
        );
        let p = udp4(a, b, 2, b"hello, link");
        assert_eq!(checksum(&[&p[..20]]), 0);
        let pseudo = [198, 18, 0, 1, 198, 19, 0, 1, 0, 17, 0, 19];
        assert_eq!(checksum(&[&pseudo, &p[20..]]), 0);
        assert_eq!(parse(&p), Some((a, b, 2, &b"hello, link"[..])));
    }
}
