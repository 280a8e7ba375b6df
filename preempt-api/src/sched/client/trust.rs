//! Who the client obeys: the daemon's uid, from the kernel's record of the socket's peer
//! (`SO_PEERCRED`, which the daemon cannot forge), must be root, this process's own effective
//! uid, the system user [`DAEMON_USER`] (the systemd unit's), or one the configuration names
//! ([`TRUST_ENV`], [`ClientOptions::trusted_uids`](crate::sched::ClientOptions::trusted_uids)).
//! Anything else is refused before the hello: another user's process listening at a shared path
//! (a socket planted in /tmp, a directory made before ours) would otherwise receive this
//! process's streams and suspend them at will.
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::unistd::{Uid, User};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// The system user the packaged daemon runs as (`preempt-sched/systemd/preempt-sched.service`).
pub const DAEMON_USER: &str = "preempt-sched";

/// More uids (or user names) to trust, comma-separated.
pub const TRUST_ENV: &str = "PREEMPT_SCHEDULER_UID";

/// The uids of `list` (numbers or user names, comma-separated); `Err` names the bad word.
pub fn parse_uids(list: &str) -> Result<Vec<u32>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| match w.parse::<u32>() {
            Ok(u) => Ok(u),
            Err(_) => match User::from_name(w) {
                Ok(Some(u)) => Ok(u.uid.as_raw()),
                _ => Err(format!("{TRUST_ENV}: {w:?} is neither a uid nor a user name here")),
            },
        })
        .collect()
}

/// Whether `uid` may be obeyed, with the configured `extra` uids; `Err`: why not.
pub fn trusted(uid: u32, extra: &[u32]) -> Result<(), String> {
    let me = Uid::effective().as_raw();
    if uid == 0 || uid == me || extra.contains(&uid) {
        return Ok(());
    }
    if matches!(User::from_name(DAEMON_USER), Ok(Some(u)) if u.uid.as_raw() == uid) {
        return Ok(());
    }
    let env = match std::env::var(TRUST_ENV) {
        Ok(v) => parse_uids(&v)?,
        Err(_) => Vec::new(),
    };
    if env.contains(&uid) {
        return Ok(());
    }
    let name = match User::from_uid(Uid::from_raw(uid)) {
        Ok(Some(u)) => format!(" ({})", u.name),
        _ => String::new(),
    };
    Err(format!(
        "runs as uid {uid}{name}, which this process does not trust (root, its own uid {me}, the user \
         {DAEMON_USER}, or uids named by {TRUST_ENV}): another user may have planted it; not connecting"
    ))
}

/// Checks the daemon at the other end of `stream`.
pub fn check_daemon(stream: &UnixStream, path: &Path, extra: &[u32]) -> Result<(), String> {
    let creds = getsockopt(stream, PeerCredentials)
        .map_err(|e| format!("{}: SO_PEERCRED of the daemon: {e}", path.display()))?;
    trusted(creds.uid(), extra).map_err(|why| format!("the daemon at {} {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_our_own_uid_are_trusted_others_only_when_named() {
        let me = Uid::effective().as_raw();
        assert!(trusted(0, &[]).is_ok());
        assert!(trusted(me, &[]).is_ok());
        let other = me.wrapping_add(54_321).max(1);
        let e = trusted(other, &[]).unwrap_err();
        assert!(
            e.contains(&format!("runs as uid {other}")) && e.contains(TRUST_ENV),
            "{e}"
        );
        assert!(trusted(other, &[other]).is_ok());
        assert_eq!(parse_uids("12, 13,,").unwrap(), vec![12, 13]);
        assert_eq!(parse_uids("root").unwrap(), vec![0]);
        assert!(parse_uids("no-such-user-here").unwrap_err().contains(TRUST_ENV));
    }
}
