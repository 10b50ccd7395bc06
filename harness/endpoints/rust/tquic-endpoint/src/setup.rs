//! What configures every tquic connection of a process: the LL_CC registry, the
//! tquic::Config of the contract's options, and the key log and qlog attached to
//! each new connection.

use std::fs::OpenOptions;

use ll_endpoint_common::{applog::monotonic_us, exit, hex, hq, AppLog, Failure, Opts, Role};
use tquic::{CongestionControlAlgorithm as Algo, Connection, TlsConfig};

pub const STACK: &str = "tquic";
pub const VERSION: &str = env!("LL_TQUIC_VERSION");

/// One congestion controller: the contract's LL_CC name and tquic's own.
pub struct Cc {
    pub name: &'static str,
    pub tquic_name: &'static str,
    pub algo: Algo,
}

/// What LL_CC may name: every controller tquic 1.6 has. It has no NewReno, so
/// `newreno` is refused (exit 127) and the harness skips with that reason.
pub const CONTROLLERS: &[Cc] = &[
    Cc {
        name: "cubic",
        tquic_name: "cubic",
        algo: Algo::Cubic,
    },
    Cc {
        name: "bbr",
        tquic_name: "bbr",
        algo: Algo::Bbr,
    },
    Cc {
        name: "bbr3",
        tquic_name: "bbr3",
        algo: Algo::Bbr3,
    },
    Cc {
        name: "copa",
        tquic_name: "copa",
        algo: Algo::Copa,
    },
];
/// tquic's own default is BBR; the suite's default for a stack that has CUBIC is
/// CUBIC (caps.json "default_cc"), so an unset LL_CC means CUBIC here too.
pub const DEFAULT_CC: &str = "cubic";

pub fn lookup_cc(name: &str) -> Option<&'static Cc> {
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
                "tquic has no LL_CC {name:?}; known: {}",
                known.join(", ")
            ))
        })?;
        let applog = AppLog::open(opts.applog.as_deref())?;
        Ok(Setup { opts, cc, applog })
    }

    /// The tquic configuration of this process's endpoint.
    pub fn config(&self) -> Result<tquic::Config, Failure> {
        let o = &self.opts;
        let q = |e: tquic::Error| Failure::Fatal(format!("tquic config: {e:?}"));
        let mut c = tquic::Config::new().map_err(q)?;
        let alpn = vec![hq::ALPN.to_vec()];
        let mut tls = if o.role == Role::Server {
            let (cert, key) = (o.certs.join("cert.pem"), o.certs.join("priv.key"));
            TlsConfig::new_server_config(
                &cert.to_string_lossy(),
                &key.to_string_lossy(),
                alpn,
                false,
            )
            .map_err(|e| Failure::Fatal(format!("{} / {}: {e:?}", cert.display(), key.display())))?
        } else {
            TlsConfig::new_client_config(alpn, false).map_err(q)?
        };
        tls.set_verify(false);
        c.set_tls_config(tls);
        c.set_max_idle_timeout(30_000);
        let mds = o.max_datagram_size;
        c.set_recv_udp_payload_size(mds.min(u16::MAX as usize) as u16);
        c.set_send_udp_payload_size(mds);
        // A fixed datagram size: no PMTU probes changing it mid-run.
        c.enable_dplpmtud(false);
        // Flow control far above any BDP: the ceiling of tquic's window auto-tuning
        // and the initial credit alike. The ceilings first: tquic caps each initial
        // value by them when it is set (15 MB / 6 MB by default), which left a
        // 48 MB transfer flow-control blocked every few RTTs.
        c.set_max_connection_window(o.flow_window);
        c.set_max_stream_window(o.flow_window);
        c.set_initial_max_data(o.flow_window);
        c.set_initial_max_stream_data_bidi_local(o.flow_window);
        c.set_initial_max_stream_data_bidi_remote(o.flow_window);
        c.set_initial_max_stream_data_uni(o.flow_window);
        c.set_initial_max_streams_bidi(1000);
        c.set_initial_max_streams_uni(100);
        c.set_congestion_control_algorithm(self.cc.algo);
        if let Some(packets) = o.initial_window {
            c.set_initial_congestion_window(packets);
        }
        c.enable_pacing(true);
        // No Retry: the client's first flight is not delayed by an extra round
        // trip the CC properties do not model.
        c.enable_retry(false);
        c.set_cid_len(20);
        Ok(c)
    }

    /// Attaches the key log and a qlog file (named by the connection's trace id,
    /// from its source connection ID) to a connection just created.
    pub fn instrument(&self, conn: &mut Connection) -> Result<(), Failure> {
        if let Some(path) = &self.opts.keylog {
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            conn.set_keylog(Box::new(file));
        }
        if let Some(dir) = &self.opts.qlogdir {
            let role = self.opts.role.as_str();
            // "SERVER-<scid>" / "CLIENT-<scid>": the SCID part names the file.
            let id = conn.trace_id();
            let scid = id.rsplit('-').next().unwrap_or(id);
            let name = if scid.chars().all(|c| c.is_ascii_hexdigit()) {
                scid.to_string()
            } else {
                hex(scid.as_bytes())
            };
            let file = exit::qlog_file(dir, role, &name)?;
            // tquic's reference_time is wall-clock; the description adds the
            // CLOCK_MONOTONIC µs of the same origin, the clock the ground truth uses.
            let origin_us = monotonic_us();
            conn.set_qlog(
                Box::new(exit::EventLines::new(file)),
                format!("longlook {STACK} {VERSION} {role}"),
                format!("reference_time_monotonic_us={origin_us}"),
            );
        }
        Ok(())
    }
}
