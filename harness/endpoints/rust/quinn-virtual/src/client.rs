//! The client host: quinn-endpoint/src/client.rs's requests, think times and
//! linger, against quinn-proto's sans-IO API.

use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;

use link_core::Dir;
use ll_endpoint_common::{hq, linger};
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, Connection, ConnectionId, Event, Incoming, ReadError, StreamEvent, StreamId,
    VarInt,
};

use crate::clock::Clock;
use crate::config::{Config, Testcase};
use crate::entropy::Entropy;
use crate::linkio::{numbered, LinkIo};
use crate::logs::Logs;
use crate::side::{qlog, side, transport, wall_clock, Host, Side};
use crate::tls;

/// How long the client waits for its close to complete, as the real client.
const DRAIN_LIMIT_NS: u64 = 2_000_000_000;

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
