//! The daemon under load, with protocol-level clients (host figures; nothing runs on a device):
//!
//! - `register`: `--clients` clients each register `--streams` streams at once (priority 5),
//!   while an HP client enters and leaves blocks of priority 1 over one LP client's stream (which
//!   acknowledges every order at once): how long the registrations take in all, and the HP
//!   `enter` latency meanwhile. The registering clients are threads of this process, or with
//!   `--registrars-as UID` (as root) another process of that user (`storm registrars`).
//! - `flood`: one allowed client sends 16,000 empty frames per connection, reconnecting, for
//!   `--seconds`: the daemon's CPU share and its log lines per flooding connection.
//! - `pings --socket PATH`, `span --socket PATH` and `attack --socket PATH`: attacks on a
//!   daemon already running (the tests and `examples/hop.rs --attack-as` run them as another
//!   user); `attack`: `--idle` connections that say hello and stay silent, and a garbage flood: `--clients` connections keeping their sockets full of
//!   pings; or `--clients` clients registering `--streams` streams each at priority 0 (printing
//!   how many were refused) while one more enters and leaves blocks of priority 1 as fast as it
//!   can, never acknowledging an order. Each runs `--seconds`.
//!
//! ```sh
//! cargo build --release -p preempt-sched --examples --bins
//! target/release/examples/storm register --clients 64 --streams 1024
//! target/release/examples/storm flood --seconds 10
//! ```
use preempt_api::sched::proto::{Decoder, Device, Notice, Request, decode_notice, encode_request};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The device every stream and block of the storm is on (one device: the worst case for the plan).
const HOST0: Device = Device::host(0);

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a whole number"))
}

struct Conn {
    s: UnixStream,
    dec: Decoder,
    seq: u64,
}

impl Conn {
    fn hello(socket: &Path, name: &str) -> Conn {
        Self::try_hello(socket, name).expect("the daemon welcomes the client")
    }

    /// A connection that said hello, `None` if the daemon did not welcome it.
    fn try_hello(socket: &Path, name: &str) -> Option<Conn> {
        let s = UnixStream::connect(socket).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        let mut c = Conn {
            s,
            dec: Decoder::new(),
            seq: 0,
        };
        c.s.write_all(&encode_request(1, Request::Hello { name: name.into() }))
            .ok()?;
        matches!(c.try_recv(), Some(Notice::Welcome { .. })).then_some(c)
    }

    fn send(&mut self, msg: Request) -> u64 {
        self.seq += 1;
        self.s.write_all(&encode_request(self.seq, msg)).expect("write");
        self.seq
    }

    fn recv(&mut self) -> Notice {
        self.try_recv().expect("the daemon closed the connection")
    }

    /// The next notice, `None` once the connection ends.
    fn try_recv(&mut self) -> Option<Notice> {
        loop {
            if let Some(p) = self.dec.next_frame().expect("a frame") {
                return Some(decode_notice(&p).expect("a notice"));
            }
            let mut b = [0u8; 65536];
            match self.s.read(&mut b) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.dec.push(&b[..n]),
            }
        }
    }
}

fn daemon(dir: &Path, log: &Path) -> (Child, PathBuf) {
    let exe = std::env::current_exe().unwrap();
    let program = exe.parent().and_then(Path::parent).unwrap().join("preempt-sched");
    let socket = dir.join("s.sock");
    let child = Command::new(program)
        .arg("--socket")
        .arg(&socket)
        .args([
            "--max-clients",
            "4096",
            "--max-per-uid",
            "4096",
            "--max-streams-per-uid",
            "1048576",
        ])
        .args(
            std::env::args()
                .position(|a| a == "--registrars-as")
                .map(|_| vec!["--allow-uid".to_owned(), arg("--registrars-as", 0).to_string()])
                .unwrap_or_default(),
        )
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("the daemon starts");
    let end = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < end, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
    if std::env::args().any(|a| a == "--registrars-as") {
        // Reachable by the other user (who is admitted by --allow-uid).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    (child, socket)
}

fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

fn pct(mut v: Vec<Duration>) -> String {
    v.sort_unstable();
    let at = |q: f64| {
        let i = ((v.len() - 1) as f64 * q).round();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        v[i as usize]
    };
    format!(
        "p50 {:.1} us, p99 {:.1} us, max {:.1} us ({} samples)",
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        v.last().unwrap().as_secs_f64() * 1e6,
        v.len()
    )
}

/// `clients` connections registering `streams` streams each at priority 5, all sent at once
/// after `go`; returns them once every registration is answered, and how long that took.
fn registrars(socket: &Path, clients: u64, streams: u64, go: &Arc<Barrier>) -> (Vec<Conn>, Duration) {
    let regs: Vec<_> = (0..clients)
        .map(|i| {
            let (socket, go) = (socket.to_path_buf(), Arc::clone(go));
            std::thread::spawn(move || {
                let mut c = Conn::hello(&socket, &format!("registrar {i}"));
                let mut all = Vec::new();
                for s in 0..streams {
                    c.seq += 1;
                    all.extend(encode_request(
                        c.seq,
                        Request::Register {
                            stream: s,
                            priority: 5,
                            device: HOST0,
                        },
                    ));
                }
                go.wait();
                c.s.write_all(&all).unwrap();
                let mut n = 0;
                while n < streams {
                    if matches!(c.recv(), Notice::Done { .. }) {
                        n += 1;
                    }
                }
                c
            })
        })
        .collect();
    go.wait();
    let t0 = Instant::now();
    let conns = regs.into_iter().map(|r| r.join().unwrap()).collect();
    (conns, t0.elapsed())
}

fn register(socket: &Path, clients: u64, streams: u64, storm: &Path) {
    // The LP client: one stream below the HP blocks, every order acknowledged at once.
    let mut lp = Conn::hello(socket, "lp");
    lp.send(Request::Register {
        stream: 1,
        priority: 0,
        device: HOST0,
    });
    assert!(matches!(lp.recv(), Notice::Done { .. }));
    std::thread::spawn(move || {
        while let Some(n) = lp.try_recv() {
            if let Notice::Order { order, .. } = n {
                lp.send(Request::Ack {
                    order,
                    ok: true,
                    error: None,
                });
            }
        }
    });
    let done = Arc::new(AtomicBool::new(false));
    let mut hp = Conn::hello(socket, "hp");
    let hp_done = Arc::clone(&done);
    let hp_thread = std::thread::spawn(move || {
        let mut lat = Vec::new();
        while !hp_done.load(Ordering::Relaxed) {
            let t0 = Instant::now();
            hp.send(Request::Enter {
                priority: 1,
                device: HOST0,
            });
            while !matches!(hp.recv(), Notice::Entered { .. }) {}
            lat.push((t0, t0.elapsed()));
            hp.send(Request::Leave {
                priority: 1,
                device: HOST0,
            });
            while !matches!(hp.recv(), Notice::Done { .. }) {}
        }
        lat
    });
    std::thread::sleep(Duration::from_millis(200));
    let as_user = std::env::args().any(|a| a == "--registrars-as");
    let (t0, took, who) = if as_user {
        // Another user's processes register: the HP client's uid has its own allowance.
        let uid = arg("--registrars-as", 0);
        let t0 = Instant::now();
        let out = Command::new("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .args(["--clear-groups", "--"])
            .arg(storm)
            .args([
                "registrars",
                "--clients",
                &clients.to_string(),
                "--streams",
                &streams.to_string(),
                "--socket",
            ])
            .arg(socket)
            .output()
            .expect("setpriv runs storm");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        (t0, t0.elapsed(), format!("uid {uid}, another process"))
    } else {
        let go = Arc::new(Barrier::new(usize::try_from(clients).unwrap() + 1));
        let t0 = Instant::now();
        let (conns, took) = registrars(socket, clients, streams, &go);
        drop(conns);
        (t0, took, "the HP client's uid, threads of its process".to_owned())
    };
    done.store(true, Ordering::Relaxed);
    let lat = hp_thread.join().unwrap();
    // Only the blocks that started while the registrations ran.
    let during: Vec<Duration> = lat
        .into_iter()
        .filter(|&(at, _)| at >= t0 && at <= t0 + took)
        .map(|(_, d)| d)
        .collect();
    println!("host figures (protocol-level clients, no device work)");
    println!(
        "{clients} clients x {streams} streams registered in {:.3} s in all ({who})",
        took.as_secs_f64()
    );
    println!(
        "HP enter (suspending one LP stream) while they registered: {}",
        pct(during)
    );
}

fn flood(pid: u32, socket: &Path, seconds: u64, log: &Path) {
    let cpu0 = cpu_s(pid);
    let t0 = Instant::now();
    let frames = vec![0u8; 16_000 * 4];
    let mut conns = 0u64;
    while t0.elapsed() < Duration::from_secs(seconds) {
        let Ok(mut s) = UnixStream::connect(socket) else {
            continue;
        };
        let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = s.write_all(&frames);
        conns += 1;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_s(pid) - cpu0;
    std::thread::sleep(Duration::from_secs(1));
    let after = cpu_s(pid) - cpu0 - cpu;
    let lines = std::fs::read_to_string(log).unwrap_or_default().lines().count();
    println!("host figures (one allowed client flooding; the daemon on the same 2 cores)");
    println!(
        "{conns} flooding connections in {wall:.1} s: daemon CPU {:.0} % of one core during the flood, {:.2} s in the second after",
        100.0 * cpu / wall,
        after
    );
    println!(
        "{lines} log lines, {:.1} per flooding connection",
        lines as f64 / conns.max(1) as f64
    );
}

/// Connections that keep their sockets full of pings (their replies read and thrown away).
fn pings(socket: &Path, clients: u64, seconds: u64) {
    let end = Instant::now() + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let socket = socket.to_path_buf();
            std::thread::spawn(move || {
                // The daemon may not welcome them all in time: this user's own flood delays
                // its new connections (they are served after its established ones).
                let Some(mut c) = Conn::try_hello(&socket, &format!("pinger {i}")) else {
                    return;
                };
                let mut r = c.s.try_clone().unwrap();
                std::thread::spawn(move || {
                    let mut b = [0u8; 65536];
                    while matches!(r.read(&mut b), Ok(n) if n > 0) {}
                });
                let mut burst = Vec::new();
                for seq in 0..256 {
                    burst.extend(encode_request(seq, Request::Ping {}));
                }
                while Instant::now() < end {
                    if c.s.write_all(&burst).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    println!("pings: {clients} connections for {seconds} s");
}

/// `idle` connections that say hello and stay silent, and one client flooding 16,000 empty
/// frames per connection, reconnecting, for `seconds` (what `examples/hop.rs --attack-as`
/// runs as another user).
fn attack(socket: &Path, idle: u64, seconds: u64) {
    let held: Vec<Conn> = (0..idle)
        .filter_map(|i| Conn::try_hello(socket, &format!("idle {i}")))
        .collect();
    println!("attack: {} idle connections", held.len());
    let frames = vec![0u8; 16_000 * 4];
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut conns = 0u64;
    while Instant::now() < end {
        let mut s = match UnixStream::connect(socket) {
            Ok(s) => s,
            // The daemon is gone (its socket removed or closed): so is the attack.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                break;
            }
            Err(_) => continue,
        };
        let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = s.write_all(&frames);
        conns += 1;
    }
    println!("attack: {conns} flooding connections");
    drop(held);
}

/// Many streams below one toggling block, never acknowledged.
fn span(socket: &Path, clients: u64, streams: u64, seconds: u64) {
    let (mut registered, mut refused) = (0u64, 0u64);
    let mut held = Vec::new();
    for i in 0..clients {
        let mut c = Conn::hello(socket, &format!("span {i}"));
        let mut all = Vec::new();
        for s in 0..streams {
            all.extend(encode_request(
                s + 1,
                Request::Register {
                    stream: s,
                    priority: 0,
                    device: HOST0,
                },
            ));
        }
        c.s.write_all(&all).unwrap();
        let mut answered = 0;
        while answered < streams {
            match c.try_recv() {
                Some(Notice::Done { .. }) => {
                    answered += 1;
                    registered += 1;
                }
                Some(Notice::Refused { .. }) => {
                    answered += 1;
                    refused += 1;
                }
                Some(_) => {}
                None => break,
            }
        }
        held.push(c);
    }
    println!("span: {registered} streams registered, {refused} refused");
    let mut t = Conn::hello(socket, "toggler");
    let mut r = t.s.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut b = [0u8; 65536];
        while matches!(r.read(&mut b), Ok(n) if n > 0) {}
    });
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut flips = 0u64;
    while Instant::now() < end {
        t.send(Request::Enter {
            priority: 1,
            device: HOST0,
        });
        t.send(Request::Leave {
            priority: 1,
            device: HOST0,
        });
        flips += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    println!("span: {flips} enter/leave pairs sent");
    drop(held);
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let given = std::env::args()
        .position(|a| a == "--socket")
        .and_then(|i| std::env::args().nth(i + 1));
    if let Some(socket) = given {
        let socket = PathBuf::from(socket);
        match mode.as_str() {
            "pings" => pings(&socket, arg("--clients", 64), arg("--seconds", 5)),
            "attack" => attack(&socket, arg("--idle", 1000), arg("--seconds", 5)),
            "registrars" => {
                let go = Arc::new(Barrier::new(usize::try_from(arg("--clients", 64)).unwrap() + 1));
                let (_conns, took) = registrars(&socket, arg("--clients", 64), arg("--streams", 1024), &go);
                println!("registrars: done in {:.3} s", took.as_secs_f64());
            }
            "span" => span(
                &socket,
                arg("--clients", 16),
                arg("--streams", 1024),
                arg("--seconds", 5),
            ),
            _ => eprintln!("usage: storm pings|span --socket PATH [--clients N] [--streams N] [--seconds N]"),
        }
        return;
    }
    let dir = preempt_api::sched::hop::private_dir("preempt-sched-storm").expect("a private directory");
    let log = dir.join("daemon.log");
    let (mut child, socket) = daemon(&dir, &log);
    match mode.as_str() {
        "register" => register(
            &socket,
            arg("--clients", 64),
            arg("--streams", 1024),
            &std::env::current_exe().unwrap(),
        ),
        "flood" => flood(child.id(), &socket, arg("--seconds", 10), &log),
        _ => eprintln!("usage: storm register [--clients N] [--streams N] | flood [--seconds N]"),
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
