//! The client: one connection to the server of REQUESTS, requests in turn
//! (transfer), all at once (multiplexing) or in turn with LL_THINK_MS pauses
//! (appidle); each response is written to LL_DOWNLOADS/NAME.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ll_endpoint_common::hq::Request;
use ll_endpoint_common::{linger, Failure, Opts, Role, Testcase};
use s2n_quic::client::Connect;
use s2n_quic::connection::Handle;
use s2n_quic::Client;

use crate::qlog::Qlog;
use crate::{Controller, Setup};

/// How long to wait for the close to be acknowledged before exiting anyway.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

fn start(setup: &Setup, local: std::net::SocketAddr) -> Result<Client, Failure> {
    let qlog = Qlog { dir: setup.opts.qlogdir.clone(), role: Role::Client };
    let builder = Client::builder()
        .with_tls(setup.client_tls()?)
        .map_err(Failure::fatal)?
        .with_io(setup.io(local)?)
        .map_err(Failure::fatal)?
        .with_limits(setup.limits()?)
        .map_err(Failure::fatal)?
        .with_event(qlog)
        .map_err(Failure::fatal)?;
    let client = match setup.controller() {
        Controller::Cubic(c) => builder.with_congestion_controller(c).map_err(Failure::fatal)?.start(),
        Controller::Bbr(c) => builder.with_congestion_controller(c).map_err(Failure::fatal)?.start(),
    };
    client.map_err(Failure::fatal)
}

pub async fn fetch_all(setup: Arc<Setup>) -> Result<(), Failure> {
    let opts = &setup.opts;
    if !opts.upload {
        std::fs::create_dir_all(&opts.downloads)?;
    }
    let server = opts.server_addr()?;
    let mut client = start(&setup, Opts::any_local_for(server))?;
    let first = &opts.requests[0];
    let name = first
        .sni()
        .unwrap_or(&first.host)
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let began = Instant::now();
    let mut conn = client
        .connect(Connect::new(server).with_server_name(name.as_str()))
        .await
        .map_err(|e| Failure::Fatal(format!("handshake with {server}: {e}")))?;
    // The handshake's duration stands in for the RTT (s2n-quic's estimate is not
    // exposed on the connection): it only sizes the linger below.
    let rtt = began.elapsed();
    conn.keep_alive(true).map_err(Failure::fatal)?;

    let result = run_testcase(&setup, conn.handle()).await;
    if result.is_ok() {
        // A PING carries our pending ACK at once: left to the delayed-ACK timer
        // (max_ack_delay, 25 ms) it can still be waiting when the linger ends, and the
        // server's last response would close unacknowledged.
        let _ = conn.ping();
        tokio::time::sleep(linger(rtt)).await;
    }
    conn.close(0u32.into());
    let _ = tokio::time::timeout(DRAIN_LIMIT, client.wait_idle()).await;
    result
}

async fn run_testcase(setup: &Arc<Setup>, conn: Handle) -> Result<(), Failure> {
    let requests = &setup.opts.requests;
    match setup.opts.testcase {
        Testcase::Transfer => {
            for r in requests {
                fetch(setup, conn.clone(), r).await?;
            }
        }
        Testcase::Appidle => {
            let mut last_stream = 0;
            for (i, r) in requests.iter().enumerate() {
                if i > 0 {
                    setup.applog.event("idle_start", last_stream, 0);
                    tokio::time::sleep(setup.opts.think).await;
                    setup.applog.event("idle_end", last_stream, 0);
                }
                last_stream = fetch(setup, conn.clone(), r).await?;
            }
        }
        Testcase::Multiplexing => {
            let tasks: Vec<_> = requests
                .iter()
                .map(|r| {
                    let (setup, conn, r) = (setup.clone(), conn.clone(), r.clone());
                    tokio::spawn(async move { fetch(&setup, conn, &r).await })
                })
                .collect();
            for t in tasks {
                t.await.map_err(Failure::fatal)??;
            }
        }
    }
    Ok(())
}

/// An upload (LL_DIRECTION=upload): `PUT /NAME` and LL_WWW/NAME on a new stream;
/// done when the server's FIN says it has it all. Returns the stream's ID.
async fn upload(setup: &Setup, mut conn: Handle, request: &Request) -> Result<u64, Failure> {
    let path = setup.opts.www.join(&request.name);
    let body = std::fs::read(&path).map_err(|e| Failure::Fatal(format!("{}: {e}", path.display())))?;
    let mut stream = conn.open_bidirectional_stream().await.map_err(Failure::fatal)?;
    let id = stream.id();
    setup.applog.event("request_start", id, body.len() as u64);
    let size = body.len() as u64;
    stream.send(Bytes::from(request.put_line())).await.map_err(Failure::fatal)?;
    stream.send(Bytes::from(body)).await.map_err(Failure::fatal)?;
    stream.finish().map_err(Failure::fatal)?;
    while stream
        .receive()
        .await
        .map_err(|e| Failure::Fatal(format!("{}: {e}", request.name)))?
        .is_some()
    {}
    setup.applog.request_done(id, size, true);
    Ok(id)
}

/// One request on a new stream; returns the stream's ID.
async fn fetch(setup: &Setup, mut conn: Handle, request: &Request) -> Result<u64, Failure> {
    if setup.opts.upload {
        return upload(setup, conn, request).await;
    }
    let mut stream = conn.open_bidirectional_stream().await.map_err(Failure::fatal)?;
    let id = stream.id();
    setup.applog.event("request_start", id, 0);
    stream.send(Bytes::from(request.line())).await.map_err(Failure::fatal)?;
    stream.finish().map_err(Failure::fatal)?;
    let path = request.download_path(&setup.opts.downloads);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut received = 0u64;
    while let Some(chunk) = stream
        .receive()
        .await
        .map_err(|e| Failure::Fatal(format!("{}: {e}", request.name)))?
    {
        file.write_all(&chunk)?;
        received += chunk.len() as u64;
    }
    file.flush()?;
    setup.applog.event("request_done", id, received);
    Ok(id)
}
