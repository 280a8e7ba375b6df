//! What the daemon's hop costs on HP start, on the host device (host figures): the time from
//! "an HP block starts" to "every LP stream is suspended", with the LP stream in the same
//! process (preempt-api's in-process helper) and in other processes (this daemon). The
//! measurement is `preempt_api::sched::hop`'s, which `preempt-lat priority --processes` runs too
//! (host and GPU).
//!
//! ```sh
//! cargo build --release -p preempt-sched -p host-device --examples --bins
//! target/release/examples/hop --samples 2000 --lp-clients 1
//! target/release/examples/hop --samples 2000 --idle 1000 --flood          # under attack
//! target/release/examples/hop --samples 2000 --attack-as 65534 --idle 1000  # by another user (root)
//! ```
//! `--idle N` opens N connections that say hello and stay silent before the daemon's hop is
//! measured; `--flood` has one allowed client send 16,000 empty frames per connection,
//! reconnecting, all the while (the attacks the daemon must shrug off). Both come from this
//! process's uid, whose own new connections a flood delays (the daemon serves each uid in turn);
//! `--attack-as UID` runs both as that user instead (`storm attack`, through `setpriv`; the
//! daemon then admits it and its socket is made reachable), the case the daemon is built for.
//! Needs `preempt-sched`, `examples/preempt-sched-client` and `preempt-host-worker` in the example's
//! directory (cargo's `target/<profile>/`).
use preempt_api::sched::hop::{Daemon, time_enters};
use preempt_api::sched::proto::{Request, encode_request};
use preempt_api::{DeviceSpec, Level, Options, Session, WorkerExe};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// `n` connections that say hello, read the welcome and stay silent.
fn idle(socket: &Path, n: usize) -> Result<Vec<UnixStream>, Box<dyn std::error::Error>> {
    (0..n)
        .map(|i| {
            let mut s = UnixStream::connect(socket)?;
            s.write_all(&encode_request(
                1,
                Request::Hello {
                    name: format!("idle {i}"),
                },
            ))?;
            let mut b = [0u8; 256];
            let _ = s.read(&mut b)?;
            Ok(s)
        })
        .collect()
}

/// The attacking process, killed when dropped (also when the measurement fails).
struct Attacker(Option<std::process::Child>);

impl Drop for Attacker {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// With `--attack-as UID`: the daemon's directory and socket made reachable, and `storm attack`
/// started as that user (idle connections, then the flood), given a moment to connect.
fn attack_as(
    dir: &Path,
    socket: &Path,
    idle: usize,
) -> Result<Option<std::process::Child>, Box<dyn std::error::Error>> {
    use std::os::unix::fs::PermissionsExt;
    let Some(uid) = std::env::args()
        .position(|a| a == "--attack-as")
        .map(|_| arg("--attack-as", 0))
    else {
        return Ok(None);
    };
    let parent = socket.parent().ok_or("the socket has no directory")?;
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o711))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
    let child = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .args(["--clear-groups", "--"])
        .arg(dir.join("examples").join("storm"))
        .args(["attack", "--seconds", "600", "--idle", &idle.to_string(), "--socket"])
        .arg(socket)
        .stdout(Stdio::null())
        .spawn()?;
    // Its idle connections first, then the flood: give them a moment.
    std::thread::sleep(std::time::Duration::from_millis(500 + 2 * idle as u64));
    Ok(Some(child))
}

/// One allowed client flooding until `stop`: 16,000 empty frames a connection, reconnecting.
fn flood(socket: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let frames = vec![0u8; 16_000 * 4];
        let mut conns = 0;
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut s) = UnixStream::connect(&socket) else {
                continue;
            };
            let _ = s.set_write_timeout(Some(std::time::Duration::from_millis(100)));
            let _ = s.write_all(&frames);
            conns += 1;
        }
        conns
    })
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a whole number"))
}

fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the example's path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>/examples")
        .to_path_buf()
}

fn percentiles(mut ns: Vec<u64>) -> (u64, u64, u64) {
    ns.sort_unstable();
    let at = |q: f64| {
        let i = ((ns.len() - 1) as f64 * q).round();
        // A quantile's index is within 0..len by construction.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        ns[i as usize]
    };
    (at(0.5), at(0.99), *ns.last().unwrap())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let samples = arg("--samples", 1000).max(1);
    let lp_clients = arg("--lp-clients", 1).max(1);
    let dir = profile_dir();
    let worker = WorkerExe::new(dir.join(preempt_api::host::WORKER_NAME));
    let opts = Options {
        worker: Some(worker.clone()),
        host_workers: 1,
        ..Options::default()
    };

    // In-process: the helper suspends the session's own LP streams.
    let s = Session::open(DeviceSpec::HOST, opts.clone())?;
    let streams = (0..lp_clients)
        .map(|_| s.create_lp_stream(Level::Lv3))
        .collect::<Result<Vec<_>, _>>()?;
    for lp in &streams {
        s.helper_register(lp, 0)?;
    }
    let local = time_enters(&s, samples, 0)?;
    s.close()?;

    // Across processes: a daemon, `lp_clients` LP processes, this process as the HP side.
    let idle_n = arg("--idle", 0);
    let attacker_uid = std::env::args()
        .position(|a| a == "--attack-as")
        .map(|_| arg("--attack-as", 0).to_string());
    let mut daemon_args = vec!["--ack-timeout-ms", "10000", "--block-silence-ms", "60000"];
    match &attacker_uid {
        // Another user: the daemon's defaults hold it (256 connections per uid).
        Some(uid) => daemon_args.extend(["--allow-uid", uid.as_str()]),
        // The flood and the idle connections are this process's uid: room for them.
        None => daemon_args.extend(["--max-clients", "16000", "--max-per-uid", "16000"]),
    }
    let daemon = Daemon::start_with(&dir.join("preempt-sched"), &daemon_args)?;
    let attacker = Attacker(attack_as(&dir, daemon.socket(), idle_n)?);
    let _idle = if attacker.0.is_some() {
        Vec::new()
    } else {
        idle(daemon.socket(), idle_n)?
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flooder =
        (flag("--flood") && attacker.0.is_none()).then(|| flood(daemon.socket().to_path_buf(), Arc::clone(&stop)));
    let mut clients = Vec::new();
    for _ in 0..lp_clients {
        let mut c = Command::new(dir.join("examples").join("preempt-sched-client"))
            .arg("--socket")
            .arg(daemon.socket())
            .args(["--timeout-ms", "10000"])
            .env(preempt_api::host::WORKER_ENV, &worker.program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(c.stdout.take().expect("piped")).read_line(&mut line)?;
        assert!(line.starts_with("ready"), "{line}");
        clients.push(c);
    }
    let hp = Session::open(
        DeviceSpec::HOST,
        Options {
            scheduler: Some(daemon.socket().to_path_buf()),
            scheduler_client: preempt_api::sched::hop::measuring_client(),
            ..opts
        },
    )?;
    let remote = time_enters(&hp, samples, u32::try_from(lp_clients)?)?;
    hp.close()?;
    stop.store(true, Ordering::Relaxed);
    let flooded = flooder.map(|f| f.join().unwrap_or(0));
    if attacker.0.is_some() {
        drop(attacker);
        println!(
            "  (the idle connections and the flood came from uid {} through storm attack)",
            arg("--attack-as", 0)
        );
    }
    for mut c in clients {
        if let Some(mut i) = c.stdin.take() {
            let _ = writeln!(i, "quit");
        }
        let _ = c.wait();
    }
    drop(daemon);

    let (lp50, lp99, lmax) = percentiles(local);
    let (rp50, rp99, rmax) = percentiles(remote);
    println!("host figures (CPU worker processes stand in for the GPU; not GPU numbers)");
    println!("HP start until {lp_clients} LP stream(s) suspended, {samples} samples, us: p50 / p99 / max");
    println!(
        "  the daemon had {idle_n} idle connections{}",
        flooded.map_or(String::new(), |n| format!(
            " and a flooding client ({n} connections of 16,000 empty frames)"
        ))
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    println!(
        "  in-process helper : {:8.1} / {:8.1} / {:8.1}",
        us(lp50),
        us(lp99),
        us(lmax)
    );
    println!(
        "  daemon, {lp_clients} process(es): {:8.1} / {:8.1} / {:8.1}",
        us(rp50),
        us(rp99),
        us(rmax)
    );
    println!(
        "  hop cost          : {:8.1} / {:8.1} (p50 and p99 differences)",
        us(rp50) - us(lp50),
        us(rp99) - us(lp99)
    );
    Ok(())
}
