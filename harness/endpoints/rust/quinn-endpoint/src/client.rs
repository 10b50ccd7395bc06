//! The client: one connection to the server of REQUESTS, requests in turn
//! (transfer), all at once (multiplexing) or in turn with LL_THINK_MS pauses
//! (appidle); each response is written to LL_DOWNLOADS/NAME.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use ll_endpoint_common::hq::Request;
use ll_endpoint_common::{linger, random_bytes, Failure, Opts, Testcase};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ClientConfig, Connection, ConnectionId};

use crate::{tls, Setup};

/// How long to wait for the close to be acknowledged before exiting anyway.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

pub async fn fetch_all(setup: Arc<Setup>) -> Result<(), Failure> {
    let opts = &setup.opts;
    if !opts.upload {
        std::fs::create_dir_all(&opts.downloads)?;
    }
    let server = opts.server_addr()?;
    let socket = std::net::UdpSocket::bind(Opts::any_local_for(server))?;
    let endpoint = setup.endpoint(socket, None)?;

    // Choosing the original DCID ourselves names the qlog file before connecting.
    let odcid = random_bytes(8)?;
    let crypto = QuicClientConfig::try_from(tls::client()?).map_err(Failure::fatal)?;
    let mut config = ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(setup.transport(setup.qlog(&odcid)?)?));
    let cid = ConnectionId::new(&odcid);
    config.initial_dst_cid_provider(Arc::new(move || cid));
    let first = &opts.requests[0];
    let server_name = first
        .sni()
        .unwrap_or(&first.host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let conn = endpoint
        .connect_with(config, server, server_name)
        .map_err(Failure::fatal)?
        .await
        .map_err(|e| Failure::Fatal(format!("handshake with {server}: {e}")))?;

    let result = run_testcase(&setup, &conn).await;
    if result.is_ok() {
        tokio::time::sleep(linger(conn.rtt())).await;
    }
    conn.close(0u32.into(), b"done");
    let _ = tokio::time::timeout(DRAIN_LIMIT, endpoint.wait_idle()).await;
    result
}

async fn run_testcase(setup: &Arc<Setup>, conn: &Connection) -> Result<(), Failure> {
    let requests = &setup.opts.requests;
    match setup.opts.testcase {
        Testcase::Transfer => {
            for r in requests {
                fetch(setup, conn, r).await?;
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
                last_stream = fetch(setup, conn, r).await?;
            }
        }
        Testcase::Multiplexing => {
            let tasks: Vec<_> = requests
                .iter()
                .map(|r| {
                    let (setup, conn, r) = (setup.clone(), conn.clone(), r.clone());
                    tokio::spawn(async move { fetch(&setup, &conn, &r).await })
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
async fn upload(setup: &Setup, conn: &Connection, request: &Request) -> Result<u64, Failure> {
    let path = setup.opts.www.join(&request.name);
    let body = std::fs::read(&path).map_err(|e| Failure::Fatal(format!("{}: {e}", path.display())))?;
    let (mut send, mut recv) = conn.open_bi().await.map_err(Failure::fatal)?;
    let stream = u64::from(send.id());
    setup.applog.event("request_start", stream, body.len() as u64);
    send.write_all(&request.put_line()).await.map_err(Failure::fatal)?;
    send.write_all(&body).await.map_err(Failure::fatal)?;
    send.finish().map_err(Failure::fatal)?;
    while recv
        .read_chunk(usize::MAX, true)
        .await
        .map_err(|e| Failure::Fatal(format!("{}: {e}", request.name)))?
        .is_some()
    {}
    setup.applog.request_done(stream, body.len() as u64, true);
    Ok(stream)
}

/// One request on a new stream; returns the stream's ID.
async fn fetch(setup: &Setup, conn: &Connection, request: &Request) -> Result<u64, Failure> {
    if setup.opts.upload {
        return upload(setup, conn, request).await;
    }
    let (mut send, mut recv) = conn.open_bi().await.map_err(Failure::fatal)?;
    let stream = u64::from(send.id());
    setup.applog.event("request_start", stream, 0);
    send.write_all(&request.line())
        .await
        .map_err(Failure::fatal)?;
    send.finish().map_err(Failure::fatal)?;
    let path = request.download_path(&setup.opts.downloads);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut received = 0u64;
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .map_err(|e| Failure::Fatal(format!("{}: {e}", request.name)))?
    {
        file.write_all(&chunk.bytes)?;
        received += chunk.bytes.len() as u64;
    }
    file.flush()?;
    setup.applog.event("request_done", stream, received);
    Ok(stream)
}
