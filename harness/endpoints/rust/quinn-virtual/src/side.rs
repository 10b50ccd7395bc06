//! What the client and the server share: the endpoint with its one connection
//! (Side), the Host interface the loop drives them through, and the transport,
//! qlog and clocks both configure alike, so that the two can only differ where
//! quinn-endpoint's client and server do.

use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use link_core::Dir;
use ll_endpoint_common::{exit, hex};
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, EcnCodepoint, Endpoint, EndpointConfig, Event,
    Incoming, QlogConfig, QlogStream, Transmit, TransportConfig, VarInt,
};

use crate::clock::Clock;
use crate::config::Config;
use crate::entropy::{Entropy, KeyLogTo, SeededCids, VirtualWallClock};
use crate::linkio::{Counters, LinkIo};
use crate::logs::{AppLog, Logs};
use crate::{wire, VERSION};

/// Datagrams per poll_transmit (GSO batch), as quinn's own driver asks for.
const MAX_BATCH: usize = 10;
/// A host reacting more often than this within one instant is looping.
const REACT_LIMIT: usize = 100_000;

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
    pub keylog: Arc<KeyLogTo>,
    pub applog: AppLog,
}

impl Side {
    pub fn conn_mut(&mut self) -> Option<&mut Connection> {
        self.conn.as_mut().map(|(_, c)| c)
    }

    pub fn send(
        &mut self,
        io: &mut LinkIo,
        now: u64,
        t: &Transmit,
        buf: &[u8],
    ) -> Result<(), String> {
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
pub fn transport(config: &Config, qlog: Option<QlogStream>) -> TransportConfig {
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
pub fn qlog(
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

pub fn side(
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

pub fn wall_clock(config: &Config, clock: &Clock) -> Arc<VirtualWallClock> {
    Arc::new(VirtualWallClock {
        epoch_unix_ns: config.epoch_unix_ns,
        now_ns: clock.now_ns.clone(),
    })
}
