//! What configures every s2n-quic connection of a process: the LL_CC registry,
//! the TLS, I/O and limits providers built from the contract's options, and the
//! qlog subscriber.

use std::time::Duration;

use ll_endpoint_common::{hq, AppLog, Failure, Opts, Role};
use s2n_quic::provider::congestion_controller::{bbr, cubic};
use s2n_quic::provider::io::tokio::Builder as IoBuilder;
use s2n_quic::provider::limits::Limits;
use s2n_quic::provider::tls::s2n_tls;

pub const STACK: &str = "s2n-quic";
pub const VERSION: &str = env!("LL_S2N_QUIC_VERSION");

/// IPv4 (20 B) and UDP (8 B) headers: s2n-quic sizes packets by the path's MTU,
/// the contract by the UDP payload.
const IP_UDP_HEADERS: usize = 28;

/// One congestion controller: the contract's LL_CC name and s2n-quic's own.
pub struct Cc {
    pub name: &'static str,
    pub native: &'static str,
}

/// What LL_CC may name: the two controllers s2n-quic 1.91 ships. It has no
/// NewReno, so `newreno` is refused (exit 127) and the harness skips with that reason.
pub const CONTROLLERS: &[Cc] = &[
    Cc { name: "cubic", native: "cubic (s2n_quic::provider::congestion_controller::Cubic)" },
    Cc { name: "bbr", native: "bbr (BBRv2, s2n_quic::provider::congestion_controller::Bbr)" },
];
/// s2n-quic's own default.
pub const DEFAULT_CC: &str = "cubic";

/// What every connection of this process is configured from.
pub struct Setup {
    pub opts: Opts,
    pub cc: &'static Cc,
    pub applog: AppLog,
}

/// The s2n-quic congestion-controller endpoints LL_CC chooses between. Each is a
/// different type, so the server and client builders are generic over it.
pub enum Controller {
    Cubic(s2n_quic::provider::congestion_controller::Cubic),
    Bbr(s2n_quic::provider::congestion_controller::Bbr),
}

impl Setup {
    pub fn new(opts: Opts) -> Result<Setup, Failure> {
        let name = opts.cc.as_deref().unwrap_or(DEFAULT_CC);
        let cc = CONTROLLERS.iter().find(|c| c.name == name).ok_or_else(|| {
            let known: Vec<_> = CONTROLLERS.iter().map(|c| c.name).collect();
            Failure::Unsupported(format!(
                "s2n-quic has no LL_CC {name:?}; known: {}",
                known.join(", ")
            ))
        })?;
        let mtu = opts.max_datagram_size + IP_UDP_HEADERS;
        if mtu > u16::MAX as usize {
            return Err(Failure::Unsupported(
                "LL_MAX_DATAGRAM_SIZE above 65507".into(),
            ));
        }
        let applog = AppLog::open(opts.applog.as_deref())?;
        Ok(Setup { opts, cc, applog })
    }

    /// The controller LL_CC names, with LL_INITIAL_WINDOW (packets) if set.
    pub fn controller(&self) -> Controller {
        let iw = self
            .opts
            .initial_window
            .map(|p| (p * self.opts.max_datagram_size as u64).min(u32::MAX as u64) as u32);
        match self.cc.name {
            "bbr" => {
                let b = bbr::Builder::default();
                Controller::Bbr(match iw {
                    Some(w) => b.with_initial_congestion_window(w),
                    None => b,
                }
                .build())
            }
            _ => {
                let b = cubic::Builder::default();
                Controller::Cubic(match iw {
                    Some(w) => b.with_initial_congestion_window(w),
                    None => b,
                }
                .build())
            }
        }
    }

    /// The UDP socket provider: bound to `addr`, with a fixed datagram size (base,
    /// initial and largest MTU alike, so no probe changes it mid-run).
    pub fn io(&self, addr: std::net::SocketAddr) -> Result<s2n_quic::provider::io::Default, Failure> {
        let mtu = (self.opts.max_datagram_size + IP_UDP_HEADERS) as u16;
        let bad = |e: std::io::Error| Failure::Unsupported(format!("LL_MAX_DATAGRAM_SIZE: {e}"));
        let io = IoBuilder::default()
            .with_receive_address(addr)
            .map_err(|e| Failure::Fatal(format!("bind {addr}: {e}")))?
            .with_max_mtu(mtu)
            .map_err(bad)?
            .with_initial_mtu(mtu)
            .map_err(bad)?
            .with_base_mtu(mtu)
            .map_err(bad)?
            // 4 MiB socket buffers, as the other endpoints ask for: a burst is
            // queued by the emulated link, not dropped by our own socket.
            .with_send_buffer_size(4 << 20)?
            .with_recv_buffer_size(4 << 20)?
            // LL_OFFLOAD=off: one datagram per send and per receive.
            .with_gso(self.opts.offload)?
            .with_gro(self.opts.offload)?
            .build()?;
        Ok(io)
    }

    /// Flow control far above any BDP; up to 1000 concurrent streams each way.
    pub fn limits(&self) -> Result<Limits, Failure> {
        let w = self.opts.flow_window;
        // s2n-quic does not re-export its limits' error type: only its Display is used.
        fn refuse<E: std::fmt::Display>(w: u64) -> impl Fn(E) -> Failure + Copy {
            move |e| Failure::Unsupported(format!("LL_FLOW_WINDOW={w}: {e}"))
        }
        let bad = refuse(w);
        Limits::new()
            .with_data_window(w)
            .map_err(bad)?
            .with_bidirectional_local_data_window(w)
            .map_err(bad)?
            .with_bidirectional_remote_data_window(w)
            .map_err(bad)?
            .with_unidirectional_data_window(w)
            .map_err(bad)?
            .with_max_send_buffer_size(w.min(u32::MAX as u64) as u32)
            .map_err(bad)?
            .with_max_open_local_bidirectional_streams(1000)
            .map_err(bad)?
            .with_max_open_remote_bidirectional_streams(1000)
            .map_err(bad)?
            .with_max_idle_timeout(Duration::from_secs(30))
            .map_err(bad)?
            // The default 10 s would close a handshake whose schedule keeps the
            // server dark for longer (the early-CRYPTO property's 15-17 s).
            .with_max_handshake_duration(Duration::from_secs(60))
            .map_err(bad)
    }

    /// TLS for the server: LL_CERTS' certificate and key, ALPN hq-interop, the key
    /// log to SSLKEYLOGFILE (s2n-quic reads the variable itself).
    pub fn server_tls(&self) -> Result<s2n_tls::Server, Failure> {
        let (cert, key) = (self.opts.certs.join("cert.pem"), self.opts.certs.join("priv.key"));
        let tls_err = |e: s2n_tls::error::Error| {
            Failure::Fatal(format!("TLS with {} / {}: {e}", cert.display(), key.display()))
        };
        let mut b = s2n_tls::Server::builder()
            .with_certificate(cert.as_path(), key.as_path())
            .map_err(tls_err)?
            .with_application_protocols([hq::ALPN])
            .map_err(tls_err)?;
        if self.opts.keylog.is_some() {
            b = b.with_key_logging().map_err(tls_err)?;
        }
        b.build().map_err(tls_err)
    }

    /// TLS for the client: it does not verify the server's certificate (the
    /// interop-runner convention, as the quinn and tquic endpoints: test certificates
    /// are self-signed and a client need not be given LL_CERTS); s2n-tls still checks
    /// the handshake's CertificateVerify signature, so the TLS exchange is the real one.
    pub fn client_tls(&self) -> Result<s2n_tls::Client, Failure> {
        let tls_err = |e: s2n_tls::error::Error| Failure::Fatal(format!("client TLS: {e}"));
        let mut b = s2n_tls::Client::builder()
            .with_application_protocols([hq::ALPN])
            .map_err(tls_err)?;
        // SAFETY: s2n-tls marks this unsafe because it removes authentication; the
        // suite's client talks only to its own test servers inside the namespaces.
        unsafe { b.config_mut().disable_x509_verification() }.map_err(tls_err)?;
        if self.opts.keylog.is_some() {
            b = b.with_key_logging().map_err(tls_err)?;
        }
        b.build().map_err(tls_err)
    }

    pub fn role(&self) -> Role {
        self.opts.role
    }
}
