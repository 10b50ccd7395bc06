//! How an endpoint ends: exit 0 on success (server: on SIGTERM), 127 with one line
//! on stderr for an option it cannot honour, 1 for anything else (docs/endpoints.md).
//!
//! qlog files are written through `FlushedFile` buffers (a busy connection logs
//! several events per packet, too many for one write(2) each); every exit path here
//! flushes them first, including SIGTERM and LL_TIMEOUT_S, which end the process
//! from a helper thread.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Why an endpoint stops early.
#[derive(Debug)]
pub enum Failure {
    /// An option the stack cannot honour: exit 127, the harness skips.
    Unsupported(String),
    /// Anything else: exit 1, the harness keeps the logs.
    Fatal(String),
}

impl Failure {
    pub fn fatal(what: impl std::fmt::Display) -> Failure {
        Failure::Fatal(what.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Fatal(e.to_string())
    }
}

/// A buffered, shareable file whose buffer `flush_all` empties before any exit.
/// Dropping the last clone (the connection that logs into it) flushes it too.
#[derive(Clone)]
pub struct FlushedFile(Arc<Mutex<BufWriter<File>>>);

/// Weak, so a closed connection's file is released rather than kept for the exit.
static OPEN_FILES: Mutex<Vec<Weak<Mutex<BufWriter<File>>>>> = Mutex::new(Vec::new());

impl FlushedFile {
    pub fn create(path: &Path) -> io::Result<FlushedFile> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)?;
        let shared = FlushedFile(Arc::new(Mutex::new(BufWriter::with_capacity(
            256 * 1024,
            file,
        ))));
        let mut open = OPEN_FILES.lock().unwrap();
        open.retain(|f| f.strong_count() > 0);
        open.push(Arc::downgrade(&shared.0));
        Ok(shared)
    }
}

impl Write for FlushedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap().flush()
    }
}

/// A qlog writer in front of a FlushedFile that hands it whole lines: qlog's
/// serde_json writes an event in ~100 small pieces, each of which would take the
/// file's lock (40% of a quiche-virtual run's CPU). The streamer ends every
/// event with a separate "\n" write, so looking at a write's last byte is
/// enough; a kill loses at most the event being written.
pub struct EventLines {
    line: Vec<u8>,
    file: FlushedFile,
}

impl EventLines {
    pub fn new(file: FlushedFile) -> EventLines {
        EventLines {
            line: Vec::with_capacity(4096),
            file,
        }
    }

    fn pass_on(&mut self) -> io::Result<()> {
        let r = self.file.write_all(&self.line);
        self.line.clear();
        r
    }
}

impl Write for EventLines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        if buf.last() == Some(&b'\n') || self.line.len() >= 256 * 1024 {
            self.pass_on()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.pass_on()?;
        self.file.flush()
    }
}

impl Drop for EventLines {
    fn drop(&mut self) {
        let _ = self.pass_on();
    }
}

/// Flushes every FlushedFile opened so far.
pub fn flush_all() {
    for f in OPEN_FILES.lock().unwrap().iter().filter_map(Weak::upgrade) {
        let _ = f.lock().unwrap().flush();
    }
}

/// Flushes, reports and exits with the contract's status for `result`.
pub fn finish(result: Result<(), Failure>) -> ! {
    flush_all();
    let _ = io::stdout().flush();
    match result {
        Ok(()) => std::process::exit(0),
        Err(Failure::Unsupported(why)) => {
            eprintln!("unsupported: {why}");
            std::process::exit(127)
        }
        Err(Failure::Fatal(why)) => {
            eprintln!("error: {why}");
            std::process::exit(1)
        }
    }
}

/// Every endpoint's `main`: reads the contract's environment, guards the process
/// (SIGTERM ends a server well and a client cut short as a failure; LL_TIMEOUT_S),
/// tightens timers, runs `run` and exits with the contract's status.
pub fn run_endpoint(run: fn(crate::Opts) -> Result<(), Failure>) -> ! {
    let opts = match crate::Opts::from_env() {
        Ok(o) => o,
        Err(e) => finish(Err(e)),
    };
    let on_term = match opts.role {
        crate::Role::Server => || Ok(()),
        crate::Role::Client => || {
            Err(Failure::Fatal(
                "terminated before every request completed".into(),
            ))
        },
    };
    guard_process(on_term, opts.timeout);
    tight_timers();
    finish(run(opts))
}

/// Takes over SIGTERM/SIGINT and LL_TIMEOUT_S for the whole process.
///
/// Must run on the main thread before any other thread starts (the tokio runtime
/// included): the signals are blocked here, the mask is inherited, and one helper
/// thread receives them with sigwait, so no thread is interrupted mid-write.
/// SIGTERM ends the process with `on_term` (Ok for a server, a failure for a
/// client cut short); the timeout ends it with exit 1.
pub fn guard_process(on_term: fn() -> Result<(), Failure>, timeout: Option<Duration>) {
    // SAFETY: plain signal-mask calls on a sigset_t we own.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    std::thread::spawn(move || {
        let mut sig: libc::c_int = 0;
        // SAFETY: sigwait reads the set and writes the signal number we own.
        unsafe { libc::sigwait(&set, &mut sig) };
        finish(on_term())
    });
    if let Some(limit) = timeout {
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            finish(Err(Failure::Fatal(format!(
                "LL_TIMEOUT_S: gave up after {:.1} s",
                limit.as_secs_f64()
            ))))
        });
    }
}

/// Lowers the kernel's timer slack (default 50 µs) so paced sends and short
/// sleeps wake when asked: a coarse wake-up would itself shape the traffic.
pub fn tight_timers() {
    // SAFETY: prctl with an integer argument has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
}

/// `DIR/ROLE-ID.sqlog`: one JSON-SEQ qlog per connection, named by its original DCID.
pub fn qlog_file(dir: &Path, role: &str, id_hex: &str) -> io::Result<FlushedFile> {
    std::fs::create_dir_all(dir)?;
    FlushedFile::create(&dir.join(format!("{role}-{id_hex}.sqlog")))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
