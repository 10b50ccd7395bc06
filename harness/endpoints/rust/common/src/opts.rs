//! The endpoint's environment (docs/endpoints.md), read once and validated.
//!
//! Values that are present but malformed are failures (exit 1: the harness has a
//! bug); values that are well-formed but that a stack cannot honour are reported by
//! the stack itself as `Failure::Unsupported` (exit 127).

use std::env;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use crate::exit::Failure;
use crate::hq::Request;

/// Contract default for LL_FLOW_WINDOW: far above any BDP a property uses.
pub const DEFAULT_FLOW_WINDOW: u64 = 64 * 1024 * 1024;
/// Contract default for LL_MAX_DATAGRAM_SIZE (max UDP payload, bytes).
pub const DEFAULT_MAX_DATAGRAM_SIZE: usize = 1252;
/// LL_THINK_MS when unset (the aioquic endpoint's default too).
pub const DEFAULT_THINK_MS: u64 = 1000;
/// QUIC's minimum: Initial datagrams must carry 1200 bytes (RFC 9000 §14.1).
pub const MIN_DATAGRAM_SIZE: usize = 1200;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Testcase {
    /// Every request in turn, on one connection, without pauses.
    Transfer,
    /// Every request at once, one stream each.
    Multiplexing,
    /// Requests in turn with LL_THINK_MS of idleness between them.
    Appidle,
}

/// Everything the contract passes in; `None` where a variable was not set.
#[derive(Clone, Debug)]
pub struct Opts {
    pub role: Role,
    pub testcase: Testcase,
    /// Client: the requests in REQUESTS order (all to one server).
    pub requests: Vec<Request>,
    /// Server: where to listen.
    pub listen: SocketAddr,
    pub www: PathBuf,
    pub downloads: PathBuf,
    pub certs: PathBuf,
    pub qlogdir: Option<PathBuf>,
    pub keylog: Option<PathBuf>,
    /// LL_CC as given (lower-cased); None means the stack's default.
    pub cc: Option<String>,
    /// Max UDP payload, bytes.
    pub max_datagram_size: usize,
    /// Initial congestion window, packets.
    pub initial_window: Option<u64>,
    pub think: Duration,
    /// Connection and stream flow-control windows, bytes.
    pub flow_window: u64,
    pub applog: Option<PathBuf>,
    pub timeout: Option<Duration>,
    /// LL_DIRECTION=upload: the client sends each object (`PUT /NAME`), the server
    /// stores it; false is a download.
    pub upload: bool,
    /// LL_OFFLOAD=off: no segmentation offload (GSO on send, GRO on receive) where
    /// the stack would use one; true (the default, or `on`) leaves the stack's own.
    pub offload: bool,
}

fn var(name: &str) -> Option<String> {
    env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn number<T: std::str::FromStr>(name: &str) -> Result<Option<T>, Failure> {
    match var(name) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| Failure::Fatal(format!("{name}={v:?} is not a valid number"))),
    }
}

impl Opts {
    pub fn from_env() -> Result<Opts, Failure> {
        let role = match var("ROLE").as_deref() {
            Some("client") => Role::Client,
            Some("server") => Role::Server,
            other => {
                return Err(Failure::Fatal(format!(
                    "ROLE must be client or server, got {other:?}"
                )))
            }
        };
        let testcase = match var("TESTCASE").as_deref().unwrap_or("transfer") {
            "transfer" => Testcase::Transfer,
            "multiplexing" => Testcase::Multiplexing,
            "appidle" => Testcase::Appidle,
            other => {
                return Err(Failure::Unsupported(format!(
                    "unsupported TESTCASE {other:?}"
                )))
            }
        };
        let requests = match (role, var("REQUESTS")) {
            (Role::Client, None) => return Err(Failure::Fatal("REQUESTS is empty".into())),
            (Role::Client, Some(r)) => r
                .split_whitespace()
                .map(Request::from_url)
                .collect::<Result<Vec<_>, _>>()?,
            (Role::Server, _) => Vec::new(),
        };
        if let Some(first) = requests.first() {
            if requests.iter().any(|r| r.server != first.server) {
                return Err(Failure::Unsupported(
                    "REQUESTS name more than one server".into(),
                ));
            }
        }
        let port: u16 = number("LL_PORT")?.unwrap_or(4433);
        let host = var("LL_ADDR").unwrap_or_else(|| "0.0.0.0".into());
        let listen = resolve(&host, port)?;
        let max_datagram_size =
            number("LL_MAX_DATAGRAM_SIZE")?.unwrap_or(DEFAULT_MAX_DATAGRAM_SIZE);
        if !(MIN_DATAGRAM_SIZE..=65527).contains(&max_datagram_size) {
            return Err(Failure::Unsupported(format!(
                "LL_MAX_DATAGRAM_SIZE={max_datagram_size} is outside QUIC's {MIN_DATAGRAM_SIZE}..=65527"
            )));
        }
        let initial_window: Option<u64> = number("LL_INITIAL_WINDOW")?;
        if initial_window == Some(0) {
            return Err(Failure::Unsupported("LL_INITIAL_WINDOW=0 packets".into()));
        }
        let upload = match var("LL_DIRECTION").as_deref().unwrap_or("download") {
            "download" => false,
            "upload" => true,
            other => {
                return Err(Failure::Unsupported(format!(
                    "LL_DIRECTION={other:?}: download or upload"
                )))
            }
        };
        let offload = match var("LL_OFFLOAD").as_deref().unwrap_or("on") {
            "on" => true,
            "off" => false,
            other => {
                return Err(Failure::Unsupported(format!(
                    "LL_OFFLOAD={other:?}: on or off"
                )))
            }
        };
        let timeout = number::<f64>("LL_TIMEOUT_S")?
            .filter(|s| *s > 0.0)
            .map(Duration::from_secs_f64);
        Ok(Opts {
            role,
            testcase,
            requests,
            listen,
            www: var("LL_WWW").unwrap_or_else(|| "/www".into()).into(),
            downloads: var("LL_DOWNLOADS")
                .unwrap_or_else(|| "/downloads".into())
                .into(),
            certs: var("LL_CERTS").unwrap_or_else(|| "/certs".into()).into(),
            qlogdir: var("QLOGDIR").map(PathBuf::from),
            keylog: var("SSLKEYLOGFILE").map(PathBuf::from),
            cc: var("LL_CC").map(|c| c.to_ascii_lowercase()),
            max_datagram_size,
            initial_window,
            think: Duration::from_millis(number("LL_THINK_MS")?.unwrap_or(DEFAULT_THINK_MS)),
            flow_window: number("LL_FLOW_WINDOW")?.unwrap_or(DEFAULT_FLOW_WINDOW),
            applog: var("LL_APPLOG").map(PathBuf::from),
            timeout,
            upload,
            offload,
        })
    }

    /// The server the client connects to (every request names the same one).
    pub fn server_addr(&self) -> Result<SocketAddr, Failure> {
        let first = self
            .requests
            .first()
            .ok_or_else(|| Failure::Fatal("no requests".into()))?;
        resolve(&first.host, first.port)
    }

    /// A local address of the family of `peer`, any port: the client's bind address.
    pub fn any_local_for(peer: SocketAddr) -> SocketAddr {
        match peer {
            SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            SocketAddr::V6(_) => "[::]:0".parse().expect("literal address"),
        }
    }
}

/// `host` may be an IP literal (IPv6 with or without brackets) or a name.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, Failure> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (bare, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Failure::Fatal(format!("cannot resolve {host:?}")))
}
