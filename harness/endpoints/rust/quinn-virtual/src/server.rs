//! The server host: quinn-endpoint/src/server.rs's request parsing and answers,
//! against quinn-proto's sans-IO API.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use link_core::Dir;
use ll_endpoint_common::hq;
use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{Event, Incoming, ServerConfig, StreamEvent, StreamId, VarInt, WriteError};
use serde_json::json;

use crate::clock::Clock;
use crate::config::Config;
use crate::entropy::{Entropy, VirtualWallClock};
use crate::linkio::{numbered, LinkIo};
use crate::logs::Logs;
use crate::side::{qlog, side, transport, wall_clock, Host, Side};

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
