//! The client: one connection to the server of REQUESTS, requests in turn
//! (transfer), all at once (multiplexing) or in turn with LL_THINK_MS pauses
//! (appidle); each response is written to LL_DOWNLOADS/NAME. In an upload
//! (LL_DIRECTION=upload) each request is `PUT /NAME` and the bytes of LL_WWW/NAME,
//! done when the server's FIN says it has them all.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use ll_endpoint_common::hq::Request;
use ll_endpoint_common::{linger, random_bytes, Failure, Opts, Testcase};

use crate::io::{deadline, earliest, fire_timer, Outbox, Socket, MAX_UDP, RECV_BATCH};
use crate::Setup;

/// How long to wait for the close to be acknowledged before exiting anyway.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

struct Download {
    file: BufWriter<File>,
    received: u64,
}

/// An upload in progress: the PUT line and the file, and how much quiche took.
struct Upload {
    data: Vec<u8>,
    offset: usize,
    size: u64,
}

/// Which request goes out when, per TESTCASE.
struct Schedule<'a> {
    setup: &'a Setup,
    next: usize,
    active: HashMap<u64, Download>,
    uploads: HashMap<u64, Upload>,
    /// appidle: the end of the current think time.
    idle_until: Option<Instant>,
    last_stream: u64,
}

impl Schedule<'_> {
    fn finished(&self) -> bool {
        self.next == self.setup.opts.requests.len()
            && self.active.is_empty()
            && self.uploads.is_empty()
    }

    /// Opens the streams the testcase allows now.
    fn start_requests(
        &mut self,
        conn: &mut quiche::Connection,
        now: Instant,
    ) -> Result<(), Failure> {
        let opts = &self.setup.opts;
        if let Some(until) = self.idle_until {
            if now < until {
                return Ok(());
            }
            self.idle_until = None;
            self.setup.applog.event("idle_end", self.last_stream, 0);
        }
        while self.next < opts.requests.len() && conn.peer_streams_left_bidi() > 0 {
            if opts.testcase != Testcase::Multiplexing
                && !(self.active.is_empty() && self.uploads.is_empty())
            {
                break;
            }
            let stream = 4 * self.next as u64; // client-initiated bidirectional
            let request: &Request = &opts.requests[self.next];
            if opts.upload {
                let body = std::fs::read(opts.www.join(&request.name))?;
                let size = body.len() as u64;
                let mut data = request.put_line();
                data.extend_from_slice(&body);
                self.setup.applog.event("request_start", stream, size);
                self.uploads.insert(
                    stream,
                    Upload {
                        data,
                        offset: 0,
                        size,
                    },
                );
                self.next += 1;
                continue;
            }
            self.setup.applog.event("request_start", stream, 0);
            conn.stream_send(stream, &request.line(), true)
                .map_err(|e| Failure::Fatal(format!("request {}: {e}", request.name)))?;
            let file = File::create(request.download_path(&opts.downloads))?;
            self.active.insert(
                stream,
                Download {
                    file: BufWriter::new(file),
                    received: 0,
                },
            );
            self.next += 1;
        }
        Ok(())
    }

    /// After a request's last byte: appidle's think time starts if more follow.
    fn request_ended(&mut self, stream: u64) {
        self.last_stream = stream;
        if self.setup.opts.testcase == Testcase::Appidle
            && self.next < self.setup.opts.requests.len()
        {
            self.setup.applog.event("idle_start", stream, 0);
            self.idle_until = Some(Instant::now() + self.setup.opts.think);
        }
    }

    /// Hands quiche as much of each upload as it takes, the FIN with its last byte.
    fn send_uploads(&mut self, conn: &mut quiche::Connection) -> Result<(), Failure> {
        for (&stream, u) in self.uploads.iter_mut() {
            while u.offset < u.data.len() {
                match conn.stream_send(stream, &u.data[u.offset..], true) {
                    Ok(0) | Err(quiche::Error::Done) => break,
                    Ok(n) => u.offset += n,
                    Err(e) => {
                        return Err(Failure::Fatal(format!("upload on stream {stream}: {e}")))
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes what arrived; a FIN completes its request.
    fn read_responses(
        &mut self,
        conn: &mut quiche::Connection,
        buf: &mut [u8],
    ) -> Result<(), Failure> {
        let readable: Vec<u64> = conn.readable().collect();
        for stream in readable {
            if self.uploads.contains_key(&stream) {
                // The server's answer to an upload is its FIN alone.
                let mut fin = false;
                while let Ok((_, f)) = conn.stream_recv(stream, buf) {
                    fin |= f;
                    if f {
                        break;
                    }
                }
                if fin {
                    let u = self.uploads.remove(&stream).expect("present above");
                    self.setup.applog.event("request_done", stream, u.size);
                    self.request_ended(stream);
                }
                continue;
            }
            let Some(d) = self.active.get_mut(&stream) else {
                continue;
            };
            let mut fin = false;
            loop {
                match conn.stream_recv(stream, buf) {
                    Ok((n, f)) => {
                        d.file.write_all(&buf[..n])?;
                        d.received += n as u64;
                        if f {
                            // quiche forgets a finished stream: no further reads.
                            fin = true;
                            break;
                        }
                    }
                    Err(quiche::Error::Done) => break,
                    Err(e) => return Err(Failure::Fatal(format!("stream {stream}: {e}"))),
                }
            }
            if fin {
                let mut d = self.active.remove(&stream).expect("present above");
                d.file.flush()?;
                self.setup.applog.event("request_done", stream, d.received);
                self.request_ended(stream);
            }
        }
        Ok(())
    }
}

pub fn fetch_all(setup: &Setup) -> Result<(), Failure> {
    let opts = &setup.opts;
    if !opts.upload {
        std::fs::create_dir_all(&opts.downloads)?;
    }
    let server = opts.server_addr()?;
    let socket = Socket::bind(Opts::any_local_for(server))?;
    let mut config = setup.config()?;
    let scid = quiche::ConnectionId::from_vec(random_bytes(quiche::MAX_CONN_ID_LEN)?);
    let mut conn = quiche::connect(
        opts.requests[0].sni(),
        &scid,
        socket.local,
        server,
        &mut config,
    )
    .map_err(|e| Failure::Fatal(format!("connect: {e}")))?;
    // Before any packet is received, the destination ID is the original DCID.
    let odcid = conn.destination_id().to_vec();
    setup.instrument(&mut conn, &odcid)?;

    let mut schedule = Schedule {
        setup,
        next: 0,
        active: HashMap::new(),
        uploads: HashMap::new(),
        idle_until: None,
        last_stream: 0,
    };
    let mut outbox = Outbox::default();
    let (mut buf, mut scratch) = (vec![0u8; MAX_UDP], vec![0u8; MAX_UDP]);
    let mut closing_since: Option<Instant> = None;
    let mut linger_until: Option<Instant> = None;
    loop {
        for _ in 0..RECV_BATCH {
            let Some((n, from)) = socket.recv(&mut buf)? else {
                break;
            };
            if let Err(e) = conn.recv(
                &mut buf[..n],
                quiche::RecvInfo {
                    from,
                    to: socket.local,
                },
            ) {
                eprintln!("client: recv: {e}");
            }
        }
        let now = Instant::now();
        fire_timer(&mut conn, now);
        if conn.is_closed() {
            break;
        }
        if conn.is_established() && closing_since.is_none() {
            schedule.read_responses(&mut conn, &mut buf)?;
            schedule.start_requests(&mut conn, now)?;
            schedule.send_uploads(&mut conn)?;
            if schedule.finished() && linger_until.is_none() {
                // A PING carries our ACKs at once; lingering lets them arrive.
                let _ = conn.send_ack_eliciting();
                let srtt = conn.path_stats().next().map_or(Duration::ZERO, |p| p.rtt);
                linger_until = Some(now + linger(srtt));
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
        outbox
            .pull(&mut conn, &mut scratch)
            .map_err(|e| Failure::Fatal(format!("send: {e}")))?;
        outbox.transmit(&socket, Instant::now())?;
        let lingering = linger_until.filter(|_| closing_since.is_none());
        // Closing, wake at DRAIN_LIMIT too: quiche's own timeout then is its draining
        // period, three PTOs, which a handshake whose first RTT sample took seconds
        // stretches past the run's timeout.
        let draining = closing_since.map(|t| t + DRAIN_LIMIT);
        let wake = earliest(
            earliest(deadline(&conn, &outbox), schedule.idle_until),
            earliest(lingering, draining),
        );
        socket.wait(outbox.blocked, wake)?;
    }
    if closing_since.is_some() {
        return Ok(());
    }
    let why = match (conn.peer_error(), conn.local_error()) {
        (Some(e), _) => format!("peer closed the connection: {e:?}"),
        (_, Some(e)) => format!("connection closed: {e:?}"),
        _ if conn.is_timed_out() => "idle timeout".to_string(),
        _ => "connection closed".to_string(),
    };
    Err(Failure::Fatal(format!(
        "{why} with {} of {} requests done",
        schedule.next - schedule.active.len(),
        opts.requests.len()
    )))
}
