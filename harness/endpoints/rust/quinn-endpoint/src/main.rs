//! longlook endpoint on quinn: an HTTP/0.9 ("hq-interop") client or server driven
//! by the environment of docs/endpoints.md (ROLE, TESTCASE, REQUESTS, LL_*).
//!
//! quinn does its own I/O, pacing and timers on tokio; this program only sets the
//! transport up (CC from cc::REGISTRY, flow windows, fixed datagram size, one qlog
//! per connection) and moves files over streams.

mod cc;
mod client;
mod mutants;
mod server;
mod tls;

use std::sync::Arc;
use std::time::Instant;

use ll_endpoint_common::{applog::monotonic_us, exit, hex, AppLog, Failure, Opts, Role};
use quinn::{QlogConfig, QlogStream, TransportConfig, VarInt};

pub const STACK: &str = "quinn";
pub const VERSION: &str = env!("LL_QUINN_VERSION");
pub const PROTO_VERSION: &str = env!("LL_QUINN_PROTO_VERSION");

/// What every connection of this process is configured from.
pub struct Setup {
    pub opts: Opts,
    pub cc: &'static cc::Entry,
    pub applog: AppLog,
}

impl Setup {
    fn new(opts: Opts) -> Result<Setup, Failure> {
        let name = opts.cc.as_deref().unwrap_or(cc::DEFAULT);
        let cc = cc::lookup(name).ok_or_else(|| {
            Failure::Unsupported(format!(
                "quinn has no LL_CC {name:?}; known: {}",
                cc::names().join(", ")
            ))
        })?;
        if opts.max_datagram_size > u16::MAX as usize {
            return Err(Failure::Unsupported(
                "LL_MAX_DATAGRAM_SIZE above 65535".into(),
            ));
        }
        let applog = AppLog::open(opts.applog.as_deref())?;
        Ok(Setup { opts, cc, applog })
    }

    fn datagram_size(&self) -> u16 {
        self.opts.max_datagram_size as u16
    }

    /// The transport of one connection; `qlog` is that connection's own stream.
    pub fn transport(&self, qlog: Option<QlogStream>) -> Result<TransportConfig, Failure> {
        let window = VarInt::from_u64(self.opts.flow_window).map_err(|_| {
            Failure::Unsupported(format!(
                "LL_FLOW_WINDOW={} exceeds 2^62",
                self.opts.flow_window
            ))
        })?;
        let initial_window = self
            .opts
            .initial_window
            .map(|p| p * self.opts.max_datagram_size as u64);
        let mut t = TransportConfig::default();
        t.receive_window(window)
            .stream_receive_window(window)
            .send_window(self.opts.flow_window)
            // A fixed datagram size: no PMTU probes changing it mid-run.
            .initial_mtu(self.datagram_size())
            .min_mtu(self.datagram_size())
            .mtu_discovery_config(None)
            .max_concurrent_bidi_streams(VarInt::from_u32(1000))
            .congestion_controller_factory((self.cc.build)(initial_window))
            // LL_OFFLOAD=off: one datagram per send call (GSO off); GRO in `endpoint`.
            .enable_segmentation_offload(self.opts.offload)
            .qlog_stream(qlog);
        Ok(t)
    }

    /// quinn's endpoint on `socket`, its receive offload off under LL_OFFLOAD=off:
    /// quinn-udp switches UDP_GRO on when it takes the socket and has no setting
    /// against it, so a dup of the fd, kept until then, switches it off after.
    pub fn endpoint(
        &self,
        socket: std::net::UdpSocket,
        server: Option<quinn::ServerConfig>,
    ) -> Result<quinn::Endpoint, Failure> {
        ll_endpoint_common::enlarge_socket_buffers(&socket);
        let dup = if self.opts.offload { None } else { Some(socket.try_clone()?) };
        let endpoint = quinn::Endpoint::new(
            self.endpoint_config()?,
            server,
            socket,
            Arc::new(quinn::TokioRuntime),
        )?;
        if let Some(dup) = dup {
            ll_endpoint_common::turn_gro_off(&dup)
                .map_err(|e| Failure::Fatal(format!("LL_OFFLOAD=off: UDP_GRO: {e}")))?;
        }
        Ok(endpoint)
    }

    pub fn endpoint_config(&self) -> Result<quinn::EndpointConfig, Failure> {
        let mut config = quinn::EndpointConfig::default();
        config
            .max_udp_payload_size(self.datagram_size())
            .map_err(Failure::fatal)?;
        Ok(config)
    }

    /// A qlog stream in QLOGDIR named by the connection's original DCID.
    ///
    /// quinn's trace carries no reference time, so the description records the
    /// CLOCK_MONOTONIC µs of the events' time origin.
    pub fn qlog(&self, odcid: &[u8]) -> Result<Option<QlogStream>, Failure> {
        let Some(dir) = &self.opts.qlogdir else {
            return Ok(None);
        };
        let role = self.opts.role.as_str();
        let file = exit::qlog_file(dir, role, &hex(odcid))?;
        let (start, start_us) = (Instant::now(), monotonic_us());
        let mut config = QlogConfig::default();
        config
            .writer(Box::new(file))
            .title(Some(format!("longlook {STACK} {VERSION} {role}")))
            .description(Some(format!("reference_time_monotonic_us={start_us}")))
            .start_time(start);
        Ok(config.into_stream())
    }
}

fn run(opts: Opts) -> Result<(), Failure> {
    let setup = Arc::new(Setup::new(opts)?);
    setup.applog.version(
        STACK,
        VERSION,
        setup.cc.name,
        serde_json::json!({"quinn_proto": PROTO_VERSION}),
    );
    // One thread, like the quiche endpoint: no cross-thread wake-ups in the timing.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match setup.opts.role {
            Role::Server => server::serve(setup).await,
            Role::Client => client::fetch_all(setup).await,
        }
    })
}

fn main() {
    exit::run_endpoint(run)
}
