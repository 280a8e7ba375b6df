//! Attacks that need a second local user (made with `useradd` here; root only, as CI runs:
//! elsewhere each test says SKIPPED and why): a fake daemon of another user at the socket's path,
//! a lock file or socket directory another user planted, and one user's connections not
//! crowding out another's.
mod common;
use common::{Client, Daemon, STEP, temp_dir, wait_until};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The test's second user (created once, as `check-build-user.sh` does for its own), or `None`
/// with the reason printed.
fn other_user() -> Option<(u32, u32)> {
    const NAME: &str = "psched-attacker";
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("SKIPPED: making and becoming another user needs root");
        return None;
    }
    if !matches!(nix::unistd::User::from_name(NAME), Ok(Some(_))) {
        let st = Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME])
            .status();
        if !st.is_ok_and(|s| s.success()) {
            eprintln!("SKIPPED: useradd {NAME} failed");
            return None;
        }
    }
    let u = nix::unistd::User::from_name(NAME).ok().flatten()?;
    Some((u.uid.as_raw(), u.gid.as_raw()))
}

/// `program` copied where the other user can run it (the build may live under /root). The copy
/// is written by another process (`install`), never through a descriptor of this one: a test
/// thread forking meanwhile would carry that descriptor into its child until exec, and executing
/// the copy then fails with ETXTBSY ("Text file busy").
fn reachable(dir: &Path, program: &str) -> PathBuf {
    let to = dir.join(Path::new(program).file_name().unwrap());
    let st = Command::new("install")
        .args(["-m", "0755", program])
        .arg(&to)
        .status()
        .unwrap();
    assert!(st.success(), "install {program} {}: {st}", to.display());
    to
}

/// A child killed and reaped when the test ends, a failed assertion included: a daemon left
/// running would keep the test runner's output pipe open.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn as_user(uid: u32, gid: u32, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args(["--clear-groups", "--"])
        .arg(program);
    c
}

#[test]
fn a_daemon_of_another_user_is_not_obeyed_unless_named() {
    let Some((uid, gid)) = other_user() else { return };
    let dir = temp_dir("fake");
    // The other user's directory and "daemon" (the real one, run as that user: it answers like
    // ours would, which is the attack).
    let theirs = dir.join("shared");
    std::fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(uid.into()), Some(gid.into())).unwrap();
    let daemon = reachable(&dir, common::DAEMON);
    let socket = theirs.join("s.sock");
    let log = dir.join("fake.log");
    let _fake = Reaped(
        as_user(uid, gid, &daemon)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    assert!(wait_until(STEP, || std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("listening on")));
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap_or_else(|_| {
        Command::new("chmod").arg("666").arg(&socket).status().unwrap();
    });
    // Root's client refuses it before saying hello: nothing of root's is ever suspended by it.
    let mut c = Client::spawn_with(Command::new(&*common::CLIENT), &socket, &["--lp", "1"]);
    assert_eq!(c.exit_status().code(), Some(1), "{}", c.stderr_text());
    let err = c.stderr_text();
    assert!(
        err.contains(&format!("runs as uid {uid} (psched-attacker)")) && err.contains("not connecting"),
        "{err}"
    );
    assert!(
        !std::fs::read_to_string(&log).unwrap().contains("connected"),
        "no hello reached it"
    );
    // Named in the configuration, it is trusted (it also admits root: --allow-uid is not
    // needed, the fake's SO_PEERCRED check is its own business).
    let mut cmd = Command::new(&*common::CLIENT);
    cmd.env("PREEMPT_SCHEDULER_UID", uid.to_string());
    let c = Client::spawn_with(cmd, &socket, &["--lp", "0"]);
    let mut c = c;
    let st = c.exit_status();
    assert!(
        c.stderr_text().contains("is not allowed") || st.success(),
        "trusted: the client spoke to it ({st}): {}",
        c.stderr_text()
    );
}

#[test]
fn a_lock_file_or_directory_of_another_user_is_refused() {
    let Some((uid, gid)) = other_user() else { return };
    let dir = temp_dir("planted");
    // A lock file another user made (it could hold its flock and keep the daemon out, or be
    // a hard link to a file of root's).
    let socket = dir.join("s.sock");
    let lock = dir.join("s.sock.lock");
    std::fs::write(&lock, "1\n").unwrap();
    nix::unistd::chown(&lock, Some(uid.into()), Some(gid.into())).unwrap();
    let out = Command::new(common::DAEMON)
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("another user may have planted it"), "{err}");
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "1\n");
    // A hard link to a file of root's, planted as the lock file: refused, not truncated.
    std::fs::remove_file(&lock).unwrap();
    let precious = dir.join("precious");
    std::fs::write(&precious, "root's\n").unwrap();
    std::fs::hard_link(&precious, &lock).unwrap();
    let out = Command::new(common::DAEMON)
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "root's\n");
    // A socket directory the other user owns (a predictable name made before ours).
    let theirs = dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(uid.into()), Some(gid.into())).unwrap();
    let out = Command::new(common::DAEMON)
        .arg("--socket")
        .arg(theirs.join("s.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("owned by uid {uid}")), "{err}");
}

#[test]
fn one_user_at_its_connection_limit_does_not_lock_out_another() {
    let Some((uid, gid)) = other_user() else { return };
    let dir = temp_dir("peruid");
    let d = Daemon::start(&dir, &["--max-per-uid", "4", "--allow-uid", &uid.to_string()]);
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mine: Vec<_> = (0..4).map(|_| d.raw()).collect();
    let client = reachable(&dir, common::CLIENT.to_str().unwrap());
    let mut theirs = Client::spawn_with(as_user(uid, gid, &client), &d.socket, &["--lp", "0"]);
    theirs = theirs.expect_ready();
    assert_eq!(theirs.cmd("connected"), "connected true");
    theirs.quit();
    drop(mine);
}

/// Pings of a root connection on `d` for `dur`, one at a time: their round trips, sorted.
fn bystander_pings(d: &Daemon, dur: std::time::Duration) -> Vec<std::time::Duration> {
    let (mut s, mut dec) = common::hello(d, "bystander");
    let end = std::time::Instant::now() + dur;
    let mut rtts = Vec::new();
    let mut seq = 10;
    while std::time::Instant::now() < end {
        let t0 = std::time::Instant::now();
        seq += 1;
        common::send(&mut s, seq, preempt_sched::proto::Request::Ping {});
        loop {
            match common::recv(&mut s, &mut dec) {
                Some(preempt_sched::proto::Notice::Pong { re }) if re == seq => break,
                Some(_) => {}
                None => panic!("the bystander's connection ended"),
            }
        }
        rtts.push(t0.elapsed());
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    rtts.sort_unstable();
    rtts
}

#[test]
fn another_user_flooding_from_many_connections_does_not_slow_root() {
    let Some((uid, gid)) = other_user() else { return };
    let dir = temp_dir("uidflood");
    let d = Daemon::start(&dir, &["--allow-uid", &uid.to_string()]);
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let storm = reachable(&dir, common::example("storm").to_str().unwrap());
    let mut attack = as_user(uid, gid, &storm)
        .args(["pings", "--clients", "200", "--seconds", "4", "--socket"])
        .arg(&d.socket)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let rtts = bystander_pings(&d, std::time::Duration::from_secs(3));
    let _ = attack.wait();
    let p50 = rtts[rtts.len() / 2];
    eprintln!(
        "host: root's ping p50 {p50:?}, max {:?} ({} pings) while uid {uid} flooded from 200 connections",
        rtts.last().unwrap(),
        rtts.len()
    );
    // Before: fairness was per connection, and 200 connections of one user took 200 shares.
    assert!(p50 < std::time::Duration::from_millis(20), "root's ping p50 {p50:?}");
}

#[test]
fn another_user_cannot_register_more_streams_than_its_share_nor_stall_root_with_them() {
    let Some((uid, gid)) = other_user() else { return };
    let dir = temp_dir("uidspan");
    let d = Daemon::start(
        &dir,
        &[
            "--allow-uid",
            &uid.to_string(),
            "--max-streams-per-uid",
            "4096",
            "--ack-timeout-ms",
            "40",
        ],
    );
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let storm = reachable(&dir, common::example("storm").to_str().unwrap());
    let attack = as_user(uid, gid, &storm)
        .args([
            "span",
            "--clients",
            "5",
            "--streams",
            "1024",
            "--seconds",
            "4",
            "--socket",
        ])
        .arg(&d.socket)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let rtts = bystander_pings(&d, std::time::Duration::from_secs(2));
    let out = attack.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The fifth client's registrations are refused (and after 64 refusals it is closed).
    assert!(text.contains("span: 4096 streams registered, 65 refused"), "{text}");
    let max = *rtts.last().unwrap();
    eprintln!(
        "host: root's ping p50 {:?}, max {max:?} while uid {uid} flipped a block over its 4096 streams",
        rtts[rtts.len() / 2]
    );
    assert!(max < std::time::Duration::from_secs(1), "root's ping took {max:?}");
}

#[test]
fn a_socket_path_through_another_users_directory_is_refused() {
    let Some((uid, gid)) = other_user() else { return };
    let dir = temp_dir("ancestors");
    // evil/ is the other user's; run/ inside it is root's, 0755: the immediate directory looks
    // right, but the other user may rename run/ away and put a symlink in its place.
    let evil = dir.join("evil");
    std::fs::create_dir(&evil).unwrap();
    std::fs::create_dir(evil.join("run")).unwrap();
    nix::unistd::chown(&evil, Some(uid.into()), Some(gid.into())).unwrap();
    let out = Command::new(common::DAEMON)
        .arg("--socket")
        .arg(evil.join("run/s.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{} (on the way to the socket's directory) is owned by uid {uid}",
            evil.display()
        )),
        "{err}"
    );
    assert!(!evil.join("run/s.sock").exists());
}

#[test]
fn other_users_filling_every_slot_do_not_lock_out_the_owner() {
    let Some((uid, gid)) = other_user() else { return };
    let dir = temp_dir("reserve");
    let d = Daemon::start(
        &dir,
        &[
            "--allow-uid",
            &uid.to_string(),
            "--max-clients",
            "3",
            "--max-per-uid",
            "8",
        ],
    );
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let client = reachable(&dir, common::CLIENT.to_str().unwrap());
    let theirs: Vec<Client> = (0..3)
        .map(|_| Client::spawn_with(as_user(uid, gid, &client), &d.socket, &["--lp", "0"]).expect_ready())
        .collect();
    // A fourth of theirs is refused; root still gets in.
    let mut fourth = Client::spawn_with(as_user(uid, gid, &client), &d.socket, &["--lp", "0"]);
    assert_eq!(fourth.exit_status().code(), Some(1));
    assert!(
        fourth.stderr_text().contains("clients connected already"),
        "{}",
        fourth.stderr_text()
    );
    let mut root = Client::spawn(&d.socket, &["--lp", "0"]);
    assert_eq!(root.cmd("connected"), "connected true");
    root.quit();
    drop(theirs);
}
