//! What the quiche, quinn and tquic endpoints share: the environment of docs/endpoints.md,
//! the LL_APPLOG writer, the HTTP/0.9 request line, and how the process ends
//! (exit codes, SIGTERM, LL_TIMEOUT_S, flushing qlog buffers first).
//!
//! Each stack's program keeps only what differs: its QUIC API and I/O loop.

pub mod applog;
pub mod exit;
pub mod hq;
pub mod opts;
pub mod udp;

use std::time::Duration;

/// How long a client waits after its last response before closing: its ACK of
/// the server's last packets (delayed by up to max_ack_delay, 25 ms in both
/// stacks) must reach the server, so the server's request_done is real.
pub fn linger(smoothed_rtt: Duration) -> Duration {
    (Duration::from_millis(25) + 2 * smoothed_rtt).min(Duration::from_secs(2))
}

pub use applog::AppLog;
pub use exit::{hex, Failure, FlushedFile};
pub use opts::{Opts, Role, Testcase};

/// For the endpoints' build scripts: the exact version Cargo.lock pins for
/// `package`, exported to the program as env!(`var`), so the applog's version record
/// names what was really linked.
pub fn export_locked_version(package: &str, var: &str) {
    let lock_path =
        std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let lock =
        std::fs::read_to_string(&lock_path).expect("Cargo.lock next to the workspace manifest");
    let wanted = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines
                .next()
                .and_then(|v| v.trim().strip_prefix("version = "))
                .expect("version line");
            println!("cargo:rustc-env={var}={}", version.trim_matches('"'));
            return;
        }
    }
    panic!("{package} is not in {}", lock_path.display());
}

/// `n` unpredictable bytes (connection IDs), from the kernel's getrandom(2): a
/// libc call rather than a read of /dev/urandom so that quiche-virtual, which
/// defines getrandom in its own executable, seeds these IDs with the rest.
pub fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        // SAFETY: writes at most n - filled bytes into the tail of our buffer.
        let got = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), n - filled, 0) };
        if got < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += got as usize;
        }
    }
    Ok(buf)
}

/// Asks for 4 MiB socket buffers (the kernel caps them at net.core.*mem_max), so
/// a burst is queued by the emulated link, not dropped by our own socket.
/// Switches receive offload (UDP_GRO) off on `socket`, for LL_OFFLOAD=off where the
/// stack's own I/O layer switched it on with no setting to say otherwise (quinn-udp
/// does so when it takes the socket; a dup of the fd reaches the same socket after).
pub fn turn_gro_off(socket: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    let off: libc::c_int = 0;
    // SAFETY: setsockopt reads an int we own for a valid fd.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_GRO,
            &off as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

pub fn enlarge_socket_buffers(socket: &std::net::UdpSocket) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4 << 20;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: setsockopt reads an int we own for the fd the socket owns.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &size as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}
