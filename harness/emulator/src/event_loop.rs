//! The real-time router: one epoll loop over the two TUN devices, a timerfd for the
//! link's next deadline, a signalfd for SIGTERM/SIGINT and the control socket. All
//! impairment logic lives in the sans-IO `Link`; this file only moves bytes and time.

use crate::control::{self, Client, Listener, Request};
use longlook_link::output::{summary, Log, SidePcap};
use crate::sys::{self, Epoll, TimerFd};
use longlook_link::lateness::Lateness;
use longlook_link::offload::{self, Coalescer, VnetHdr, VNET_HDR_LEN};
use longlook_link::record::marks;
use longlook_link::{Dir, Link};
use serde_json::json;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const T_CLIENT: u64 = 0;
const T_SERVER: u64 = 1;
const T_TIMER: u64 = 2;
const T_SIGNAL: u64 = 3;
const T_LISTEN: u64 = 4;
const T_CONTROL_BASE: u64 = 100;

/// Wire packets taken from one device per wake-up before deliveries get a turn
/// (bounds the lateness a burst of reads can cause).
const READ_BATCH: usize = 64;
/// Largest read a TUN hands us: a 64 KiB IP packet plus the virtio-net header.
const BUF_BYTES: usize = 65536 + VNET_HDR_LEN;

pub struct Router {
    pub link: Link,
    /// TUN devices by side: 0 = client namespace, 1 = server namespace.
    pub tun: [OwnedFd; 2],
    pub log: Log,
    pub pcap: Option<[SidePcap; 2]>,
    pub control: Option<Listener>,
    /// Deliver every packet due within this many ns of now on each wake-up.
    pub slice_ns: u64,
    /// Devices carry virtio-net headers (segmentation offload; see `offload`).
    pub offload: bool,
    /// The absolute time the timer is armed for (0: disarmed).
    pub armed_at: u64,
    /// CLOCK_MONOTONIC and CLOCK_REALTIME at the link's time 0.
    pub start_mono: u64,
    pub start_unix: u64,
}

struct LoopState {
    lateness: Lateness,
    /// Wire packets of the current read, and the per-side write coalescers.
    segments: Vec<Vec<u8>>,
    coalesce: [Coalescer; 2],
    write_errors: u64,
    stop: bool,
    clients: HashMap<u64, Client>,
    next_client: u64,
    last_flush: u64,
}

/// Side whose device a packet of `dir` is read from (written to the other one).
fn side_in(dir: Dir) -> usize {
    match dir {
        Dir::C2s => 0,
        Dir::S2c => 1,
    }
}

impl Router {
    fn now(&self) -> u64 {
        sys::monotonic_ns().saturating_sub(self.start_mono)
    }

    /// Runs until SIGTERM/SIGINT or a `stop` request, then logs what is still in the
    /// link as in flight, writes the summary and flushes everything.
    pub fn run(&mut self, signals: OwnedFd) -> io::Result<()> {
        let epoll = Epoll::new()?;
        let timer = TimerFd::new()?;
        epoll.add(self.tun[0].as_raw_fd(), T_CLIENT)?;
        epoll.add(self.tun[1].as_raw_fd(), T_SERVER)?;
        epoll.add(timer.0.as_raw_fd(), T_TIMER)?;
        epoll.add(signals.as_raw_fd(), T_SIGNAL)?;
        if let Some(l) = &self.control {
            epoll.add(l.inner.as_raw_fd(), T_LISTEN)?;
        }
        let mut st = LoopState {
            lateness: Lateness::default(),
            segments: Vec::new(),
            coalesce: [Coalescer::default(), Coalescer::default()],
            write_errors: 0,
            stop: false,
            clients: HashMap::new(),
            next_client: T_CONTROL_BASE,
            last_flush: 0,
        };
        let mut buf = vec![0u8; BUF_BYTES];
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
        let mut timeout_ms = -1;
        while !st.stop {
            let n = epoll.wait(&mut events, timeout_ms)?;
            for ev in &events[..n] {
                match ev.u64 {
                    T_CLIENT => self.read_side(Dir::C2s, &mut buf, &mut st.segments)?,
                    T_SERVER => self.read_side(Dir::S2c, &mut buf, &mut st.segments)?,
                    T_TIMER => {
                        timer.drain();
                        self.armed_at = 0; // fired: a one-shot timer is disarmed now
                    }
                    T_SIGNAL => st.stop = true,
                    T_LISTEN => self.accept(&epoll, &mut st),
                    token => self.serve(token, &epoll, &mut st),
                }
            }
            self.deliver(&mut st)?;
            timeout_ms = self.arm(&timer);
        }
        self.link.shutdown();
        self.drain_records(&mut st, true)?;
        let s = summary(&self.link, &st.lateness, st.write_errors);
        self.log.finish(&s)?;
        if let Some(p) = &mut self.pcap {
            p[0].close()?;
            p[1].close()?;
        }
        Ok(())
    }

    /// Reads up to a batch of packets travelling in `dir` into the link, cutting
    /// offloaded super-packets into wire packets first.
    fn read_side(&mut self, dir: Dir, buf: &mut [u8], segments: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let fd = self.tun[side_in(dir)].as_raw_fd();
        let mut taken = 0;
        while taken < READ_BATCH {
            let Some(n) = sys::read_packet(fd, buf)? else { break };
            let now = self.now();
            segments.clear();
            if self.offload {
                let Some(h) = VnetHdr::parse(&buf[..n]) else { continue };
                offload::split(h, &buf[VNET_HDR_LEN..n], segments);
            } else {
                segments.push(buf[..n].to_vec());
            }
            taken += segments.len();
            for seg in segments.drain(..) {
                if let Some(p) = &mut self.pcap {
                    p[side_in(dir)].write(self.start_unix + now, &seg)?;
                }
                self.link.on_packet_owned(now, dir, seg);
            }
        }
        Ok(())
    }

    /// Writes every packet due within the slice (merging TCP segments per side when
    /// offloading) and logs finished records.
    fn deliver(&mut self, st: &mut LoopState) -> io::Result<()> {
        let horizon = self.now() + self.slice_ns;
        while let Some(t) = self.link.poll_transmit(horizon) {
            let out = 1 - side_in(t.dir);
            let now = self.now();
            st.lateness.add(t.due_ns, now);
            if let Some(p) = &mut self.pcap {
                p[out].write(self.start_unix + now, &t.bytes)?;
            }
            if !self.offload {
                if sys::write_packet(self.tun[out].as_raw_fd(), &t.bytes).is_err() {
                    st.write_errors += 1;
                }
                continue;
            }
            let mergeable = t.marks & marks::CORRUPT == 0;
            if !st.coalesce[out].push(&t.bytes, mergeable) {
                self.write_coalesced(out, st);
                st.coalesce[out].push(&t.bytes, mergeable);
            }
        }
        self.write_coalesced(0, st);
        self.write_coalesced(1, st);
        self.drain_records(st, false)
    }

    fn write_coalesced(&self, side: usize, st: &mut LoopState) {
        if let Some((h, bytes)) = st.coalesce[side].flush() {
            if sys::write_prefixed(self.tun[side].as_raw_fd(), &h.to_bytes(), bytes).is_err() {
                st.write_errors += 1;
            }
        }
    }

    fn drain_records(&mut self, st: &mut LoopState, final_flush: bool) -> io::Result<()> {
        while let Some(r) = self.link.poll_record() {
            self.log.record(&r)?;
        }
        // Keep the file fresh for readers during long runs, without a write per packet.
        let now = self.now();
        if final_flush || now - st.last_flush > 1_000_000_000 {
            st.last_flush = now;
            self.log.flush()?;
        }
        Ok(())
    }

    /// Arms the timer for the link's next deadline; returns the epoll timeout to use
    /// (0 when something is already due within the slice).
    fn arm(&mut self, timer: &TimerFd) -> i32 {
        let Some(t) = self.link.next_deadline() else {
            self.set_timer(timer, 0);
            return -1;
        };
        if t <= self.now() + self.slice_ns {
            return 0;
        }
        // Wake half a slice early: the wake-up itself takes about that long.
        self.set_timer(timer, self.start_mono + t - self.slice_ns / 2);
        -1
    }

    /// Re-arms the timer only when the time changes: timerfd_settime is a system
    /// call, and at high packet rates the deadline often stays the same.
    fn set_timer(&mut self, timer: &TimerFd, at_ns: u64) {
        if self.armed_at != at_ns {
            timer.set_abs(at_ns);
            self.armed_at = at_ns;
        }
    }

    fn accept(&self, epoll: &Epoll, st: &mut LoopState) {
        let Some(l) = &self.control else { return };
        while let Ok((stream, _)) = l.inner.accept() {
            let Ok(c) = Client::new(stream) else { continue };
            let token = st.next_client;
            st.next_client += 1;
            if epoll.add(c.stream.as_raw_fd(), token).is_ok() {
                st.clients.insert(token, c);
            }
        }
    }

    fn serve(&mut self, token: u64, epoll: &Epoll, st: &mut LoopState) {
        let Some(mut c) = st.clients.remove(&token) else { return };
        let (lines, closed) = c.read_lines();
        for line in lines {
            let reply = match control::parse(&line) {
                Ok(Request::Phase { index }) => match self.link.force_phase(self.now(), index) {
                    Ok(()) => json!({"ok": true, "phase": index}),
                    Err(e) => json!({"error": e}),
                },
                Ok(Request::Stats) => summary(&self.link, &st.lateness, st.write_errors),
                Ok(Request::Stop) => {
                    st.stop = true;
                    json!({"ok": true})
                }
                Err(e) => json!({"error": e}),
            };
            c.reply(&reply);
        }
        if closed {
            epoll.delete(c.stream.as_raw_fd());
        } else {
            st.clients.insert(token, c);
        }
    }
}
