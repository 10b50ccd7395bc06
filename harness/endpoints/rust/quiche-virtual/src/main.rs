//! quiche-virtual: quiche-endpoint's own client and server (its client.rs,
//! server.rs and setup.rs, compiled in unchanged) over longlook-link's core, in
//! virtual time (docs/virtual-time.md). One process, no sockets, no real clock.
//!
//!     quiche-virtual RUN_DIR < config.json
//!
//! Inputs, outputs and the run directory are quinn-virtual's (its config.rs and
//! linkio.rs are included): RUN_DIR holds schedule.json, www/ and certs/; the run
//! writes link.ndjson, pcap/, {client,server}/{qlog/,keys.log,app.ndjson} and
//! client/downloads/. stdout's last line: one JSON object (error, virtual_s,
//! steps, link summary, datagram counts); the server's `{"ready": true}` line
//! comes before it. Exit 2: bad input; 127: an option quiche cannot honour.
//!
//! quiche takes no clock and no RNG from its caller; shim.rs answers the libc
//! calls it and BoringSSL make instead, which is what makes this possible.

#[path = "../../quiche-endpoint/src/client.rs"]
mod client;
#[path = "../../quinn-virtual/src/config.rs"]
mod config;
#[path = "vio.rs"]
mod io;
#[path = "../../quinn-virtual/src/linkio.rs"]
mod linkio;
#[path = "../../quiche-endpoint/src/server.rs"]
mod server;
#[path = "../../quiche-endpoint/src/setup.rs"]
mod setup;
mod shim;
#[path = "../../quinn-virtual/src/wire.rs"]
#[allow(dead_code)]
mod wire;
mod world;

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::exit;
use std::time::Duration;

use link_core::Dir;
use linkio::numbered;
use ll_endpoint_common::hq::Request;
use ll_endpoint_common::{Failure, Opts, Role};
use serde_json::json;

pub use setup::*;

/// quinn-virtual's config.rs names its registry `cc`; quiche-endpoint's is in setup.rs.
mod cc {
    pub use crate::setup::Cc as Entry;
    pub const DEFAULT: &str = crate::setup::DEFAULT_CC;

    pub fn lookup(name: &str) -> Option<&'static Entry> {
        crate::setup::lookup_cc(name)
    }

    pub fn names() -> Vec<&'static str> {
        crate::setup::CONTROLLERS.iter().map(|c| c.name).collect()
    }
}

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const CLIENT_PORT: u16 = 40000;
const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(198, 19, 0, 1), 4433);

/// The contract's options for one host, as the real harness would set them in
/// its environment (docs/endpoints.md), with the run directory's paths.
fn opts(c: &config::Config, role: Role, dir: &str) -> Opts {
    let d = c.run_dir.join(dir);
    let server = SocketAddr::V4(SERVER);
    Opts {
        role,
        testcase: match c.testcase {
            config::Testcase::Transfer => ll_endpoint_common::Testcase::Transfer,
            config::Testcase::Multiplexing => ll_endpoint_common::Testcase::Multiplexing,
            config::Testcase::Appidle => ll_endpoint_common::Testcase::Appidle,
        },
        requests: match role {
            Role::Client => c
                .names
                .iter()
                .map(|n| {
                    Request::from_url(&format!("https://{server}/{n}")).expect("names were checked")
                })
                .collect(),
            Role::Server => Vec::new(),
        },
        listen: server,
        www: c.run_dir.join("www"),
        downloads: d.join("downloads"),
        certs: c.run_dir.join("certs"),
        qlogdir: c.qlog.then(|| d.join("qlog")),
        keylog: Some(d.join("keys.log")),
        cc: Some(c.cc.name.to_string()),
        max_datagram_size: c.max_datagram_size as usize,
        initial_window: c.initial_window,
        think: Duration::from_nanos(c.think_ns),
        flow_window: c.flow_window,
        applog: Some(d.join("app.ndjson")),
        timeout: None,
        upload: false,
        // No sockets in virtual time: nothing to offload.
        offload: true,
    }
}

/// What quiche-endpoint's main does for one host, on the calling thread.
fn host(opts: Opts) -> Result<(), String> {
    let text = |f: Failure| match f {
        Failure::Fatal(s) | Failure::Unsupported(s) => s,
    };
    let setup = Setup::new(opts).map_err(text)?;
    setup.applog.version(
        STACK,
        VERSION,
        setup.cc.name,
        json!({"quiche_cc": setup.cc.quiche_name, "driver": "longlook-virtual"}),
    );
    match setup.opts.role {
        Role::Server => server::serve(&setup),
        Role::Client => client::fetch_all(&setup),
    }
    .map_err(text)
}

fn run(c: &config::Config) -> Result<serde_json::Value, String> {
    shim::seed(c.seed);
    shim::set_epoch(c.epoch_unix_ns);
    shim::set_now(0);
    let io = linkio::LinkIo::open(&c.run_dir, STACK, c.epoch_unix_ns)?;
    let mut addrs = vec![(SERVER, Dir::S2c)];
    for k in 1..=c.clients {
        addrs.push((
            SocketAddrV4::new(CLIENT_IP, CLIENT_PORT + k as u16 - 1),
            Dir::C2s,
        ));
    }
    // The hosts' directories, for their app and key logs (the client makes
    // downloads/ and each host its qlog/ as in real time).
    for dir in ["server".to_string()]
        .into_iter()
        .chain((1..=c.clients).map(|k| numbered("client", k)))
    {
        let d = c.run_dir.join(dir);
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    world::install(io, &addrs);
    let o = opts(c, Role::Server, "server");
    world::spawn(world::SERVER, move || host(o));
    for k in 1..=c.clients {
        let o = opts(c, Role::Client, &numbered("client", k));
        world::spawn(k, move || host(o));
    }
    let out = world::run(c.timeout_ns);
    // The qlogs' buffers; the server stays suspended in its wait.
    ll_endpoint_common::exit::flush_all();
    Ok(json!({
        "error": out.error,
        "virtual_s": out.virtual_s,
        "steps": out.steps,
        "link": out.link,
        "client": out.client,
        "server": out.server,
        "flows": c.clients,
    }))
}

fn main() {
    if !shim::SUPPORTED {
        eprintln!("quiche-virtual: unsupported: its clock and getrandom shim needs x86_64 Linux with glibc (docs/virtual-time.md)");
        exit(127);
    }
    // RDRAND off in BoringSSL (read once, at its first use): on Intel CPUs it
    // mixes RDRAND output into every RAND_bytes call, which no shim can reach.
    // The mask clears CPUID.1:ECX bit 30 (bit 62 of the first value).
    std::env::set_var("OPENSSL_ia32cap", "~0x4000000000000000");
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 || args[1].starts_with('-') {
        eprintln!("usage: quiche-virtual RUN_DIR < config.json (harness/virtual writes both; docs/virtual-time.md)");
        exit(2);
    }
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("quiche-virtual: reading the config from stdin: {e}");
        exit(2);
    }
    let c = match config::Config::parse(&text, PathBuf::from(&args[1])) {
        Ok(c) => c,
        Err(config::Bad::Input(why)) => {
            eprintln!("quiche-virtual: {why}");
            exit(2);
        }
        Err(config::Bad::Unsupported(why)) => {
            eprintln!("quiche-virtual: unsupported: {why}");
            exit(127);
        }
    };
    match run(&c) {
        Ok(stats) => {
            println!("{stats}");
            // At once: the server's coroutine stays suspended for good.
            exit(0);
        }
        Err(e) => {
            eprintln!("quiche-virtual: {e}");
            exit(1);
        }
    }
}
