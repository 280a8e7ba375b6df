//! The one file to attach to a bug report: a `.tar.gz` of the run's directory, written with the
//! `tar` and `flate2` crates (pure Rust: no `tar` program needed on the node, which a minimal
//! container may lack, and `report` reads archives in memory without unpacking them), replaced
//! only when complete ([`crate::atomic_file`]). Reading is bounded: a member, the members kept
//! and the bytes unpacked in all have limits, so a hostile or damaged archive cannot exhaust
//! memory.
use crate::atomic_file::AtomicFile;
use crate::error::{Context, Error};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::io::Read;
use std::path::Path;

/// Writes `dir` (its contents under `top/`) as a gzip'd tar at `dest`.
pub fn write(dir: &Path, top: &str, dest: &Path) -> Result<(), Error> {
    let written = || -> std::io::Result<()> {
        let file = AtomicFile::create(dest)?;
        let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
        tar.follow_symlinks(false);
        append_sorted(&mut tar, dir, Path::new(top))?;
        tar.into_inner()?.finish()?.commit()
    };
    written().with_context(|| format!("{}: cannot write the archive", dest.display()))
}

/// `dir` as `name/` and everything under it, in name order (so that `tar tf` lists a stage's
/// files together, and the stages in their order).
fn append_sorted<W: std::io::Write>(tar: &mut tar::Builder<W>, dir: &Path, name: &Path) -> std::io::Result<()> {
    tar.append_dir(name, dir)?;
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let (path, inner) = (e.path(), name.join(e.file_name()));
        if e.file_type()?.is_dir() {
            append_sorted(tar, &path, &inner)?;
        } else {
            tar.append_path_with_name(&path, &inner)?;
        }
    }
    Ok(())
}

/// Whether `path` names an archive this module reads (by its name).
pub fn is_archive(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.ends_with(".tar.gz") || name.ends_with(".tgz")
}

/// How much of an archive is read.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A member larger than this is listed as skipped, not read.
    pub member: u64,
    /// Members kept.
    pub members: usize,
    /// Bytes unpacked in all (kept or not): past it the archive is refused.
    pub unpacked: u64,
}

impl Limits {
    /// JSON results are small (a run of a million samples is ~100 MiB): 128 MiB per member, 10000
    /// members, 1 GiB unpacked (which bounds what is kept in memory too).
    pub const REPORT: Limits = Limits {
        member: 128 << 20,
        members: 10_000,
        unpacked: 1 << 30,
    };
}

/// The members of an archive that `wanted` selects, read into memory, and those left out.
#[derive(Debug, Default)]
pub struct Members {
    /// (path inside the archive, contents).
    pub kept: Vec<(String, Vec<u8>)>,
    /// (path, why it was left out).
    pub skipped: Vec<(String, String)>,
}

/// Counts what passes through, and fails past a limit (the decompressor's output, so that a
/// small archive that unpacks to terabytes is refused early).
struct Counted<R> {
    inner: R,
    n: u64,
    limit: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let got = self.inner.read(buf)?;
        self.n += got as u64;
        if self.n > self.limit {
            return Err(std::io::Error::other(format!(
                "unpacks to more than {} MiB: refused",
                self.limit >> 20
            )));
        }
        Ok(got)
    }
}

/// Reads the regular-file members of the archive at `path` whose path `wanted` accepts. The
/// error is a line of text: the fleet report keeps it as the archive's reason for being skipped.
pub fn read(path: &Path, wanted: impl Fn(&str) -> bool, limits: Limits) -> Result<Members, String> {
    let name = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{name}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{name}: not a regular file"));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let counted = Counted {
        inner: GzDecoder::new(std::io::BufReader::new(file)),
        n: 0,
        limit: limits.unpacked,
    };
    let mut archive = tar::Archive::new(counted);
    let mut out = Members::default();
    let bad = |e: std::io::Error| format!("{name}: not a readable .tar.gz: {e}");
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let member = entry.path().map_err(bad)?.to_string_lossy().into_owned();
        if !wanted(&member) {
            continue;
        }
        let size = entry.header().size().map_err(bad)?;
        if size > limits.member {
            out.skipped
                .push((member, format!("{size} bytes: larger than {} MiB", limits.member >> 20)));
            continue;
        }
        if out.kept.len() >= limits.members {
            out.skipped
                .push((member, format!("more than {} members: left out", limits.members)));
            continue;
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        (&mut entry).take(limits.member).read_to_end(&mut bytes).map_err(bad)?;
        out.kept.push((member, bytes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("preempt-lat-archive-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_directory_round_trips_and_only_wanted_members_are_read() {
        let d = scratch("round");
        let run = d.join("run");
        std::fs::create_dir_all(run.join("host/01-environment")).unwrap();
        std::fs::write(run.join("summary.json"), r#"{"tool":"x"}"#).unwrap();
        std::fs::write(run.join("host/01-environment/stage.json"), "{}").unwrap();
        std::fs::write(run.join("host/01-environment/stderr.txt"), "log").unwrap();
        let dest = d.join("run.tar.gz");
        write(&run, "run", &dest).unwrap();
        assert!(is_archive(&dest) && is_archive(Path::new("a.TGZ")) && !is_archive(Path::new("a.json")));
        let m = read(&dest, |p| p.ends_with(".json"), Limits::REPORT).unwrap();
        let mut names: Vec<&str> = m.kept.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["run/host/01-environment/stage.json", "run/summary.json"]);
        assert_eq!(
            m.kept.iter().find(|(n, _)| n == "run/summary.json").unwrap().1,
            br#"{"tool":"x"}"#
        );
        // No temporary file beside it.
        let left: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "{left:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn limits_hold_against_large_members_and_bombs() {
        let d = scratch("limits");
        let run = d.join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("big.json"), vec![b' '; 4096]).unwrap();
        std::fs::write(run.join("small.json"), "[]").unwrap();
        let dest = d.join("run.tar.gz");
        write(&run, "run", &dest).unwrap();
        let tight = Limits {
            member: 1024,
            members: 10,
            unpacked: 1 << 20,
        };
        let m = read(&dest, |_| true, tight).unwrap();
        assert_eq!(m.kept.len(), 1);
        assert_eq!(m.skipped.len(), 1);
        assert!(m.skipped[0].1.contains("larger than"), "{:?}", m.skipped);
        // Past the unpacked limit the archive is refused, whatever is kept.
        let e = read(
            &dest,
            |_| true,
            Limits {
                unpacked: 2048,
                ..tight
            },
        )
        .unwrap_err();
        assert!(e.contains("unpacks to more than"), "{e}");
        // Not an archive; not a regular file.
        std::fs::write(d.join("x.tar.gz"), "plain text").unwrap();
        assert!(
            read(&d.join("x.tar.gz"), |_| true, Limits::REPORT)
                .unwrap_err()
                .contains("not a readable")
        );
        assert!(
            read(&d, |_| true, Limits::REPORT)
                .unwrap_err()
                .contains("not a regular file")
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
