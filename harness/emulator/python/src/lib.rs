//! Python bindings to the emulator's sans-IO core, for virtual-time runs
//! (docs/virtual-time.md). The impairment logic is `longlook_link::Link` itself
//! (imported here as `link_core`, since this module takes the name longlook_link)
//! and the ground-truth log and pcap writers are the router's own (`output`), so a virtual
//! run's link.ndjson and pcap/ read exactly like a real-time run's.
//!
//! Times are ns since the link started, supplied by the caller; pcap timestamps are
//! `start_unix_ns` plus that time, as in the router.

use link_core::lateness::Lateness;
use link_core::output::{summary, Log, SidePcap};
use link_core::{Dir, Schedule};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

fn parse_dir(dir: &str) -> PyResult<Dir> {
    match dir {
        "c2s" => Ok(Dir::C2s),
        "s2c" => Ok(Dir::S2c),
        other => Err(PyValueError::new_err(format!("direction {other:?}: give \"c2s\" or \"s2c\""))),
    }
}

/// Side (0 client, 1 server) whose device a packet of `dir` enters from.
fn side_in(dir: Dir) -> usize {
    dir.index()
}

fn io_err(what: &str, e: std::io::Error) -> PyErr {
    PyOSError::new_err(format!("{what}: {e}"))
}

/// A packet `poll_transmit` hands over: (dir, packet, due_ns, marks).
type Transmitted<'py> = (&'static str, Bound<'py, PyBytes>, u64, u8);
/// A packet `poll_due` hands over: (dir, UDP payload, marks).
type Due<'py> = (&'static str, Bound<'py, PyBytes>, u8);

/// The link of one virtual run: `link_core::Link` plus its log and captures.
#[pyclass(unsendable, name = "Link")]
struct PyLink {
    link: link_core::Link,
    log: Log,
    pcap: Option<[SidePcap; 2]>,
    start_unix_ns: u64,
    closed: bool,
}

#[pymethods]
impl PyLink {
    /// Loads and validates the schedule file (traces relative to it, as the router
    /// does); writes the log header now. `log` and `pcap_dir` may be None.
    #[new]
    #[pyo3(signature = (schedule, log=None, pcap_dir=None, start_unix_ns=0, argv=Vec::new()))]
    fn new(
        schedule: PathBuf,
        log: Option<PathBuf>,
        pcap_dir: Option<PathBuf>,
        start_unix_ns: u64,
        argv: Vec<String>,
    ) -> PyResult<Self> {
        let s = Schedule::load(&schedule).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let link = link_core::Link::new(s);
        let log = Log::create(log.as_deref(), &link, &argv, start_unix_ns).map_err(|e| io_err("link log", e))?;
        let pcap = match pcap_dir {
            Some(d) => {
                let mk = |side| SidePcap::create(&d, side).map_err(|e| io_err(&d.display().to_string(), e));
                Some([mk("client")?, mk("server")?])
            }
            None => None,
        };
        Ok(PyLink { link, log, pcap, start_unix_ns, closed: false })
    }

    /// A packet (an IP datagram) entered the link at `now_ns` travelling `dir`.
    fn on_packet(&mut self, now_ns: u64, dir: &str, packet: &[u8]) -> PyResult<()> {
        self.check_open()?;
        let dir = parse_dir(dir)?;
        self.enter(now_ns, dir, packet.to_vec())
    }

    /// The next packet due at or before `now_ns`: (dir, packet, due_ns, marks), or None.
    /// It is captured on its way out at its due time (virtual time is never late).
    fn poll_transmit<'py>(&mut self, py: Python<'py>, now_ns: u64) -> PyResult<Option<Transmitted<'py>>> {
        self.check_open()?;
        let Some(t) = self.leave(now_ns)? else { return Ok(None) };
        Ok(Some((t.dir.name(), PyBytes::new(py, &t.bytes), t.due_ns, t.marks)))
    }

    /// Datagrams (UDP payloads) a host sent at `now_ns` from `src` to `dst`, both
    /// (address, port), each put on the link travelling `dir` as `udp4` wraps it:
    /// the same as `on_packet(now_ns, dir, udp4(...))` per datagram, in one call.
    fn send(&mut self, now_ns: u64, dir: &str, src: (&str, u16), dst: (&str, u16), payloads: &Bound<'_, PyList>) -> PyResult<()> {
        self.check_open()?;
        let dir = parse_dir(dir)?;
        let (s, d) = (SocketAddrV4::new(parse_addr(src.0)?, src.1), SocketAddrV4::new(parse_addr(dst.0)?, dst.1));
        // Checked first, so that a bad item puts none of the datagrams on the link.
        let items: Vec<Bound<'_, PyBytes>> = payloads.iter().map(|i| i.cast_into::<PyBytes>()).collect::<Result<_, _>>()?;
        for payload in &items {
            check_fits(payload.as_bytes())?;
        }
        for payload in &items {
            self.enter(now_ns, dir, link_core::packet::udp4(s, d, 0, payload.as_bytes()))?;
        }
        Ok(())
    }

    /// Every packet due at or before `now_ns`, in `poll_transmit`'s order, as
    /// (dir, UDP payload, marks): what a receiving socket would read, in one call.
    /// A packet too short to carry IPv4 and UDP headers has an empty payload.
    fn poll_due<'py>(&mut self, py: Python<'py>, now_ns: u64) -> PyResult<Vec<Due<'py>>> {
        self.check_open()?;
        let mut due = Vec::new();
        while let Some(t) = self.leave(now_ns)? {
            let start = udp_payload_start(&t.bytes).min(t.bytes.len());
            due.push((t.dir.name(), PyBytes::new(py, &t.bytes[start..]), t.marks));
        }
        Ok(due)
    }

    /// A lower bound, ns, on when `poll_transmit` can next return a packet.
    fn next_deadline(&self) -> Option<u64> {
        self.link.next_deadline()
    }

    fn force_phase(&mut self, now_ns: u64, index: usize) -> PyResult<()> {
        self.link.force_phase(now_ns, index).map_err(PyValueError::new_err)
    }

    fn phase_at(&self, t_ns: u64) -> usize {
        self.link.phase_at(t_ns)
    }

    /// Counters and (zero) lateness as JSON text, the log summary's format.
    fn stats(&self) -> String {
        summary(&self.link, &Lateness::default(), 0).to_string()
    }

    /// Ends the run: what is still inside becomes `in_flight`, the summary line is
    /// written, files are flushed. Returns the summary (JSON text). Idempotent.
    fn close(&mut self) -> PyResult<String> {
        let s = summary(&self.link, &Lateness::default(), 0);
        if self.closed {
            return Ok(s.to_string());
        }
        self.closed = true;
        self.link.shutdown();
        self.drain()?;
        let s = summary(&self.link, &Lateness::default(), 0);
        self.log.finish(&s).map_err(|e| io_err("link log", e))?;
        if let Some(p) = &mut self.pcap {
            for side in p.iter_mut() {
                side.close().map_err(|e| io_err("pcap", e))?;
            }
        }
        Ok(s.to_string())
    }
}

impl PyLink {
    /// A packet enters the link: captured on the sender's side, then queued.
    fn enter(&mut self, now_ns: u64, dir: Dir, packet: Vec<u8>) -> PyResult<()> {
        if let Some(p) = &mut self.pcap {
            p[side_in(dir)].write(self.start_unix_ns + now_ns, &packet).map_err(|e| io_err("pcap", e))?;
        }
        self.link.on_packet_owned(now_ns, dir, packet);
        self.drain()
    }

    /// The next packet due at or before `now_ns`, captured on the receiver's side
    /// at its due time (virtual time is never late).
    fn leave(&mut self, now_ns: u64) -> PyResult<Option<link_core::Transmit>> {
        let Some(t) = self.link.poll_transmit(now_ns) else { return Ok(None) };
        if let Some(p) = &mut self.pcap {
            p[1 - side_in(t.dir)].write(self.start_unix_ns + t.due_ns, &t.bytes).map_err(|e| io_err("pcap", e))?;
        }
        self.drain()?;
        Ok(Some(t))
    }

    fn check_open(&self) -> PyResult<()> {
        if self.closed {
            return Err(PyValueError::new_err("the link is closed; create a new Link for another run"));
        }
        Ok(())
    }

    fn drain(&mut self) -> PyResult<()> {
        while let Some(r) = self.link.poll_record() {
            self.log.record(&r).map_err(|e| io_err("link log", e))?;
        }
        Ok(())
    }
}

fn parse_addr(s: &str) -> PyResult<Ipv4Addr> {
    s.parse::<Ipv4Addr>().map_err(|e| PyValueError::new_err(format!("address {s:?}: {e}")))
}

fn check_fits(payload: &[u8]) -> PyResult<()> {
    if 8 + payload.len() + 20 > 65535 {
        return Err(PyValueError::new_err(format!("payload of {} bytes does not fit one IPv4 packet", payload.len())));
    }
    Ok(())
}

/// Where the UDP payload of an IPv4 packet starts: after its header (IHL words) and
/// the 8-byte UDP header.
fn udp_payload_start(packet: &[u8]) -> usize {
    packet.first().map_or(0, |b| usize::from(b & 0x0f) * 4 + 8)
}

/// An IPv4/UDP datagram around `payload` with valid checksums (TTL 64, DF set), as
/// the kernel would hand it to a TUN device.
#[pyfunction]
#[pyo3(signature = (src, dst, sport, dport, payload, ecn=0))]
fn udp4<'py>(py: Python<'py>, src: &str, dst: &str, sport: u16, dport: u16, payload: &[u8], ecn: u8) -> PyResult<Bound<'py, PyBytes>> {
    let (s, d) = (parse_addr(src)?, parse_addr(dst)?);
    check_fits(payload)?;
    let p = link_core::packet::udp4(SocketAddrV4::new(s, sport), SocketAddrV4::new(d, dport), ecn, payload);
    Ok(PyBytes::new(py, &p))
}

#[pymodule]
#[pyo3(name = "longlook_link")]
fn python_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLink>()?;
    m.add_function(wrap_pyfunction!(udp4, m)?)?;
    m.add("CORRUPT", link_core::record::marks::CORRUPT)?;
    Ok(())
}
