//! The server: accepts connections until SIGTERM, answers each request stream
//! with the named file from LL_WWW and FIN.
//!
//! request_done is logged when tquic closes the stream: it does so only once the
//! request was read and every byte and the FIN of the reply were acknowledged,
//! so "closed after a complete reply" is the acknowledgement.
//!
//! In an upload (LL_DIRECTION=upload) a stream carries `PUT /NAME` and the object:
//! the body goes to LL_DOWNLOADS/NAME, and at its FIN the server logs request_done
//! (bytes received) and answers with FIN alone.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::rc::Rc;

use bytes::Bytes;
use ll_endpoint_common::{hq, Failure};
use tquic::{Connection, Endpoint, TransportHandler};

use crate::io::{buffer, turn, wait, Sender};
use crate::Setup;

/// One request stream, from its request line to the acknowledgement of its reply.
enum Exchange {
    /// Request bytes received so far.
    Request(Vec<u8>),
    /// The file's bytes and how many tquic has taken (the FIN goes with the last).
    Reply { data: Bytes, taken: usize },
    /// Everything and the FIN are queued; waiting for the peer's acknowledgement.
    Queued { size: u64 },
    /// An upload's body being written to its file.
    Receiving {
        file: BufWriter<File>,
        received: u64,
    },
    /// An upload stored and answered.
    Stored,
}

struct Server {
    setup: Rc<Setup>,
    /// Keyed by (tquic's connection index, stream ID).
    exchanges: HashMap<(u64, u64), Exchange>,
}

impl Server {
    fn key(conn: &Connection, stream: u64) -> (u64, u64) {
        (conn.index().unwrap_or(u64::MAX), stream)
    }

    /// Hands tquic as much of a reply as it takes now.
    fn pump(&mut self, conn: &mut Connection, stream: u64) {
        let key = Self::key(conn, stream);
        let Some(Exchange::Reply { data, taken }) = self.exchanges.get_mut(&key) else {
            return;
        };
        loop {
            match conn.stream_write(stream, data.slice(*taken..), true) {
                Ok(n) => {
                    *taken += n;
                    if *taken == data.len() {
                        let size = data.len() as u64;
                        self.exchanges.insert(key, Exchange::Queued { size });
                        return;
                    }
                    if n == 0 {
                        return;
                    }
                }
                Err(tquic::Error::Done) => return,
                Err(e) => {
                    eprintln!("server: stream {stream}: write: {e:?}");
                    let size = data.len() as u64;
                    self.setup.applog.request_done(stream, size, false);
                    self.exchanges.remove(&key);
                    return;
                }
            }
        }
    }

    /// Answers a complete request line with its file, or refuses the stream.
    fn answer(&mut self, conn: &mut Connection, stream: u64, name: Result<String, String>) {
        let key = Self::key(conn, stream);
        let path = name.map(|n| self.setup.opts.www.join(n));
        match path.and_then(|p| std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))) {
            Ok(data) => {
                self.setup
                    .applog
                    .event("request_start", stream, data.len() as u64);
                let data = Bytes::from(data);
                self.exchanges
                    .insert(key, Exchange::Reply { data, taken: 0 });
                self.pump(conn, stream);
            }
            Err(e) => {
                eprintln!("server: stream {stream}: {e}");
                self.exchanges.remove(&key);
                let _ = conn.stream_shutdown(stream, tquic::Shutdown::Write, 0x10);
            }
        }
    }
}

impl Server {
    /// An upload's bytes: the PUT line opens LL_DOWNLOADS/NAME, the rest goes into
    /// it, and the FIN stores it and is answered with FIN alone.
    fn receive(&mut self, conn: &mut Connection, stream: u64) -> Result<(), String> {
        let key = Self::key(conn, stream);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let (n, fin) = match conn.stream_read(stream, &mut buf) {
                Ok(got) => got,
                Err(tquic::Error::Done) => return Ok(()),
                Err(e) => return Err(format!("{e:?}")),
            };
            let mut body = &buf[..n];
            let entry = self
                .exchanges
                .entry(key)
                .or_insert_with(|| Exchange::Request(Vec::new()));
            if let Exchange::Request(line) = entry {
                line.extend_from_slice(body);
                let Some((name, start)) = hq::parse_upload(line)? else {
                    if fin {
                        return Err("FIN before the PUT line ended".into());
                    }
                    continue;
                };
                let path = self.setup.opts.downloads.join(&name);
                let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let rest = line[start..].to_vec();
                self.setup.applog.event("request_start", stream, 0);
                *entry = Exchange::Receiving {
                    file: BufWriter::new(file),
                    received: 0,
                };
                if let Exchange::Receiving { file, received } = entry {
                    file.write_all(&rest).map_err(|e| e.to_string())?;
                    *received += rest.len() as u64;
                }
                body = &[];
            }
            if let Exchange::Receiving { file, received } = entry {
                file.write_all(body).map_err(|e| e.to_string())?;
                *received += body.len() as u64;
                if fin {
                    file.flush().map_err(|e| e.to_string())?;
                    self.setup.applog.event("request_done", stream, *received);
                    *entry = Exchange::Stored;
                    conn.stream_write(stream, Bytes::new(), true)
                        .map_err(|e| format!("{e:?}"))?;
                }
            }
            if fin || n == 0 {
                return Ok(());
            }
        }
    }
}

impl TransportHandler for Server {
    fn on_conn_created(&mut self, conn: &mut Connection) {
        if let Err(e) = self.setup.instrument(conn) {
            eprintln!("server: instrumenting a connection: {e:?}");
        }
    }

    fn on_conn_established(&mut self, _conn: &mut Connection) {}

    /// What was still being sent was never acknowledged.
    fn on_conn_closed(&mut self, conn: &mut Connection) {
        let idx = conn.index().unwrap_or(u64::MAX);
        let gone: Vec<(u64, u64)> = self
            .exchanges
            .keys()
            .filter(|k| k.0 == idx)
            .copied()
            .collect();
        for key in gone {
            match self.exchanges.remove(&key) {
                Some(Exchange::Reply { data, .. }) => {
                    self.setup
                        .applog
                        .request_done(key.1, data.len() as u64, false)
                }
                Some(Exchange::Queued { size }) => {
                    self.setup.applog.request_done(key.1, size, false)
                }
                _ => {}
            }
        }
    }

    fn on_stream_created(&mut self, _conn: &mut Connection, _stream: u64) {}

    fn on_stream_readable(&mut self, conn: &mut Connection, stream: u64) {
        if self.setup.opts.upload {
            if let Err(e) = self.receive(conn, stream) {
                eprintln!("server: upload on stream {stream}: {e}");
                self.exchanges.remove(&Self::key(conn, stream));
                let _ = conn.stream_shutdown(stream, tquic::Shutdown::Read, 0x10);
            }
            return;
        }
        let key = Self::key(conn, stream);
        let mut buf = [0u8; 4096];
        let mut fin = false;
        // Bytes after the request line are read and dropped: tquic closes a
        // stream only once its receive side is finished.
        while let Ok((n, f)) = conn.stream_read(stream, &mut buf) {
            let entry = self
                .exchanges
                .entry(key)
                .or_insert_with(|| Exchange::Request(Vec::new()));
            if let Exchange::Request(request) = entry {
                request.extend_from_slice(&buf[..n]);
            }
            if f {
                fin = true;
                break;
            }
            if n == 0 {
                break;
            }
        }
        let Some(Exchange::Request(request)) = self.exchanges.get(&key) else {
            return;
        };
        match hq::parse_request(request, fin) {
            Ok(None) => {}
            Ok(Some(name)) => self.answer(conn, stream, Ok(name)),
            Err(e) => self.answer(conn, stream, Err(e)),
        }
    }

    fn on_stream_writable(&mut self, conn: &mut Connection, stream: u64) {
        self.pump(conn, stream);
    }

    fn on_stream_closed(&mut self, conn: &mut Connection, stream: u64) {
        match self.exchanges.remove(&Self::key(conn, stream)) {
            Some(Exchange::Queued { size }) => self.setup.applog.request_done(stream, size, true),
            Some(Exchange::Reply { data, .. }) => {
                self.setup
                    .applog
                    .request_done(stream, data.len() as u64, false)
            }
            _ => {}
        }
    }

    fn on_new_token(&mut self, _conn: &mut Connection, _token: Vec<u8>) {}
}

pub fn serve(setup: Setup) -> Result<(), Failure> {
    let config = setup.config()?;
    let socket = Rc::new(ll_endpoint_common::udp::Socket::bind(setup.opts.listen)?);
    let setup = Rc::new(setup);
    let server = Server {
        setup,
        exchanges: HashMap::new(),
    };
    let sender = Rc::new(Sender {
        socket: socket.clone(),
    });
    let mut endpoint = Endpoint::new(Box::new(config), true, Box::new(server), sender);
    println!("{{\"ready\": true}}");
    std::io::stdout().flush()?;
    let mut buf = buffer();
    loop {
        turn(&mut endpoint, &socket, &mut buf)?;
        wait(&endpoint, &socket, None)?;
    }
}
