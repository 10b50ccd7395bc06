//! longlook endpoint on cloudflare quiche: an HTTP/0.9 ("hq-interop") client or
//! server driven by the environment of docs/endpoints.md (ROLE, TESTCASE,
//! REQUESTS, LL_*).
//!
//! quiche is sans-IO: `io` holds our UDP loop, which holds every packet until the
//! send time quiche stamps on it (`SendInfo.at`), so quiche's pacing reaches the
//! wire the way its own SO_TXTIME-based servers deliver it.

mod client;
mod io;
mod server;
mod setup;

use ll_endpoint_common::{exit, Failure, Opts, Role};
pub use setup::*;

fn run(opts: Opts) -> Result<(), Failure> {
    let setup = Setup::new(opts)?;
    setup.applog.version(
        STACK,
        VERSION,
        setup.cc.name,
        serde_json::json!({"quiche_cc": setup.cc.quiche_name}),
    );
    match setup.opts.role {
        Role::Server => server::serve(&setup),
        Role::Client => client::fetch_all(&setup),
    }
}

fn main() {
    exit::run_endpoint(run)
}
