//! quinn-virtual: a quinn-proto client and server over longlook-link's own core, in
//! virtual time (docs/virtual-time.md). One process, no sockets, no real clock.
//!
//!     quinn-virtual RUN_DIR < config.json
//!
//! RUN_DIR must hold schedule.json, www/ (the objects) and certs/ (cert.pem,
//! priv.key); harness/virtual prepares them. The run writes the real-time layout
//! next to them: link.ndjson, pcap/{client,server}.pcap, {client,server}/qlog/,
//! {client,server}/keys.log, {client,server}/app.ndjson, client/downloads/.
//! stdout: one JSON object (error, virtual_s, steps, link summary, datagram
//! counts). Exit 2: bad input (stderr names it); 127: an option quinn cannot honour.
//!
//! The congestion controllers are quinn-endpoint's own registry (same names, same
//! mutants), compiled in from its source.

#[path = "../../quinn-endpoint/src/cc.rs"]
#[allow(dead_code)]
mod cc;
#[path = "../../quinn-endpoint/src/mutants.rs"]
mod mutants;
#[path = "../../quinn-endpoint/src/tls.rs"]
#[allow(dead_code)]
mod tls;

// One way down, never back: sim (the loop) → hosts → client, server → side →
// logs, clock, linkio, wire, config, entropy.
mod client;
mod clock;
mod config;
mod entropy;
mod hosts;
mod linkio;
mod logs;
mod server;
mod side;
mod sim;
mod wire;

use std::io::Read;
use std::path::PathBuf;
use std::process::exit;

pub const STACK: &str = "quinn";
pub const VERSION: &str = env!("LL_QUINN_VERSION");
pub const PROTO_VERSION: &str = env!("LL_QUINN_PROTO_VERSION");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 || args[1].starts_with('-') {
        eprintln!("usage: quinn-virtual RUN_DIR < config.json (harness/virtual writes both; docs/virtual-time.md)");
        exit(2);
    }
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("quinn-virtual: reading the config from stdin: {e}");
        exit(2);
    }
    let config = match config::Config::parse(&text, PathBuf::from(&args[1])) {
        Ok(c) => c,
        Err(config::Bad::Input(why)) => {
            eprintln!("quinn-virtual: {why}");
            exit(2);
        }
        Err(config::Bad::Unsupported(why)) => {
            eprintln!("quinn-virtual: unsupported: {why}");
            exit(127);
        }
    };
    match sim::run(&config) {
        Ok(stats) => println!("{stats}"),
        Err(e) => {
            eprintln!("quinn-virtual: {e}");
            exit(1);
        }
    }
}
