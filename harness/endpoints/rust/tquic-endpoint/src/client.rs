//! The client: one connection to the server of REQUESTS, requests in turn
//! (transfer), all at once (multiplexing) or in turn with LL_THINK_MS pauses
//! (appidle); each response is written to LL_DOWNLOADS/NAME. In an upload
//! (LL_DIRECTION=upload) each request sends LL_WWW/NAME instead, and the server's
//! FIN says it has the whole object.
//!
//! tquic's handler sees stream events; the loop in `fetch_all` owns the
//! schedule's clock (think time, linger, close), so both share `Progress`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ll_endpoint_common::udp::Socket;
use ll_endpoint_common::{linger, Failure, Opts, Testcase};
use tquic::{Connection, Endpoint, TransportHandler};

use crate::io::{buffer, turn, wait, Sender};
use crate::Setup;

/// How long to wait for the close to be acknowledged before exiting anyway.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// One request in progress.
enum Request {
    Download {
        file: BufWriter<File>,
        received: u64,
    },
    /// The PUT line and the object, how much of it tquic has taken, the object's size.
    Upload {
        data: Bytes,
        taken: usize,
        size: u64,
    },
}

/// What the handler and the loop share.
#[derive(Default)]
struct Progress {
    established: bool,
    /// Why the connection closed, once it has.
    closed: Option<String>,
    next: usize,
    active: HashMap<u64, Request>,
    /// appidle: the end of the current think time.
    idle_until: Option<Instant>,
    last_stream: u64,
    /// A write error on a download file, reported by the loop.
    failed: Option<String>,
}

struct Client {
    setup: Rc<Setup>,
    progress: Rc<RefCell<Progress>>,
}

impl Client {
    /// Writes what arrived on `stream`; a FIN completes its request.
    fn read(&self, conn: &mut Connection, stream: u64, p: &mut Progress) -> std::io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut fin = false;
        while let Ok((n, f)) = conn.stream_read(stream, &mut buf) {
            if let Some(Request::Download { file, received }) = p.active.get_mut(&stream) {
                file.write_all(&buf[..n])?;
                *received += n as u64;
            }
            if f {
                fin = true;
                break;
            }
            if n == 0 {
                break;
            }
        }
        if fin && p.active.contains_key(&stream) {
            match p.active.remove(&stream).expect("present above") {
                Request::Download { mut file, received } => {
                    file.flush()?;
                    self.setup.applog.event("request_done", stream, received);
                }
                // The server answers an upload once it has every byte.
                Request::Upload { size, .. } => self.setup.applog.request_done(stream, size, true),
            }
            p.last_stream = stream;
            let opts = &self.setup.opts;
            if opts.testcase == Testcase::Appidle && p.next < opts.requests.len() {
                self.setup.applog.event("idle_start", stream, 0);
                p.idle_until = Some(Instant::now() + opts.think);
            }
        }
        Ok(())
    }
}

impl TransportHandler for Client {
    fn on_conn_created(&mut self, conn: &mut Connection) {
        if let Err(e) = self.setup.instrument(conn) {
            eprintln!("client: instrumenting the connection: {e:?}");
        }
    }

    fn on_conn_established(&mut self, _conn: &mut Connection) {
        self.progress.borrow_mut().established = true;
    }

    fn on_conn_closed(&mut self, conn: &mut Connection) {
        let why = match (conn.peer_error(), conn.local_error()) {
            (Some(e), _) => format!("peer closed the connection: {e:?}"),
            (_, Some(e)) => format!("connection closed: {e:?}"),
            _ if conn.is_idle_timeout() => "idle timeout".to_string(),
            _ => "connection closed".to_string(),
        };
        self.progress.borrow_mut().closed = Some(why);
    }

    fn on_stream_created(&mut self, _conn: &mut Connection, _stream: u64) {}

    fn on_stream_readable(&mut self, conn: &mut Connection, stream: u64) {
        let progress = self.progress.clone();
        let mut p = progress.borrow_mut();
        if let Err(e) = self.read(conn, stream, &mut p) {
            p.failed = Some(format!("stream {stream}: {e}"));
        }
    }

    fn on_stream_writable(&mut self, conn: &mut Connection, stream: u64) {
        let progress = self.progress.clone();
        let mut p = progress.borrow_mut();
        if let Err(e) = pump(conn, stream, &mut p) {
            p.failed = Some(e);
        }
    }

    fn on_stream_closed(&mut self, _conn: &mut Connection, _stream: u64) {}

    fn on_new_token(&mut self, _conn: &mut Connection, _token: Vec<u8>) {}
}

/// Opens the streams the testcase allows now; true if any was opened.
fn start_requests(setup: &Setup, conn: &mut Connection, p: &mut Progress) -> Result<bool, Failure> {
    let opts = &setup.opts;
    if let Some(until) = p.idle_until {
        if Instant::now() < until {
            return Ok(false);
        }
        p.idle_until = None;
        setup.applog.event("idle_end", p.last_stream, 0);
    }
    let mut opened = false;
    while p.next < opts.requests.len() {
        if opts.testcase != Testcase::Multiplexing && !p.active.is_empty() {
            break;
        }
        let stream = 4 * p.next as u64; // client-initiated bidirectional
        let request = &opts.requests[p.next];
        if opts.upload {
            let path = opts.www.join(&request.name);
            let body = std::fs::read(&path)
                .map_err(|e| Failure::Fatal(format!("{}: {e}", path.display())))?;
            let size = body.len() as u64;
            let data = Bytes::from([request.put_line(), body].concat());
            // Opens the stream (at the peer's stream limit the request waits for credit).
            match conn.stream_write(stream, Bytes::new(), false) {
                Ok(_) => {}
                Err(tquic::Error::StreamLimitError) | Err(tquic::Error::Done) => break,
                Err(e) => return Err(Failure::Fatal(format!("request {}: {e:?}", request.name))),
            }
            setup.applog.event("request_start", stream, size);
            p.active.insert(
                stream,
                Request::Upload {
                    data,
                    taken: 0,
                    size,
                },
            );
            pump(conn, stream, p).map_err(Failure::Fatal)?;
        } else {
            match conn.stream_write(stream, Bytes::from(request.line()), true) {
                Ok(_) => {}
                // The peer's stream limit: the next request waits for credit.
                Err(tquic::Error::StreamLimitError) | Err(tquic::Error::Done) => break,
                Err(e) => return Err(Failure::Fatal(format!("request {}: {e:?}", request.name))),
            }
            setup.applog.event("request_start", stream, 0);
            let file = File::create(request.download_path(&opts.downloads))?;
            let file = BufWriter::new(file);
            p.active
                .insert(stream, Request::Download { file, received: 0 });
        }
        p.next += 1;
        opened = true;
    }
    Ok(opened)
}

/// Hands tquic as much of an upload as it takes now; the FIN goes with the last byte.
fn pump(conn: &mut Connection, stream: u64, p: &mut Progress) -> Result<(), String> {
    let Some(Request::Upload { data, taken, .. }) = p.active.get_mut(&stream) else {
        return Ok(());
    };
    while *taken < data.len() {
        match conn.stream_write(stream, data.slice(*taken..), true) {
            Ok(0) | Err(tquic::Error::Done) => break,
            Ok(n) => *taken += n,
            Err(e) => return Err(format!("upload on stream {stream}: {e:?}")),
        }
    }
    Ok(())
}

fn smoothed_rtt(conn: &mut Connection, local: SocketAddr, server: SocketAddr) -> Duration {
    conn.get_path_stats(local, server)
        .map_or(Duration::ZERO, |s| Duration::from_micros(s.srtt))
}

pub fn fetch_all(setup: Setup) -> Result<(), Failure> {
    let opts = &setup.opts;
    if !opts.upload {
        std::fs::create_dir_all(&opts.downloads)?;
    }
    let server = opts.server_addr()?;
    let socket = Rc::new(Socket::bind(Opts::any_local_for(server))?);
    let config = setup.config()?;
    let setup = Rc::new(setup);
    let progress = Rc::new(RefCell::new(Progress::default()));
    let client = Client {
        setup: setup.clone(),
        progress: progress.clone(),
    };
    let sender = Rc::new(Sender {
        socket: socket.clone(),
    });
    let mut endpoint = Endpoint::new(Box::new(config), false, Box::new(client), sender);
    let local = socket.local;
    let sni = setup.opts.requests[0].sni().map(str::to_string);
    let idx = endpoint
        .connect(local, server, sni.as_deref(), None, None, None)
        .map_err(|e| Failure::Fatal(format!("connect: {e:?}")))?;

    let mut buf = buffer();
    let mut closing_since: Option<Instant> = None;
    let mut linger_until: Option<Instant> = None;
    loop {
        turn(&mut endpoint, &socket, &mut buf)?;
        let now = Instant::now();
        {
            let mut p = progress.borrow_mut();
            if let Some(e) = p.failed.take() {
                return Err(Failure::Fatal(e));
            }
            if p.closed.is_some() {
                break;
            }
            if let (true, None, Some(conn)) =
                (p.established, closing_since, endpoint.conn_get_mut(idx))
            {
                start_requests(&setup, conn, &mut p)?;
                let finished = p.next == setup.opts.requests.len() && p.active.is_empty();
                if finished && linger_until.is_none() {
                    // A PING carries our ACKs at once; lingering lets them arrive.
                    let _ = conn.ping(None);
                    linger_until = Some(now + linger(smoothed_rtt(conn, local, server)));
                }
                if linger_until.is_some_and(|t| now >= t) {
                    let _ = conn.close(true, 0, b"done");
                    closing_since = Some(now);
                }
            }
            // At the limit, not past it: the wake-up below is set to it, and in virtual time
        // the clock can stand exactly there.
        if closing_since.is_some_and(|t| now.duration_since(t) >= DRAIN_LIMIT) {
                break;
            }
        }
        // What the schedule just queued (requests, PING, close) goes out now.
        endpoint
            .process_connections()
            .map_err(|e| Failure::Fatal(format!("tquic: {e:?}")))?;
        let p = progress.borrow();
        let lingering = linger_until.filter(|_| closing_since.is_none());
        // Closing, wake at DRAIN_LIMIT too: tquic's own timer then is its draining
        // period, three PTOs, which a handshake whose first RTT sample took seconds
        // stretches past the run's timeout.
        let draining = closing_since.map(|t| t + DRAIN_LIMIT);
        let also = [p.idle_until, lingering, draining].into_iter().flatten().min();
        drop(p);
        wait(&endpoint, &socket, also)?;
    }
    let p = progress.borrow();
    if closing_since.is_some() {
        return Ok(());
    }
    let why = p
        .closed
        .clone()
        .unwrap_or_else(|| "connection closed".into());
    Err(Failure::Fatal(format!(
        "{why} with {} of {} requests done",
        p.next - p.active.len(),
        setup.opts.requests.len()
    )))
}
