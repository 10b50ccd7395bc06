//! Segmentation offload: splitting a TCP super-packet gives valid wire segments, and
//! coalescing them gives the super-packet back.

mod common;
use longlook_link::offload::{fold, split, sum, Coalescer, VnetHdr, F_NEEDS_CSUM, GSO_TCPV4};
use longlook_link::packet::{ipv4_header_checksum, parse};

/// A TCP/IPv4 super-packet with `payload` bytes, seq 1000, PSH set, checksum partial.
fn super_packet(payload: usize) -> Vec<u8> {
    let mut p = common::tcp(5201, 40000, 40 + payload);
    p[24..28].copy_from_slice(&1000u32.to_be_bytes());
    p[33] = 0x18;
    p
}

fn tcp_checksum_ok(p: &[u8]) -> bool {
    let l4 = &p[20..];
    let pseudo = sum(&p[12..20], 6 + l4.len() as u64);
    fold(sum(l4, pseudo)) == 0xffff
}

#[test]
fn split_cuts_a_super_packet_into_valid_segments() {
    let sp = super_packet(3000);
    let h = VnetHdr { flags: F_NEEDS_CSUM, gso_type: GSO_TCPV4, hdr_len: 40, gso_size: 1448, csum_start: 20, csum_offset: 16 };
    let mut out = Vec::new();
    assert_eq!(split(h, &sp, &mut out), 3);
    let sizes: Vec<usize> = out.iter().map(|s| s.len()).collect();
    assert_eq!(sizes, vec![1488, 1488, 144]);
    for (i, s) in out.iter().enumerate() {
        assert_eq!(u16::from_be_bytes([s[2], s[3]]) as usize, s.len());
        assert_eq!(u16::from_be_bytes([s[10], s[11]]), ipv4_header_checksum(&s[..20]));
        assert!(tcp_checksum_ok(s), "segment {i} has a bad TCP checksum");
        let seq = u32::from_be_bytes([s[24], s[25], s[26], s[27]]);
        assert_eq!(seq, 1000 + 1448 * i as u32);
        assert_eq!(s[33] & 0x08 != 0, i == 2, "PSH only on the last segment");
        assert_eq!(parse(s).unwrap().dport, 40000);
    }
}

#[test]
fn split_finishes_a_partial_checksum() {
    let mut p = common::udp(1, 2, 200, 0);
    // Kernel style: the field holds the folded pseudo-header sum.
    let pseudo = fold(sum(&p[12..20], 17 + 180));
    p[26..28].copy_from_slice(&pseudo.to_be_bytes());
    let h = VnetHdr { flags: F_NEEDS_CSUM, csum_start: 20, csum_offset: 6, ..Default::default() };
    let mut out = Vec::new();
    split(h, &p, &mut out);
    let q = &out[0];
    assert_eq!(fold(sum(&q[20..], fold(sum(&q[12..20], 17 + 180)) as u64)), 0xffff);
}

#[test]
fn coalescing_segments_restores_the_super_packet() {
    let sp = super_packet(4000);
    let h = VnetHdr { flags: F_NEEDS_CSUM, gso_type: GSO_TCPV4, hdr_len: 40, gso_size: 1000, csum_start: 20, csum_offset: 16 };
    let mut segs = Vec::new();
    split(h, &sp, &mut segs);
    let mut c = Coalescer::default();
    for s in &segs {
        assert!(c.push(s, true));
    }
    let (vh, merged) = c.flush().unwrap();
    assert_eq!(vh.gso_type, GSO_TCPV4);
    assert_eq!(vh.gso_size, 1000);
    assert_eq!(vh.hdr_len, 40);
    assert_eq!(merged.len(), sp.len());
    assert_eq!(&merged[40..], &sp[40..], "payload in order");
    assert_eq!(merged[33] & 0x08, 0x08, "PSH of the last segment kept");
    assert!(c.flush().is_none());
}

#[test]
fn coalescer_refuses_gaps_other_flows_and_corrupted_packets() {
    let sp = super_packet(3000);
    let h = VnetHdr { flags: F_NEEDS_CSUM, gso_type: GSO_TCPV4, hdr_len: 40, gso_size: 1000, csum_start: 20, csum_offset: 16 };
    let mut segs = Vec::new();
    split(h, &sp, &mut segs);
    let mut c = Coalescer::default();
    assert!(c.push(&segs[0], true));
    assert!(!c.push(&segs[2], true), "a sequence gap must not merge");
    assert!(!c.push(&segs[1], false), "a corrupted segment must keep its own checksum");
    let mut other = segs[1].clone();
    other[20] ^= 1; // another source port
    assert!(!c.push(&other, true));
    assert!(!c.push(&common::udp(1, 2, 100, 0), true));
    let (vh, single) = c.flush().unwrap();
    assert_eq!(vh, VnetHdr::default(), "one segment is written as is");
    assert_eq!(single, &segs[0][..]);
    // A packet that cannot merge (UDP) is written alone.
    assert!(c.push(&common::udp(1, 2, 100, 0), true));
    assert!(!c.push(&common::udp(1, 2, 100, 0), true));
}
