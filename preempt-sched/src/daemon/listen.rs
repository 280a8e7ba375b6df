//! The daemon's socket: one daemon per socket, never a live socket unlinked.
//!
//! Order of things: take an exclusive `flock` on `<socket>.lock` (non-blocking; held for the
//! daemon's life, released by the kernel when it dies however it dies), so a second daemon is
//! refused with the first one's pid; then, if the socket path exists, probe it with a connect:
//! an answer means a daemon that does not take our lock is there (refused too), no answer a
//! stale socket of a dead daemon (unlinked); a path that is not a socket is left alone and
//! refused. The socket is bound under umask 0177 (never reachable by others, not even between
//! bind and chmod), then given its group and mode 0660 where a group is named.
use super::DaemonError;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::stat::{Mode, umask};
use nix::unistd::{Gid, chown};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// The bound socket with its lock; dropping it unlinks the socket (if it is still ours) and
/// releases the lock.
#[derive(Debug)]
pub struct Listening {
    /// The listening socket (non-blocking).
    pub listener: UnixListener,
    path: PathBuf,
    ino: u64,
    _lock: Flock<File>,
}

/// The lock file beside `socket`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

impl Listening {
    /// Takes the lock and binds `socket` (see the [module documentation](self)); `group`: the
    /// socket's group, mode 0660 (else 0600).
    pub fn bind(socket: &Path, group: Option<Gid>) -> Result<Listening, DaemonError> {
        if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(|e| DaemonError::io(format!("creating {}", dir.display()), e))?;
        }
        if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            check_dir(dir)?;
        }
        let lock = take_lock(socket)?;
        match std::fs::symlink_metadata(socket) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DaemonError::io(format!("inspecting {}", socket.display()), e)),
            Ok(m) if !m.file_type().is_socket() => {
                return Err(DaemonError::Config(format!(
                    "{} exists and is not a socket: not replacing it",
                    socket.display()
                )));
            }
            Ok(_) => {
                if UnixStream::connect(socket).is_ok() {
                    return Err(DaemonError::AlreadyRunning {
                        socket: socket.to_owned(),
                        pid: None,
                    });
                }
                std::fs::remove_file(socket)
                    .map_err(|e| DaemonError::io(format!("removing the stale socket {}", socket.display()), e))?;
            }
        }
        // The daemon binds before it starts any thread, so the process-wide umask is ours.
        let old = umask(Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(socket);
        umask(old);
        let listener = bound.map_err(|e| DaemonError::io(format!("binding {}", socket.display()), e))?;
        let meta = std::fs::symlink_metadata(socket)
            .map_err(|e| DaemonError::io(format!("inspecting {}", socket.display()), e))?;
        let me = Listening {
            listener,
            path: socket.to_owned(),
            ino: meta.ino(),
            _lock: lock,
        };
        if let Some(g) = group {
            chown(socket, None, Some(g))
                .map_err(|e| DaemonError::io(format!("giving {} group {g}", socket.display()), e))?;
            std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o660))
                .map_err(|e| DaemonError::io(format!("chmod 0660 {}", socket.display()), e))?;
        }
        me.listener
            .set_nonblocking(true)
            .map_err(|e| DaemonError::io("making the listener non-blocking", e))?;
        Ok(me)
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        // Only our own socket: never one a later daemon bound (it cannot while we hold the
        // lock, but a hand-made file at the path is not ours to remove either).
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Opens the lock file without following a symlink planted at its path, and accepts only a
/// regular file of the daemon's own user with one link: another user who may write the socket's
/// directory must not make the daemon truncate a file of its choosing (through a symlink or a
/// hard link), nor hold the lock of a file it owns to keep the daemon from starting.
fn open_lock(path: &Path) -> Result<File, DaemonError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|e| {
            let why = if e.raw_os_error() == Some(Errno::ELOOP as i32) {
                " (it is a symlink: not following it)".to_owned()
            } else {
                String::new()
            };
            DaemonError::io(format!("opening the lock file {}{why}", path.display()), e)
        })?;
    let meta = file
        .metadata()
        .map_err(|e| DaemonError::io(format!("inspecting the lock file {}", path.display()), e))?;
    let me = nix::unistd::Uid::effective().as_raw();
    if !meta.file_type().is_file() || meta.uid() != me || meta.nlink() != 1 {
        return Err(DaemonError::Config(format!(
            "the lock file {} is not a regular file of uid {me} with one link (uid {}, {} links): \
             another user may have planted it; remove it or choose a directory only you can write",
            path.display(),
            meta.uid(),
            meta.nlink()
        )));
    }
    Ok(file)
}

/// Refuses a socket directory that another user could swap under the daemon: the directory and
/// every directory above it, on the path as given and as it resolves, must belong to the
/// daemon's uid or root and be writable by no one else unless it has the sticky bit (as /tmp),
/// and any symlink on the way must belong to the daemon's uid or root. Otherwise whoever may
/// rename an entry on the way could replace the directory between the check and the bind, and
/// the socket's chown and chmod would reach a file of their choosing.
fn check_dir(dir: &Path) -> Result<(), DaemonError> {
    let me = nix::unistd::Uid::effective().as_raw();
    let dir = std::path::absolute(dir).map_err(|e| DaemonError::io(format!("resolving {}", dir.display()), e))?;
    let real = std::fs::canonicalize(&dir).map_err(|e| DaemonError::io(format!("resolving {}", dir.display()), e))?;
    for path in [&dir, &real] {
        for p in path.ancestors() {
            let meta =
                std::fs::symlink_metadata(p).map_err(|e| DaemonError::io(format!("inspecting {}", p.display()), e))?;
            let mode = meta.mode();
            let owned = meta.uid() == me || meta.uid() == 0;
            let writable_by_others = meta.is_dir() && mode & 0o022 != 0 && mode & 0o1000 == 0;
            if !owned || writable_by_others {
                return Err(DaemonError::Config(format!(
                    "{} (on the way to the socket's directory) is owned by uid {} with mode {:o}: every directory and \
                     symlink there must belong to uid {me} or root, and no directory be writable by others without the \
                     sticky bit (as /tmp)",
                    p.display(),
                    meta.uid(),
                    mode & 0o7777
                )));
            }
        }
    }
    Ok(())
}

fn take_lock(socket: &Path) -> Result<Flock<File>, DaemonError> {
    let path = lock_path(socket);
    let file = open_lock(&path)?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((mut file, Errno::EWOULDBLOCK)) => {
            let mut text = String::new();
            let _ = (&mut file).take(64).read_to_string(&mut text);
            return Err(DaemonError::AlreadyRunning {
                socket: socket.to_owned(),
                pid: text.trim().parse().ok(),
            });
        }
        Err((_, e)) => return Err(DaemonError::io(format!("locking {}", path.display()), e)),
    };
    // The holder's pid, for the refusal of a second daemon (information only: the lock decides).
    let written = lock
        .set_len(0)
        .and_then(|()| lock.seek(SeekFrom::Start(0)))
        .and_then(|_| writeln!(lock, "{}", std::process::id()));
    written.map_err(|e| DaemonError::io(format!("writing {}", path.display()), e))?;
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("preempt-sched-listen-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_second_daemon_is_refused_and_a_stale_socket_replaced() {
        let d = temp_dir("second");
        let sock = d.join("s.sock");
        let first = Listening::bind(&sock, None).unwrap();
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        match Listening::bind(&sock, None) {
            Err(DaemonError::AlreadyRunning { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("second bind: {other:?}"),
        }
        assert!(
            UnixStream::connect(&sock).is_ok(),
            "the first daemon's socket is still there"
        );
        drop(first);
        assert!(!sock.exists(), "dropped: the socket is unlinked");
        // A stale socket (bound, its daemon gone, never unlinked) is replaced.
        let stale = UnixListener::bind(&sock).unwrap();
        drop(stale);
        assert!(sock.exists());
        let again = Listening::bind(&sock, None).unwrap();
        assert!(UnixStream::connect(again.path()).is_ok());
        drop(again);
        // A live socket of a daemon that holds no lock is never unlinked.
        let foreign = UnixListener::bind(&sock).unwrap();
        assert!(matches!(
            Listening::bind(&sock, None),
            Err(DaemonError::AlreadyRunning { pid: None, .. })
        ));
        drop(foreign);
        std::fs::remove_file(&sock).unwrap();
        std::fs::write(&sock, b"not a socket").unwrap();
        assert!(matches!(Listening::bind(&sock, None), Err(DaemonError::Config(_))));
        assert!(sock.exists(), "a file that is not a socket is left alone");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
