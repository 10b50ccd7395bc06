//! The sans-IO link: packets in with `on_packet(now, dir, bytes)`, packets out with
//! `poll_transmit(now)`, the next time anything happens with `next_deadline()`, and the
//! ground truth with `poll_record()`. No syscalls and no clock: `now` is ns since the
//! link started, supplied by the caller (real time or virtual time).
//!
//! Per direction, in order: blackhole → index drop → random loss → rate + drop-tail
//! queue (ECN marking on entry) → delay + jitter → index delay / hold → duplicate →
//! delivery. Corruption is applied on entry to the queue.

use crate::packet::{self, PacketInfo};
use crate::record::{marks, DropReason, Fate, Record};
use crate::schedule::{ActionKind, Dir, FlowMatch, LinkSettings, Loss, Proto, Schedule};
use crate::schedule::{DEFAULT_MAX_HOLD_US, DEFAULT_QUEUE_PACKETS};
use crate::stages::{jitter_ns, Draws, GeState, Service, Stream};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

/// A packet leaving the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    pub dir: Dir,
    pub bytes: Vec<u8>,
    /// When it was scheduled to leave, ns (the caller may be late).
    pub due_ns: u64,
    /// What was done to it (`record::marks`); a corrupted packet must keep its
    /// own checksum, so a writer must not merge it with others.
    pub marks: u8,
}

/// Counters of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub arrived: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    pub duplicates: u64,
    pub ce_marked: u64,
    pub in_flight: u64,
    /// Drops by reason, in `DropReason::ALL` order.
    pub dropped: [u64; 6],
}

/// What the schedule's actions asked for one packet.
#[derive(Debug, Default, Clone)]
struct Asked {
    drop: bool,
    hold: Option<(u64, u64, Option<usize>)>, // k, max_hold_ns, selector
    extra_ns: u64,
    /// `outage`: the direction goes dark for this long from this packet's arrival, ns.
    outage_ns: u64,
    duplicate: bool,
    corrupt: bool,
    ce: bool,
}

#[derive(Debug)]
struct Pkt {
    rec: Record,
    bytes: Vec<u8>,
    asked: Asked,
    /// Selectors (by id) this packet matched; holds count only matching packets.
    matched: u64,
}

/// A packet in the delay line, ordered by (due, seq, after) as a min-heap. `after`
/// places a packet right behind the one whose seq it shares: a duplicate behind its
/// original, a released hold behind the packet that released it, even when later
/// packets are due at the same instant.
#[derive(Debug)]
struct Lined {
    due: u64,
    seq: u64,
    after: u8,
    copy: bool,
    pkt: Box<Pkt>,
}

impl Lined {
    fn key(&self) -> (u64, u64, u8) {
        (self.due, self.seq, self.after)
    }
}

impl PartialEq for Lined {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Lined {}
impl PartialOrd for Lined {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Lined {
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

#[derive(Debug)]
struct Held {
    pkt: Box<Pkt>,
    remaining: u64,
    selector: Option<usize>,
    due: u64,
    deadline: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FlowKey {
    proto: u8,
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
}

/// State of one direction.
struct Direction {
    dir: Dir,
    draws: Draws,
    ge: GeState,
    service: Service,
    next_idx: u64,
    flows: HashMap<FlowKey, (Arc<str>, u64)>,
    selectors: Vec<FlowMatch>,
    sel_next: Vec<u64>,
    /// (selector id or none, index) → indices into the schedule's actions.
    actions: HashMap<(Option<usize>, u64), Vec<usize>>,
    queue: VecDeque<Box<Pkt>>,
    queue_bytes: u64,
    head_finish: Option<u64>,
    /// When the bottleneck finished its last packet, ns: the next cannot start earlier
    /// even if the caller's clock steps back (the loop looks ahead by a time slice).
    busy_until: u64,
    line: BinaryHeap<Lined>,
    last_base_due: u64,
    held: Vec<Held>,
    /// Until when an `outage` action keeps this direction dark, ns (0: never was).
    dark_until: u64,
    counters: Counters,
}

/// The whole link: both directions, the schedule's phases, finished records.
pub struct Link {
    schedule: Schedule,
    starts_ns: Vec<u64>,
    /// A phase forced at some time by the control socket: (at ns, phase index).
    forced: Option<(u64, usize)>,
    dirs: [Direction; 2],
    records: VecDeque<Record>,
    seq: u64,
    no_flow: Arc<str>,
}

impl Link {
    /// A link following `schedule` (already validated).
    pub fn new(schedule: Schedule) -> Link {
        let starts_ns = schedule.phases.iter().map(|p| p.start_us * 1000).collect();
        let dirs = Dir::BOTH.map(|d| Direction::new(d, &schedule));
        Link { schedule, starts_ns, forced: None, dirs, records: VecDeque::new(), seq: 0, no_flow: Arc::from("-") }
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    pub fn counters(&self, dir: Dir) -> &Counters {
        &self.dirs[dir.index()].counters
    }

    /// Forces phase `index` from `now` on, until the next time-keyed phase starts.
    pub fn force_phase(&mut self, now: u64, index: usize) -> Result<(), String> {
        if index >= self.schedule.phases.len() {
            return Err(format!("phase {index} does not exist; the schedule has {}", self.schedule.phases.len()));
        }
        self.forced = Some((now, index));
        Ok(())
    }

    /// The phase in force at `t` ns.
    pub fn phase_at(&self, t: u64) -> usize {
        phase_at(&self.starts_ns, self.forced, t)
    }

    /// A packet arrived at `now` ns travelling in `dir`.
    pub fn on_packet(&mut self, now: u64, dir: Dir, bytes: &[u8]) {
        self.on_packet_owned(now, dir, bytes.to_vec());
    }

    /// As `on_packet`, taking ownership of the buffer: a caller that already holds
    /// the packet in its own allocation (the router, after segmentation) saves a copy.
    pub fn on_packet_owned(&mut self, now: u64, dir: Dir, bytes: Vec<u8>) {
        self.advance(now);
        let phase = self.phase_at(now);
        let settings = self.schedule.phases[phase].settings(dir);
        let d = &mut self.dirs[dir.index()];
        let Some(info) = packet::parse(&bytes) else {
            let rec = d.malformed_record(now, bytes.len(), &self.no_flow);
            finish(&mut d.counters, &mut self.records, rec, Fate::Dropped(DropReason::Malformed), None);
            return;
        };
        let mut pkt = d.admit(now, info, bytes, &self.schedule);
        if pkt.asked.outage_ns > 0 {
            d.dark_until = d.dark_until.max(now + pkt.asked.outage_ns);
        }
        if let Some(reason) = d.drop_reason(settings, &pkt) {
            let rec = pkt.rec;
            finish(&mut d.counters, &mut self.records, rec, Fate::Dropped(reason), None);
            return;
        }
        let (limit_p, limit_b) = queue_limits(settings);
        let size = pkt.bytes.len() as u64;
        if d.queue.len() as u64 + 1 > limit_p || d.queue_bytes + size > limit_b {
            let rec = pkt.rec;
            finish(&mut d.counters, &mut self.records, rec, Fate::Dropped(DropReason::QueueFull), None);
            return;
        }
        let over = settings.ecn_threshold_bytes.is_some_and(|t| d.queue_bytes >= t);
        if (pkt.asked.ce || over) && packet::mark_ce(&mut pkt.bytes) {
            pkt.rec.marks |= marks::CE;
            d.counters.ce_marked += 1;
        }
        let corrupt = pkt.asked.corrupt || (settings.corrupt > 0.0 && d.draws.unit(Stream::Corrupt, pkt.rec.idx, 0) < settings.corrupt);
        if corrupt {
            let bit = d.draws.word(Stream::Corrupt, pkt.rec.idx, 1);
            if packet::flip_payload_bit(&mut pkt.bytes, bit).is_some() {
                pkt.rec.marks |= marks::CORRUPT;
            }
        }
        if settings.duplicate > 0.0 && d.draws.unit(Stream::Duplicate, pkt.rec.idx, 0) < settings.duplicate {
            pkt.asked.duplicate = true;
        }
        d.queue_bytes += size;
        d.queue.push_back(pkt);
        if d.queue.len() == 1 {
            let start = now.max(d.busy_until);
            let fin = self.service_finish(dir, start);
            self.dirs[dir.index()].head_finish = Some(fin);
        }
        self.advance(now);
    }

    /// The next packet due at or before `now`, if any.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Transmit> {
        self.advance(now);
        let pick = Dir::BOTH
            .into_iter()
            .filter_map(|dir| self.dirs[dir.index()].line.peek().map(|l| (l.key(), dir)))
            .filter(|&((due, _, _), _)| due <= now)
            .min()?;
        let dir = pick.1;
        let d = &mut self.dirs[dir.index()];
        let lined = d.line.pop().expect("peeked");
        let Lined { due, seq, copy, pkt, .. } = lined;
        let mut pkt = pkt;
        if copy {
            let (bytes, marks) = (pkt.bytes.clone(), pkt.rec.marks);
            finish(&mut d.counters, &mut self.records, pkt.rec, Fate::Duplicate, Some(due));
            return Some(Transmit { dir, bytes, due_ns: due, marks });
        }
        d.release_holds(&pkt, due, seq);
        if pkt.asked.duplicate {
            pkt.asked.duplicate = false;
            let copy = Box::new(Pkt { rec: pkt.rec.clone(), bytes: pkt.bytes.clone(), asked: Asked::default(), matched: 0 });
            d.line.push(Lined { due, seq, after: 1, copy: true, pkt: copy });
        }
        let Pkt { rec, bytes, .. } = *pkt;
        let marks = rec.marks;
        finish(&mut d.counters, &mut self.records, rec, Fate::Delivered, Some(due));
        Some(Transmit { dir, bytes, due_ns: due, marks })
    }

    /// A lower bound, ns, on the next time `poll_transmit` can return a packet: the
    /// head of a delay line, a hold's bound, or the end of the bottleneck's current
    /// service plus the smallest base delay any packet now queued can still get
    /// (a later phase, or a forced one, may have a shorter delay and, with
    /// reordering jitter, let a queued packet overtake the head). Internal service
    /// completions are not deadlines of their own, so a loop need not wake for every
    /// packet the bottleneck serialises.
    pub fn next_deadline(&self) -> Option<u64> {
        Dir::BOTH
            .into_iter()
            .flat_map(|dir| {
                let d = &self.dirs[dir.index()];
                let line = d.line.peek().map(|l| l.due);
                let held = d.held.iter().map(|h| h.deadline).min();
                let served = d.head_finish.map(|f| f + self.min_delay_from(dir, f));
                [line, held, served]
            })
            .flatten()
            .min()
    }

    /// The smallest base delay, ns, of the phase in force at `t` and every phase
    /// after it (and of a forced phase, which applies whenever it is set).
    fn min_delay_from(&self, dir: Dir, t: u64) -> u64 {
        let first = self.phase_at(t).min(starts_index(&self.starts_ns, t));
        let mut min = self.schedule.phases[first..].iter().map(|p| p.settings(dir).delay_us).min().unwrap_or(0);
        if let Some((_, i)) = self.forced {
            min = min.min(self.schedule.phases[i].settings(dir).delay_us);
        }
        min * 1000
    }

    /// The next finished ground-truth record.
    pub fn poll_record(&mut self) -> Option<Record> {
        self.records.pop_front()
    }

    /// Ends the run: every packet still inside gets a record with fate `in_flight`.
    pub fn shutdown(&mut self) {
        for d in &mut self.dirs {
            let mut inside: Vec<Box<Pkt>> = d.queue.drain(..).collect();
            inside.extend(d.line.drain().filter(|l| !l.copy).map(|l| l.pkt));
            inside.extend(d.held.drain(..).map(|h| h.pkt));
            inside.sort_by_key(|p| p.rec.idx);
            for p in inside {
                finish(&mut d.counters, &mut self.records, p.rec, Fate::InFlight, None);
            }
            d.queue_bytes = 0;
            d.head_finish = None;
        }
    }

    /// Moves packets whose service finished by `now` into the delay line, and held
    /// packets whose bound expired back into it.
    fn advance(&mut self, now: u64) {
        for dir in Dir::BOTH {
            loop {
                let d = &mut self.dirs[dir.index()];
                match d.head_finish {
                    Some(f) if f <= now => {
                        let pkt = d.queue.pop_front().expect("head_finish implies a head");
                        d.queue_bytes -= pkt.bytes.len() as u64;
                        d.head_finish = None;
                        d.busy_until = f;
                        let settings = self.schedule.phases[phase_at(&self.starts_ns, self.forced, f)].settings(dir);
                        self.seq += 1;
                        d.enter_line(pkt, f, settings, self.seq);
                        if let Some(next) = self.dirs[dir.index()].queue.front() {
                            let start = f.max(next.rec.arr_ns);
                            let fin = self.service_finish(dir, start);
                            self.dirs[dir.index()].head_finish = Some(fin);
                        }
                    }
                    _ => break,
                }
            }
            let d = &mut self.dirs[dir.index()];
            while let Some(i) = d.held.iter().position(|h| h.deadline <= now) {
                let h = d.held.swap_remove(i);
                self.seq += 1;
                d.line.push(Lined { due: h.deadline, seq: self.seq, after: 0, copy: false, pkt: h.pkt });
            }
        }
    }

    /// When the head of `dir`'s queue, entering service at `start`, leaves it.
    fn service_finish(&mut self, dir: Dir, start: u64) -> u64 {
        let settings = self.schedule.phases[phase_at(&self.starts_ns, self.forced, start)].settings(dir);
        let d = &mut self.dirs[dir.index()];
        let size = d.queue.front().map_or(0, |p| p.bytes.len() as u64);
        d.service.finish(settings, start, size).unwrap_or(start)
    }
}

/// Index of the last time-keyed phase starting at or before `t`.
fn starts_index(starts_ns: &[u64], t: u64) -> usize {
    starts_ns.partition_point(|&s| s <= t).saturating_sub(1)
}

fn phase_at(starts_ns: &[u64], forced: Option<(u64, usize)>, t: u64) -> usize {
    let k = starts_index(starts_ns, t);
    match forced {
        Some((at, i)) if t >= at && at >= starts_ns[k] => i,
        _ => k,
    }
}

fn queue_limits(s: &LinkSettings) -> (u64, u64) {
    let limited = s.rate_bps.is_some() || !s.trace_ms.is_empty();
    match (limited, s.queue_packets, s.queue_bytes) {
        (false, _, _) => (u64::MAX, u64::MAX),
        (true, None, None) => (DEFAULT_QUEUE_PACKETS, u64::MAX),
        (true, p, b) => (p.unwrap_or(u64::MAX), b.unwrap_or(u64::MAX)),
    }
}

/// Completes a record and counts it.
fn finish(c: &mut Counters, out: &mut VecDeque<Record>, mut rec: Record, fate: Fate, dep: Option<u64>) {
    match fate {
        Fate::Delivered => {
            c.delivered += 1;
            c.delivered_bytes += u64::from(rec.size);
        }
        Fate::Dropped(r) => c.dropped[DropReason::ALL.iter().position(|x| *x == r).unwrap_or(0)] += 1,
        Fate::Duplicate => c.duplicates += 1,
        Fate::InFlight => c.in_flight += 1,
    }
    rec.fate = fate;
    rec.dep_ns = dep;
    out.push_back(rec);
}

fn matches(sel: &FlowMatch, info: &PacketInfo) -> bool {
    let proto_ok = match sel.proto {
        None => true,
        Some(Proto::Udp) => info.proto == packet::PROTO_UDP,
        Some(Proto::Tcp) => info.proto == packet::PROTO_TCP,
    };
    let port_ok = sel.port.is_none_or(|p| info.sport == p || info.dport == p);
    proto_ok && port_ok
}

impl Direction {
    fn new(dir: Dir, schedule: &Schedule) -> Direction {
        let mut selectors: Vec<FlowMatch> = Vec::new();
        let mut actions: HashMap<(Option<usize>, u64), Vec<usize>> = HashMap::new();
        for (i, a) in schedule.actions.iter().enumerate().filter(|(_, a)| a.dir == dir) {
            let sel = a.flow.as_ref().map(|f| match selectors.iter().position(|s| s == f) {
                Some(p) => p,
                None => {
                    selectors.push(f.clone());
                    selectors.len() - 1
                }
            });
            actions.entry((sel, a.index)).or_default().push(i);
        }
        Direction {
            dir,
            draws: Draws::new(schedule.seed, dir),
            ge: GeState::default(),
            service: Service::default(),
            next_idx: 0,
            flows: HashMap::new(),
            sel_next: vec![0; selectors.len()],
            selectors,
            actions,
            queue: VecDeque::new(),
            queue_bytes: 0,
            head_finish: None,
            busy_until: 0,
            line: BinaryHeap::new(),
            last_base_due: 0,
            held: Vec::new(),
            dark_until: 0,
            counters: Counters::default(),
        }
    }

    fn malformed_record(&mut self, now: u64, size: usize, no_flow: &Arc<str>) -> Record {
        let idx = self.next_idx;
        self.next_idx += 1;
        self.counters.arrived += 1;
        Record {
            dir: self.dir,
            idx,
            fidx: 0,
            flow: no_flow.clone(),
            proto: "other",
            sport: 0,
            dport: 0,
            size: size as u32,
            arr_ns: now,
            fate: Fate::InFlight,
            dep_ns: None,
            qbytes: self.queue_bytes,
            marks: 0,
        }
    }

    /// Numbers the packet, finds its flow and the actions aimed at it.
    fn admit(&mut self, now: u64, info: PacketInfo, bytes: Vec<u8>, schedule: &Schedule) -> Box<Pkt> {
        let idx = self.next_idx;
        self.next_idx += 1;
        self.counters.arrived += 1;
        let key = FlowKey { proto: info.proto, src: info.src, dst: info.dst, sport: info.sport, dport: info.dport };
        let entry = self.flows.entry(key).or_insert_with(|| (Arc::from(info.flow_key()), 0));
        let fidx = entry.1;
        entry.1 += 1;
        let flow = entry.0.clone();
        let mut asked = Asked::default();
        let mut matched = 0u64;
        self.apply_actions((None, idx), schedule, &mut asked);
        for s in 0..self.selectors.len() {
            if matches(&self.selectors[s], &info) {
                matched |= 1 << (s % 64);
                let n = self.sel_next[s];
                self.sel_next[s] += 1;
                self.apply_actions((Some(s), n), schedule, &mut asked);
            }
        }
        let rec = Record {
            dir: self.dir,
            idx,
            fidx,
            flow,
            proto: info.proto_name(),
            sport: info.sport,
            dport: info.dport,
            size: bytes.len() as u32,
            arr_ns: now,
            fate: Fate::InFlight,
            dep_ns: None,
            qbytes: self.queue_bytes,
            marks: 0,
        };
        Box::new(Pkt { rec, bytes, asked, matched })
    }

    fn apply_actions(&self, key: (Option<usize>, u64), schedule: &Schedule, asked: &mut Asked) {
        let Some(list) = self.actions.get(&key) else { return };
        for &i in list {
            let a = &schedule.actions[i];
            match a.action {
                ActionKind::Drop => asked.drop = true,
                ActionKind::Hold => {
                    let max = a.max_hold_us.unwrap_or(DEFAULT_MAX_HOLD_US) * 1000;
                    asked.hold = Some((a.k.unwrap_or(1), max, key.0));
                }
                ActionKind::Delay => asked.extra_ns += a.extra_us.unwrap_or(0) * 1000,
                ActionKind::Outage => asked.outage_ns = asked.outage_ns.max(a.duration_us.unwrap_or(0) * 1000),
                ActionKind::Duplicate => asked.duplicate = true,
                ActionKind::Corrupt => asked.corrupt = true,
                ActionKind::Ce => asked.ce = true,
            }
        }
    }

    /// Blackhole (the phase's, or an outage's from its packet on), index drop and
    /// random loss, in that order.
    fn drop_reason(&mut self, s: &LinkSettings, pkt: &Pkt) -> Option<DropReason> {
        if s.blackhole || pkt.rec.arr_ns < self.dark_until {
            return Some(DropReason::Blackhole);
        }
        if pkt.asked.drop {
            return Some(DropReason::LossIndex);
        }
        let idx = pkt.rec.idx;
        match &s.loss {
            Some(Loss::Iid(p)) if self.draws.unit(Stream::Loss, idx, 0) < *p => Some(DropReason::LossIid),
            Some(Loss::GilbertElliott(g)) if self.ge.step(g, &mut self.draws, idx) => Some(DropReason::LossGe),
            _ => None,
        }
    }

    /// Delay, jitter, extra delay and hold for a packet leaving the queue at `finish`.
    fn enter_line(&mut self, mut pkt: Box<Pkt>, finish: u64, s: &LinkSettings, seq: u64) {
        let mut base = finish + s.delay_us * 1000 + jitter_ns(s, &mut self.draws, pkt.rec.idx);
        if base < self.last_base_due {
            if s.jitter_reorders {
                pkt.rec.marks |= marks::REORDERED_BY_JITTER;
            } else {
                base = self.last_base_due;
            }
        }
        self.last_base_due = self.last_base_due.max(base);
        let mut due = base;
        if pkt.asked.extra_ns > 0 {
            due += pkt.asked.extra_ns;
            pkt.rec.marks |= marks::EXTRA_DELAY;
        }
        if let Some((k, max_hold, selector)) = pkt.asked.hold.take() {
            pkt.rec.marks |= marks::HELD;
            self.held.push(Held { pkt, remaining: k, selector, due, deadline: due + max_hold });
            return;
        }
        self.line.push(Lined { due, seq, after: 0, copy: false, pkt });
    }

    /// Counts `left` (a packet just delivered, due at `due` with line order `seq`)
    /// against every hold it is behind, and releases holds whose count reached zero
    /// right behind it (or at their own due time, if later).
    fn release_holds(&mut self, left: &Pkt, due: u64, seq: u64) {
        let mut i = 0;
        while i < self.held.len() {
            let h = &mut self.held[i];
            let counts = left.rec.idx > h.pkt.rec.idx
                && h.selector.is_none_or(|s| left.matched & (1 << (s % 64)) != 0);
            if counts {
                h.remaining -= 1;
            }
            if h.remaining == 0 {
                let h = self.held.swap_remove(i);
                self.line.push(Lined { due: h.due.max(due), seq, after: 2, copy: false, pkt: h.pkt });
            } else {
                i += 1;
            }
        }
    }
}
