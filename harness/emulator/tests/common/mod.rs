//! Helpers shared by the core tests: packet builders and a driver that runs a link
//! to completion in virtual time.

#![allow(dead_code)]

use longlook_link::packet::ipv4_header_checksum;
use longlook_link::{Dir, Link, Record, Schedule, Transmit};

/// An IPv4 UDP packet of `size` bytes total with the given ports and ECN bits.
pub fn udp(sport: u16, dport: u16, size: usize, ecn: u8) -> Vec<u8> {
    ip4(17, sport, dport, size, ecn)
}

/// An IPv4 TCP packet (20-byte header, ACK set) of `size` bytes total.
pub fn tcp(sport: u16, dport: u16, size: usize) -> Vec<u8> {
    ip4(6, sport, dport, size, 0)
}

fn ip4(proto: u8, sport: u16, dport: u16, size: usize, ecn: u8) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    assert!(size >= 20 + l4);
    let mut b = vec![0u8; size];
    b[0] = 0x45;
    b[1] = ecn & 3;
    b[2..4].copy_from_slice(&(size as u16).to_be_bytes());
    b[8] = 64;
    b[9] = proto;
    b[12..16].copy_from_slice(&[198, 18, 0, 1]);
    b[16..20].copy_from_slice(&[198, 19, 0, 1]);
    let c = ipv4_header_checksum(&b[..20]);
    b[10..12].copy_from_slice(&c.to_be_bytes());
    b[20..22].copy_from_slice(&sport.to_be_bytes());
    b[22..24].copy_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        b[32] = 5 << 4;
        b[33] = 0x10;
    } else {
        b[24..26].copy_from_slice(&((size - 20) as u16).to_be_bytes());
    }
    for (i, x) in b[20 + l4..].iter_mut().enumerate() {
        *x = i as u8;
    }
    b
}

pub fn schedule(json: &str) -> Schedule {
    Schedule::parse(json, "test.json").unwrap_or_else(|e| panic!("{e}"))
}

/// Feeds `arrivals` (time ns, dir, bytes) and steps the link to completion, always
/// jumping to the next event. Returns the transmits (with the time they were taken)
/// and all records.
pub fn drive(link: &mut Link, arrivals: &[(u64, Dir, Vec<u8>)]) -> (Vec<(u64, Transmit)>, Vec<Record>) {
    let mut out = Vec::new();
    let mut recs = Vec::new();
    let mut i = 0;
    let mut now = 0;
    loop {
        while let Some(t) = link.poll_transmit(now) {
            out.push((now, t));
        }
        while let Some(r) = link.poll_record() {
            recs.push(r);
        }
        let next_arrival = arrivals.get(i).map(|a| a.0);
        let next = match (next_arrival, link.next_deadline()) {
            (None, None) => break,
            (Some(a), Some(d)) => a.min(d.max(now + 1)),
            (Some(a), None) => a,
            (None, Some(d)) => d.max(now + 1),
        };
        now = now.max(next);
        while i < arrivals.len() && arrivals[i].0 <= now {
            link.on_packet(arrivals[i].0, arrivals[i].1, &arrivals[i].2);
            i += 1;
        }
    }
    while let Some(r) = link.poll_record() {
        recs.push(r);
    }
    (out, recs)
}

/// `n` packets in `dir`, `gap` ns apart starting at 0, built by `mk(i)`.
pub fn train(n: usize, gap: u64, dir: Dir, mk: impl Fn(usize) -> Vec<u8>) -> Vec<(u64, Dir, Vec<u8>)> {
    (0..n).map(|i| (i as u64 * gap, dir, mk(i))).collect()
}

/// A UDP packet whose payload starts with its sequence number `i`.
pub fn numbered(i: usize) -> Vec<u8> {
    let mut p = udp(40000, 443, 1200, 0);
    p[28..32].copy_from_slice(&(i as u32).to_be_bytes());
    p
}

pub fn seq_of(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[28], bytes[29], bytes[30], bytes[31]])
}
