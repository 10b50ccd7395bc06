//! The control socket: one JSON request per line, one JSON reply per line.
//! Requests: {"cmd":"phase","index":N}, {"cmd":"stats"}, {"cmd":"stop"}.

use serde::Deserialize;
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

#[derive(Deserialize, Debug, PartialEq)]
#[serde(tag = "cmd", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    Phase { index: usize },
    Stats,
    Stop,
}

/// Parses one request line; the error is the reply to send.
pub fn parse(line: &str) -> Result<Request, String> {
    serde_json::from_str(line).map_err(|e| {
        format!("bad request {line:?}: {e}; send {{\"cmd\":\"phase\",\"index\":N}}, {{\"cmd\":\"stats\"}} or {{\"cmd\":\"stop\"}}")
    })
}

pub struct Listener {
    pub inner: UnixListener,
    path: PathBuf,
}

impl Listener {
    pub fn bind(path: &Path) -> io::Result<Listener> {
        // A socket file left by a killed earlier run would make bind fail.
        let _ = std::fs::remove_file(path);
        let inner = UnixListener::bind(path)?;
        inner.set_nonblocking(true)?;
        Ok(Listener { inner, path: path.to_path_buf() })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A connected client with its partial input line.
pub struct Client {
    pub stream: UnixStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn new(stream: UnixStream) -> io::Result<Client> {
        stream.set_nonblocking(true)?;
        Ok(Client { stream, buf: Vec::new() })
    }

    /// Reads what is available; returns complete lines and whether the peer closed.
    pub fn read_lines(&mut self) -> (Vec<String>, bool) {
        let mut chunk = [0u8; 4096];
        let mut closed = false;
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
            if self.buf.len() > 1 << 16 {
                closed = true; // a line this long is not a request
                break;
            }
        }
        let mut lines = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=nl).collect();
            lines.push(String::from_utf8_lossy(&line).trim().to_string());
        }
        (lines.into_iter().filter(|l| !l.is_empty()).collect(), closed)
    }

    pub fn reply(&mut self, v: &serde_json::Value) {
        // Replies are small; a client that does not read them just loses them.
        let _ = self.stream.set_nonblocking(false);
        let _ = writeln!(self.stream, "{v}");
        let _ = self.stream.set_nonblocking(true);
    }
}
