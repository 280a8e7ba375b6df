//! Files replaced only when complete: every result `preempt-lat` writes (`--out`, `--trace`,
//! the files in `--out-dir`) goes through here, so a run that is refused, fails or is killed
//! leaves the previous result in place and no half-written one.
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A file written under a temporary name beside its destination (`.<name>.tmp-<pid>`) and
/// renamed onto it by [`AtomicFile::commit`]: a run that fails or is killed leaves whatever was
/// there before. Dropped without a commit, the temporary file goes.
pub struct AtomicFile {
    dest: PathBuf,
    tmp: PathBuf,
    file: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Creates the temporary file now (so an unwritable place fails before a long run).
    pub fn create(dest: &Path) -> io::Result<AtomicFile> {
        if dest.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "is a directory"));
        }
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "names no file"))?;
        let tmp = dest.with_file_name(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let file = File::options().write(true).create_new(true).open(&tmp)?;
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            tmp,
            file: Some(BufWriter::new(file)),
        })
    }

    /// Flushes and renames the temporary file onto the destination.
    pub fn commit(mut self) -> io::Result<()> {
        if let Some(mut f) = self.file.take() {
            f.flush()?;
            f.get_ref().sync_all()?;
        }
        std::fs::rename(&self.tmp, &self.dest)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.file {
            Some(f) => f.write(buf),
            None => Err(io::Error::other("already committed")),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), Write::flush)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes one file through `write`, replacing the destination only once it is complete.
pub fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), String> {
    let e = |e: io::Error| format!("{}: cannot write: {e}", path.display());
    let mut f = AtomicFile::create(path).map_err(e)?;
    write(&mut f).map_err(e)?;
    f.commit().map_err(e)
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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
