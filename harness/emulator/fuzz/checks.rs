//! The checks behind the fuzz targets, in one copy: the cargo-fuzz targets
//! (fuzz/fuzz_targets/) call `check_*` on each input, and the stable-Rust tests
//! (tests/fuzz_corpus.rs replays fuzz/corpus/, tests/prop_link.rs) include this file
//! with `#[path]`. Each `check_*` takes arbitrary bytes and panics only if an
//! invariant of the link fails. Only std, longlook_link and serde_json are used, so
//! the file builds in both crates.

#![allow(dead_code)]

use longlook_link::offload::{fold, split, sum, Coalescer, VnetHdr, F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6};
use longlook_link::packet::{self, ipv4_header_checksum};
use longlook_link::record::marks;
use longlook_link::{Counters, Dir, DropReason, Fate, Link, Record, Schedule, Transmit};
use serde_json::{json, Value};

/// Arrivals per input (keeps each execution fast).
pub const MAX_ARRIVALS: usize = 64;
/// Driver steps per run; more means the link never settles (a livelock).
pub const MAX_STEPS: usize = 20_000;

/// Reads fuzz bytes as small numbers; past the end every read gives 0.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Up to `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.pos = end;
        &self.data[start..end]
    }
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(usize::MAX)
    }
}

// ---------------------------------------------------------------- packets

/// A well-formed IPv4/IPv6 UDP or TCP packet (ACK set for TCP) with valid checksums;
/// the payload is `payload` bytes counting up from `seq`.
pub fn build(v6: bool, tcp: bool, sport: u16, dport: u16, payload: usize, ecn: u8, seq: u32) -> Vec<u8> {
    let ip = if v6 { 40 } else { 20 };
    let l4 = if tcp { 20 } else { 8 };
    let mut b = vec![0u8; ip + l4 + payload];
    let len = b.len();
    if v6 {
        b[0] = 0x60;
        b[1] = (ecn & 3) << 4;
        b[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        b[6] = if tcp { 6 } else { 17 };
        b[7] = 64;
        b[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        b[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        b[0] = 0x45;
        b[1] = ecn & 3;
        b[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        b[8] = 64;
        b[9] = if tcp { 6 } else { 17 };
        b[12..16].copy_from_slice(&[198, 18, 0, 1]);
        b[16..20].copy_from_slice(&[198, 19, 0, 1]);
        let c = ipv4_header_checksum(&b[..20]);
        b[10..12].copy_from_slice(&c.to_be_bytes());
    }
    b[ip..ip + 2].copy_from_slice(&sport.to_be_bytes());
    b[ip + 2..ip + 4].copy_from_slice(&dport.to_be_bytes());
    if tcp {
        b[ip + 4..ip + 8].copy_from_slice(&seq.to_be_bytes());
        b[ip + 12] = 5 << 4;
        b[ip + 13] = 0x10;
        b[ip + 14..ip + 16].copy_from_slice(&1000u16.to_be_bytes());
    } else {
        b[ip + 4..ip + 6].copy_from_slice(&((len - ip) as u16).to_be_bytes());
    }
    for (i, x) in b[ip + l4..].iter_mut().enumerate() {
        *x = seq.wrapping_add(i as u32) as u8;
    }
    set_l4_checksum(&mut b, ip, if tcp { ip + 16 } else { ip + 6 });
    b
}

/// (version, IP header length, transport protocol) if the IP header is plausible.
fn ip_header(p: &[u8]) -> Option<(u8, usize, u8)> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 && usize::from(p[0] & 15) * 4 >= 20 => Some((4, usize::from(p[0] & 15) * 4, p[9])),
        6 if p.len() >= 40 => Some((6, 40, p[6])),
        _ => None,
    }
}

/// Ones'-complement sum of the pseudo-header and the transport segment from `l4`.
fn l4_sum(p: &[u8], l4: usize) -> u16 {
    let (version, _, proto) = ip_header(p).expect("IP");
    let addrs = if version == 4 { &p[12..20] } else { &p[8..40] };
    fold(sum(&p[l4..], sum(addrs, u64::from(proto) + (p.len() - l4) as u64)))
}

fn set_l4_checksum(p: &mut [u8], l4: usize, at: usize) {
    p[at] = 0;
    p[at + 1] = 0;
    let c = !l4_sum(p, l4);
    p[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// (version, IP header length, IP + TCP header length) of a TCP packet that
/// `offload::split` would segment.
fn tcp_layout(p: &[u8]) -> Option<(u8, usize, usize)> {
    let (version, ihl, proto) = ip_header(p)?;
    if proto != 6 || p.len() < ihl + 20 {
        return None;
    }
    let hdr = ihl + usize::from(p[ihl + 12] >> 4) * 4;
    (hdr >= ihl + 20 && p.len() > hdr).then_some((version, ihl, hdr))
}

fn ecn_of(p: &[u8]) -> u8 {
    packet::parse(p).map_or(0, |i| i.ecn)
}

fn port(b: &mut Bytes) -> u16 {
    match b.u8() % 5 {
        0 => 443,
        1 => 40000,
        2 => 5201,
        3 => 53,
        _ => b.u16(),
    }
}

/// One packet from the fuzz bytes: raw bytes, or a real UDP/TCP over IPv4/IPv6
/// packet, optionally truncated or with one byte changed.
fn packet_from(b: &mut Bytes, kind: u8) -> Vec<u8> {
    // kind % 5: 0 raw, 1 UDP/IPv4, 2 TCP/IPv4, 3 UDP/IPv6, 4 TCP/IPv6.
    let (v6, tcp) = match kind % 5 {
        0 => {
            let n = usize::from(b.u8());
            return b.take(n).to_vec();
        }
        k => (k >= 3, k == 2 || k == 4),
    };
    let (sport, dport) = (port(b), port(b));
    let payload = usize::from(b.u16() % 1500);
    let ecn = b.u8();
    let mut p = build(v6, tcp, sport, dport, payload, ecn & 3, b.u32());
    if ecn & 0x80 != 0 {
        p.truncate(usize::from(b.u8()));
    }
    if ecn & 0x40 != 0 && !p.is_empty() {
        let at = usize::from(b.u16()) % p.len();
        p[at] ^= b.u8();
    }
    p
}

// ---------------------------------------------------------------- link driver

/// A packet offered to the link at `t_ns` (arrivals are in time order), or, with
/// `force_phase`, the control socket's `{"cmd": "phase"}` at that time instead.
#[derive(Clone, Debug)]
pub struct Arrival {
    pub t_ns: u64,
    pub dir: Dir,
    pub bytes: Vec<u8>,
    pub force_phase: Option<usize>,
}

impl Arrival {
    pub fn packet(t_ns: u64, dir: Dir, bytes: Vec<u8>) -> Arrival {
        Arrival { t_ns, dir, bytes, force_phase: None }
    }
}

/// Everything a run showed: transmits (with the horizon they were polled at),
/// records in the order they came out, and the final counters.
#[derive(Debug, PartialEq)]
pub struct Run {
    pub transmits: Vec<(u64, Transmit)>,
    pub records: Vec<Record>,
    pub counters: [Counters; 2],
}

/// Drives a link the way the event loop does: on each wake-up every packet due
/// within `slice_ns` leaves, the next wake-up is half a slice before
/// `next_deadline()`, and arrivals come in between. With `drain` the link runs
/// until empty before `shutdown`, otherwise it stops after the last arrival.
/// `next_deadline()` must be a lower bound: after waking for it, nothing due earlier
/// may come out.
pub fn drive(schedule: &Schedule, arrivals: &[Arrival], slice_ns: u64, drain: bool) -> Run {
    let mut link = Link::new(schedule.clone());
    let (mut transmits, mut records) = (Vec::new(), Vec::new());
    let mut now = 0u64;
    let mut next = 0;
    let mut floor = 0; // what the last next_deadline() promised, if we woke for it
    for step in 0.. {
        assert!(step < MAX_STEPS, "the link did not settle after {MAX_STEPS} steps (now {now} ns)");
        let horizon = now + slice_ns;
        while let Some(t) = link.poll_transmit(horizon) {
            assert!(t.due_ns <= horizon, "poll_transmit({horizon}) returned a packet due at {}", t.due_ns);
            assert!(t.due_ns >= floor, "next_deadline() was {floor} ns but a packet was due at {} ns", t.due_ns);
            transmits.push((horizon, t));
            records.extend(std::iter::from_fn(|| link.poll_record()));
        }
        records.extend(std::iter::from_fn(|| link.poll_record()));
        let deadline = link.next_deadline();
        if let Some(d) = deadline {
            assert!(d > horizon, "next_deadline() is {d} ns, not after the horizon {horizon} just drained");
        }
        let wake = deadline.map(|d| d.saturating_sub(slice_ns / 2).max(now + 1));
        match (arrivals.get(next), wake) {
            (None, None) => break,
            (None, Some(_)) if !drain => break,
            (Some(a), w) if w.is_none_or(|w| a.t_ns <= w) => {
                now = now.max(a.t_ns);
                floor = 0;
                match a.force_phase {
                    Some(i) => assert_eq!(link.force_phase(a.t_ns, i).is_ok(), i < schedule.phases.len(), "force_phase({i})"),
                    None => link.on_packet(a.t_ns, a.dir, &a.bytes),
                }
                records.extend(std::iter::from_fn(|| link.poll_record()));
                next += 1;
            }
            (_, Some(w)) => (now, floor) = (w, deadline.unwrap_or(0)),
            (_, None) => unreachable!(),
        }
    }
    link.shutdown();
    records.extend(std::iter::from_fn(|| link.poll_record()));
    assert_eq!(link.next_deadline(), None, "something is left inside after shutdown");
    let counters = [link.counters(Dir::C2s).clone(), link.counters(Dir::S2c).clone()];
    Run { transmits, records, counters }
}

/// Runs the link twice and checks every invariant; returns the run.
pub fn check_link(schedule: &Schedule, arrivals: &[Arrival], slice_ns: u64, drain: bool) -> Run {
    let run = drive(schedule, arrivals, slice_ns, drain);
    check_run(schedule, arrivals, &run);
    let again = drive(schedule, arrivals, slice_ns, drain);
    assert!(run == again, "two links with the same schedule and arrivals differ");
    run
}

/// The invariants of one finished run (after `shutdown`).
pub fn check_run(schedule: &Schedule, arrivals: &[Arrival], run: &Run) {
    let by_dir: [Vec<&Arrival>; 2] = Dir::BOTH.map(|d| arrivals.iter().filter(|a| a.dir == d && a.force_phase.is_none()).collect());
    let mut finals = [vec![0u32; by_dir[0].len()], vec![0u32; by_dir[1].len()]];
    let mut copies = finals.clone();
    let mut delivered = [vec![false; by_dir[0].len()], vec![false; by_dir[1].len()]];
    for r in &run.records {
        let (d, i) = (r.dir.index(), r.idx as usize);
        let a = by_dir[d].get(i).unwrap_or_else(|| panic!("record {r:?}: only {} packets arrived", by_dir[d].len()));
        assert_eq!((r.arr_ns, r.size as usize), (a.t_ns, a.bytes.len()), "record {r:?} does not match its arrival");
        if r.fate == Fate::Duplicate {
            copies[d][i] += 1;
        } else {
            finals[d][i] += 1;
        }
        delivered[d][i] |= r.fate == Fate::Delivered;
        match r.fate {
            Fate::Delivered | Fate::Duplicate => {
                let dep = r.dep_ns.unwrap_or_else(|| panic!("record {r:?} left without a departure time"));
                assert!(dep >= r.arr_ns, "record {r:?} left before it arrived");
            }
            Fate::Dropped(_) | Fate::InFlight => assert_eq!(r.dep_ns, None, "record {r:?}"),
        }
        let malformed = packet::parse(&a.bytes).is_none();
        assert_eq!(r.fate == Fate::Dropped(DropReason::Malformed), malformed, "record {r:?}, bytes {:?}", a.bytes);
    }
    for d in Dir::BOTH {
        for (i, n) in finals[d.index()].iter().enumerate() {
            assert_eq!(*n, 1, "{} packet {i} has {n} final records (want exactly 1)", d.name());
        }
        for (i, n) in copies[d.index()].iter().enumerate() {
            assert!(*n <= 1, "{} packet {i} has {n} duplicates", d.name());
            assert!(*n == 0 || delivered[d.index()][i], "{} packet {i} has a copy but was not delivered", d.name());
        }
    }
    // The k-th delivered-or-copy record is the k-th transmit.
    let leaving: Vec<&Record> = run.records.iter().filter(|r| matches!(r.fate, Fate::Delivered | Fate::Duplicate)).collect();
    assert_eq!(leaving.len(), run.transmits.len(), "records of packets sent vs transmits");
    for (r, (_, t)) in leaving.iter().zip(&run.transmits) {
        let sent = (t.dir, Some(t.due_ns), t.marks, t.bytes.len());
        assert_eq!(sent, (r.dir, r.dep_ns, r.marks, r.size as usize), "transmit vs record {r:?}");
        let orig = &by_dir[r.dir.index()][r.idx as usize].bytes;
        check_bytes(orig, &t.bytes, r);
    }
    // Without reordering impairments a direction is FIFO.
    let reorders = !schedule.actions.is_empty() || schedule.phases.iter().any(|p| p.c2s.jitter_reorders || p.s2c.jitter_reorders);
    if !reorders {
        for d in Dir::BOTH {
            let order: Vec<u64> = leaving.iter().filter(|r| r.dir == d && r.fate == Fate::Delivered).map(|r| r.idx).collect();
            assert!(order.windows(2).all(|w| w[0] < w[1]), "{} delivered out of order without reordering: {order:?}", d.name());
        }
    }
    for d in Dir::BOTH {
        let recs: Vec<&Record> = run.records.iter().filter(|r| r.dir == d).collect();
        let count = |f: &dyn Fn(&Record) -> bool| recs.iter().filter(|r| f(r)).count() as u64;
        let c = &run.counters[d.index()];
        assert_eq!(c.arrived, by_dir[d.index()].len() as u64, "{} arrived", d.name());
        assert_eq!(c.delivered, count(&|r| r.fate == Fate::Delivered), "{} delivered", d.name());
        let bytes: u64 = recs.iter().filter(|r| r.fate == Fate::Delivered).map(|r| u64::from(r.size)).sum();
        assert_eq!(c.delivered_bytes, bytes, "{} delivered_bytes", d.name());
        assert_eq!(c.duplicates, count(&|r| r.fate == Fate::Duplicate), "{} duplicates", d.name());
        assert_eq!(c.in_flight, count(&|r| r.fate == Fate::InFlight), "{} in_flight", d.name());
        assert_eq!(c.ce_marked, count(&|r| r.fate != Fate::Duplicate && r.marks & marks::CE != 0), "{} ce_marked", d.name());
        for (k, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(c.dropped[k], count(&|r| r.fate == Fate::Dropped(*reason)), "{} dropped {reason:?}", d.name());
        }
    }
}

/// A sent packet is the arrived one, changed only as its marks say.
fn check_bytes(orig: &[u8], sent: &[u8], r: &Record) {
    let (ce, corrupt) = (r.marks & marks::CE != 0, r.marks & marks::CORRUPT != 0);
    if !ce && !corrupt {
        assert_eq!(orig, sent, "record {r:?}: bytes changed without a mark");
    }
    if ce {
        assert!(matches!(ecn_of(orig), 1 | 2) && ecn_of(sent) == 3, "record {r:?}: CE mark on a packet that was not ECT, or not set");
    }
    if let Some((4, ihl, _)) = ip_header(orig) {
        if orig.len() >= ihl && u16::from_be_bytes([orig[10], orig[11]]) == ipv4_header_checksum(&orig[..ihl]) {
            assert_eq!(u16::from_be_bytes([sent[10], sent[11]]), ipv4_header_checksum(&sent[..ihl]), "record {r:?}: IPv4 checksum broken");
        }
    }
    if corrupt && !ce {
        let flipped: u32 = orig.iter().zip(sent).map(|(a, b)| (a ^ b).count_ones()).sum();
        let at = orig.iter().zip(sent).position(|(a, b)| a != b);
        let payload = packet::parse(orig).and_then(|i| i.payload_offset);
        assert!(flipped == 1 && at >= payload, "record {r:?}: corrupt should flip one payload bit, flipped {flipped} at {at:?}");
    }
}

// ---------------------------------------------------------------- targets

/// Arbitrary text → `Schedule::parse` gives Ok or Err; an accepted schedule survives
/// a serde round trip and runs a few packets through a link.
pub fn check_schedule_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let s = match Schedule::parse(&text, "fuzz.json") {
        Ok(s) => s,
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("fuzz.json"), "an error that does not name the file: {m}");
            return;
        }
    };
    let json = serde_json::to_string(&s).expect("a parsed schedule serializes");
    let again = Schedule::parse(&json, "again.json").unwrap_or_else(|e| panic!("the round trip {json} is rejected: {e}"));
    assert!(again == s, "the round trip changed the schedule:\n{s:?}\n{again:?}");
    // Times are µs in a schedule and ns in the link: an accepted time must fit in ns.
    let mut times: Vec<(&str, u64)> = Vec::new();
    for a in &s.actions {
        times.extend(a.extra_us.map(|v| ("extra_us", v)).into_iter().chain(a.max_hold_us.map(|v| ("max_hold_us", v))));
    }
    for p in &s.phases {
        times.extend([("start_us", p.start_us), ("delay_us", p.c2s.delay_us), ("delay_us", p.s2c.delay_us)]);
        times.extend([("jitter_us", p.c2s.jitter_us), ("jitter_us", p.s2c.jitter_us)]);
    }
    for (k, v) in times {
        assert!(v.checked_mul(1000).is_some(), "accepted {k} = {v} overflows u64 once in ns: {json}");
    }
    check_link(&s, &sample_arrivals(), 0, true);
}

/// Loads traces whose `trace` "path" is the trace text itself, as `Schedule::load`
/// would from a file (`Schedule::parse` loads none).
pub fn load_inline_traces(s: &mut Schedule) {
    for p in &mut s.phases {
        for l in [&mut p.c2s, &mut p.s2c] {
            if let Some(text) = l.trace.as_ref().and_then(|t| t.to_str()) {
                l.trace_ms = longlook_link::schedule::parse_trace(text).unwrap_or_else(|e| panic!("inline trace {text:?}: {e}"));
            }
        }
    }
}

/// A few packets of every kind in both directions, 1 ms apart.
pub fn sample_arrivals() -> Vec<Arrival> {
    let packets = [
        build(false, false, 40000, 443, 1200, 2, 0),
        build(false, true, 5201, 40000, 1448, 0, 1),
        build(true, false, 443, 40000, 1200, 1, 2),
        build(true, true, 40000, 5201, 0, 2, 3),
        vec![0x45, 0, 0],
    ];
    let mut out = Vec::new();
    for (i, p) in packets.iter().cycle().take(12).enumerate() {
        let dir = if i % 3 == 2 { Dir::S2c } else { Dir::C2s };
        out.push(Arrival::packet(i as u64 * 1_000_000, dir, p.clone()));
    }
    out
}

/// Fuzz bytes → a valid schedule with small numbers, then (delay, dir, packet)
/// arrivals through a link; every invariant of `check_run` must hold.
pub fn check_packet_path(data: &[u8]) {
    let mut b = Bytes::new(data);
    let flags = b.u8();
    let slice_ns = [0, 0, 50_000, 1_000_000][usize::from(flags & 3)];
    let drain = flags & 4 == 0;
    let json = schedule_json(&mut b);
    let text = json.to_string();
    let mut s = Schedule::parse(&text, "packet_path.json").unwrap_or_else(|e| panic!("generated schedule rejected: {e}\n{text}"));
    load_inline_traces(&mut s);
    let mut arrivals = Vec::new();
    let mut t = 0u64;
    while !b.is_empty() && arrivals.len() < MAX_ARRIVALS {
        let head = b.u8();
        let dir = if head & 1 == 0 { Dir::C2s } else { Dir::S2c };
        t += match (head >> 1) & 3 {
            0 => 0,
            1 => u64::from(b.u8()) * 1000,
            2 => u64::from(b.u16()) * 1000,
            _ => u64::from(b.u16()) * 16_000,
        };
        if head >> 3 == 31 {
            let phase = usize::from(b.u8()) % (s.phases.len() + 1);
            arrivals.push(Arrival { t_ns: t, dir, bytes: Vec::new(), force_phase: Some(phase) });
        } else {
            arrivals.push(Arrival::packet(t, dir, packet_from(&mut b, head >> 3)));
        }
    }
    check_link(&s, &arrivals, slice_ns, drain);
}

/// A valid schedule (JSON) from fuzz bytes: 1–3 phases, up to 4 actions.
fn schedule_json(b: &mut Bytes) -> Value {
    let seed = b.u8();
    let n_phases = 1 + b.u8() % 3;
    let mut start = 0u64;
    let mut phases = Vec::new();
    for i in 0..n_phases {
        if i > 0 {
            start += 1 + u64::from(b.u16()) * 16;
        }
        phases.push(json!({"start_us": start, "c2s": settings_json(b), "s2c": settings_json(b)}));
    }
    let n_actions = b.u8() % 5;
    let actions: Vec<Value> = (0..n_actions).map(|_| action_json(b)).collect();
    json!({"seed": seed, "phases": phases, "actions": actions})
}

fn prob(b: &mut Bytes) -> f64 {
    f64::from(b.u8()) / 255.0
}

fn settings_json(b: &mut Bytes) -> Value {
    let f = b.u16();
    let mut s = serde_json::Map::new();
    let mut put = |k: &str, v: Value| s.insert(k.to_string(), v);
    if f & 1 != 0 {
        put("rate_bps", json!((1 + u64::from(b.u8())) * 100_000));
    } else if f & 2048 != 0 {
        // A mahimahi trace, its text standing in for the path (see load_inline_traces).
        let mut t = 0;
        let mut ms: Vec<String> = (0..1 + b.u8() % 6).map(|_| { t += u64::from(b.u8() % 20); t.to_string() }).collect();
        if t == 0 {
            ms.push("1".into());
        }
        put("trace", json!(ms.join("\n")));
    }
    if f & 2 != 0 {
        put("queue_bytes", json!(1 + u64::from(b.u16())));
    }
    if f & 4 != 0 {
        put("queue_packets", json!(1 + u64::from(b.u8() % 32)));
    }
    if f & 8 != 0 {
        put("delay_us", json!(b.u16()));
    }
    if f & 16 != 0 {
        put("jitter_us", json!(b.u16()));
    }
    if f & 32 != 0 {
        put("jitter_reorders", json!(true));
    }
    if f & 64 != 0 {
        put("loss", json!({"iid": prob(b)}));
    } else if f & 128 != 0 {
        put("loss", json!({"gilbert_elliott": {"p_good_bad": prob(b), "p_bad_good": prob(b), "loss_good": prob(b), "loss_bad": prob(b)}}));
    }
    if f & 256 != 0 {
        put("ecn_threshold_bytes", json!(b.u16()));
    }
    if f & 512 != 0 {
        put("duplicate", json!(prob(b)));
    }
    if f & 1024 != 0 {
        put("corrupt", json!(prob(b)));
    }
    if f & 0xf000 == 0xf000 {
        put("blackhole", json!(true));
    }
    Value::Object(s)
}

fn action_json(b: &mut Bytes) -> Value {
    let f = b.u8();
    let kind = ["drop", "hold", "delay", "duplicate", "corrupt", "ce"][usize::from(f & 7) % 6];
    let mut a = json!({"dir": if f & 8 != 0 { "s2c" } else { "c2s" }, "index": b.u8() % 16, "action": kind});
    if f & 16 != 0 {
        let proto = if f & 32 != 0 { "tcp" } else { "udp" };
        a["flow"] = json!({"proto": proto, "port": port(b)});
    }
    match kind {
        "hold" => {
            a["k"] = json!(1 + b.u8() % 4);
            if f & 64 != 0 {
                a["max_hold_us"] = json!(b.u16());
            }
        }
        "delay" => a["extra_us"] = json!(b.u16()),
        _ => {}
    }
    a
}

// ---------------------------------------------------------------- offload

/// Segmentation and coalescing never panic; segments of a TCP super-packet are
/// valid and coalesce back to the same payload.
pub fn check_offload(data: &[u8]) {
    let mut b = Bytes::new(data);
    let mode = b.u8();
    if mode & 1 == 0 {
        check_split(&mut b, mode)
    } else {
        check_coalesce(&mut b)
    }
}

fn check_split(b: &mut Bytes, mode: u8) {
    let raw = b.take(10);
    let h = VnetHdr::parse(raw).unwrap_or_default();
    assert_eq!(VnetHdr::parse(&h.to_bytes()), Some(h), "vnet header round trip");
    let pkt: Vec<u8> = if mode & 2 == 0 {
        b.rest().to_vec()
    } else {
        super_packet(b, mode)
    };
    let mut out = vec![vec![7u8; 3]];
    let n = split(h, &pkt, &mut out);
    assert_eq!((out.len(), &out[0][..]), (n + 1, &[7u8; 3][..]), "split appends exactly its n segments");
    let segs = &out[1..];
    let gso = matches!(h.gso_type & 0x7f, GSO_TCPV4 | GSO_TCPV6) && h.gso_size > 0;
    let Some((version, ihl, hdr)) = tcp_layout(&pkt).filter(|_| gso && pkt.len() <= 65535) else {
        assert!(n >= 1, "split returned nothing");
        return;
    };
    let mss = usize::from(h.gso_size);
    assert_eq!(n, (pkt.len() - hdr).div_ceil(mss), "segment count");
    let seq0 = u32::from_be_bytes([pkt[ihl + 4], pkt[ihl + 5], pkt[ihl + 6], pkt[ihl + 7]]);
    // Fields a segment may change: IP length, id, checksum; TCP seq, flags, checksum.
    let own = |j: usize| {
        (version == 4 && matches!(j, 2..=5 | 10 | 11)) || (version == 6 && matches!(j, 4 | 5))
            || (ihl + 4..ihl + 8).contains(&j) || j == ihl + 13 || (ihl + 16..ihl + 18).contains(&j)
    };
    for (i, s) in segs.iter().enumerate() {
        assert!((0..hdr).all(|j| own(j) || s[j] == pkt[j]), "segment {i} headers differ from the super-packet's");
        let seq = u32::from_be_bytes([s[ihl + 4], s[ihl + 5], s[ihl + 6], s[ihl + 7]]);
        assert_eq!(seq, seq0.wrapping_add((i * mss) as u32), "segment {i} sequence number");
        if version == 4 {
            assert_eq!(usize::from(u16::from_be_bytes([s[2], s[3]])), s.len(), "segment {i} IPv4 length");
            assert_eq!(u16::from_be_bytes([s[10], s[11]]), ipv4_header_checksum(&s[..ihl]), "segment {i} IPv4 checksum");
        } else {
            assert_eq!(usize::from(u16::from_be_bytes([s[4], s[5]])) + 40, s.len(), "segment {i} IPv6 length");
        }
        assert_eq!(l4_sum(s, ihl), 0xffff, "segment {i} TCP checksum");
    }
    let payload: Vec<u8> = segs.iter().flat_map(|s| s[hdr..].iter().copied()).collect();
    assert!(payload == pkt[hdr..], "segments' payloads differ from the super-packet's");
    // Coalescing the segments gives the payload back, in one piece if it can merge.
    let merged = coalesce_all(segs);
    let back: Vec<u8> = merged.iter().flat_map(|(_, p)| p[tcp_layout(p).expect("TCP").2..].to_vec()).collect();
    assert!(back == pkt[hdr..], "coalesced payload differs from the super-packet's");
    let flags = pkt[ihl + 13];
    if flags & !0x08 == 0x10 && ecn_of(&pkt) != 3 && (version == 6 || ihl == 20) {
        assert_eq!(merged.len(), 1, "plain data segments of one super-packet merge into one");
        let mut again = Vec::new();
        split(merged[0].0, &merged[0].1, &mut again);
        assert!(again == segs, "splitting the coalesced packet does not give the same segments");
    }
}

/// A TCP super-packet from a few fuzzed fields and a generated payload (up to 64 KiB).
fn super_packet(b: &mut Bytes, mode: u8) -> Vec<u8> {
    let v6 = mode & 4 != 0;
    let opts = usize::from(b.u8() % 11) * 4;
    let ip_opts = if v6 { 0 } else { usize::from((mode >> 3) & 3) * 4 };
    let flags = b.u8();
    let ecn = b.u8() & 3;
    let seq = b.u32();
    let head = if v6 { 40 } else { 20 + ip_opts } + 20 + opts;
    let payload = usize::from(b.u16()).min(65535 - head);
    let base = build(v6, true, 40000, 5201, 0, ecn, seq);
    let ip = if v6 { 40 } else { 20 };
    let mut p = base[..ip].to_vec();
    p.extend(std::iter::repeat_n(1u8, ip_opts)); // IPv4 NOPs
    if !v6 {
        p[0] = 0x40 | ((20 + ip_opts) / 4) as u8;
    }
    let l4 = p.len();
    p.extend_from_slice(&base[ip..ip + 20]);
    p[l4 + 12] = (((20 + opts) / 4) as u8) << 4;
    p[l4 + 13] = flags;
    p.extend(std::iter::repeat_n(1u8, opts)); // TCP NOPs
    let fill = b.rest();
    p.extend((0..payload).map(|i| if fill.is_empty() { i as u8 } else { fill[i % fill.len()] }));
    let len = p.len();
    if v6 {
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    } else {
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        let c = ipv4_header_checksum(&p[..l4]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// Pushes every packet (mergeable), flushing when refused; returns what was flushed.
fn coalesce_all(segs: &[Vec<u8>]) -> Vec<(VnetHdr, Vec<u8>)> {
    let mut c = Coalescer::default();
    let mut out = Vec::new();
    for s in segs {
        if !c.push(s, true) {
            let (h, p) = c.flush().expect("a refused push means something is open");
            out.push((h, p.to_vec()));
            assert!(c.push(s, true), "an empty coalescer refused a packet");
        }
    }
    if let Some((h, p)) = c.flush() {
        out.push((h, p.to_vec()));
    }
    out
}

/// Arbitrary packets through a coalescer: what comes out is what went in.
fn check_coalesce(b: &mut Bytes) {
    let mut c = Coalescer::default();
    let mut open: Vec<(Vec<u8>, bool)> = Vec::new();
    let (mut seq, mut last_len) = (0u32, 100usize);
    for _ in 0..MAX_ARRIVALS {
        if b.is_empty() {
            break;
        }
        let head = b.u8();
        let mergeable = head & 1 == 0;
        let p = if head & 2 != 0 {
            let n = usize::from(b.u16() % 2048);
            b.take(n).to_vec()
        } else {
            let len = if head & 4 != 0 { last_len } else { usize::from(b.u8()) };
            let s = if head & 8 != 0 { seq } else { b.u32() };
            let mut p = build(head & 16 != 0, true, 40000, 5201, len, (head >> 5) & 3, s);
            if head & 0x80 != 0 {
                let l4 = if head & 16 != 0 { 40 } else { 20 };
                p[l4 + 13] = b.u8();
                set_l4_checksum(&mut p, l4, l4 + 16);
            }
            (seq, last_len) = (s.wrapping_add(len as u32), len);
            p
        };
        let was_open = !open.is_empty();
        let first_solo = open.first().is_some_and(|(_, m)| !m);
        if c.push(&p, mergeable) {
            assert!(!was_open || (mergeable && !first_solo), "a packet that must stay alone was merged");
        } else {
            assert!(was_open, "an empty coalescer refused a packet");
            check_flush(&mut c, &open);
            open.clear();
            assert!(c.push(&p, mergeable), "an empty coalescer refused a packet");
        }
        open.push((p, mergeable));
    }
    if !open.is_empty() {
        check_flush(&mut c, &open);
    }
    assert!(c.is_empty() && c.flush().is_none(), "flush leaves the coalescer empty");
}

fn check_flush(c: &mut Coalescer, open: &[(Vec<u8>, bool)]) {
    let (h, p) = c.flush().expect("something is open");
    let p = p.to_vec();
    if open.len() == 1 {
        assert_eq!((h, &p), (VnetHdr::default(), &open[0].0), "a single packet is written as is");
        return;
    }
    assert!(p.len() <= 65535, "super-packet of {} bytes", p.len());
    assert!(h.flags == F_NEEDS_CSUM && matches!(h.gso_type, GSO_TCPV4 | GSO_TCPV6), "vnet header {h:?}");
    let want: Vec<u8> = open.iter().flat_map(|(s, _)| s[tcp_layout(s).expect("merged TCP").2..].to_vec()).collect();
    assert!(p[usize::from(h.hdr_len)..] == want[..], "merged payload differs from the segments'");
    let mut again = Vec::new();
    assert_eq!(split(h, &p, &mut again), open.len(), "re-splitting a merged packet");
    let back: Vec<u8> = again.iter().flat_map(|s| s[usize::from(h.hdr_len)..].to_vec()).collect();
    assert!(back == want, "re-split payload differs");
}
