//! What `report` reads, and how much of it (issue 20 item 12: `report /dev/zero` read forever,
//! a FIFO blocked the read, any size was read whole). A file is read only if it is a regular file
//! of at most [`MAX_FILE_BYTES`], checked before it is opened (opening a device can do things)
//! and again on the open file (it may have been swapped since); it is opened non-blocking, so a
//! FIFO swapped in cannot block the open. A directory stands for its `*.json` entries. A file is
//! parsed as it is read, keeping only the members a row is made of ([`RESULT`]), one result at a
//! time: memory follows the rows kept, not the file (a run's JSON holds every sample).
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest file `report` reads: a run's JSON with the most samples a run takes (1000000) is
/// about 130 MB.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The most elements a list in a result may have (a sweep's runs, a priority run's modes).
pub const MAX_ELEMENTS: usize = 100_000;

/// The members of a result that a row reads (a run, an element of a sweep, a priority run):
/// everything else is skipped unread.
pub const RESULT: Shape = Shape::Obj(&[
    ("params", Shape::Obj(&[("level", SCALAR), ("t_ms", SCALAR)])),
    ("env", ENV),
    ("latency_ns", Shape::Obj(&[("suspend", STATS), ("hp_start", STATS)])),
    ("correctness", OK),
    ("modes", Shape::List(&MODE)),
    ("target_p99_ratio", SCALAR),
]);
const SCALAR: Shape = Shape::Scalar;
const ENV: Shape = Shape::Obj(&[
    ("device", SCALAR),
    ("mechanism", SCALAR),
    ("kernel", SCALAR),
    ("gfx_target", SCALAR),
    ("git_revision", SCALAR),
]);
const STATS: Shape = Shape::Obj(&[("p50", SCALAR), ("p99", SCALAR), ("max", SCALAR), ("count", SCALAR)]);
const OK: Shape = Shape::Obj(&[("ok", SCALAR)]);
const MODE: Shape = Shape::Obj(&[
    ("mode", SCALAR),
    ("mechanism", SCALAR),
    ("hp_latency_ns", STATS),
    ("hp_p99_vs_standalone", SCALAR),
    ("correctness", OK),
]);

/// What part of a JSON document is kept.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// A number, string, boolean or null (anything else there becomes null).
    Scalar,
    /// An object with these members, each of its shape.
    Obj(&'static [(&'static str, Shape)]),
    /// An array of elements of this shape, at most [`MAX_ELEMENTS`].
    List(&'static Shape),
}

/// What a path given to `report` stands for.
pub enum Given {
    File(PathBuf),
    /// A directory's `*.json` entries, by name.
    Dir(Vec<PathBuf>),
}

/// What `path` stands for; an error if it cannot be looked at.
pub fn given(path: &Path) -> io::Result<Given> {
    if !std::fs::metadata(path)?.is_dir() {
        return Ok(Given::File(path.to_path_buf()));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|x| x == "json"));
    files.sort();
    Ok(Given::Dir(files))
}

/// Why a file was not read, or not whole.
#[derive(Debug)]
pub enum NotRead {
    /// Not a regular file, too large, or unreadable: nothing of it was used.
    Refused(String),
    /// Not JSON (or not all of it): what was read before is kept.
    NotJson(String),
    /// `each` asked to stop, with its reason.
    Stopped(String),
}

/// Which part of a file a value handed to `each` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The document (an object, or anything else as null).
    Whole,
    /// An element of a document that is an array (a sweep's runs).
    Element,
}

/// Reads `path` if it is a regular file of at most [`MAX_FILE_BYTES`], handing `each` its
/// document (or each element of a top-level array) pruned to [`RESULT`].
pub fn results(path: &Path, each: &mut dyn FnMut(Value, Part) -> Result<(), String>) -> Result<(), NotRead> {
    let refused = |e: io::Error| NotRead::Refused(format!("cannot read: {e}"));
    check(&std::fs::metadata(path).map_err(refused)?)?;
    let file = File::options()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(refused)?;
    check(&file.metadata().map_err(refused)?)?;
    let mut counted = Counted { inner: file, n: 0 };
    let mut doc = Doc { each, stopped: None };
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(BufReader::new((&mut counted).take(MAX_FILE_BYTES + 1)));
        de.deserialize_any(&mut doc).and_then(|()| de.end())
    };
    if counted.n > MAX_FILE_BYTES {
        return Err(NotRead::Refused(too_large(counted.n)));
    }
    match (doc.stopped, parsed) {
        (Some(why), _) => Err(NotRead::Stopped(why)),
        (None, Err(e)) if e.is_io() => Err(NotRead::Refused(format!("cannot read: {e}"))),
        (None, Err(e)) => Err(NotRead::NotJson(e.to_string())),
        (None, Ok(())) => Ok(()),
    }
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

/// The document: an object (handed over whole) or an array (each element handed over as it is
/// parsed); `stopped` holds `each`'s reason if it asked to stop.
struct Doc<'a> {
    each: &'a mut dyn FnMut(Value, Part) -> Result<(), String>,
    stopped: Option<String>,
}

impl Doc<'_> {
    fn hand<E: de::Error>(&mut self, v: Value, part: Part) -> Result<(), E> {
        (self.each)(v, part).map_err(|why| {
            let e = E::custom(&why);
            self.stopped = Some(why);
            e
        })
    }
}

impl<'de> Visitor<'de> for &mut Doc<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON document")
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
        let v = Pruned(RESULT).visit_map(m)?;
        self.hand(v, Part::Whole)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while let Some(v) = s.next_element_seed(Pruned(RESULT))? {
            self.hand(v, Part::Element)?;
        }
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.hand(Value::Null, Part::Whole)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.hand(Value::Null, Part::Whole)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.hand(Value::Null, Part::Whole)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.hand(Value::Null, Part::Whole)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.hand(Value::Null, Part::Whole)
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.hand(Value::Null, Part::Whole)
    }
}

/// A value pruned to a [`Shape`]: what does not fit it is skipped unread (null in its place).
#[derive(Clone, Copy)]
struct Pruned(Shape);

impl Pruned {
    fn scalar(self, v: impl FnOnce() -> Value) -> Value {
        match self.0 {
            Shape::Scalar => v(),
            _ => Value::Null,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Pruned {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Pruned {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(self.scalar(|| Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(self.scalar(|| Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(self.scalar(|| Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(self.scalar(|| Value::from(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(self.scalar(|| Value::String(v.to_owned())))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let Shape::Obj(members) = self.0 else {
            while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        };
        let mut out = Map::new();
        while let Some(k) = m.next_key::<String>()? {
            match members.iter().find(|(name, _)| *name == k) {
                Some(&(_, shape)) => {
                    let v = m.next_value_seed(Pruned(shape))?;
                    out.insert(k, v);
                }
                None => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let Shape::List(elem) = self.0 else {
            while s.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        };
        let mut out = Vec::new();
        while let Some(v) = s.next_element_seed(Pruned(*elem))? {
            if out.len() == MAX_ELEMENTS {
                return Err(de::Error::custom(format!(
                    "a list of more than {MAX_ELEMENTS} elements"
                )));
            }
            out.push(v);
        }
        Ok(Value::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pruned(text: &str) -> Vec<(Value, Part)> {
        let dir = std::env::temp_dir().join(format!("preempt-lat-read-{}-{}", std::process::id(), text.len()));
        std::fs::write(&dir, text).unwrap();
        let mut got = Vec::new();
        results(&dir, &mut |v, part| {
            got.push((v, part));
            Ok(())
        })
        .unwrap();
        std::fs::remove_file(&dir).unwrap();
        got
    }

    /// Only what a row reads is kept: a run's samples and everything else are skipped unread.
    #[test]
    fn results_are_pruned_to_what_a_row_reads() {
        let run = json!({
            "params": {"level": 3, "t_ms": 0.5, "seed": 1},
            "env": {"device": "host", "mechanism": "sigstop", "kernel": "k", "git_revision": "x", "cores": 2},
            "latency_ns": {"suspend": {"p50": 1, "p99": 2, "max": 3, "count": 4, "mean": 1.5}, "resume": {"p99": 1}},
            "correctness": {"ok": true, "missing": [1, 2, 3]},
            "samples": [{"suspend_ns": 1}, {"suspend_ns": 2}],
        });
        let got = pruned(&run.to_string());
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, Part::Whole);
        assert_eq!(
            got[0].0,
            json!({
                "params": {"level": 3, "t_ms": 0.5},
                "env": {"device": "host", "mechanism": "sigstop", "kernel": "k", "git_revision": "x"},
                "latency_ns": {"suspend": {"p50": 1, "p99": 2, "max": 3, "count": 4}},
                "correctness": {"ok": true},
            })
        );
        let sweep = pruned(&json!([run, {"other": [1, 2]}, 7]).to_string());
        assert_eq!(sweep.iter().map(|g| g.1).collect::<Vec<_>>(), [Part::Element; 3]);
        assert_eq!((&sweep[1].0, &sweep[2].0), (&json!({}), &Value::Null));
        // Where a member is not of its shape, it is null.
        let odd = pruned(r#"{"params": [1, 2], "modes": {"x": 1}, "target_p99_ratio": {"a": 1}}"#);
        assert_eq!(
            odd[0].0,
            json!({"params": null, "modes": null, "target_p99_ratio": null})
        );
    }

    #[test]
    fn what_each_refuses_stops_the_read_with_its_reason() {
        let path = std::env::temp_dir().join(format!("preempt-lat-read-stop-{}", std::process::id()));
        std::fs::write(&path, "[{}, {}, {}]").unwrap();
        let mut n = 0;
        let r = results(&path, &mut |_, _| {
            n += 1;
            if n == 2 { Err("enough".into()) } else { Ok(()) }
        });
        assert!(matches!(r, Err(NotRead::Stopped(ref why)) if why == "enough"), "{r:?}");
        std::fs::write(&path, "{\"params\": ").unwrap();
        assert!(matches!(results(&path, &mut |_, _| Ok(())), Err(NotRead::NotJson(_))));
        std::fs::remove_file(&path).unwrap();
    }
}
