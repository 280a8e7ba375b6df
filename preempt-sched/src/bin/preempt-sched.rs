//! `preempt-sched`: the per-node scheduler daemon (docs/scheduler-daemon.md).
use clap::Parser;
use preempt_sched::daemon::{self, Config, DaemonError, access::Access, listen::Listening, plan::Limits};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The per-node scheduler daemon: highest-priority-first across processes. Clients (a
/// preempt-api session with a scheduler) register their low-priority streams and report
/// high-priority blocks; the daemon tells each client to suspend or resume its own streams.
#[derive(Parser, Debug)]
#[command(name = "preempt-sched", version)]
struct Args {
    /// The Unix socket to listen on [default: $XDG_RUNTIME_DIR/preempt-sched.sock, else
    /// /run/preempt-sched/preempt-sched.sock]. A lock file `<socket>.lock` beside it keeps a
    /// second daemon off the same socket.
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Give the socket this group and mode 0660, and let the group's members connect (default:
    /// mode 0600, the daemon's own user only).
    #[arg(long, value_name = "NAME")]
    group: Option<String>,
    /// Also let this uid connect (repeatable; the socket's mode must let it reach the socket).
    #[arg(long, value_name = "UID")]
    allow_uid: Vec<u32>,
    /// How long a client may take to acknowledge a suspend or resume before it is reported and
    /// no longer waited for (1..=60000); also the longest an `enter` waits for its suspends.
    /// Below the clients' own bound on `enter` (50 ms by default), so that a block is answered
    /// before its client gives up on the daemon.
    #[arg(long, value_name = "MS", default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    ack_timeout_ms: u64,
    /// Connections at most (1..=65536). The daemon needs a file descriptor per connection:
    /// it raises its soft RLIMIT_NOFILE to N+16 if the hard limit allows, and refuses to start
    /// otherwise (raise LimitNOFILE= or `ulimit -n`, or lower N).
    #[arg(long, value_name = "N", default_value_t = daemon::DEFAULT_MAX_CLIENTS as u64,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_clients: u64,
    /// Streams registered by all the clients of one uid at most (1..=1048576): a block that
    /// outranks a user's streams costs the daemon work in proportion, in one turn that every
    /// other client waits for (4096 streams: a few milliseconds here).
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    max_streams_per_uid: u64,
    /// Connections of one uid at most (1..=65536): one user cannot take every slot (the
    /// daemon's own user and root have 32 more beyond --max-clients).
    #[arg(long, value_name = "N", default_value_t = daemon::DEFAULT_MAX_PER_UID as u64,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_per_uid: u64,
    /// How long a connection may stay without saying hello before it is closed (1..=60000).
    #[arg(long, value_name = "MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    hello_timeout_ms: u64,
    /// The longest one high-priority block may stay active: past it the daemon ends it, logs
    /// it, and the streams it kept suspended resume (1..=3600000).
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    max_block_ms: u64,
    /// The longest a client holding a block may stay silent (its client pings at least every
    /// 100 ms; a stopped or hung process does not): past it its blocks end (1..=600000).
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    block_silence_ms: u64,
}

/// The daemon's log on stderr, which it does not wait for when stderr is a pipe or a socket:
/// that is made non-blocking, and a line that does not fit (a pipe nobody reads, `| less`
/// paused, a stalled journal) is dropped and counted, said in the next line that fits. A
/// terminal is left blocking (its open file is the shell's too): a daemon run by hand in a
/// terminal stopped with Ctrl-S waits until Ctrl-Q. A failed write (stderr closed) is
/// ignored too: the daemon's work never depends on its log.
struct Log {
    start: Instant,
    dropped: u64,
    /// The last line was cut: the next starts on a line of its own.
    cut: bool,
    /// stderr's flags before, restored at exit (the open file may be shared).
    restore: Option<nix::fcntl::OFlag>,
}

impl Log {
    fn new() -> Log {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        use nix::sys::stat::{SFlag, fstat};
        // Only a pipe or a socket can block a write for long: a terminal is left as it is (its
        // open file is the shell's too, which a non-blocking flag would break), and so is a
        // regular file.
        let err = std::io::stderr();
        let mut restore = None;
        let blocking_kind = fstat(&err).is_ok_and(|st| {
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            kind == SFlag::S_IFIFO || kind == SFlag::S_IFSOCK
        });
        if blocking_kind && let Ok(flags) = fcntl(&err, FcntlArg::F_GETFL) {
            let flags = OFlag::from_bits_truncate(flags);
            if fcntl(&err, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).is_ok() {
                restore = Some(flags);
            }
        }
        Log {
            start: Instant::now(),
            dropped: 0,
            cut: false,
            restore,
        }
    }

    fn line(&mut self, line: &str) {
        let mut text = String::new();
        if self.cut {
            text.push('\n');
        }
        text.push_str(&format!(
            "preempt-sched [{:>10.3}s] {line}",
            self.start.elapsed().as_secs_f64()
        ));
        if self.dropped > 0 {
            text.push_str(&format!(
                " ({} log lines dropped before this one: stderr was full)",
                self.dropped
            ));
        }
        text.push('\n');
        let mut err = std::io::stderr().lock();
        match err.write(text.as_bytes()) {
            Ok(n) if n == text.len() => {
                self.dropped = 0;
                self.cut = false;
            }
            Ok(0) | Err(_) => self.dropped += 1,
            Ok(_) => {
                self.dropped = 0;
                self.cut = true;
            }
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Some(flags) = self.restore {
            let _ = nix::fcntl::fcntl(std::io::stderr(), nix::fcntl::FcntlArg::F_SETFL(flags));
        }
    }
}

/// A one-line message on stderr, errors ignored (see [`log_line`]).
fn say(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "preempt-sched: {text}");
}

fn main() -> ExitCode {
    // Bad input: one line and exit 2, clap's refusals included (the project's CLI rule).
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            say(first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    let mut access = Access::owner_only();
    for uid in &args.allow_uid {
        access = access.with_uid(*uid);
    }
    if let Some(g) = &args.group {
        access = match access.with_group(g) {
            Ok(a) => a,
            Err(e) => {
                say(&format!("--group: {e}"));
                return ExitCode::from(2);
            }
        };
    }
    let cfg = Config {
        socket: args.socket.unwrap_or_else(daemon::default_socket),
        access,
        ack_timeout: Duration::from_millis(args.ack_timeout_ms),
        max_clients: usize::try_from(args.max_clients).unwrap_or(usize::MAX),
        max_per_uid: usize::try_from(args.max_per_uid).unwrap_or(usize::MAX),
        hello_timeout: Duration::from_millis(args.hello_timeout_ms),
        limits: Limits {
            streams_per_uid: usize::try_from(args.max_streams_per_uid).unwrap_or(usize::MAX),
            max_block: Duration::from_millis(args.max_block_ms),
            block_silence: Duration::from_millis(args.block_silence_ms),
            ..Limits::default()
        },
    };
    if let Err(e) = daemon::ensure_fd_limit(cfg.max_clients) {
        say(&e.to_string());
        return ExitCode::from(2);
    }
    let mut logger = Log::new();
    let mut log = |line: &str| logger.line(line);
    let listening = match Listening::bind(&cfg.socket, cfg.access.group().map(|g| g.1)) {
        Ok(l) => l,
        Err(e) => {
            say(&e.to_string());
            return ExitCode::from(match e {
                DaemonError::Config(_) => 2,
                _ => 1,
            });
        }
    };
    match daemon::serve(&listening, &cfg, &mut log) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say(&e.to_string());
            ExitCode::from(1)
        }
    }
}
