//! `longlook-link`: the command line of the link emulator (see docs/emulator.md).
//!
//! Exit status: 0 on a clean stop, 2 for an invalid schedule or command line, 1 when
//! the link cannot be set up (namespace missing, not root, …), each with one line on
//! stderr naming the problem and the fix.

mod control;
mod event_loop;
mod sys;

use clap::{Parser, Subcommand};
use event_loop::Router;
use longlook_link::{output, Link, Schedule};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "longlook-link", version, about = "Deterministic impairment link between two network namespaces")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Validate a schedule file and exit (0: valid, 2: invalid).
    Check { schedule: PathBuf },
    /// Run the link between two network namespaces until SIGTERM.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Schedule file (JSON; see docs/emulator.md).
    #[arg(long)]
    schedule: PathBuf,
    /// Client network namespace (a name under /run/netns).
    #[arg(long)]
    client_netns: String,
    /// Server network namespace.
    #[arg(long)]
    server_netns: String,
    /// TUN device name inside the client namespace.
    #[arg(long, default_value = "ll0")]
    client_dev: String,
    /// TUN device name inside the server namespace.
    #[arg(long, default_value = "ll0")]
    server_dev: String,
    /// Ground-truth log (NDJSON); without it records are discarded.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Directory for client.pcap and server.pcap.
    #[arg(long)]
    pcap_dir: Option<PathBuf>,
    /// Unix socket for control requests.
    #[arg(long)]
    control: Option<PathBuf>,
    /// Deliver every packet due within this many µs per wake-up.
    #[arg(long, default_value_t = 50)]
    slice_us: u64,
    /// Ask for SCHED_FIFO (priority 10) to cut timer lateness.
    #[arg(long)]
    fifo: bool,
    /// MTU of both devices, bytes.
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Turn off segmentation offload: one system call per packet each way.
    #[arg(long)]
    no_offload: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check { schedule } => match Schedule::load(&schedule) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("longlook-link: {e}");
                ExitCode::from(2)
            }
        },
        Cmd::Run(args) => run(args),
    }
}

fn run(args: RunArgs) -> ExitCode {
    let schedule = match Schedule::load(&args.schedule) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("longlook-link: {e}");
            return ExitCode::from(2);
        }
    };
    match setup_and_run(&args, schedule) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("longlook-link: {e}");
            ExitCode::from(1)
        }
    }
}

fn setup_and_run(args: &RunArgs, schedule: Schedule) -> Result<(), String> {
    // Block the signals first, so a SIGTERM during setup still ends in a clean stop.
    let signals = sys::termination_signals().map_err(|e| e.to_string())?;
    let open = |ns: &str, dev: &str| {
        sys::in_netns(ns, || sys::open_tun(dev, args.mtu, 5000, !args.no_offload)).map_err(|e| setup_hint(ns, e))
    };
    let client = open(&args.client_netns, &args.client_dev)?;
    let server = open(&args.server_netns, &args.server_dev)?;
    let pcap = match &args.pcap_dir {
        Some(d) => {
            let mk = |side| output::SidePcap::create(d, side).map_err(|e| file_hint(d, e));
            Some([mk("client")?, mk("server")?])
        }
        None => None,
    };
    let control = match &args.control {
        Some(p) => Some(control::Listener::bind(p).map_err(|e| file_hint(p, e))?),
        None => None,
    };
    if args.fifo && !sys::set_fifo(10) {
        eprintln!("longlook-link: SCHED_FIFO refused; running with normal priority");
    }
    let link = Link::new(schedule);
    let (start_mono, start_unix) = sys::clock_pair();
    let argv: Vec<String> = std::env::args().collect();
    let log = output::Log::create(args.log.as_deref(), &link, &argv, start_unix)
        .map_err(|e| file_hint(args.log.as_deref().unwrap_or(Path::new("-")), e))?;
    let mut router = Router {
        link,
        tun: [client, server],
        log,
        pcap,
        control,
        slice_ns: args.slice_us * 1000,
        offload: !args.no_offload,
        armed_at: 0,
        start_mono,
        start_unix,
    };
    let ready = serde_json::json!({
        "ready": true, "pid": std::process::id(),
        "client_dev": args.client_dev, "server_dev": args.server_dev,
        "start_unix_ns": start_unix,
    });
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{ready}");
    let _ = out.flush();
    drop(out);
    router.run(signals).map_err(|e| format!("router stopped: {e}"))
}

fn setup_hint(ns: &str, e: sys::SysError) -> String {
    let fix = match e.err.raw_os_error() {
        Some(libc::ENOENT) if e.call == "open" && e.what.starts_with("/run/netns") => {
            format!("create it first: ip netns add {ns}")
        }
        Some(libc::EPERM) | Some(libc::EACCES) => "run as root (CAP_NET_ADMIN and CAP_SYS_ADMIN are needed)".into(),
        Some(libc::EBUSY) => "a device of that name already exists in the namespace; pick another --client-dev/--server-dev".into(),
        _ => "check the namespace and device names".into(),
    };
    format!("cannot set up the link in namespace {ns:?}: {e}; {fix}")
}

fn file_hint(path: &Path, e: std::io::Error) -> String {
    format!("cannot create {}: {e}; check the directory exists and is writable", path.display())
}
