//! The discrete-event loop: two quinn-proto endpoints and the emulator's core.
//!
//! Time is u64 ns since the link started; quinn-proto sees it as `base + ns`
//! Instants (it only ever subtracts them). The loop jumps to the earliest of the
//! link's next deadline, either connection's `poll_timeout`, either application's
//! timer; at that instant it delivers what the link has due, fires due timers, then
//! lets both hosts react and send — what quinn's connection driver does on a wake.

use std::net::SocketAddrV4;
use std::sync::atomic::Ordering;

use link_core::record::marks;
use link_core::Dir;
use serde_json::json;

use crate::clock::Clock;
use crate::config::Config;
use crate::hosts::{finish_files, Client, Host, Logs, Server};
use crate::linkio::LinkIo;
use crate::wire;

/// The first client's address; flow k uses port CLIENT_PORT + k - 1.
const CLIENT_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 18, 0, 1);
const CLIENT_PORT: u16 = 40000;
const SERVER: &str = "198.19.0.1:4433";
/// Consecutive firings of an unchanged, still-due timer before the run is abandoned.
const STUCK_LIMIT: u32 = 1000;

pub fn run(config: &Config) -> Result<serde_json::Value, String> {
    let dir = &config.run_dir;
    let mut io = LinkIo::open(dir, "quinn", config.epoch_unix_ns)?;
    let clock = Clock::start();
    let server_addr: SocketAddrV4 = SERVER.parse().unwrap();
    let mut hosts = Hosts {
        clients: Vec::new(),
        servers: Vec::new(),
    };
    let server_logs = Logs::create(config, "server").map_err(|e| format!("server: {e}"))?;
    for k in 1..=config.clients {
        let addr = SocketAddrV4::new(CLIENT_IP, CLIENT_PORT + k as u16 - 1);
        let server = Server::new(config, &clock, k, server_addr, server_logs.clone())
            .map_err(|e| format!("server: {e}"))?;
        let client = Client::new(config, &clock, k, addr, server_addr)?;
        hosts.servers.push(server);
        hosts.clients.push(client);
    }
    let mut lp = Loop {
        clock: clock.clone(),
        now: 0,
        steps: 0,
        buf: Vec::with_capacity(64 * 1024),
    };
    let outcome = lp.run(&mut io, &mut hosts, config.timeout_ns);
    finish_files(&mut hosts.clients, &mut hosts.servers)?;
    let link_summary = io.close().map_err(|e| format!("link output: {e}"))?;
    // The first client's problem, named by its directory when there are several.
    let client_error = || {
        hosts.clients.iter().enumerate().find_map(|(i, c)| {
            c.error().map(|e| {
                if i == 0 {
                    e
                } else {
                    format!("client-{}: {e}", i + 1)
                }
            })
        })
    };
    let error = match outcome {
        Err(e) => Some(e),
        Ok(false) => Some(client_error().unwrap_or_else(|| {
            format!(
                "gave up after LL_TIMEOUT_S={} (virtual)",
                config.timeout_ns as f64 / 1e9
            )
        })),
        Ok(true) => client_error(),
    };
    Ok(json!({
        "error": error,
        "virtual_s": lp.now as f64 / 1e9,
        "steps": lp.steps,
        "link": link_summary,
        "client": hosts.clients[0].side().counters.to_json(),
        "server": hosts.servers[0].side().counters.to_json(),
        "flows": config.clients,
    }))
}

/// The run's hosts: client k talks to server endpoint k (one pair per flow).
struct Hosts {
    clients: Vec<Client>,
    servers: Vec<Server>,
}

impl Hosts {
    /// Clients first, then servers: the order in which each instant is handled.
    fn all(&mut self) -> impl Iterator<Item = &mut dyn Host> {
        let clients = self.clients.iter_mut().map(|c| c as &mut dyn Host);
        clients.chain(self.servers.iter_mut().map(|s| s as &mut dyn Host))
    }

    fn finished(&self) -> bool {
        self.clients.iter().all(Client::finished)
    }

    /// The host a datagram of `dir` is for: flows are told apart by client port.
    fn receiver(&mut self, dir: Dir, client_port: u16) -> Option<&mut dyn Host> {
        let k = usize::from(client_port.checked_sub(CLIENT_PORT)?);
        match dir {
            Dir::C2s => self.servers.get_mut(k).map(|s| s as &mut dyn Host),
            Dir::S2c => self.clients.get_mut(k).map(|c| c as &mut dyn Host),
        }
    }
}

struct Loop {
    clock: Clock,
    now: u64,
    steps: u64,
    buf: Vec<u8>,
}

impl Loop {
    /// Ok(true) when every client finished, Ok(false) when `until` came first.
    fn run(&mut self, io: &mut LinkIo, hosts: &mut Hosts, until: u64) -> Result<bool, String> {
        for client in hosts.clients.iter_mut() {
            client.start(&self.clock, 0)?;
        }
        self.react(io, hosts)?;
        while !hosts.finished() {
            let mut next = io.link.next_deadline();
            for host in hosts.all() {
                for t in [next_timer(host, &self.clock), host.app_deadline()]
                    .into_iter()
                    .flatten()
                {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
            let Some(t) = next else {
                return Err(format!(
                    "at {:.6} s nothing is scheduled but a client is not finished (a stack or harness bug)",
                    self.now as f64 / 1e9
                ));
            };
            if t > until {
                self.now = until;
                return Ok(false);
            }
            self.now = self.now.max(t);
            self.clock.now_ns.store(self.now, Ordering::Relaxed);
            self.step(io, hosts)?;
        }
        Ok(true)
    }

    fn step(&mut self, io: &mut LinkIo, hosts: &mut Hosts) -> Result<(), String> {
        let now = self.now;
        self.steps += 1;
        while let Some(t) = io.poll(now).map_err(|e| format!("link output: {e}"))? {
            let Some((from, to, ecn, payload)) = wire::parse(&t.bytes) else {
                return Err(format!(
                    "the link delivered a packet that is not IPv4/UDP ({} bytes)",
                    t.bytes.len()
                ));
            };
            let client_port = if t.dir == Dir::C2s {
                from.port()
            } else {
                to.port()
            };
            let Some(host) = hosts.receiver(t.dir, client_port) else {
                return Err(format!("the link delivered a datagram for client port {client_port}, which no flow has"));
            };
            if t.marks & marks::CORRUPT != 0 {
                // A flipped payload bit breaks the UDP checksum: the kernel would drop it.
                host.side().counters.corrupt_dropped += 1;
                continue;
            }
            host.side().counters.received += 1;
            host.receive(&self.clock, now, from, ecn, payload, &mut self.buf, io)?;
        }
        for host in hosts.all() {
            fire_timer(host, &self.clock, now);
            if host.app_deadline().is_some_and(|d| d <= now) {
                host.on_app_timer(&self.clock, now);
            }
        }
        self.react(io, hosts)?;
        for host in hosts.all() {
            check_stuck(host, &self.clock, now)?;
        }
        Ok(())
    }

    /// Lets each host hand events to its application and send what it can.
    fn react(&mut self, io: &mut LinkIo, hosts: &mut Hosts) -> Result<(), String> {
        for host in hosts.all() {
            host.react(&self.clock, self.now, &mut self.buf, io)?;
        }
        Ok(())
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
