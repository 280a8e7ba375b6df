//! Files replaced only when complete: every result `preempt-lat` writes (`--out`, `--trace`, the
//! files in `--out-dir`) goes through here, so a run that is refused, fails or is killed leaves the
//! previous result in place and no half-written one. A destination that exists and is not a regular
//! file (`/dev/null`, `/dev/stdout`, a FIFO) is written in place and never replaced: renaming a
//! file onto it would replace the device node itself (as root, `--out /dev/full` would turn
//! /dev/full into a regular file).
use crate::error::{Context, Error};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A result file being written.
pub struct AtomicFile {
    dest: PathBuf,
    how: How,
    file: Option<BufWriter<File>>,
}

enum How {
    /// Under the temporary name `tmp` beside the destination, renamed onto it by
    /// [`AtomicFile::commit`]; dropped without a commit, the temporary file goes.
    Replace { tmp: PathBuf },
    /// In place (not a regular file), opened at the first write: opening a FIFO waits for its
    /// reader, which the check before a run must not consume.
    InPlace,
}

impl AtomicFile {
    /// Checks the destination and, for a regular file or a new one, creates the temporary file
    /// now (so that an unwritable place fails before a long run). A symbolic link is followed:
    /// the file it names is replaced, the link stays.
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
        match std::fs::metadata(dest) {
            Ok(m) if m.is_dir() => return Err(io::Error::new(io::ErrorKind::IsADirectory, "is a directory")),
            Ok(m) if !m.is_file() => {
                nix::unistd::access(dest, nix::unistd::AccessFlags::W_OK).map_err(io::Error::from)?;
                return Ok(AtomicFile {
                    dest: dest.to_path_buf(),
                    how: How::InPlace,
                    file: None,
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // A regular file (or none yet): replace the file a link names, not the link.
        let dest = std::fs::canonicalize(dest).unwrap_or_else(|_| dest.to_path_buf());
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "names no file"))?;
        let tmp = dest.with_file_name(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let file = File::options().write(true).create_new(true).open(&tmp)?;
        Ok(AtomicFile {
            dest,
            how: How::Replace { tmp },
            file: Some(BufWriter::new(file)),
        })
    }

    /// The open file, opening an in-place destination at its first use.
    fn file(&mut self) -> io::Result<&mut BufWriter<File>> {
        if self.file.is_none() {
            match self.how {
                How::InPlace => {
                    let f = File::options().write(true).open(&self.dest)?;
                    self.file = Some(BufWriter::new(f));
                }
                How::Replace { .. } => return Err(io::Error::other("already committed")),
            }
        }
        self.file.as_mut().ok_or_else(|| io::Error::other("not open"))
    }

    /// Flushes, and renames the temporary file onto the destination (in place: flushes only).
    pub fn commit(mut self) -> io::Result<()> {
        self.file()?.flush()?;
        if let How::Replace { tmp } = &self.how {
            if let Some(w) = &self.file {
                w.get_ref().sync_all()?;
            }
            // On an error the file is still held: dropping it removes the temporary file.
            std::fs::rename(tmp, &self.dest)?;
        }
        self.file = None;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file()?.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), Write::flush)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let How::Replace { tmp } = &self.how
            && self.file.take().is_some()
        {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Writes one file through `write`, replacing the destination only once it is complete.
pub fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Error> {
    write_io(path, write).with_context(|| format!("{}: cannot write", path.display()))
}

/// [`write_file`] with the bare I/O error, for a caller that says the file its own way.
pub fn write_io(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    write(&mut f)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_replaces_its_destination_only_when_complete() {
        let dir = std::env::temp_dir().join(format!("preempt-lat-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("r.json");
        std::fs::write(&dest, "previous").unwrap();
        // Dropped without a commit (an error, a kill mid-run): the previous result stays and no
        // temporary file is left.
        let mut f = AtomicFile::create(&dest).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "previous");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        write_file(&dest, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(AtomicFile::create(&dir).is_err(), "a directory is no file");
        assert!(
            AtomicFile::create(Path::new("/proc/version")).is_err(),
            "nowhere to write beside it"
        );
        // Through a link, the file it names is replaced and the link stays.
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&dest, &link).unwrap();
        write_file(&link, |w| w.write_all(b"linked")).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "linked");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What is not a regular file is written in place, never replaced: renaming onto it would
    /// replace the node itself (as root, `--out /dev/full` turned /dev/full into a regular file;
    /// a FIFO stands in for a device here, harmlessly).
    #[test]
    fn what_is_not_a_regular_file_is_written_in_place() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        let dir = std::env::temp_dir().join(format!("preempt-lat-atomic-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("out.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Checked without being opened: opening would take the reader the run's output is for.
        let f = AtomicFile::create(&fifo).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut s = String::new();
                File::open(fifo).unwrap().read_to_string(&mut s).unwrap();
                s
            })
        };
        let mut f = f;
        f.write_all(b"through the pipe").unwrap();
        f.commit().unwrap();
        // (Checked before the join: had it been replaced, the reader would wait forever.)
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "still a FIFO");
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file beside it"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
