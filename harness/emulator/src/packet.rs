//! Just enough IP parsing to classify a packet (protocol, ports, ECN) and to edit it
//! (set CE, flip a payload bit). Any byte string is accepted: a packet too short or
//! not IP yields `None`, never a panic.

use std::fmt::Write as _;

pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// What the link needs to know about a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    pub version: u8,
    /// IP protocol number (IPv6: the first next-header; extension headers are not walked).
    pub proto: u8,
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
    /// Ports for TCP and UDP, 0 otherwise.
    pub sport: u16,
    pub dport: u16,
    /// ECN codepoint (0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: u8,
    /// Offset of the transport payload (after the TCP/UDP header), if known.
    pub payload_offset: Option<usize>,
}

impl PacketInfo {
    pub fn proto_name(&self) -> &'static str {
        match self.proto {
            PROTO_TCP => "tcp",
            PROTO_UDP => "udp",
            1 => "icmp",
            58 => "icmpv6",
            _ => "other",
        }
    }

    /// The flow's 5-tuple as text, e.g. `udp 198.18.0.1:40000>198.19.0.1:443`.
    pub fn flow_key(&self) -> String {
        let mut s = String::with_capacity(48);
        let _ = write!(s, "{} {}:{}>{}:{}", self.proto_name(), self.src, self.sport, self.dst, self.dport);
        s
    }
}

/// Parses an IPv4 or IPv6 packet; `None` if it is neither or is truncated.
pub fn parse(b: &[u8]) -> Option<PacketInfo> {
    let version = *b.first()? >> 4;
    let (proto, src, dst, ecn, l4) = match version {
        4 => {
            if b.len() < 20 {
                return None;
            }
            let ihl = usize::from(b[0] & 0x0f) * 4;
            if ihl < 20 || b.len() < ihl {
                return None;
            }
            let src = std::net::Ipv4Addr::new(b[12], b[13], b[14], b[15]);
            let dst = std::net::Ipv4Addr::new(b[16], b[17], b[18], b[19]);
            // Only the first fragment carries the transport header.
            let frag_off = u16::from_be_bytes([b[6], b[7]]) & 0x1fff;
            let l4 = if frag_off == 0 { Some(ihl) } else { None };
            (b[9], src.into(), dst.into(), b[1] & 3, l4)
        }
        6 => {
            if b.len() < 40 {
                return None;
            }
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&b[8..24]);
            d.copy_from_slice(&b[24..40]);
            let tc = ((b[0] & 0x0f) << 4) | (b[1] >> 4);
            (b[6], std::net::Ipv6Addr::from(s).into(), std::net::Ipv6Addr::from(d).into(), tc & 3, Some(40))
        }
        _ => return None,
    };
    let (mut sport, mut dport, mut payload_offset) = (0, 0, None);
    if let Some(l4) = l4 {
        let hdr = match proto {
            PROTO_UDP => Some(8),
            PROTO_TCP if b.len() >= l4 + 13 => Some(usize::from(b[l4 + 12] >> 4) * 4),
            _ => None,
        };
        if let Some(hdr) = hdr {
            if b.len() >= l4 + 4 {
                sport = u16::from_be_bytes([b[l4], b[l4 + 1]]);
                dport = u16::from_be_bytes([b[l4 + 2], b[l4 + 3]]);
            }
            if hdr >= 8 && b.len() > l4 + hdr {
                payload_offset = Some(l4 + hdr);
            }
        }
    }
    Some(PacketInfo { version, proto, src, dst, sport, dport, ecn, payload_offset })
}

/// Sets the ECN field to CE if the packet is ECN-capable; fixes the IPv4 header
/// checksum incrementally (RFC 1624). Returns whether the packet was marked.
pub fn mark_ce(b: &mut [u8]) -> bool {
    let Some(info) = parse(b) else { return false };
    if info.ecn == 0 || info.ecn == 3 {
        return false;
    }
    match info.version {
        4 => {
            let old = u16::from_be_bytes([b[0], b[1]]);
            b[1] |= 3;
            let new = u16::from_be_bytes([b[0], b[1]]);
            let sum = u16::from_be_bytes([b[10], b[11]]);
            let fixed = checksum_adjust(sum, old, new);
            b[10..12].copy_from_slice(&fixed.to_be_bytes());
        }
        _ => b[1] |= 0x30,
    }
    true
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
fn checksum_adjust(sum: u16, old: u16, new: u16) -> u16 {
    let mut acc = u32::from(!sum) + u32::from(!old) + u32::from(new);
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Full IPv4 header checksum (for tests and verification).
pub fn ipv4_header_checksum(hdr: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for (i, pair) in hdr.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        let w = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        acc += u32::from(w);
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Flips bit `bit` (counted from the start of the transport payload, modulo its
/// length) so the transport checksum fails at the receiver. Returns the byte offset
/// flipped, or `None` if the packet has no payload to corrupt.
pub fn flip_payload_bit(b: &mut [u8], bit: u64) -> Option<usize> {
    let off = parse(b)?.payload_offset?;
    let len = (b.len() - off) as u64;
    if len == 0 {
        return None;
    }
    let bit = bit % (len * 8);
    let at = off + (bit / 8) as usize;
    b[at] ^= 1 << (bit % 8);
    Some(at)
}

/// An IPv4/UDP datagram around `payload` as the kernel would hand it to a TUN
/// device: TTL 64, DF set, valid checksums, `ecn` in the low TOS bits. The
/// virtual-time hosts (the Python bindings and quinn-virtual) have no kernel to
/// frame their datagrams. `payload` must fit one IPv4 packet.
pub fn udp4(src: std::net::SocketAddrV4, dst: std::net::SocketAddrV4, ecn: u8, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    assert!(udp_len + 20 <= 65535, "payload of {} bytes does not fit one IPv4 packet", payload.len());
    let mut p = vec![0u8; 20 + udp_len];
    p[0] = 0x45;
    p[1] = ecn & 3;
    p[2..4].copy_from_slice(&((udp_len + 20) as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.ip().octets());
    p[16..20].copy_from_slice(&dst.ip().octets());
    p[20..22].copy_from_slice(&src.port().to_be_bytes());
    p[22..24].copy_from_slice(&dst.port().to_be_bytes());
    p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
    p[28..].copy_from_slice(payload);
    crate::offload::set_checksums(&mut p);
    p
}

#[cfg(test)]
mod udp4_tests {
    use super::*;
    use crate::offload::{fold, sum};

    #[test]
    fn udp4_checksums_verify_to_zero() {
        let (a, b) = ("198.18.0.1:40000".parse().unwrap(), "198.19.0.1:4433".parse().unwrap());
        let p = udp4(a, b, 2, b"hello, link");
        assert_eq!((p[1], p[8], p[9], p.len()), (2, 64, 17, 28 + 11));
        assert_eq!(!fold(sum(&p[..20], 0)), 0);
        let pseudo = [198, 18, 0, 1, 198, 19, 0, 1, 0, 17, 0, 19];
        assert_eq!(!fold(sum(&p[20..], sum(&pseudo, 0))), 0);
        assert_eq!(ipv4_header_checksum(&p[..20]), u16::from_be_bytes([p[10], p[11]]));
    }
}
