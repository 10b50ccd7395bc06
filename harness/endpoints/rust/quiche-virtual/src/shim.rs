//! The clock and the entropy quiche and BoringSSL read from the OS, answered by
//! this executable instead.
//!
//! quiche calls `Instant::now()` itself (timers, pacing, RTT samples) and its TLS,
//! BoringSSL, draws its randoms (TLS randoms, key shares, ECDSA nonces) from
//! getrandom(2); neither can be handed a clock or an RNG. Both reach the OS
//! through glibc, which this binary links dynamically, while std and BoringSSL are
//! linked statically into it: defining `clock_gettime`, `gettimeofday`, `time`,
//! `getrandom` and `syscall` here makes every call resolve to these at link time,
//! before glibc is consulted. `syscall` is there because BoringSSL asks for
//! entropy with `syscall(SYS_getrandom, ...)`; every other number is passed on to
//! the kernel unchanged (std's futexes go that way).
//!
//! x86_64 only: `syscall` is variadic in C, and its integer arguments arrive in
//! the same registers as a fixed six-argument function's only under the SysV
//! x86_64 ABI.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// Whether this build answers the libc calls (x86_64 Linux with glibc only);
/// elsewhere the binary builds, so the workspace does, and refuses to run.
pub const SUPPORTED: bool = cfg!(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu"
));

/// The loop's current time, ns since the link started (virtual time 0).
static NOW_NS: AtomicU64 = AtomicU64::new(0);
/// Wall-clock ns of virtual time 0, for CLOCK_REALTIME and gettimeofday.
static EPOCH_UNIX_NS: AtomicU64 = AtomicU64::new(0);
/// CLOCK_MONOTONIC at virtual time 0: far enough from 0 that no `Instant - d`
/// in quiche can underflow.
pub const MONOTONIC_BASE_NS: u64 = 1_000_000_000_000;

/// Until `seed` runs (std draws its HashMap keys before main), a fixed stream.
static RNG: Mutex<Option<ChaCha20Rng>> = Mutex::new(None);

pub fn set_now(ns: u64) {
    NOW_NS.store(ns, Ordering::Relaxed);
}

pub fn now() -> u64 {
    NOW_NS.load(Ordering::Relaxed)
}

pub fn set_epoch(unix_ns: u64) {
    EPOCH_UNIX_NS.store(unix_ns, Ordering::Relaxed);
}

/// One stream for the whole process: the hosts run one at a time in a fixed
/// order (world.rs), so the order of draws, and so every byte, is fixed too.
pub fn seed(seed: u64) {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..22].copy_from_slice(b"quiche-virtual");
    *RNG.lock().unwrap() = Some(ChaCha20Rng::from_seed(key));
}

fn fill(buf: *mut u8, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: the caller (glibc's contract for getrandom) owns len bytes at buf.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, len) };
    let mut rng = RNG.lock().unwrap();
    rng.get_or_insert_with(|| ChaCha20Rng::from_seed([0; 32]))
        .fill_bytes(out);
}

/// Virtual ns of an Instant read from the shimmed clock.
pub fn instant_ns(t: std::time::Instant, zero: std::time::Instant) -> u64 {
    t.saturating_duration_since(zero).as_nanos() as u64
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
mod interpose {
    use super::{fill, now, EPOCH_UNIX_NS, MONOTONIC_BASE_NS};
    use std::sync::atomic::Ordering;

    fn write_ts(ts: *mut libc::timespec, ns: u64) {
        // SAFETY: clock_gettime's caller passes a timespec it owns.
        unsafe {
            (*ts).tv_sec = (ns / 1_000_000_000) as libc::time_t;
            (*ts).tv_nsec = (ns % 1_000_000_000) as libc::c_long;
        }
    }

    #[no_mangle]
    pub extern "C" fn clock_gettime(clk: libc::clockid_t, ts: *mut libc::timespec) -> libc::c_int {
        match clk {
            libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_TAI => {
                write_ts(ts, EPOCH_UNIX_NS.load(Ordering::Relaxed) + now())
            }
            libc::CLOCK_MONOTONIC
            | libc::CLOCK_MONOTONIC_RAW
            | libc::CLOCK_MONOTONIC_COARSE
            | libc::CLOCK_BOOTTIME => write_ts(ts, MONOTONIC_BASE_NS + now()),
            // CPU-time clocks (the harness's own accounting) stay real.
            _ => {
                // SAFETY: the kernel fills the caller's timespec.
                return unsafe {
                    errno_or(raw_syscall(
                        libc::SYS_clock_gettime,
                        clk as libc::c_long,
                        ts as libc::c_long,
                        0,
                        0,
                        0,
                        0,
                    )) as libc::c_int
                };
            }
        }
        0
    }

    #[no_mangle]
    pub extern "C" fn gettimeofday(tv: *mut libc::timeval, _tz: *mut libc::c_void) -> libc::c_int {
        if !tv.is_null() {
            let ns = EPOCH_UNIX_NS.load(Ordering::Relaxed) + now();
            // SAFETY: the caller passes a timeval it owns (or null, skipped).
            unsafe {
                (*tv).tv_sec = (ns / 1_000_000_000) as libc::time_t;
                (*tv).tv_usec = (ns % 1_000_000_000 / 1000) as libc::suseconds_t;
            }
        }
        0
    }

    #[no_mangle]
    pub extern "C" fn time(t: *mut libc::time_t) -> libc::time_t {
        let s = ((EPOCH_UNIX_NS.load(Ordering::Relaxed) + now()) / 1_000_000_000) as libc::time_t;
        if !t.is_null() {
            // SAFETY: the caller's own time_t.
            unsafe { *t = s };
        }
        s
    }

    #[no_mangle]
    pub extern "C" fn getrandom(buf: *mut libc::c_void, len: usize, _flags: libc::c_uint) -> isize {
        fill(buf.cast(), len);
        len as isize
    }

    /// # Safety
    /// As glibc's syscall(2): the arguments must suit the call `n`.
    #[no_mangle]
    pub unsafe extern "C" fn syscall(
        n: libc::c_long,
        a: libc::c_long,
        b: libc::c_long,
        c: libc::c_long,
        d: libc::c_long,
        e: libc::c_long,
        f: libc::c_long,
    ) -> libc::c_long {
        if n == libc::SYS_getrandom {
            fill(a as *mut u8, b as usize);
            return b;
        }
        errno_or(raw_syscall(n, a, b, c, d, e, f))
    }

    /// glibc's convention: -1 with errno set for a kernel error return.
    unsafe fn errno_or(ret: libc::c_long) -> libc::c_long {
        if (-4095..0).contains(&ret) {
            *libc::__errno_location() = -ret as libc::c_int;
            return -1;
        }
        ret
    }

    /// The kernel call itself; glibc's `syscall` is the symbol we replaced.
    unsafe fn raw_syscall(
        n: libc::c_long,
        a: libc::c_long,
        b: libc::c_long,
        c: libc::c_long,
        d: libc::c_long,
        e: libc::c_long,
        f: libc::c_long,
    ) -> libc::c_long {
        let ret: libc::c_long;
        std::arch::asm!(
            "syscall",
            inlateout("rax") n => ret,
            in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d, in("r8") e, in("r9") f,
            lateout("rcx") _, lateout("r11") _,
            options(nostack)
        );
        ret
    }
}
