//! longlook endpoint on AWS s2n-quic: an HTTP/0.9 ("hq-interop") client or server
//! driven by the environment of docs/endpoints.md (ROLE, TESTCASE, REQUESTS, LL_*).
//!
//! s2n-quic does its own I/O, pacing and timers on tokio, and writes no qlog: its
//! event subscriber API reports packets, ACK ranges, losses and recovery metrics,
//! and `qlog` turns those into one qlog 0.3 JSON-SEQ file per connection.

mod client;
mod qlog;
mod server;
mod setup;

use ll_endpoint_common::{exit, Failure, Opts, Role};
pub use setup::*;

fn run(opts: Opts) -> Result<(), Failure> {
    let setup = std::sync::Arc::new(Setup::new(opts)?);
    setup.applog.version(
        STACK,
        VERSION,
        setup.cc.name,
        serde_json::json!({"s2n_quic_cc": setup.cc.native}),
    );
    // One thread, like the quinn endpoint: no cross-thread wake-ups in the timing.
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
