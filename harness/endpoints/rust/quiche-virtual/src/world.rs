//! The discrete-event loop. quiche-endpoint's client and server loops are
//! blocking loops around `Socket::wait`, so each host runs them on a thread of
//! its own; but only one thread ever runs at a time: a host runs until it waits,
//! then hands the turn back to the loop, which delivers the link's due packets,
//! advances the (shimmed) clock to the earliest deadline of the link and of every
//! host's wait, and gives the turn to each host that has a datagram or a due
//! deadline, in a fixed order (clients, then the server). Threads are only a way
//! to keep the endpoint's code as it is; the schedule is sequential and
//! deterministic.

use std::cell::Cell;
use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use link_core::record::marks;
use link_core::Dir;
use serde_json::{json, Value};

use crate::linkio::LinkIo;
use crate::{shim, wire};

/// Host 0 is the server; client k (1-based) is host k.
pub const SERVER: usize = 0;
/// Turns given within one instant before the run is declared stuck.
const REACT_LIMIT: u64 = 100_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    Waiting,
    Done,
}

#[derive(Default)]
pub struct Counters {
    pub sent: u64,
    pub received: u64,
    pub corrupt_dropped: u64,
}

impl Counters {
    pub fn to_json(&self) -> Value {
        json!({"sent": self.sent, "received": self.received, "corrupt_dropped": self.corrupt_dropped})
    }
}

struct Host {
    addr: SocketAddrV4,
    dir: Dir,
    inbox: VecDeque<(Vec<u8>, SocketAddrV4)>,
    wake: Option<u64>,
    state: State,
    counters: Counters,
    error: Option<String>,
}

struct World {
    hosts: Vec<Host>,
    /// The host whose turn it is; None: the loop's.
    turn: Option<usize>,
    io: LinkIo,
    now: u64,
    /// A send the link could not record (its files); ends the run.
    io_error: Option<String>,
}

static WORLD: Mutex<Option<World>> = Mutex::new(None);
static TURN: Condvar = Condvar::new();
/// `Instant` at virtual time 0.
static ZERO: OnceLock<Instant> = OnceLock::new();

thread_local! {
    static HOST: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn world() -> MutexGuard<'static, Option<World>> {
    WORLD.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn instant_ns(t: Instant) -> u64 {
    shim::instant_ns(t, *ZERO.get().expect("the loop set ZERO"))
}

pub fn current_host() -> usize {
    HOST.with(Cell::get)
}

pub fn local_addr(host: usize) -> SocketAddrV4 {
    world().as_ref().unwrap().hosts[host].addr
}

pub fn send(host: usize, buf: &[u8], to: SocketAddr) -> std::io::Result<()> {
    let SocketAddr::V4(to) = to else {
        return Err(std::io::Error::other("the virtual link is IPv4 only"));
    };
    let mut g = world();
    let w = g.as_mut().unwrap();
    let h = &mut w.hosts[host];
    h.counters.sent += 1;
    let (dir, packet) = (h.dir, wire::udp4(h.addr, to, 0, buf));
    let now = w.now;
    if let Err(e) = w.io.send(now, dir, &packet) {
        w.io_error.get_or_insert(format!("link output: {e}"));
    }
    Ok(())
}

pub fn recv(host: usize) -> Option<(Vec<u8>, SocketAddrV4)> {
    world().as_mut().unwrap().hosts[host].inbox.pop_front()
}

/// Called by a host thread: gives the turn back and sleeps until it is given again.
pub fn wait(host: usize, wake: Option<u64>) {
    let mut g = world();
    let w = g.as_mut().unwrap();
    w.hosts[host].wake = wake;
    w.hosts[host].state = State::Waiting;
    w.turn = None;
    TURN.notify_all();
    while g.as_ref().unwrap().turn != Some(host) {
        g = TURN.wait(g).unwrap_or_else(|e| e.into_inner());
    }
}

/// Runs `body` as host `host` once the loop first gives it the turn.
pub fn spawn(
    host: usize,
    name: String,
    body: impl FnOnce() -> Result<(), String> + Send + 'static,
) {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            HOST.with(|h| h.set(host));
            {
                let mut g = world();
                while g.as_ref().unwrap().turn != Some(host) {
                    g = TURN.wait(g).unwrap_or_else(|e| e.into_inner());
                }
            }
            // A panic must still hand the turn back, or the loop waits forever.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
                .unwrap_or_else(|_| {
                    Err("the host's thread panicked (stderr has the message)".into())
                });
            let mut g = world();
            let w = g.as_mut().unwrap();
            w.hosts[host].state = State::Done;
            w.hosts[host].error = outcome.err();
            w.turn = None;
            TURN.notify_all();
        })
        .expect("spawning a host thread");
}

pub struct Outcome {
    pub error: Option<String>,
    pub virtual_s: f64,
    pub steps: u64,
    pub link: Value,
    pub client: Value,
    pub server: Value,
}

pub fn install(io: LinkIo, addrs: &[(SocketAddrV4, Dir)]) {
    ZERO.get_or_init(Instant::now);
    let hosts = addrs
        .iter()
        .map(|&(addr, dir)| Host {
            addr,
            dir,
            inbox: VecDeque::new(),
            wake: None,
            state: State::NotStarted,
            counters: Counters::default(),
            error: None,
        })
        .collect();
    *world() = Some(World {
        hosts,
        turn: None,
        io,
        now: 0,
        io_error: None,
    });
}

/// Gives host `i` the turn and waits for it to hand it back.
fn give_turn(
    mut g: MutexGuard<'static, Option<World>>,
    i: usize,
) -> MutexGuard<'static, Option<World>> {
    g.as_mut().unwrap().turn = Some(i);
    TURN.notify_all();
    while g.as_ref().unwrap().turn.is_some() {
        g = TURN.wait(g).unwrap_or_else(|e| e.into_inner());
    }
    g
}

/// Runs until every client is done or virtual time `until`.
pub fn run(until: u64) -> Outcome {
    let mut g = world();
    let mut steps = 0u64;
    let mut error: Option<String> = None;
    let n = g.as_ref().unwrap().hosts.len();
    // Clients first, then the server, at every instant.
    let order: Vec<usize> = (1..n).chain([SERVER]).collect();
    'run: loop {
        let mut turns_now = 0u64;
        loop {
            deliver(g.as_mut().unwrap());
            let now = g.as_ref().unwrap().now;
            let mut ran = false;
            for &i in &order {
                let h = &g.as_ref().unwrap().hosts[i];
                let due = match h.state {
                    State::NotStarted => true,
                    State::Waiting => !h.inbox.is_empty() || h.wake.is_some_and(|t| t <= now),
                    State::Done => false,
                };
                if due {
                    g = give_turn(g, i);
                    ran = true;
                    turns_now += 1;
                }
            }
            if let Some(e) = g.as_mut().unwrap().io_error.take() {
                error = Some(e);
                break 'run;
            }
            if !ran {
                break;
            }
            if turns_now > REACT_LIMIT {
                error = Some(format!(
                    "at virtual time {now} ns the hosts were woken {turns_now} times without time passing (a stack or harness bug)"
                ));
                break 'run;
            }
        }
        let w = g.as_mut().unwrap();
        if w.hosts[1..].iter().all(|h| h.state == State::Done) {
            break;
        }
        steps += 1;
        let mut next = w.io.link.next_deadline();
        for h in &w.hosts {
            if h.state == State::Waiting {
                if let Some(t) = h.wake {
                    next = Some(next.map_or(t, |x| x.min(t)));
                }
            }
        }
        let Some(t) = next else {
            error = Some(format!(
                "at {:.6} s nothing is scheduled but a client is not finished (a stack or harness bug)",
                w.now as f64 / 1e9
            ));
            break;
        };
        if t > until {
            w.now = until;
            shim::set_now(until);
            error = Some(format!(
                "gave up after LL_TIMEOUT_S={} (virtual)",
                until as f64 / 1e9
            ));
            break;
        }
        w.now = w.now.max(t);
        shim::set_now(w.now);
    }
    let w = g.as_mut().unwrap();
    // The first client's own failure explains a run better than the loop's.
    let client_error = w.hosts[1..].iter().enumerate().find_map(|(i, h)| {
        h.error.as_ref().map(|e| {
            if i == 0 {
                e.clone()
            } else {
                format!("client-{}: {e}", i + 1)
            }
        })
    });
    let link = match w.io.close() {
        Ok(s) => s,
        Err(e) => {
            error.get_or_insert(format!("link output: {e}"));
            Value::Null
        }
    };
    Outcome {
        error: client_error.or(error),
        virtual_s: w.now as f64 / 1e9,
        steps,
        link,
        client: w.hosts[1].counters.to_json(),
        server: w.hosts[SERVER].counters.to_json(),
    }
}

/// Moves every packet the link has due now into its receiver's inbox.
fn deliver(w: &mut World) {
    let now = w.now;
    loop {
        let t = match w.io.poll(now) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                w.io_error.get_or_insert(format!("link output: {e}"));
                return;
            }
        };
        let Some((from, to, _ecn, payload)) = wire::parse(&t.bytes) else {
            w.io_error.get_or_insert(format!(
                "the link delivered a packet that is not IPv4/UDP ({} bytes)",
                t.bytes.len()
            ));
            return;
        };
        let receiver = match t.dir {
            Dir::C2s => Some(SERVER),
            Dir::S2c => w
                .hosts
                .iter()
                .position(|h| h.dir == Dir::C2s && h.addr == to),
        };
        let Some(h) = receiver.map(|i| &mut w.hosts[i]) else {
            w.io_error.get_or_insert(format!(
                "the link delivered a datagram for {to}, which no host has"
            ));
            return;
        };
        if t.marks & marks::CORRUPT != 0 {
            // A flipped payload bit breaks the UDP checksum: the kernel would drop it.
            h.counters.corrupt_dropped += 1;
            continue;
        }
        h.counters.received += 1;
        h.inbox.push_back((payload.to_vec(), from));
    }
}
