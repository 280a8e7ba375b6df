//! A small MessagePack reader, enough for the AMDGPU metadata note (maps, arrays, strings,
//! integers, booleans; floats and binaries are read and kept as opaque values).

use crate::HipError;

/// A decoded MessagePack value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Nil,
    Bool(bool),
    Int(i128),
    Str(String),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    /// A float, a binary or an extension: present, not interpreted.
    Other,
}

impl Value {
    /// The value of key `k` in a map.
    pub(crate) fn get(&self, k: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m
                .iter()
                .find(|(key, _)| matches!(key, Value::Str(s) if s == k))
                .map(|(_, v)| v),
            _ => None,
        }
    }
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub(crate) fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

fn bad(why: &str) -> HipError {
    HipError::Invalid(format!("code object metadata: {why}"))
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], HipError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| bad("truncated MessagePack"))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn uint(&mut self, n: usize) -> Result<u64, HipError> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }
    fn len(&mut self, n: usize) -> Result<usize, HipError> {
        usize::try_from(self.uint(n)?).map_err(|_| bad("length too large"))
    }
    fn string(&mut self, n: usize) -> Result<Value, HipError> {
        let s = self.take(n)?;
        Ok(Value::Str(String::from_utf8_lossy(s).into_owned()))
    }
    fn array(&mut self, n: usize, depth: u32) -> Result<Value, HipError> {
        // Every element is at least one byte: a length past the input is malformed.
        if n > self.b.len() - self.pos {
            return Err(bad("array longer than the input"));
        }
        (0..n)
            .map(|_| self.value(depth + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array)
    }
    fn map(&mut self, n: usize, depth: u32) -> Result<Value, HipError> {
        if n > self.b.len() - self.pos {
            return Err(bad("map longer than the input"));
        }
        (0..n)
            .map(|_| Ok((self.value(depth + 1)?, self.value(depth + 1)?)))
            .collect::<Result<_, _>>()
            .map(Value::Map)
    }
    fn value(&mut self, depth: u32) -> Result<Value, HipError> {
        if depth > 32 {
            return Err(bad("nested too deeply"));
        }
        let t = self.take(1)?[0];
        Ok(match t {
            0x00..=0x7f => Value::Int(i128::from(t)),
            0x80..=0x8f => return self.map(usize::from(t & 0x0f), depth),
            0x90..=0x9f => return self.array(usize::from(t & 0x0f), depth),
            0xa0..=0xbf => return self.string(usize::from(t & 0x1f)),
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.len(1 << (t - 0xc4))?;
                self.take(n)?;
                Value::Other
            }
            0xc7..=0xc9 => {
                let n = self.len(1 << (t - 0xc7))?;
                self.take(n.checked_add(1).ok_or_else(|| bad("length too large"))?)?;
                Value::Other
            }
            0xca => {
                self.take(4)?;
                Value::Other
            }
            0xcb => {
                self.take(8)?;
                Value::Other
            }
            0xcc..=0xcf => Value::Int(i128::from(self.uint(1 << (t - 0xcc))?)),
            0xd0..=0xd3 => {
                let n = 1usize << (t - 0xd0);
                let u = self.uint(n)?;
                // Sign-extend the n-byte value: move its top bit to bit 63, shift back arithmetically.
                let shift = 64 - (8u32 << (t - 0xd0));
                Value::Int(i128::from((u << shift).cast_signed() >> shift))
            }
            0xd4..=0xd8 => {
                self.take(1 + (1 << (t - 0xd4)))?;
                Value::Other
            }
            0xd9..=0xdb => {
                let n = self.len(1 << (t - 0xd9))?;
                return self.string(n);
            }
            0xdc | 0xdd => {
                let n = self.len(if t == 0xdc { 2 } else { 4 })?;
                return self.array(n, depth);
            }
            0xde | 0xdf => {
                let n = self.len(if t == 0xde { 2 } else { 4 })?;
                return self.map(n, depth);
            }
            0xe0..=0xff => Value::Int(i128::from(t.cast_signed())),
            0xc1 => return Err(bad("reserved MessagePack byte 0xc1")),
        })
    }
}

/// Decodes one value from the start of `b`.
pub(crate) fn decode(b: &[u8]) -> Result<Value, HipError> {
    Reader { b, pos: 0 }.value(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_formats_the_metadata_uses() {
        // {"a": [1, -1, 300, "xy", true, nil, 1.5f32], "b": {}}
        let b = [
            0x82, 0xa1, b'a', 0x97, 0x01, 0xff, 0xcd, 0x01, 0x2c, 0xa2, b'x', b'y', 0xc3, 0xc0, 0xca, 0x3f, 0xc0, 0x00,
            0x00, 0xa1, b'b', 0x80,
        ];
        let v = decode(&b).unwrap();
        let a = v.get("a").and_then(Value::as_array).unwrap();
        assert_eq!(a[0].as_u64(), Some(1));
        assert_eq!(a[1], Value::Int(-1));
        assert_eq!(a[2].as_u64(), Some(300));
        assert_eq!(a[3].as_str(), Some("xy"));
        assert_eq!((&a[4], &a[5], &a[6]), (&Value::Bool(true), &Value::Nil, &Value::Other));
        assert_eq!(v.get("b"), Some(&Value::Map(vec![])));
        assert_eq!(v.get("c"), None);
        assert_eq!(decode(&[0xd1, 0xff, 0x00]).unwrap(), Value::Int(-256));
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for b in [
            &[][..],
            &[0x92, 0x01],
            &[0xdd, 0xff, 0xff, 0xff, 0xff],
            &[0xdb, 0xff, 0xff, 0xff, 0xff],
            &[0xc1],
            &[0xa3, b'x'],
        ] {
            assert!(decode(b).is_err(), "{b:?}");
        }
        let deep = vec![0x91u8; 100];
        assert!(decode(&deep).is_err());
    }
}
