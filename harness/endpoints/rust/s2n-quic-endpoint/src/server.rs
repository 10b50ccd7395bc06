//! The server: accepts connections until SIGTERM, answers each request stream
//! with the named file from LL_WWW and FIN (or stores an upload).

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use ll_endpoint_common::{hq, Failure, Role};
use s2n_quic::stream::BidirectionalStream;
use s2n_quic::{Connection, Server};
use tokio::io::AsyncReadExt;

use crate::qlog::Qlog;
use crate::{Controller, Setup};

/// Bytes read from the file per stream write.
const CHUNK: usize = 256 * 1024;

/// The s2n-quic server of the contract's options; generic only in its controller.
fn start(setup: &Setup) -> Result<Server, Failure> {
    let qlog = Qlog { dir: setup.opts.qlogdir.clone(), role: Role::Server };
    let builder = Server::builder()
        .with_tls(setup.server_tls()?)
        .map_err(Failure::fatal)?
        .with_io(setup.io(setup.opts.listen)?)
        .map_err(Failure::fatal)?
        .with_limits(setup.limits()?)
        .map_err(Failure::fatal)?
        .with_event(qlog)
        .map_err(Failure::fatal)?;
    let server = match setup.controller() {
        Controller::Cubic(c) => builder.with_congestion_controller(c).map_err(Failure::fatal)?.start(),
        Controller::Bbr(c) => builder.with_congestion_controller(c).map_err(Failure::fatal)?.start(),
    };
    server.map_err(|e| Failure::Fatal(format!("start on {}: {e}", setup.opts.listen)))
}

pub async fn serve(setup: Arc<Setup>) -> Result<(), Failure> {
    let mut server = start(&setup)?;
    println!("{{\"ready\": true}}");
    std::io::stdout().flush()?;
    while let Some(conn) = server.accept().await {
        let setup = setup.clone();
        tokio::spawn(async move { connection(setup, conn).await });
    }
    Ok(())
}

async fn connection(setup: Arc<Setup>, mut conn: Connection) {
    while let Ok(Some(stream)) = conn.accept_bidirectional_stream().await {
        let setup = setup.clone();
        tokio::spawn(async move {
            let r = if setup.opts.upload {
                store(&setup, stream).await
            } else {
                answer(&setup, stream).await
            };
            if let Err(e) = r {
                eprintln!("server: stream failed: {e:?}");
            }
        });
    }
}

/// A download: `GET /NAME`, answered with LL_WWW/NAME and FIN.
async fn answer(setup: &Setup, mut stream: BidirectionalStream) -> Result<(), Failure> {
    let id = stream.id();
    let mut request = Vec::new();
    let name = loop {
        let got = stream.receive().await.map_err(Failure::fatal)?;
        if let Some(chunk) = &got {
            request.extend_from_slice(chunk);
        }
        match hq::parse_request(&request, got.is_none()) {
            Ok(Some(name)) => break name,
            Ok(None) => continue,
            Err(e) => {
                let _ = stream.reset(1u32.into());
                return Err(Failure::Fatal(e));
            }
        }
    };
    let path = setup.opts.www.join(&name);
    let mut file = match tokio::fs::File::open(&path).await {
        Ok(f) => f,
        Err(e) => {
            let _ = stream.reset(2u32.into());
            return Err(Failure::Fatal(format!("{}: {e}", path.display())));
        }
    };
    let size = file.metadata().await?.len();
    setup.applog.event("request_start", id, size);
    let mut sent = 0u64;
    loop {
        let mut buf = vec![0u8; CHUNK];
        let n = file.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        buf.truncate(n);
        stream.send(Bytes::from(buf)).await.map_err(Failure::fatal)?;
        sent += n as u64;
    }
    // close() finishes the stream and returns once the peer acknowledged all of
    // it: until then the server has data queued.
    let acked = stream.close().await.is_ok();
    setup.applog.request_done(id, sent, acked);
    Ok(())
}

/// An upload (LL_DIRECTION=upload): `PUT /NAME`, then the object to
/// LL_DOWNLOADS/NAME; at its FIN the server answers with FIN alone.
async fn store(setup: &Setup, mut stream: BidirectionalStream) -> Result<(), Failure> {
    let id = stream.id();
    let mut head = Vec::new();
    let (name, start) = loop {
        match stream.receive().await.map_err(Failure::fatal)? {
            Some(chunk) => head.extend_from_slice(&chunk),
            None => return Err(Failure::Fatal("FIN before the PUT line ended".into())),
        }
        match hq::parse_upload(&head) {
            Ok(Some(found)) => break found,
            Ok(None) => continue,
            Err(e) => {
                let _ = stream.stop_sending(1u32.into());
                return Err(Failure::Fatal(e));
            }
        }
    };
    setup.applog.event("request_start", id, 0);
    let path = setup.opts.downloads.join(&name);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    file.write_all(&head[start..])?;
    let mut stored = (head.len() - start) as u64;
    while let Some(chunk) = stream.receive().await.map_err(Failure::fatal)? {
        file.write_all(&chunk)?;
        stored += chunk.len() as u64;
    }
    file.flush()?;
    setup.applog.event("request_done", id, stored);
    stream.close().await.map_err(Failure::fatal)?;
    Ok(())
}
