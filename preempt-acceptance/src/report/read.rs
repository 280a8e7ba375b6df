//! What `report` reads, and how much of it (otherwise `report /dev/zero` reads forever, a FIFO
//! blocks the read, and any size is read whole). A result file is read only if it is a regular file
//! of at most [`MAX_FILE_BYTES`], checked before it is opened (opening a device can do things) and
//! again on the open file (it may have been swapped since); it is opened non-blocking, so a FIFO
//! swapped in cannot block the open. It is parsed as it is read, without the runs' per-sample lists
//! (nothing reads them, and a run keeps up to a million) and with at most [`MAX_VALUES`] JSON
//! values: memory follows what is kept, not the file. A directory stands for its acceptance
//! archives and its `*.json` files.
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest file `report` reads: a run's JSON with the most samples a run takes (1000000) is
/// about 130 MB.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The most JSON values kept of one file (numbers, strings, arrays, objects): a result without
/// its samples holds hundreds; a sweep of a thousand points some hundred thousand.
pub const MAX_VALUES: usize = 1_000_000;

/// The member left unread wherever it is an array: a run's samples.
const SAMPLES: &str = "samples";

/// What a path given to `report` stands for.
pub enum Given {
    /// A file: a result, or an acceptance archive.
    File(PathBuf),
    /// A directory: whether it holds acceptance archives (read by `acceptance::fleet`), its
    /// `*.json` result files, by name, and the entries of either kind that are not regular
    /// files, with why they are left out.
    Dir {
        archives: bool,
        json: Vec<PathBuf>,
        left_out: Vec<(String, String)>,
    },
}

/// What `path` stands for; an error if it cannot be looked at.
pub fn given(path: &Path) -> io::Result<Given> {
    if !std::fs::metadata(path)?.is_dir() {
        return Ok(Given::File(path.to_path_buf()));
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    entries.sort();
    let (mut archives, mut json, mut left_out) = (false, Vec::new(), Vec::new());
    for p in entries {
        let archive = crate::acceptance::archive::is_archive(&p);
        if !archive && p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        match std::fs::metadata(&p)
            .map_err(|e| NotRead::Refused(format!("cannot read: {e}")))
            .and_then(|m| check(&m))
        {
            Err(NotRead::Refused(why) | NotRead::NotJson(why)) => left_out.push((p.display().to_string(), why)),
            Ok(()) if archive => archives = true,
            Ok(()) => json.push(p),
        }
    }
    Ok(Given::Dir {
        archives,
        json,
        left_out,
    })
}

/// Why a file was not read.
#[derive(Debug)]
pub enum NotRead {
    /// Not a regular file, too large, too many values, or unreadable.
    Refused(String),
    /// Not JSON.
    NotJson(String),
}

/// Reads the result file `path`: a regular file of at most [`MAX_FILE_BYTES`], its JSON without
/// the runs' samples, at most [`MAX_VALUES`] values of it.
pub fn result(path: &Path) -> Result<Value, NotRead> {
    let refused = |e: io::Error| NotRead::Refused(format!("cannot read: {e}"));
    check(&std::fs::metadata(path).map_err(refused)?)?;
    let file = File::options()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(refused)?;
    check(&file.metadata().map_err(refused)?)?;
    let mut counted = Counted { inner: file, n: 0 };
    let values = Cell::new(0usize);
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(BufReader::new((&mut counted).take(MAX_FILE_BYTES + 1)));
        Lean { values: &values }
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
    };
    if counted.n > MAX_FILE_BYTES {
        return Err(NotRead::Refused(too_large(counted.n)));
    }
    if values.get() > MAX_VALUES {
        return Err(NotRead::Refused(format!(
            "holds more than {MAX_VALUES} JSON values: not a preempt-lat result"
        )));
    }
    parsed.map_err(|e| match e.is_io() {
        true => NotRead::Refused(format!("cannot read: {e}")),
        false => NotRead::NotJson(e.to_string()),
    })
}

fn too_large(bytes: u64) -> String {
    format!("larger than report reads ({bytes} bytes; at most {MAX_FILE_BYTES})")
}

/// A regular file of at most [`MAX_FILE_BYTES`], or why not.
fn check(m: &Metadata) -> Result<(), NotRead> {
    let t = m.file_type();
    let kind = if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    };
    if let Some(kind) = kind {
        return Err(NotRead::Refused(format!(
            "not a regular file ({kind}): report reads result files"
        )));
    }
    if m.len() > MAX_FILE_BYTES {
        return Err(NotRead::Refused(too_large(m.len())));
    }
    Ok(())
}

/// Counts the bytes read through it.
struct Counted {
    inner: File,
    n: u64,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

/// A JSON value as `report` keeps it: `samples` arrays skipped unread, every value counted in
/// `values`, the parse stopped past [`MAX_VALUES`].
#[derive(Clone, Copy)]
struct Lean<'a> {
    values: &'a Cell<usize>,
}

impl Lean<'_> {
    fn count<E: de::Error>(self) -> Result<(), E> {
        self.values.set(self.values.get() + 1);
        if self.values.get() > MAX_VALUES {
            return Err(E::custom(format!("more than {MAX_VALUES} values")));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Lean<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Lean<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.count()?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.count()?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.count()?;
        Ok(Value::from(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.count()?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Null)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        self.count()?;
        let mut out = Map::new();
        while let Some(k) = m.next_key::<String>()? {
            let v = if k == SAMPLES {
                m.next_value_seed(NoArray(self))?
            } else {
                m.next_value_seed(self)?
            };
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        self.count()?;
        let mut out = Vec::new();
        while let Some(v) = s.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
}

/// A member kept as [`Lean`] unless it is an array, which is skipped unread (null in its place).
struct NoArray<'a>(Lean<'a>);

impl<'de> DeserializeSeed<'de> for NoArray<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoArray<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.visit_bool(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.0.visit_i64(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.visit_u64(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.visit_f64(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.visit_str(v)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.0.visit_unit()
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Value, A::Error> {
        self.0.visit_map(m)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_text(text: &str) -> Result<Value, NotRead> {
        let path = std::env::temp_dir().join(format!("preempt-lat-read-{}-{}", std::process::id(), text.len()));
        std::fs::write(&path, text).unwrap();
        let r = result(&path);
        std::fs::remove_file(&path).unwrap();
        r
    }

    /// A run's samples are skipped unread (in a run, and in each run of a sweep); everything else
    /// is kept as written, `samples` that is not an array too.
    #[test]
    fn results_are_read_without_their_samples() {
        let run = json!({
            "params": {"level": 3, "t_ms": 0.5, "samples": 300},
            "latency_ns": {"suspend": {"p50": 1, "p99": 2}},
            "samples": [{"suspend_ns": 1}, {"suspend_ns": 2}],
        });
        let kept = json!({
            "params": {"level": 3, "t_ms": 0.5, "samples": 300},
            "latency_ns": {"suspend": {"p50": 1, "p99": 2}},
            "samples": null,
        });
        assert_eq!(read_text(&run.to_string()).unwrap(), kept);
        assert_eq!(read_text(&json!([run, 7]).to_string()).unwrap(), json!([kept, 7]));
        assert!(matches!(read_text("{\"params\": "), Err(NotRead::NotJson(_))));
    }

    /// More values than a result holds are refused (a hostile file would take ~100 bytes of
    /// memory per value of a few bytes).
    #[test]
    fn a_file_of_too_many_values_is_refused() {
        let many = format!("[{}0]", "0,".repeat(MAX_VALUES));
        match read_text(&many) {
            Err(NotRead::Refused(why)) => assert!(why.contains("more than"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
