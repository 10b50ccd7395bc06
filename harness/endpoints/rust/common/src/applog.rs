//! LL_APPLOG: one JSON object per line, times in µs of CLOCK_MONOTONIC, first line
//! the version record (docs/endpoints.md, "Application events").
//!
//! Lines are written unbuffered, one write each: there are a handful per request,
//! and a line must survive the process being killed right after it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{json, Value};

/// CLOCK_MONOTONIC in µs: the clock the harness and the emulator's log share.
pub fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// The application event log; a no-op when LL_APPLOG is unset.
pub struct AppLog {
    file: Option<Mutex<File>>,
}

impl AppLog {
    pub fn open(path: Option<&Path>) -> std::io::Result<AppLog> {
        let file = match path {
            None => None,
            Some(p) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(p)?,
            )),
        };
        Ok(AppLog { file })
    }

    fn write(&self, value: Value) {
        if let Some(file) = &self.file {
            let mut line = value.to_string();
            line.push('\n');
            // A lost app event must not kill a transfer; the harness notices the gap.
            let _ = file.lock().unwrap().write_all(line.as_bytes());
        }
    }

    /// The first line: the stack's exact version and the CC in use (contract name),
    /// plus stack-specific details in `extra` (e.g. the stack's own CC name).
    /// `t_us` (CLOCK_MONOTONIC) and `wall_us` (CLOCK_REALTIME) are read together,
    /// so a reader can map wall-clock qlog times onto the applog's clock.
    pub fn version(&self, stack: &str, version: &str, cc: &str, extra: Value) {
        let t_us = monotonic_us();
        let wall_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut v = json!({"event": "version", "stack": stack, "version": version, "cc": cc,
                           "t_us": t_us, "wall_us": wall_us});
        if let (Some(obj), Value::Object(more)) = (v.as_object_mut(), extra) {
            obj.extend(more);
        }
        self.write(v);
    }

    /// request_start | request_done | idle_start | idle_end | blocked | unblocked.
    pub fn event(&self, event: &str, stream: u64, bytes: u64) {
        self.write(
            json!({"t_us": monotonic_us(), "event": event, "stream": stream, "bytes": bytes}),
        );
    }

    /// A server's request_done: when the peer acknowledged every byte and the FIN
    /// (the server has nothing queued any more), or, with `"acked": false`, when
    /// the connection ended before that.
    pub fn request_done(&self, stream: u64, bytes: u64, acked: bool) {
        let mut v = json!({"t_us": monotonic_us(), "event": "request_done", "stream": stream, "bytes": bytes});
        if !acked {
            v["acked"] = json!(false);
        }
        self.write(v);
    }
}
