//! The server: accepts connections until SIGTERM, answers each request stream
//! with the named file from LL_WWW and FIN; in an upload (LL_DIRECTION=upload) it
//! stores each `PUT /NAME` body in LL_DOWNLOADS/NAME and answers with FIN alone. No Retry: the client's first flight
//! is not delayed by an extra round trip the CC properties do not model.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::time::Instant;

use ll_endpoint_common::{hq, random_bytes, Failure};

use crate::io::{deadline, earliest, fire_timer, Outbox, Socket, MAX_UDP, RECV_BATCH};
use crate::Setup;

/// Bytes read from a file per stream write.
const CHUNK: usize = 256 * 1024;
/// Our source connection IDs: the longest QUIC allows, so short headers parse
/// with a fixed length.
const CID_LEN: usize = quiche::MAX_CONN_ID_LEN;

/// A response in progress: the file and the part of it quiche has not taken.
struct Reply {
    file: File,
    size: u64,
    sent: u64,
    pending: Vec<u8>,
    offset: usize,
}

struct Session {
    conn: quiche::Connection,
    outbox: Outbox,
    /// Request bytes received so far, per stream without a reply yet.
    requests: HashMap<u64, Vec<u8>>,
    replies: HashMap<u64, Reply>,
    /// Uploads being stored: the file and the bytes written so far.
    stores: HashMap<u64, (BufWriter<File>, u64)>,
    /// Streams whose FIN is queued, with their size, until the peer acknowledged all.
    unacked: HashMap<u64, u64>,
}

impl Session {
    /// request_done for every stream the peer has acknowledged completely.
    ///
    /// quiche forgets (collects) a stream once its FIN and every byte are acked
    /// and the request was read, so "no such stream" is the acknowledgement.
    fn note_acked(&mut self, setup: &Setup) {
        let conn = &mut self.conn;
        self.unacked
            .retain(|&stream, size| match conn.stream_capacity(stream) {
                Err(quiche::Error::InvalidStreamState(_)) => {
                    setup.applog.request_done(stream, *size, true);
                    false
                }
                Err(quiche::Error::StreamStopped(_)) => {
                    setup.applog.request_done(stream, *size, false);
                    false
                }
                _ => true,
            });
    }

    /// The connection is gone: what was still being sent was never acknowledged.
    fn abandon(&mut self, setup: &Setup) {
        let replies = self.replies.drain().map(|(stream, r)| (stream, r.size));
        for (stream, size) in replies.chain(self.unacked.drain()) {
            setup.applog.request_done(stream, size, false);
        }
    }
}

pub fn serve(setup: &Setup) -> Result<(), Failure> {
    let mut config = setup.config()?;
    let socket = Socket::bind(setup.opts.listen)?;
    println!("{{\"ready\": true}}");
    std::io::stdout().flush()?;
    let mut sessions: HashMap<u64, Session> = HashMap::new();
    // Both our SCID and the client's original DCID lead to a session.
    let mut ids: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut next_id = 0u64;
    let (mut buf, mut scratch) = (vec![0u8; MAX_UDP], vec![0u8; MAX_UDP]);
    loop {
        for _ in 0..RECV_BATCH {
            let Some((n, from)) = socket.recv(&mut buf)? else {
                break;
            };
            let Ok(hdr) = quiche::Header::from_slice(&mut buf[..n], CID_LEN) else {
                continue;
            };
            let id = match ids.get(hdr.dcid.as_ref()) {
                Some(id) => *id,
                None if hdr.ty != quiche::Type::Initial => continue,
                None if !quiche::version_is_supported(hdr.version) => {
                    if let Ok(len) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut scratch) {
                        let _ = socket.socket.send_to(&scratch[..len], from);
                    }
                    continue;
                }
                None => {
                    let scid = quiche::ConnectionId::from_vec(random_bytes(CID_LEN)?);
                    let mut conn = quiche::accept(&scid, None, socket.local, from, &mut config)
                        .map_err(|e| Failure::Fatal(format!("accept: {e}")))?;
                    setup.instrument(&mut conn, &hdr.dcid)?;
                    next_id += 1;
                    ids.insert(scid.to_vec(), next_id);
                    ids.insert(hdr.dcid.to_vec(), next_id);
                    let session = Session {
                        conn,
                        outbox: Outbox::default(),
                        requests: HashMap::new(),
                        replies: HashMap::new(),
                        stores: HashMap::new(),
                        unacked: HashMap::new(),
                    };
                    sessions.insert(next_id, session);
                    next_id
                }
            };
            if let Some(s) = sessions.get_mut(&id) {
                let info = quiche::RecvInfo {
                    from,
                    to: socket.local,
                };
                if let Err(e) = s.conn.recv(&mut buf[..n], info) {
                    eprintln!("server: recv: {e}");
                }
            }
        }

        let now = Instant::now();
        let mut wake = None;
        let mut want_write = false;
        for s in sessions.values_mut() {
            fire_timer(&mut s.conn, now);
            if s.conn.is_established() || s.conn.is_in_early_data() {
                if setup.opts.upload {
                    store_uploads(setup, s);
                } else {
                    read_requests(setup, s);
                }
                let (conn, unacked) = (&mut s.conn, &mut s.unacked);
                s.replies
                    .retain(|&stream, reply| pump(conn, stream, reply, unacked));
                s.note_acked(setup);
            }
            if let Err(e) = s.outbox.pull(&mut s.conn, &mut scratch) {
                eprintln!("server: send: {e}");
            }
            s.outbox.transmit(&socket, Instant::now())?;
            want_write |= s.outbox.blocked;
            wake = earliest(wake, deadline(&s.conn, &s.outbox));
        }
        sessions.retain(|_, s| {
            let over = s.conn.is_closed() && s.outbox.is_empty();
            if over {
                s.abandon(setup);
            }
            !over
        });
        ids.retain(|_, id| sessions.contains_key(id));
        socket.wait(want_write, wake)?;
    }
}

/// Reads request lines; a complete one opens its file and starts a reply.
fn read_requests(setup: &Setup, s: &mut Session) {
    let mut buf = [0u8; 4096];
    let readable: Vec<u64> = s.conn.readable().collect();
    for stream in readable {
        // Bytes after the request line (e.g. a FIN in a later frame) are read and
        // dropped: quiche forgets a stream only once its receive side is read.
        let answered = s.replies.contains_key(&stream) || s.unacked.contains_key(&stream);
        let mut fin = false;
        while let Ok((n, f)) = s.conn.stream_recv(stream, &mut buf) {
            if !answered {
                s.requests
                    .entry(stream)
                    .or_default()
                    .extend_from_slice(&buf[..n]);
            }
            if f {
                fin = true;
                break;
            }
        }
        let Some(request) = s.requests.get(&stream) else {
            continue;
        };
        match hq::parse_request(request, fin) {
            Ok(None) => {}
            Ok(Some(name)) => {
                s.requests.remove(&stream);
                match open_reply(setup, &name) {
                    Ok(reply) => {
                        setup.applog.event("request_start", stream, reply.size);
                        s.replies.insert(stream, reply);
                    }
                    Err(e) => refuse(&mut s.conn, stream, &e),
                }
            }
            Err(e) => {
                s.requests.remove(&stream);
                refuse(&mut s.conn, stream, &e);
            }
        }
    }
}

/// Stores what each upload stream brings: its PUT line opens LL_DOWNLOADS/NAME, the
/// rest is the body, and at its FIN the server answers with FIN alone.
fn store_uploads(setup: &Setup, s: &mut Session) {
    let mut buf = vec![0u8; 64 * 1024];
    let readable: Vec<u64> = s.conn.readable().collect();
    for stream in readable {
        loop {
            let (n, fin) = match s.conn.stream_recv(stream, &mut buf) {
                Ok(read) => read,
                Err(_) => break,
            };
            if let Err(e) = store_chunk(setup, s, stream, &buf[..n]) {
                s.requests.remove(&stream);
                s.stores.remove(&stream);
                refuse(&mut s.conn, stream, &e);
                break;
            }
            if fin {
                match s.stores.remove(&stream) {
                    Some((mut file, size)) => match file.flush() {
                        Ok(()) => {
                            setup.applog.event("request_done", stream, size);
                            let _ = s.conn.stream_send(stream, b"", true);
                        }
                        Err(e) => refuse(&mut s.conn, stream, &e.to_string()),
                    },
                    None => refuse(&mut s.conn, stream, "upload ended before its PUT line"),
                }
                break;
            }
        }
    }
}

/// One read of an upload stream: the PUT line (buffered until whole), then body.
fn store_chunk(setup: &Setup, s: &mut Session, stream: u64, data: &[u8]) -> Result<(), String> {
    if let Some((file, size)) = s.stores.get_mut(&stream) {
        *size += data.len() as u64;
        return file.write_all(data).map_err(|e| e.to_string());
    }
    let head = s.requests.entry(stream).or_default();
    head.extend_from_slice(data);
    let Some((name, body)) = hq::parse_upload(head)? else {
        return Ok(());
    };
    let head = s.requests.remove(&stream).expect("present above");
    std::fs::create_dir_all(&setup.opts.downloads).map_err(|e| e.to_string())?;
    let path = setup.opts.downloads.join(&name);
    let mut file =
        BufWriter::new(File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?);
    file.write_all(&head[body..]).map_err(|e| e.to_string())?;
    setup.applog.event("request_start", stream, 0);
    s.stores.insert(stream, (file, (head.len() - body) as u64));
    Ok(())
}

fn open_reply(setup: &Setup, name: &str) -> Result<Reply, String> {
    let path = setup.opts.www.join(name);
    let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    Ok(Reply {
        file,
        size,
        sent: 0,
        pending: Vec::new(),
        offset: 0,
    })
}

fn refuse(conn: &mut quiche::Connection, stream: u64, why: &str) {
    eprintln!("server: stream {stream}: {why}");
    let _ = conn.stream_shutdown(stream, quiche::Shutdown::Write, 1);
}

/// Hands quiche as much of the reply as it takes; false once the FIN is queued
/// (the stream then waits in `unacked`) or the stream is gone.
fn pump(
    conn: &mut quiche::Connection,
    stream: u64,
    r: &mut Reply,
    unacked: &mut HashMap<u64, u64>,
) -> bool {
    loop {
        if r.offset == r.pending.len() && r.sent + (r.pending.len() as u64) < r.size {
            r.sent += r.pending.len() as u64;
            r.pending.resize(CHUNK.min((r.size - r.sent) as usize), 0);
            r.offset = 0;
            if let Err(e) = r.file.read_exact(&mut r.pending) {
                refuse(conn, stream, &e.to_string());
                return false;
            }
        }
        let fin = r.sent + r.pending.len() as u64 == r.size;
        match conn.stream_send(stream, &r.pending[r.offset..], fin) {
            Ok(n) => {
                r.offset += n;
                if r.offset == r.pending.len() && fin {
                    unacked.insert(stream, r.size);
                    return false;
                }
                if n == 0 {
                    return true;
                }
            }
            Err(quiche::Error::Done) => return true,
            Err(e) => {
                eprintln!("server: stream {stream}: {e}");
                return false;
            }
        }
    }
}
