//! The two hosts: quinn-proto endpoints with the same HTTP/0.9 (hq-interop)
//! application, options and app-log events as the real quinn endpoint
//! (quinn-endpoint/src/{client,server}.rs), rewritten against quinn-proto's
//! sans-IO API because the real one runs on quinn's tokio driver.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use link_core::Dir;
use ll_endpoint_common::{exit, hex, hq, linger};
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, ConnectionId, DatagramEvent, EcnCodepoint,
    Endpoint, EndpointConfig, Event, Incoming, QlogConfig, QlogStream, ReadError, ServerConfig,
    StreamEvent, StreamId, Transmit, TransportConfig, VarInt, WriteError,
};
use serde_json::{json, Value};

use crate::config::{Config, Testcase};
use crate::entropy::{Entropy, KeyLogTo, SeededCids, VirtualWallClock};
use crate::linkio::{numbered, Counters};
use crate::sim::{Clock, LinkIo, MAX_BATCH};
use crate::{tls, wire, PROTO_VERSION, VERSION};

/// How long the client waits for its close to complete, as the real client.
const DRAIN_LIMIT_NS: u64 = 2_000_000_000;
/// A host reacting more often than this within one instant is looping.
const REACT_LIMIT: usize = 100_000;

/// LL_APPLOG with virtual times: t_us is µs since the link started, and the
/// version record pairs t_us 0 with the epoch, so harness/observe maps the qlog
/// (whose origin is virtual time 0) onto the link's clock as in real time.
/// Shared by the server's endpoints when there are several flows: the real
/// server is one process with one log.
#[derive(Clone)]
pub struct AppLog(Rc<RefCell<BufWriter<File>>>);

impl AppLog {
    fn create(path: &Path, cc: &str, epoch_unix_ns: u64) -> std::io::Result<AppLog> {
        let mut log = AppLog(Rc::new(RefCell::new(BufWriter::new(File::create(path)?))));
        log.line(
            json!({"event": "version", "stack": "quinn", "version": VERSION, "cc": cc,
                        "quinn_proto": PROTO_VERSION, "driver": "longlook-virtual",
                        "t_us": 0, "wall_us": epoch_unix_ns / 1000}),
        );
        Ok(log)
    }

    fn line(&mut self, v: Value) {
        let _ = writeln!(self.0.borrow_mut(), "{v}");
    }

    fn event(&mut self, now: u64, event: &str, stream: u64, bytes: u64) {
        self.line(json!({"t_us": now / 1000, "event": event, "stream": stream, "bytes": bytes}));
    }
}

/// A host's key log and app log, in its directory of the run.
#[derive(Clone)]
pub struct Logs {
    keylog: Arc<KeyLogTo>,
    applog: AppLog,
}

impl Logs {
    pub fn create(config: &Config, dir_name: &str) -> Result<Logs, String> {
        let dir = config.run_dir.join(dir_name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let keylog = KeyLogTo::create(&dir.join("keys.log"))
            .map_err(|e| format!("{dir_name}/keys.log: {e}"))?;
        let applog = AppLog::create(
            &dir.join("app.ndjson"),
            config.cc.name,
            config.epoch_unix_ns,
        )
        .map_err(|e| format!("{dir_name}/app.ndjson: {e}"))?;
        Ok(Logs {
            keylog: Arc::new(keylog),
            applog,
        })
    }
}

/// What both hosts share: the endpoint, its one connection, the loop's bookkeeping.
pub struct Side {
    /// The host's directory in the run: client, client-2, …, server.
    pub name: String,
    pub addr: SocketAddrV4,
    dir: Dir,
    pub endpoint: Endpoint,
    pub conn: Option<(ConnectionHandle, Connection)>,
    pub counters: Counters,
    /// The timer last fired and the instant it fired at (the loop's livelock guard).
    pub fired: Option<(Instant, u64)>,
    pub firing: bool,
    pub stuck: u32,
    keylog: Arc<KeyLogTo>,
    applog: AppLog,
}

impl Side {
    pub fn conn_mut(&mut self) -> Option<&mut Connection> {
        self.conn.as_mut().map(|(_, c)| c)
    }

    fn send(&mut self, io: &mut LinkIo, now: u64, t: &Transmit, buf: &[u8]) -> Result<(), String> {
        let SocketAddr::V4(dst) = t.destination else {
            return Err(format!(
                "{}: quinn sent to {} (the virtual link is IPv4 only)",
                self.name, t.destination
            ));
        };
        let ecn = t.ecn.map_or(0, |e| e as u8);
        let seg = t.segment_size.unwrap_or(t.size).max(1);
        for datagram in buf[..t.size].chunks(seg) {
            self.counters.sent += 1;
            io.send(now, self.dir, &wire::udp4(self.addr, dst, ecn, datagram))
                .map_err(|e| format!("link output: {e}"))?;
        }
        Ok(())
    }

    /// Application events so far; sends what the connection has; passes
    /// endpoint events on. `again` when an endpoint event may have given the
    /// connection more to do.
    fn pump(
        &mut self,
        clock: &Clock,
        now: u64,
        buf: &mut Vec<u8>,
        io: &mut LinkIo,
    ) -> Result<(Vec<Event>, bool), String> {
        let Some((ch, conn)) = self.conn.as_mut() else {
            return Ok((Vec::new(), false));
        };
        let ch = *ch;
        let mut events = Vec::new();
        while let Some(e) = conn.poll() {
            events.push(e);
        }
        let mut transmits = Vec::new();
        loop {
            buf.clear();
            match conn.poll_transmit(clock.at(now), MAX_BATCH, buf) {
                Some(t) => transmits.push((t, buf.clone())),
                None => break,
            }
        }
        let (mut again, mut drained) = (false, false);
        while let Some(ev) = conn.poll_endpoint_events() {
            drained |= ev.is_drained();
            if let Some(back) = self.endpoint.handle_event(ch, ev) {
                conn.handle_event(back);
                again = true;
            }
        }
        if drained {
            self.conn = None;
        }
        for (t, bytes) in &transmits {
            self.send(io, now, t, bytes)?;
        }
        Ok((events, again))
    }
}

pub trait Host {
    fn side(&mut self) -> &mut Side;
    fn on_event(&mut self, now: u64, event: Event);
    fn accept(
        &mut self,
        clock: &Clock,
        now: u64,
        incoming: Incoming,
        buf: &mut Vec<u8>,
        io: &mut LinkIo,
    ) -> Result<(), String>;
    fn app_deadline(&self) -> Option<u64>;
    fn on_app_timer(&mut self, clock: &Clock, now: u64);

    /// A datagram arrived from `from` with ECN bits `ecn`.
    #[allow(clippy::too_many_arguments)]
    fn receive(
        &mut self,
        clock: &Clock,
        now: u64,
        from: SocketAddrV4,
        ecn: u8,
        payload: &[u8],
        buf: &mut Vec<u8>,
        io: &mut LinkIo,
    ) -> Result<(), String> {
        let side = self.side();
        buf.clear();
        let local = Some(IpAddr::V4(*side.addr.ip()));
        let event = side.endpoint.handle(
            clock.at(now),
            SocketAddr::V4(from),
            local,
            EcnCodepoint::from_bits(ecn),
            BytesMut::from(payload),
            buf,
        );
        match event {
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                if let Some((h, conn)) = side.conn.as_mut() {
                    if *h == ch {
                        conn.handle_event(ev);
                    }
                }
                Ok(())
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                self.accept(clock, now, incoming, buf, io)
            }
            Some(DatagramEvent::Response(t)) => {
                let bytes = buf[..t.size].to_vec();
                side.send(io, now, &t, &bytes)
            }
            None => Ok(()),
        }
    }

    /// Hands events to the application until neither it nor the endpoint has more.
    fn react(
        &mut self,
        clock: &Clock,
        now: u64,
        buf: &mut Vec<u8>,
        io: &mut LinkIo,
    ) -> Result<(), String> {
        for _ in 0..REACT_LIMIT {
            let (events, again) = self.side().pump(clock, now, buf, io)?;
            if events.is_empty() && !again {
                return Ok(());
            }
            for e in events {
                self.on_event(now, e);
            }
        }
        Err(format!(
            "{}: still reacting after {REACT_LIMIT} rounds at {now} ns",
            self.side().name
        ))
    }
}

/// The transport of one connection, as quinn-endpoint's Setup::transport.
fn transport(config: &Config, qlog: Option<QlogStream>) -> TransportConfig {
    let window = VarInt::from_u64(config.flow_window).expect("checked in config");
    let mds = config.max_datagram_size;
    let mut t = TransportConfig::default();
    t.receive_window(window)
        .stream_receive_window(window)
        .send_window(config.flow_window)
        .initial_mtu(mds)
        .min_mtu(mds)
        .mtu_discovery_config(None)
        .max_concurrent_bidi_streams(VarInt::from_u32(1000))
        .congestion_controller_factory((config.cc.build)(
            config.initial_window.map(|p| p * mds as u64),
        ))
        .qlog_stream(qlog);
    t
}

/// `{dir}/qlog/{role}-{ODCID}.sqlog`, as the real endpoint names it. The origin
/// is virtual time 0, stated as the monotonic reference our endpoints write.
fn qlog(
    config: &Config,
    clock: &Clock,
    dir_name: &str,
    role: &str,
    odcid: &[u8],
) -> Result<Option<QlogStream>, String> {
    if !config.qlog {
        return Ok(None);
    }
    let dir = config.run_dir.join(dir_name).join("qlog");
    let file =
        exit::qlog_file(&dir, role, &hex(odcid)).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut q = QlogConfig::default();
    q.writer(Box::new(file))
        .title(Some(format!("longlook quinn {VERSION} {role}")))
        .description(Some("reference_time_monotonic_us=0".into()))
        .start_time(clock.at(0));
    Ok(q.into_stream())
}

fn side(
    config: &Config,
    name: &str,
    dir: Dir,
    addr: SocketAddrV4,
    entropy: &Entropy,
    logs: Logs,
) -> Result<Side, String> {
    let mut ec = EndpointConfig::new(entropy.hmac_key());
    ec.max_udp_payload_size(config.max_datagram_size)
        .map_err(|e| e.to_string())?;
    let cids = entropy.clone();
    ec.cid_generator(move || Box::new(SeededCids(cids.clone())));
    let endpoint = Endpoint::new(Arc::new(ec), None, true, Some(entropy.bytes::<32>()));
    Ok(Side {
        name: name.to_string(),
        addr,
        dir,
        endpoint,
        conn: None,
        counters: Counters::default(),
        fired: None,
        firing: false,
        stuck: 0,
        keylog: logs.keylog,
        applog: logs.applog,
    })
}

fn wall_clock(config: &Config, clock: &Clock) -> Arc<VirtualWallClock> {
    Arc::new(VirtualWallClock {
        epoch_unix_ns: config.epoch_unix_ns,
        now_ns: clock.now_ns.clone(),
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Handshake,
    Requests,
    Linger,
    Closing,
    Done,
}

pub struct Client {
    side: Side,
    pending_config: Option<ClientConfig>,
    server: SocketAddrV4,
    queue: VecDeque<String>,
    testcase: Testcase,
    think_ns: u64,
    downloads: PathBuf,
    pending: BTreeMap<StreamId, (String, Vec<u8>)>,
    phase: Phase,
    wake: Option<u64>,
    error: Option<String>,
    last_stream: u64,
}

impl Client {
    /// The `k`-th client (1-based) at `addr`, in client/ or client-k/ as the
    /// real testbed's extra clients.
    pub fn new(
        config: &Config,
        clock: &Clock,
        k: usize,
        addr: SocketAddrV4,
        server: SocketAddrV4,
    ) -> Result<Client, String> {
        let name = numbered("client", k);
        let entropy = Entropy::new(config.seed, &name);
        let logs = Logs::create(config, &name)?;
        let side = side(config, &name, Dir::C2s, addr, &entropy, logs)?;
        let provider = entropy.provider();
        let mut tls =
            rustls::ClientConfig::builder_with_details(provider.clone(), wall_clock(config, clock))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(|e| e.to_string())?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(tls::AnyServer(provider)))
                .with_no_client_auth();
        tls.alpn_protocols = vec![hq::ALPN.to_vec()];
        tls.key_log = side.keylog.clone();
        let crypto = QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
        // The original DCID is chosen here, as the real client does, to name the qlog.
        let odcid = entropy.bytes::<8>();
        let mut cc = ClientConfig::new(Arc::new(crypto));
        cc.transport_config(Arc::new(transport(
            config,
            qlog(config, clock, &name, "client", &odcid)?,
        )));
        let cid = ConnectionId::new(&odcid);
        cc.initial_dst_cid_provider(Arc::new(move || cid));
        let downloads = config.run_dir.join(&name).join("downloads");
        std::fs::create_dir_all(&downloads).map_err(|e| format!("{}: {e}", downloads.display()))?;
        Ok(Client {
            side,
            pending_config: Some(cc),
            server,
            queue: config.names.iter().cloned().collect(),
            testcase: config.testcase,
            think_ns: config.think_ns,
            downloads,
            pending: BTreeMap::new(),
            phase: Phase::Handshake,
            wake: None,
            error: None,
            last_stream: 0,
        })
    }

    pub fn start(&mut self, clock: &Clock, now: u64) -> Result<(), String> {
        let cc = self.pending_config.take().ok_or("client started twice")?;
        // The server's address as its name: no SNI, as when REQUESTS names an IP.
        let name = self.server.ip().to_string();
        let (ch, conn) = self
            .side
            .endpoint
            .connect(clock.at(now), cc, SocketAddr::V4(self.server), &name)
            .map_err(|e| format!("connect: {e}"))?;
        self.side.conn = Some((ch, conn));
        Ok(())
    }

    pub fn finished(&self) -> bool {
        self.phase == Phase::Done || (self.phase == Phase::Closing && self.side.conn.is_none())
    }

    pub fn error(&self) -> Option<String> {
        self.error.clone()
    }

    fn conn(&mut self) -> &mut Connection {
        self.side
            .conn_mut()
            .expect("the client's connection exists while it has requests")
    }

    fn request(&mut self, name: String, now: u64) {
        let Some(id) = self.conn().streams().open(quinn_proto::Dir::Bi) else {
            return self.fail(format!(
                "no stream available for {name} (the server allows too few)"
            ));
        };
        let stream = u64::from(VarInt::from(id));
        self.side.applog.event(now, "request_start", stream, 0);
        let line = format!("GET /{name}\r\n");
        let mut s = self.conn().send_stream(id);
        if s.write(line.as_bytes()) != Ok(line.len()) || s.finish().is_err() {
            return self.fail(format!("could not send the request for {name}"));
        }
        self.pending.insert(id, (name, Vec::new()));
    }

    fn read(&mut self, id: StreamId, now: u64) {
        let Some((_, buf)) = self.pending.get_mut(&id) else {
            return;
        };
        let Some(conn) = self.side.conn.as_mut().map(|(_, c)| c) else {
            return;
        };
        let outcome: Result<bool, String> = (|| {
            let mut recv = conn.recv_stream(id);
            let mut chunks = recv.read(true).map_err(|e| e.to_string())?;
            let mut result = Ok(false);
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(c)) => buf.extend_from_slice(&c.bytes),
                    Ok(None) => {
                        result = Ok(true);
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => {
                        result = Err(e.to_string());
                        break;
                    }
                }
            }
            let _ = chunks.finalize();
            result
        })();
        match outcome {
            Ok(true) => self.done(id, now),
            Ok(false) => {}
            Err(e) => self.fail(format!("stream {id}: {e}")),
        }
    }

    fn done(&mut self, id: StreamId, now: u64) {
        let (name, data) = self.pending.remove(&id).expect("pending");
        let path = self.downloads.join(&name);
        if let Err(e) = std::fs::write(&path, &data) {
            return self.fail(format!("{}: {e}", path.display()));
        }
        let stream = u64::from(VarInt::from(id));
        self.last_stream = stream;
        self.side
            .applog
            .event(now, "request_done", stream, data.len() as u64);
        if !self.pending.is_empty() {
            return;
        }
        match self.queue.pop_front() {
            Some(next) if self.testcase == Testcase::Appidle => {
                self.queue.push_front(next);
                self.side.applog.event(now, "idle_start", stream, 0);
                self.wake = Some(now + self.think_ns);
            }
            Some(next) => self.request(next, now),
            None => {
                // Its ACK of the server's last packets must reach the server first.
                let rtt = self.conn().rtt();
                self.phase = Phase::Linger;
                self.wake = Some(now + linger(rtt).as_nanos() as u64);
            }
        }
    }

    fn fail(&mut self, why: String) {
        self.error.get_or_insert(why);
        self.pending.clear();
        self.queue.clear();
        self.phase = Phase::Done;
    }
}

impl Host for Client {
    fn side(&mut self) -> &mut Side {
        &mut self.side
    }

    fn on_event(&mut self, now: u64, event: Event) {
        match event {
            Event::Connected if self.phase == Phase::Handshake => {
                self.phase = Phase::Requests;
                let batch = if self.testcase == Testcase::Multiplexing {
                    self.queue.len()
                } else {
                    1
                };
                for _ in 0..batch {
                    if let Some(name) = self.queue.pop_front() {
                        self.request(name, now);
                    }
                }
            }
            Event::Stream(StreamEvent::Readable { id }) => self.read(id, now),
            Event::ConnectionLost { reason } => {
                // Once every response is in, the real client succeeds whatever
                // happens to the connection while it lingers.
                if self.phase < Phase::Linger {
                    self.fail(format!("connection lost: {reason}"));
                }
                self.phase = Phase::Done;
            }
            _ => {}
        }
    }

    fn accept(
        &mut self,
        _: &Clock,
        _: u64,
        incoming: Incoming,
        _: &mut Vec<u8>,
        _: &mut LinkIo,
    ) -> Result<(), String> {
        self.side.endpoint.ignore(incoming);
        Ok(())
    }

    fn app_deadline(&self) -> Option<u64> {
        self.wake
    }

    fn on_app_timer(&mut self, clock: &Clock, now: u64) {
        self.wake = None;
        match self.phase {
            Phase::Requests => {
                self.side.applog.event(now, "idle_end", self.last_stream, 0);
                if let Some(next) = self.queue.pop_front() {
                    self.request(next, now);
                }
            }
            Phase::Linger => {
                self.phase = Phase::Closing;
                if let Some(conn) = self.side.conn_mut() {
                    conn.close(
                        clock.at(now),
                        VarInt::from_u32(0),
                        bytes::Bytes::from_static(b"done"),
                    );
                }
                self.wake = Some(now + DRAIN_LIMIT_NS);
            }
            Phase::Closing => self.phase = Phase::Done,
            _ => {}
        }
    }
}

/// A response being written: the object and how much of it quinn took so far.
struct Outgoing {
    data: Vec<u8>,
    written: usize,
}

pub struct Server {
    side: Side,
    crypto: Arc<QuicServerConfig>,
    token_key: Arc<ring::hkdf::Prk>,
    wall: Arc<VirtualWallClock>,
    clock: Clock,
    config: Config,
    www: PathBuf,
    requests: BTreeMap<StreamId, Vec<u8>>,
    sending: BTreeMap<StreamId, Outgoing>,
    /// Answered streams not yet acknowledged in full: their size.
    answered: BTreeMap<StreamId, u64>,
}

impl Server {
    /// The server endpoint of the `k`-th flow. Several flows get one endpoint
    /// each, all at the server's address and sharing its logs: endpoints only
    /// demultiplex, the connections are what the flows share a link with.
    pub fn new(
        config: &Config,
        clock: &Clock,
        k: usize,
        addr: SocketAddrV4,
        logs: Logs,
    ) -> Result<Server, String> {
        let role = numbered("server", k);
        let entropy = Entropy::new(config.seed, &role);
        let certs = config.run_dir.join("certs");
        let provider = entropy.provider();
        let token_key = entropy.token_key();
        let wall = wall_clock(config, clock);
        // Built before the Side so that the certificate is checked first: the most
        // likely bad input.
        let mut tls = tls_server(&certs, provider, wall.clone())?;
        tls.alpn_protocols = vec![hq::ALPN.to_vec()];
        let mut side = side(config, "server", Dir::S2c, addr, &entropy, logs)?;
        tls.key_log = side.keylog.clone();
        let crypto = Arc::new(QuicServerConfig::try_from(tls).map_err(|e| e.to_string())?);
        let mut default = ServerConfig::new(crypto.clone(), token_key.clone());
        default
            .transport_config(Arc::new(transport(config, None)))
            .time_source(wall.clone());
        side.endpoint.set_server_config(Some(Arc::new(default)));
        Ok(Server {
            side,
            crypto,
            token_key,
            wall,
            clock: clock.clone(),
            config: config.clone(),
            www: config.run_dir.join("www"),
            requests: BTreeMap::new(),
            sending: BTreeMap::new(),
            answered: BTreeMap::new(),
        })
    }

    fn answer(&mut self, id: StreamId, name: String, now: u64) {
        let stream = u64::from(VarInt::from(id));
        let path = self.www.join(&name);
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("server: {}: {e}", path.display());
                if let Some(c) = self.side.conn_mut() {
                    let _ = c.send_stream(id).reset(VarInt::from_u32(2));
                }
                return;
            }
        };
        self.side
            .applog
            .event(now, "request_start", stream, data.len() as u64);
        self.answered.insert(id, data.len() as u64);
        self.sending.insert(id, Outgoing { data, written: 0 });
        self.write(id);
    }

    fn write(&mut self, id: StreamId) {
        let Some(out) = self.sending.get_mut(&id) else {
            return;
        };
        let Some(conn) = self.side.conn.as_mut().map(|(_, c)| c) else {
            return;
        };
        let mut s = conn.send_stream(id);
        while out.written < out.data.len() {
            match s.write(&out.data[out.written..]) {
                Ok(n) => out.written += n,
                Err(WriteError::Blocked) => return,
                Err(e) => {
                    eprintln!("server: stream {id}: {e}");
                    self.sending.remove(&id);
                    return;
                }
            }
        }
        let _ = s.finish();
        self.sending.remove(&id);
    }

    fn read_request(&mut self, id: StreamId, now: u64) {
        let Some(buf) = self.requests.get_mut(&id) else {
            return;
        };
        let Some(conn) = self.side.conn.as_mut().map(|(_, c)| c) else {
            return;
        };
        let mut recv = conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let mut fin = false;
        loop {
            match chunks.next(hq::MAX_REQUEST_LINE) {
                Ok(Some(c)) => buf.extend_from_slice(&c.bytes),
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
        match hq::parse_request(buf, fin) {
            Ok(None) => {}
            Ok(Some(name)) => {
                self.requests.remove(&id);
                self.answer(id, name, now);
            }
            Err(e) => {
                eprintln!("server: stream {id}: {e}");
                self.requests.remove(&id);
                if let Some(c) = self.side.conn_mut() {
                    let _ = c.send_stream(id).reset(VarInt::from_u32(1));
                }
            }
        }
    }

    fn request_done(&mut self, id: StreamId, now: u64, acked: bool) {
        if let Some(size) = self.answered.remove(&id) {
            let mut v = json!({"t_us": now / 1000, "event": "request_done", "stream": u64::from(VarInt::from(id)), "bytes": size});
            if !acked {
                v["acked"] = json!(false);
            }
            self.side.applog.line(v);
        }
    }
}

fn tls_server(
    certs: &Path,
    provider: Arc<rustls::crypto::CryptoProvider>,
    wall: Arc<VirtualWallClock>,
) -> Result<rustls::ServerConfig, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(certs.join("cert.pem"))
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", certs.join("cert.pem").display()))?;
    let key = PrivateKeyDer::from_pem_file(certs.join("priv.key"))
        .map_err(|e| format!("{}: {e}", certs.join("priv.key").display()))?;
    rustls::ServerConfig::builder_with_details(provider, wall)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("{}: {e}", certs.display()))
}

impl Host for Server {
    fn side(&mut self) -> &mut Side {
        &mut self.side
    }

    fn on_event(&mut self, now: u64, event: Event) {
        match event {
            Event::Stream(StreamEvent::Opened {
                dir: quinn_proto::Dir::Bi,
            }) => {
                while let Some(id) = self
                    .side
                    .conn_mut()
                    .and_then(|c| c.streams().accept(quinn_proto::Dir::Bi))
                {
                    self.requests.insert(id, Vec::new());
                    self.read_request(id, now);
                }
            }
            Event::Stream(StreamEvent::Readable { id }) => self.read_request(id, now),
            Event::Stream(StreamEvent::Writable { id }) => self.write(id),
            Event::Stream(StreamEvent::Finished { id }) => self.request_done(id, now, true),
            Event::Stream(StreamEvent::Stopped { id, .. }) => {
                self.sending.remove(&id);
                self.request_done(id, now, false);
            }
            Event::ConnectionLost { .. } => {
                let ids: Vec<StreamId> = self.answered.keys().copied().collect();
                for id in ids {
                    self.request_done(id, now, false);
                }
            }
            _ => {}
        }
    }

    /// Each connection gets its own ServerConfig, as in the real server, because
    /// the qlog stream lives in the transport config.
    fn accept(
        &mut self,
        clock: &Clock,
        now: u64,
        incoming: Incoming,
        buf: &mut Vec<u8>,
        io: &mut LinkIo,
    ) -> Result<(), String> {
        if self.side.conn.is_some() {
            self.side.endpoint.ignore(incoming);
            return Ok(());
        }
        let odcid = incoming.orig_dst_cid().to_vec();
        let q = qlog(&self.config, &self.clock, "server", "server", &odcid)?;
        let mut sc = ServerConfig::new(self.crypto.clone(), self.token_key.clone());
        sc.transport_config(Arc::new(transport(&self.config, q)))
            .time_source(self.wall.clone());
        buf.clear();
        match self
            .side
            .endpoint
            .accept(incoming, clock.at(now), buf, Some(Arc::new(sc)))
        {
            Ok((ch, conn)) => {
                self.side.conn = Some((ch, conn));
                Ok(())
            }
            Err(e) => {
                eprintln!("server: connection refused: {:?}", e.cause);
                match e.response {
                    Some(t) => {
                        let bytes = buf[..t.size].to_vec();
                        self.side.send(io, now, &t, &bytes)
                    }
                    None => Ok(()),
                }
            }
        }
    }

    fn app_deadline(&self) -> Option<u64> {
        None
    }

    fn on_app_timer(&mut self, _: &Clock, _: u64) {}
}

/// Flushes what the hosts wrote (qlog buffers, key logs, app logs). A failure
/// here (a full disk) would leave truncated files that observe misreads, so it
/// fails the run instead.
pub fn finish_files(clients: &mut [Client], servers: &mut [Server]) -> Result<(), String> {
    let clients = clients.iter_mut().map(|c| &mut c.side);
    for side in clients.chain(servers.iter_mut().map(|s| &mut s.side)) {
        // Dropping the connection releases its qlog stream.
        side.conn = None;
        exit::flush_all();
        let name = &side.name;
        side.keylog
            .flush()
            .map_err(|e| format!("{name}/keys.log: {e}"))?;
        side.applog
            .0
            .borrow_mut()
            .flush()
            .map_err(|e| format!("{name}/app.ndjson: {e}"))?;
    }
    Ok(())
}
