//! The discrete-event loop: two quinn-proto endpoints and the emulator's core.
//!
//! Time is u64 ns since the link started; quinn-proto sees it as `base + ns`
//! Instants (it only ever subtracts them). The loop jumps to the earliest of the
//! link's next deadline, either connection's `poll_timeout`, either application's
//! timer; at that instant it delivers what the link has due, fires due timers, then
//! lets both hosts react and send — what quinn's connection driver does on a wake.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use link_core::lateness::Lateness;
use link_core::output::{summary, Log, SidePcap};
use link_core::record::marks;
use link_core::{Dir, Schedule};
use serde_json::json;

use crate::config::Config;
use crate::hosts::{Client, Host, Server};
use crate::wire;

pub const CLIENT: &str = "198.18.0.1:40000";
pub const SERVER: &str = "198.19.0.1:4433";
/// Datagrams per poll_transmit (GSO batch), as quinn's own driver asks for.
pub const MAX_BATCH: usize = 10;
/// Consecutive firings of an unchanged, still-due timer before the run is abandoned.
const STUCK_LIMIT: u32 = 1000;

/// Virtual ns ⇄ the Instants quinn-proto takes.
#[derive(Clone)]
pub struct Clock {
    base: Instant,
    /// The loop's current time, for the hosts' token and TLS clocks.
    pub now_ns: Arc<AtomicU64>,
}

impl Clock {
    pub fn at(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    /// Exact: Instants and Durations are whole ns, and every Instant quinn-proto
    /// hands back is one of ours plus a Duration.
    pub fn ns(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.base);
        d.as_nanos() as u64
    }
}

/// The link with its ground-truth log and captures, as the router (and the Python
/// bindings) drive it: a packet is captured on the side it enters from when it
/// arrives, and on the other side at its due time.
pub struct LinkIo {
    link: link_core::Link,
    log: Log,
    pcap: [SidePcap; 2],
    start_unix_ns: u64,
}

impl LinkIo {
    pub fn send(&mut self, now: u64, dir: Dir, packet: &[u8]) -> std::io::Result<()> {
        self.pcap[dir.index()].write(self.start_unix_ns + now, packet)?;
        self.link.on_packet(now, dir, packet);
        self.drain()
    }

    fn poll(&mut self, now: u64) -> std::io::Result<Option<link_core::Transmit>> {
        let Some(t) = self.link.poll_transmit(now) else {
            return Ok(None);
        };
        self.pcap[1 - t.dir.index()].write(self.start_unix_ns + t.due_ns, &t.bytes)?;
        self.drain()?;
        Ok(Some(t))
    }

    fn drain(&mut self) -> std::io::Result<()> {
        while let Some(r) = self.link.poll_record() {
            self.log.record(&r)?;
        }
        Ok(())
    }

    fn close(&mut self) -> std::io::Result<serde_json::Value> {
        self.link.shutdown();
        self.drain()?;
        let s = summary(&self.link, &Lateness::default(), 0);
        self.log.finish(&s)?;
        for p in self.pcap.iter_mut() {
            p.close()?;
        }
        Ok(s)
    }
}

pub fn run(config: &Config) -> Result<serde_json::Value, String> {
    let dir = &config.run_dir;
    let io_err = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let schedule = Schedule::load(&dir.join("schedule.json"))
        .map_err(|e| format!("{}: {e}", dir.join("schedule.json").display()))?;
    let link = link_core::Link::new(schedule);
    let argv = vec!["longlook-virtual".to_string(), "quinn".to_string()];
    let log = Log::create(
        Some(&dir.join("link.ndjson")),
        &link,
        &argv,
        config.epoch_unix_ns,
    )
    .map_err(|e| io_err("link.ndjson", e))?;
    std::fs::create_dir_all(dir.join("pcap")).map_err(|e| io_err("pcap/", e))?;
    let pcap = [
        SidePcap::create(&dir.join("pcap"), "client").map_err(|e| io_err("pcap/client.pcap", e))?,
        SidePcap::create(&dir.join("pcap"), "server").map_err(|e| io_err("pcap/server.pcap", e))?,
    ];
    let mut io = LinkIo {
        link,
        log,
        pcap,
        start_unix_ns: config.epoch_unix_ns,
    };
    let clock = Clock {
        base: Instant::now(),
        now_ns: Arc::new(AtomicU64::new(0)),
    };
    let client_addr: SocketAddrV4 = CLIENT.parse().unwrap();
    let server_addr: SocketAddrV4 = SERVER.parse().unwrap();
    let mut server =
        Server::new(config, &clock, server_addr).map_err(|e| format!("server: {e}"))?;
    let mut client = Client::new(config, &clock, client_addr, server_addr)
        .map_err(|e| format!("client: {e}"))?;
    let mut lp = Loop {
        clock: clock.clone(),
        now: 0,
        steps: 0,
        buf: Vec::with_capacity(64 * 1024),
    };
    let outcome = lp.run(&mut io, &mut client, &mut server, config.timeout_ns);
    crate::hosts::finish_files(&mut client, &mut server)?;
    let link_summary = io.close().map_err(|e| io_err("link output", e))?;
    let error = match outcome {
        Err(e) => Some(e),
        Ok(false) => Some(client.error().unwrap_or_else(|| {
            format!(
                "gave up after LL_TIMEOUT_S={} (virtual)",
                config.timeout_ns as f64 / 1e9
            )
        })),
        Ok(true) => client.error(),
    };
    Ok(json!({
        "error": error,
        "virtual_s": lp.now as f64 / 1e9,
        "steps": lp.steps,
        "link": link_summary,
        "client": client.side().counters.to_json(),
        "server": server.side().counters.to_json(),
    }))
}

struct Loop {
    clock: Clock,
    now: u64,
    steps: u64,
    buf: Vec<u8>,
}

impl Loop {
    /// Ok(true) when the client finished, Ok(false) when `until` came first.
    fn run(
        &mut self,
        io: &mut LinkIo,
        client: &mut Client,
        server: &mut Server,
        until: u64,
    ) -> Result<bool, String> {
        client.start(&self.clock, 0)?;
        self.react(io, client, server)?;
        while !client.finished() {
            let t = [
                io.link.next_deadline(),
                next_timer(client, &self.clock),
                next_timer(server, &self.clock),
                client.app_deadline(),
                server.app_deadline(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(t) = t else {
                return Err(format!(
                    "at {:.6} s nothing is scheduled but the client is not finished (a stack or harness bug)",
                    self.now as f64 / 1e9
                ));
            };
            if t > until {
                self.now = until;
                return Ok(false);
            }
            self.now = self.now.max(t);
            self.clock.now_ns.store(self.now, Ordering::Relaxed);
            self.step(io, client, server)?;
        }
        Ok(true)
    }

    fn step(
        &mut self,
        io: &mut LinkIo,
        client: &mut Client,
        server: &mut Server,
    ) -> Result<(), String> {
        let now = self.now;
        self.steps += 1;
        while let Some(t) = io.poll(now).map_err(|e| format!("link output: {e}"))? {
            let host: &mut dyn Host = if t.dir == Dir::C2s { server } else { client };
            if t.marks & marks::CORRUPT != 0 {
                // A flipped payload bit breaks the UDP checksum: the kernel would drop it.
                host.side().counters.corrupt_dropped += 1;
                continue;
            }
            let Some((from, ecn, payload)) = wire::parse(&t.bytes) else {
                return Err(format!(
                    "the link delivered a packet that is not IPv4/UDP ({} bytes)",
                    t.bytes.len()
                ));
            };
            host.side().counters.received += 1;
            host.receive(&self.clock, now, from, ecn, payload, &mut self.buf, io)?;
        }
        for host in [client as &mut dyn Host, server as &mut dyn Host] {
            fire_timer(host, &self.clock, now);
            if host.app_deadline().is_some_and(|d| d <= now) {
                host.on_app_timer(&self.clock, now);
            }
        }
        self.react(io, client, server)?;
        for host in [client as &mut dyn Host, server as &mut dyn Host] {
            check_stuck(host, &self.clock, now)?;
        }
        Ok(())
    }

    /// Lets each host hand events to its application and send what it can.
    fn react(
        &mut self,
        io: &mut LinkIo,
        client: &mut Client,
        server: &mut Server,
    ) -> Result<(), String> {
        client.react(&self.clock, self.now, &mut self.buf, io)?;
        server.react(&self.clock, self.now, &mut self.buf, io)
    }
}

/// The connection's next timer in ns, moved one ns past an instant at which the
/// same timer already fired and stayed due (never the case in quinn-proto, whose
/// timers are Instants cleared on expiry — but a livelock guard costs nothing).
fn next_timer(host: &mut dyn Host, clock: &Clock) -> Option<u64> {
    let t = host.side().conn_mut()?.poll_timeout()?;
    let at = clock.ns(t);
    match host.side().fired {
        Some((same, when)) if same == t && at <= when => Some(when + 1),
        _ => Some(at),
    }
}

fn fire_timer(host: &mut dyn Host, clock: &Clock, now: u64) {
    let Some(conn) = host.side().conn_mut() else {
        return;
    };
    let Some(t) = conn.poll_timeout() else { return };
    if clock.ns(t) > now {
        return;
    }
    conn.handle_timeout(clock.at(now));
    host.side().fired = Some((t, now));
    host.side().firing = true;
}

fn check_stuck(host: &mut dyn Host, clock: &Clock, now: u64) -> Result<(), String> {
    let side = host.side();
    if !std::mem::take(&mut side.firing) {
        return Ok(());
    }
    let fired = side.fired.map(|f| f.0);
    let after = side.conn_mut().and_then(|c| c.poll_timeout());
    if after.is_some() && after == fired && clock.ns(after.unwrap()) <= now {
        side.stuck += 1;
        if side.stuck >= STUCK_LIMIT {
            return Err(format!(
                "{}: timer still due after {} firings at virtual time {now} ns; quinn-proto does not clear it",
                side.name, side.stuck
            ));
        }
    } else {
        side.stuck = 0;
    }
    Ok(())
}
