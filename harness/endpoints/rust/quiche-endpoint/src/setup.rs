//! What configures every quiche connection of a process: the LL_CC registry, the
//! quiche::Config of the contract's options, and the key log and qlog attached to
//! each new connection. Shared with quiche-virtual (docs/virtual-time.md), which
//! runs this file, client.rs and server.rs unchanged on a virtual socket and clock.

use ll_endpoint_common::{applog::monotonic_us, exit, hex, hq, AppLog, Failure, Opts, Role};
use std::fs::OpenOptions;

pub const STACK: &str = "quiche";
pub const VERSION: &str = env!("LL_QUICHE_VERSION");

/// One congestion controller: the contract's LL_CC name and quiche's own.
pub struct Cc {
    pub name: &'static str,
    pub quiche_name: &'static str,
}

/// What LL_CC may name. quiche 0.30 accepts "reno", "cubic", "bbr2"
/// (`bbr`/`bbr2` both select its gcongestion BBRv2).
pub const CONTROLLERS: &[Cc] = &[
    Cc {
        name: "newreno",
        quiche_name: "reno",
    },
    Cc {
        name: "cubic",
        quiche_name: "cubic",
    },
    Cc {
        name: "bbr",
        quiche_name: "bbr2",
    },
];
/// quiche's own default (Config::new selects CUBIC).
pub const DEFAULT_CC: &str = "cubic";
const ALIASES: &[(&str, &str)] = &[("reno", "newreno"), ("bbr2", "bbr")];

pub fn lookup_cc(name: &str) -> Option<&'static Cc> {
    let name = ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map_or(name, |(_, real)| real);
    CONTROLLERS.iter().find(|c| c.name == name)
}

/// What every connection of this process is configured from.
pub struct Setup {
    pub opts: Opts,
    pub cc: &'static Cc,
    pub applog: AppLog,
}

impl Setup {
    pub fn new(opts: Opts) -> Result<Setup, Failure> {
        let name = opts.cc.as_deref().unwrap_or(DEFAULT_CC);
        let cc = lookup_cc(name).ok_or_else(|| {
            let known: Vec<_> = CONTROLLERS.iter().map(|c| c.name).collect();
            Failure::Unsupported(format!(
                "quiche has no LL_CC {name:?}; known: {}",
                known.join(", ")
            ))
        })?;
        let applog = AppLog::open(opts.applog.as_deref())?;
        Ok(Setup { opts, cc, applog })
    }

    /// The quiche configuration shared by every connection of this process.
    pub fn config(&self) -> Result<quiche::Config, Failure> {
        let o = &self.opts;
        let q = |e: quiche::Error| Failure::Fatal(format!("quiche config: {e}"));
        let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(q)?;
        if o.role == Role::Server {
            let (cert, key) = (o.certs.join("cert.pem"), o.certs.join("priv.key"));
            c.load_cert_chain_from_pem_file(&cert.to_string_lossy())
                .map_err(|e| Failure::Fatal(format!("{}: {e}", cert.display())))?;
            c.load_priv_key_from_pem_file(&key.to_string_lossy())
                .map_err(|e| Failure::Fatal(format!("{}: {e}", key.display())))?;
        }
        c.verify_peer(false);
        c.set_application_protos_wire_format(hq::ALPN_WIRE)
            .map_err(q)?;
        c.set_max_idle_timeout(30_000);
        c.set_max_recv_udp_payload_size(o.max_datagram_size);
        c.set_max_send_udp_payload_size(o.max_datagram_size);
        // A fixed datagram size: no PMTU probes changing it mid-run.
        c.discover_pmtu(false);
        // Flow control far above any BDP: the initial credit and the ceiling of
        // quiche's window auto-tuning (24 MB / 16 MB by default) alike.
        c.set_initial_max_data(o.flow_window);
        c.set_initial_max_stream_data_bidi_local(o.flow_window);
        c.set_initial_max_stream_data_bidi_remote(o.flow_window);
        c.set_initial_max_stream_data_uni(o.flow_window);
        c.set_max_connection_window(o.flow_window);
        c.set_max_stream_window(o.flow_window);
        c.set_initial_max_streams_bidi(1000);
        c.set_initial_max_streams_uni(100);
        c.set_disable_active_migration(true);
        c.set_cc_algorithm_name(self.cc.quiche_name).map_err(q)?;
        if let Some(packets) = o.initial_window {
            c.set_initial_congestion_window_packets(packets as usize);
        }
        c.enable_pacing(true);
        if o.keylog.is_some() {
            c.log_keys();
        }
        Ok(c)
    }

    /// Attaches the key log and a qlog file (named by the original DCID) to a
    /// connection just created, before it has seen a packet.
    pub fn instrument(&self, conn: &mut quiche::Connection, odcid: &[u8]) -> Result<(), Failure> {
        if let Some(path) = &self.opts.keylog {
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            conn.set_keylog(Box::new(file));
        }
        if let Some(dir) = &self.opts.qlogdir {
            let role = self.opts.role.as_str();
            let file = exit::qlog_file(dir, role, &hex(odcid))?;
            // quiche's reference_time is wall-clock; the description adds the
            // CLOCK_MONOTONIC µs of the same origin, the clock the ground truth uses.
            let origin_us = monotonic_us();
            // Whole events to the shared file, not serde_json's pieces (EventLines).
            conn.set_qlog(
                Box::new(exit::EventLines::new(file)),
                format!("longlook {STACK} {VERSION} {role}"),
                format!("reference_time_monotonic_us={origin_us}"),
            );
        }
        Ok(())
    }
}
