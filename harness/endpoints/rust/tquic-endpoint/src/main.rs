//! longlook endpoint on Tencent's tquic: an HTTP/0.9 ("hq-interop") client or
//! server driven by the environment of docs/endpoints.md (ROLE, TESTCASE,
//! REQUESTS, LL_*).
//!
//! tquic owns its connections inside an `Endpoint` and reports stream events
//! through a `TransportHandler`; `io` holds our UDP loop around it, and the
//! handlers in `client` and `server` keep their state in `Rc<RefCell<…>>` so
//! the loop can look at it between events (think time, completion).

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
        serde_json::json!({"tquic_cc": setup.cc.tquic_name}),
    );
    match setup.opts.role {
        Role::Server => server::serve(setup),
        Role::Client => client::fetch_all(setup),
    }
}

fn main() {
    exit::run_endpoint(run)
}
