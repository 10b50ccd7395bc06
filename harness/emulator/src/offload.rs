//! Segmentation offload at the TUN boundary, so a TCP flow does not cost two system
//! calls and a pass through the receiver's stack per 1500-byte segment.
//!
//! Reading: with IFF_VNET_HDR and TSO enabled, the kernel hands the router TCP
//! super-packets (up to 64 KiB) and packets whose checksum is only partial. `split`
//! cuts a super-packet into the segments a NIC would have sent and finishes every
//! checksum, so the link core, the ground-truth log and the pcap all see real wire
//! packets and every per-packet decision stays per packet.
//!
//! Writing: `Coalescer` merges consecutive, contiguous segments of one TCP flow that
//! leave in the same wake-up back into one super-packet (what GRO would do), handed
//! to the kernel with a virtio-net header so the receiver's stack runs once for all.
//! Anything unusual (other protocols, SYN/FIN/RST/URG, CE marks, corrupted packets,
//! option changes) is written alone with its own full checksum.

/// The 10-byte virtio-net header that precedes each packet on a vnet-hdr TUN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

pub const VNET_HDR_LEN: usize = 10;
pub const F_NEEDS_CSUM: u8 = 1;
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;

impl VnetHdr {
    /// Parses the header (little-endian, as TUN uses on x86 and arm64).
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b = b.get(..VNET_HDR_LEN)?;
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr { flags: b[0], gso_type: b[1], hdr_len: u(2), gso_size: u(4), csum_start: u(6), csum_offset: u(8) })
    }

    pub fn to_bytes(self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }
}

/// Ones'-complement sum of `data` as big-endian 16-bit words, added to `acc`
/// (unfolded). Sums 32-bit words: folding gives the same 16-bit result, faster.
pub fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc + u64::from(u32::from_be_bytes(tail))
}

/// Folds an unfolded sum to 16 bits (not complemented).
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// IP header facts needed here: version, header length, transport protocol.
fn ip_layout(p: &[u8]) -> Option<(u8, usize, u8)> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 => Some((4, usize::from(p[0] & 0x0f) * 4, p[9])),
        6 if p.len() >= 40 => Some((6, 40, p[6])),
        _ => None,
    }
}

/// Pseudo-header sum for a transport segment of `l4_len` bytes.
fn pseudo(p: &[u8], version: u8, proto: u8, l4_len: usize) -> u64 {
    let addrs = if version == 4 { &p[12..20] } else { &p[8..40] };
    sum(addrs, u64::from(proto) + l4_len as u64)
}

/// Writes the IPv4 header and UDP checksums of a plain (option-less) IPv4/UDP packet.
pub(crate) fn set_checksums(p: &mut [u8]) {
    set_ipv4_checksum(p, 20);
    set_l4_checksum(p, 4, 17, 20, 26);
}

fn set_ipv4_checksum(p: &mut [u8], ihl: usize) {
    p[10] = 0;
    p[11] = 0;
    let c = !fold(sum(&p[..ihl], 0));
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Writes a full TCP or UDP checksum at `csum_at` over the segment from `l4`.
fn set_l4_checksum(p: &mut [u8], version: u8, proto: u8, l4: usize, csum_at: usize) {
    p[csum_at] = 0;
    p[csum_at + 1] = 0;
    let mut c = !fold(sum(&p[l4..], pseudo(p, version, proto, p.len() - l4)));
    if c == 0 && proto == 17 {
        c = 0xffff; // UDP: 0 means "no checksum"
    }
    p[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Turns one read (vnet header + packet) into wire packets appended to `out`:
/// super-packets are segmented, partial checksums finished. Returns how many.
/// A packet it cannot make sense of is passed on unchanged (the core drops garbage).
pub fn split(h: VnetHdr, pkt: &[u8], out: &mut Vec<Vec<u8>>) -> usize {
    let is_tcp_gso = h.gso_type & !GSO_ECN == GSO_TCPV4 || h.gso_type & !GSO_ECN == GSO_TCPV6;
    if is_tcp_gso && h.gso_size > 0 {
        if let Some(n) = split_tcp(pkt, usize::from(h.gso_size), out) {
            return n;
        }
    }
    let mut p = pkt.to_vec();
    if h.flags & F_NEEDS_CSUM != 0 {
        finish_partial(&mut p, usize::from(h.csum_start), usize::from(h.csum_offset));
    }
    out.push(p);
    1
}

/// Completes a partial checksum the way the kernel's checksum helper does.
fn finish_partial(p: &mut [u8], start: usize, offset: usize) {
    let at = start + offset;
    if at + 2 > p.len() || start >= p.len() {
        return;
    }
    let mut c = !fold(sum(&p[start..], 0));
    if c == 0 && ip_layout(p).is_some_and(|(_, _, proto)| proto == 17) {
        c = 0xffff;
    }
    p[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

fn split_tcp(pkt: &[u8], mss: usize, out: &mut Vec<Vec<u8>>) -> Option<usize> {
    let (version, ihl, proto) = ip_layout(pkt)?;
    if proto != 6 || pkt.len() < ihl + 20 {
        return None;
    }
    let thl = usize::from(pkt[ihl + 12] >> 4) * 4;
    let hdr = ihl + thl;
    if thl < 20 || pkt.len() <= hdr {
        return None;
    }
    let seq0 = u32::from_be_bytes([pkt[ihl + 4], pkt[ihl + 5], pkt[ihl + 6], pkt[ihl + 7]]);
    let id0 = u16::from_be_bytes([pkt[4], pkt[5]]);
    let flags = pkt[ihl + 13];
    let chunks: Vec<&[u8]> = pkt[hdr..].chunks(mss).collect();
    let n = chunks.len();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut s = Vec::with_capacity(hdr + chunk.len());
        s.extend_from_slice(&pkt[..hdr]);
        s.extend_from_slice(chunk);
        let len = s.len();
        if version == 4 {
            s[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            s[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            set_ipv4_checksum(&mut s, ihl);
        } else {
            s[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        }
        let seq = seq0.wrapping_add((i * mss) as u32);
        s[ihl + 4..ihl + 8].copy_from_slice(&seq.to_be_bytes());
        let mut f = flags;
        if i + 1 < n {
            f &= !(0x01 | 0x08); // FIN and PSH only on the last segment
        }
        if i > 0 {
            f &= !0x80; // CWR only on the first
        }
        s[ihl + 13] = f;
        set_l4_checksum(&mut s, version, 6, ihl, ihl + 16);
        out.push(s);
    }
    Some(n)
}

/// TCP facts compared when deciding whether two segments can be merged.
struct Seg {
    version: u8,
    ihl: usize,
    hdr: usize,
    seq: u32,
    flags: u8,
    payload: usize,
}

fn seg(p: &[u8]) -> Option<Seg> {
    let (version, ihl, proto) = ip_layout(p)?;
    if proto != 6 || p.len() < ihl + 20 || (version == 4 && ihl != 20) {
        return None;
    }
    if version == 4 && (p[1] & 3 == 3 || u16::from_be_bytes([p[2], p[3]]) as usize != p.len()) {
        return None; // CE-marked, or the length field disagrees with the bytes
    }
    if version == 6 && (((p[1] >> 4) & 3) == 3 || usize::from(u16::from_be_bytes([p[4], p[5]])) + 40 != p.len()) {
        return None;
    }
    let thl = usize::from(p[ihl + 12] >> 4) * 4;
    let hdr = ihl + thl;
    let flags = p[ihl + 13];
    // Only plain data segments: ACK set, no SYN/FIN/RST/URG/ECE/CWR.
    if thl < 20 || p.len() <= hdr || flags & !0x08 != 0x10 {
        return None;
    }
    let seq = u32::from_be_bytes([p[ihl + 4], p[ihl + 5], p[ihl + 6], p[ihl + 7]]);
    Some(Seg { version, ihl, hdr, seq, flags, payload: p.len() - hdr })
}

/// Merges consecutive contiguous TCP segments of one flow into a super-packet.
#[derive(Default)]
pub struct Coalescer {
    buf: Vec<u8>,
    segs: usize,
    gso_size: usize,
    last_payload: usize,
    next_seq: u32,
    psh: bool,
    /// Whether the open packet must be written alone (not a mergeable segment).
    solo: bool,
}

/// Largest super-packet handed to the kernel.
const MAX_SUPER: usize = 65535;

impl Coalescer {
    /// Tries to append `p`; false means the caller must `flush` first and push again.
    /// `mergeable` is false for packets that must keep their own checksum (corrupted).
    pub fn push(&mut self, p: &[u8], mergeable: bool) -> bool {
        if self.segs == 0 {
            self.start(p, mergeable);
            return true;
        }
        if self.solo || !mergeable || self.psh {
            return false;
        }
        let Some(s) = seg(p) else { return false };
        let first = &self.buf;
        let same_headers = first[..s.ihl] .iter().zip(&p[..s.ihl]).enumerate().all(|(i, (a, b))| {
            // IPv4: total length, id and checksum differ per segment.
            a == b || (s.version == 4 && matches!(i, 2..=5 | 10 | 11)) || (s.version == 6 && matches!(i, 4 | 5))
        });
        let tcp_same = first.len() >= s.hdr
            && first[s.ihl..s.ihl + 4] == p[s.ihl..s.ihl + 4]
            && first[s.ihl + 8..s.ihl + 13] == p[s.ihl + 8..s.ihl + 13]
            && first[s.ihl + 14..s.ihl + 16] == p[s.ihl + 14..s.ihl + 16]
            && first[s.ihl + 18..s.hdr] == p[s.ihl + 18..s.hdr];
        let fits = s.seq == self.next_seq
            && self.last_payload == self.gso_size
            && s.payload <= self.gso_size
            && self.buf.len() + s.payload <= MAX_SUPER;
        if !(same_headers && tcp_same && fits) {
            return false;
        }
        self.buf.extend_from_slice(&p[s.hdr..]);
        self.segs += 1;
        self.last_payload = s.payload;
        self.next_seq = s.seq.wrapping_add(s.payload as u32);
        self.psh = s.flags & 0x08 != 0;
        true
    }

    fn start(&mut self, p: &[u8], mergeable: bool) {
        self.buf.clear();
        self.buf.extend_from_slice(p);
        self.segs = 1;
        self.psh = false;
        match seg(p).filter(|_| mergeable) {
            Some(s) => {
                self.solo = false;
                self.gso_size = s.payload;
                self.last_payload = s.payload;
                self.next_seq = s.seq.wrapping_add(s.payload as u32);
                self.psh = s.flags & 0x08 != 0;
            }
            None => self.solo = true,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.segs == 0
    }

    /// Hands out the open packet with its vnet header, and empties the coalescer.
    /// A single segment keeps its own full checksum; a merged one carries a partial
    /// checksum for the kernel to accept, as from a NIC with GRO.
    pub fn flush(&mut self) -> Option<(VnetHdr, &[u8])> {
        if self.segs == 0 {
            return None;
        }
        let segs = std::mem::take(&mut self.segs);
        if segs == 1 {
            return Some((VnetHdr::default(), &self.buf));
        }
        let (version, ihl, _) = ip_layout(&self.buf).expect("merged packets are IP");
        let len = self.buf.len();
        if version == 4 {
            self.buf[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            set_ipv4_checksum(&mut self.buf, ihl);
        } else {
            self.buf[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        }
        if self.psh {
            self.buf[ihl + 13] |= 0x08;
        }
        let thl = usize::from(self.buf[ihl + 12] >> 4) * 4;
        let partial = fold(pseudo(&self.buf, version, 6, len - ihl));
        self.buf[ihl + 16..ihl + 18].copy_from_slice(&partial.to_be_bytes());
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if version == 4 { GSO_TCPV4 } else { GSO_TCPV6 },
            hdr_len: (ihl + thl) as u16,
            gso_size: self.gso_size as u16,
            csum_start: ihl as u16,
            csum_offset: 16,
        };
        Some((h, &self.buf))
    }
}
