//! The server: accepts connections until SIGTERM, answers each request stream
//! with the named file from LL_WWW and FIN.

use std::io::Write;
use std::net::UdpSocket;
use std::sync::Arc;

use ll_endpoint_common::{hq, Failure};
use quinn::crypto::rustls::QuicServerConfig;
use quinn::{Incoming, RecvStream, SendStream, ServerConfig};
use tokio::io::AsyncReadExt;

use crate::{tls, Setup};

/// Bytes read from the file per stream write.
const CHUNK: usize = 256 * 1024;

pub async fn serve(setup: Arc<Setup>) -> Result<(), Failure> {
    let crypto = Arc::new(
        QuicServerConfig::try_from(tls::server(&setup.opts.certs)?).map_err(Failure::fatal)?,
    );
    let socket = UdpSocket::bind(setup.opts.listen)
        .map_err(|e| Failure::Fatal(format!("bind {}: {e}", setup.opts.listen)))?;
    let default_config = ServerConfig::with_crypto(crypto.clone());
    let endpoint = setup.endpoint(socket, Some(default_config))?;
    println!("{{\"ready\": true}}");
    std::io::stdout().flush()?;
    while let Some(incoming) = endpoint.accept().await {
        if let Err(e) = accept(&setup, &crypto, incoming) {
            eprintln!("server: connection refused: {e:?}");
        }
    }
    Ok(())
}

/// Each connection gets its own ServerConfig, because the qlog stream lives in the
/// transport config and must be one per connection.
fn accept(
    setup: &Arc<Setup>,
    crypto: &Arc<QuicServerConfig>,
    incoming: Incoming,
) -> Result<(), Failure> {
    let qlog = setup.qlog(&incoming.orig_dst_cid())?;
    let mut config = ServerConfig::with_crypto(crypto.clone());
    config.transport_config(Arc::new(setup.transport(qlog)?));
    let connecting = incoming
        .accept_with(Arc::new(config))
        .map_err(Failure::fatal)?;
    let setup = setup.clone();
    tokio::spawn(async move {
        let conn = match connecting.await {
            Ok(c) => c,
            Err(e) => return eprintln!("server: handshake failed: {e}"),
        };
        while let Ok((send, recv)) = conn.accept_bi().await {
            let setup = setup.clone();
            tokio::spawn(async move {
                if let Err(e) = answer(&setup, send, recv).await {
                    eprintln!("server: stream failed: {e:?}");
                }
            });
        }
    });
    Ok(())
}

/// An upload (LL_DIRECTION=upload): `PUT /NAME`, then the object to LL_DOWNLOADS/NAME;
/// at its FIN the server answers with FIN alone.
async fn store(setup: &Setup, mut send: SendStream, mut recv: RecvStream) -> Result<(), Failure> {
    let stream = u64::from(send.id());
    let mut head = Vec::new();
    let (name, start) = loop {
        let mut buf = [0u8; 1024];
        match recv.read(&mut buf).await.map_err(Failure::fatal)? {
            Some(n) => head.extend_from_slice(&buf[..n]),
            None => return Err(Failure::Fatal("FIN before the PUT line ended".into())),
        }
        match hq::parse_upload(&head) {
            Ok(Some(found)) => break found,
            Ok(None) => continue,
            Err(e) => {
                let _ = recv.stop(1u32.into());
                return Err(Failure::Fatal(e));
            }
        }
    };
    setup.applog.event("request_start", stream, 0);
    let path = setup.opts.downloads.join(&name);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    file.write_all(&head[start..])?;
    let mut stored = (head.len() - start) as u64;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.map_err(Failure::fatal)? {
        file.write_all(&chunk.bytes)?;
        stored += chunk.bytes.len() as u64;
    }
    file.flush()?;
    setup.applog.event("request_done", stream, stored);
    send.finish().map_err(Failure::fatal)?;
    let _ = send.stopped().await;
    Ok(())
}

async fn answer(setup: &Setup, mut send: SendStream, mut recv: RecvStream) -> Result<(), Failure> {
    if setup.opts.upload {
        return store(setup, send, recv).await;
    }
    let stream = u64::from(send.id());
    let mut request = Vec::new();
    let name = loop {
        let mut buf = [0u8; 1024];
        let got = recv.read(&mut buf).await.map_err(Failure::fatal)?;
        if let Some(n) = got {
            request.extend_from_slice(&buf[..n]);
        }
        match hq::parse_request(&request, got.is_none()) {
            Ok(Some(name)) => break name,
            Ok(None) => continue,
            Err(e) => {
                let _ = send.reset(1u32.into());
                return Err(Failure::Fatal(e));
            }
        }
    };
    let path = setup.opts.www.join(&name);
    let mut file = match tokio::fs::File::open(&path).await {
        Ok(f) => f,
        Err(e) => {
            let _ = send.reset(2u32.into());
            return Err(Failure::Fatal(format!("{}: {e}", path.display())));
        }
    };
    let size = file.metadata().await?.len();
    setup.applog.event("request_start", stream, size);
    let mut buf = vec![0u8; CHUNK];
    let mut sent = 0u64;
    loop {
        let n = file.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        send.write_all(&buf[..n]).await.map_err(Failure::fatal)?;
        sent += n as u64;
    }
    send.finish().map_err(Failure::fatal)?;
    // quinn buffers up to LL_FLOW_WINDOW, so the FIN is queued long before the data
    // leaves; the server has data queued until the peer acknowledged all of it.
    let acked = matches!(send.stopped().await, Ok(None));
    setup.applog.request_done(stream, sent, acked);
    Ok(())
}
