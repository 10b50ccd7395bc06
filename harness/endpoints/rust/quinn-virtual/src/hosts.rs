//! The two hosts: quinn-proto endpoints with the same HTTP/0.9 (hq-interop)
//! application, options and app-log events as the real quinn endpoint
//! (quinn-endpoint/src/{client,server}.rs), rewritten against quinn-proto's
//! sans-IO API because the real one runs on quinn's tokio driver.
//!
//! What the loop sees of them; the hosts themselves are in client.rs and
//! server.rs, over side.rs, logs.rs and clock.rs, none of which reaches back up.

use ll_endpoint_common::exit;

pub use crate::client::Client;
pub use crate::logs::Logs;
pub use crate::server::Server;
pub use crate::side::Host;

/// Flushes what the hosts wrote (qlog buffers, key logs, app logs). A failure
/// here (a full disk) would leave truncated files that observe misreads, so it
/// fails the run instead.
pub fn finish_files(clients: &mut [Client], servers: &mut [Server]) -> Result<(), String> {
    let clients = clients.iter_mut().map(|c| c.side());
    for side in clients.chain(servers.iter_mut().map(|s| s.side())) {
        // Dropping the connection releases its qlog stream.
        side.conn = None;
        exit::flush_all();
        let name = &side.name;
        side.keylog
            .flush()
            .map_err(|e| format!("{name}/keys.log: {e}"))?;
        side.applog
            .flush()
            .map_err(|e| format!("{name}/app.ndjson: {e}"))?;
    }
    Ok(())
}
