//! The discrete-event loop. quiche-endpoint's client and server loops are
//! blocking loops around `Socket::wait`, so each host runs them as a coroutine
//! (corosensei: a stack of its own, switched to and from in user space, all on
//! the one thread): a host runs until it waits, which suspends it back to the
//! loop; the loop delivers the link's due packets, advances the (shimmed) clock
//! to the earliest deadline of the link and of every host's wait, and resumes
//! each host that has a datagram or a due deadline, in a fixed order (clients,
//! then the server). The schedule is sequential and deterministic. (OS threads
//! with a baton, the first version, spent two thirds of a run in futex wake-ups
//! and context switches.)

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::OnceLock;
use std::time::Instant;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use link_core::record::marks;
use link_core::Dir;
use serde_json::Value;

use crate::linkio::{Counters, LinkIo};
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

struct HostState {
    addr: SocketAddrV4,
    dir: Dir,
    inbox: VecDeque<(Vec<u8>, SocketAddrV4)>,
    wake: Option<u64>,
    state: State,
    counters: Counters,
    error: Option<String>,
}

struct World {
    hosts: Vec<HostState>,
    io: LinkIo,
    now: u64,
    /// A send the link could not record (its files); ends the run.
    io_error: Option<String>,
}

/// A host's code: resumed with nothing, suspends with nothing, ends with its outcome.
type Host = Coroutine<(), (), Result<(), String>, DefaultStack>;
/// Stack per host: quiche and BoringSSL need little; mapped lazily.
const STACK_BYTES: usize = 8 << 20;

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
    /// Each host's yielder, for `wait` to suspend through.
    static YIELDERS: RefCell<Vec<*const Yielder<(), ()>>> = const { RefCell::new(Vec::new()) };
    static HOSTS: RefCell<Vec<Option<Host>>> = const { RefCell::new(Vec::new()) };
    static HOST: Cell<usize> = const { Cell::new(usize::MAX) };
}
/// `Instant` at virtual time 0.
static ZERO: OnceLock<Instant> = OnceLock::new();

/// Never held across a suspension: every borrow ends inside `f`.
fn with<T>(f: impl FnOnce(&mut World) -> T) -> T {
    WORLD.with(|w| f(w.borrow_mut().as_mut().expect("world::install ran")))
}

pub fn instant_ns(t: Instant) -> u64 {
    shim::instant_ns(t, *ZERO.get().expect("the loop set ZERO"))
}

pub fn current_host() -> usize {
    HOST.with(Cell::get)
}

pub fn local_addr(host: usize) -> SocketAddrV4 {
    with(|w| w.hosts[host].addr)
}

pub fn send(host: usize, buf: &[u8], to: SocketAddr) -> std::io::Result<()> {
    let SocketAddr::V4(to) = to else {
        return Err(std::io::Error::other("the virtual link is IPv4 only"));
    };
    with(|w| {
        let h = &mut w.hosts[host];
        h.counters.sent += 1;
        let (dir, packet) = (h.dir, wire::udp4(h.addr, to, 0, buf));
        let now = w.now;
        if let Err(e) = w.io.send(now, dir, &packet) {
            w.io_error.get_or_insert(format!("link output: {e}"));
        }
    });
    Ok(())
}

pub fn recv(host: usize) -> Option<(Vec<u8>, SocketAddrV4)> {
    with(|w| w.hosts[host].inbox.pop_front())
}

/// Called from a host's code: suspends it until the loop resumes it.
pub fn wait(host: usize, wake: Option<u64>) {
    with(|w| {
        w.hosts[host].wake = wake;
        w.hosts[host].state = State::Waiting;
    });
    let yielder = YIELDERS.with(|y| y.borrow()[host]);
    // SAFETY: set by this host's coroutine body from the yielder it was handed;
    // the coroutine (and so its yielder) lives until the process exits.
    unsafe { (*yielder).suspend(()) };
}

/// Makes `body` host `host`'s code; it first runs when the loop first resumes it.
pub fn spawn(host: usize, body: impl FnOnce() -> Result<(), String> + 'static) {
    let stack = DefaultStack::new(STACK_BYTES).expect("mapping a host's stack");
    let co = Coroutine::with_stack(stack, move |yielder: &Yielder<(), ()>, ()| {
        YIELDERS.with(|y| y.borrow_mut()[host] = yielder as *const _);
        // A panic ends this host with an error instead of unwinding into the loop.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
            .unwrap_or_else(|_| Err("the host panicked (stderr has the message)".into()))
    });
    HOSTS.with(|h| h.borrow_mut()[host] = Some(co));
}

/// Resumes host `i` until it waits again or ends.
fn resume(i: usize) {
    HOST.with(|h| h.set(i));
    // Taken out while it runs: the host's own calls borrow the other cells.
    let mut co = HOSTS
        .with(|h| h.borrow_mut()[i].take())
        .expect("a live host");
    match co.resume(()) {
        CoroutineResult::Yield(()) => HOSTS.with(|h| h.borrow_mut()[i] = Some(co)),
        CoroutineResult::Return(outcome) => with(|w| {
            w.hosts[i].state = State::Done;
            w.hosts[i].error = outcome.err();
        }),
    }
    HOST.with(|h| h.set(usize::MAX));
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
        .map(|&(addr, dir)| HostState {
            addr,
            dir,
            inbox: VecDeque::new(),
            wake: None,
            state: State::NotStarted,
            counters: Counters::default(),
            error: None,
        })
        .collect();
    YIELDERS.with(|y| *y.borrow_mut() = vec![std::ptr::null(); addrs.len()]);
    HOSTS.with(|h| *h.borrow_mut() = (0..addrs.len()).map(|_| None).collect());
    WORLD.with(|w| {
        *w.borrow_mut() = Some(World {
            hosts,
            io,
            now: 0,
            io_error: None,
        })
    });
}

/// Runs until every client is done or virtual time `until`.
pub fn run(until: u64) -> Outcome {
    let mut steps = 0u64;
    let mut error: Option<String> = None;
    let n = with(|w| w.hosts.len());
    // Clients first, then the server, at every instant.
    let order: Vec<usize> = (1..n).chain([SERVER]).collect();
    'run: loop {
        let mut turns_now = 0u64;
        loop {
            let now = with(|w| {
                deliver(w);
                w.now
            });
            let mut ran = false;
            for &i in &order {
                let due = with(|w| {
                    let h = &w.hosts[i];
                    match h.state {
                        State::NotStarted => true,
                        State::Waiting => !h.inbox.is_empty() || h.wake.is_some_and(|t| t <= now),
                        State::Done => false,
                    }
                });
                if due {
                    resume(i);
                    ran = true;
                    turns_now += 1;
                }
            }
            if let Some(e) = with(|w| w.io_error.take()) {
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
        let advanced = with(|w| {
            if w.hosts[1..].iter().all(|h| h.state == State::Done) {
                return Ok(false);
            }
            let mut next = w.io.link.next_deadline();
            for h in &w.hosts {
                if h.state == State::Waiting {
                    if let Some(t) = h.wake {
                        next = Some(next.map_or(t, |x| x.min(t)));
                    }
                }
            }
            let Some(t) = next else {
                return Err(format!(
                    "at {:.6} s nothing is scheduled but a client is not finished (a stack or harness bug)",
                    w.now as f64 / 1e9
                ));
            };
            if t > until {
                w.now = until;
                shim::set_now(until);
                return Err(format!(
                    "gave up after LL_TIMEOUT_S={} (virtual)",
                    until as f64 / 1e9
                ));
            }
            w.now = w.now.max(t);
            shim::set_now(w.now);
            Ok(true)
        });
        match advanced {
            Ok(true) => steps += 1,
            Ok(false) => break,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    // The suspended hosts (the server, a client that did not finish) are never
    // resumed or dropped: dropping would unwind their stacks into the endpoint's
    // code, and the process exits next.
    HOSTS.with(|h| h.borrow_mut().drain(..).for_each(std::mem::forget));
    with(|w| {
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
    })
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
