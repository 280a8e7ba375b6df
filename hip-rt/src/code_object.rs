//! What an AMDGPU code object says about its kernels: the metadata note (`NT_AMDGPU_METADATA`,
//! MessagePack, code object v3 and later) read from the ELF image. Pure, safe Rust; the launch
//! check ([`crate::Function::launch`]) relies on it, as HIP itself reads the same note to lay
//! out the kernel arguments.
//!
//! ```
//! let image = include_bytes!("../tests/fixtures/args-gfx90a.co");
//! let kernels = hip_rt::code_object::kernels(image).unwrap();
//! let fill = kernels.iter().find(|k| k.name == "fill").unwrap();
//! assert_eq!(fill.params.len(), 4); // (u64* out, u32 n, u64 value, float scale)
//! assert_eq!(fill.params[0].kind, hip_rt::code_object::ParamKind::GlobalBuffer);
//! ```

use crate::HipError;
use crate::msgpack::{self, Value};

/// The kind of an explicit kernel parameter (`.value_kind` of the metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamKind {
    /// A pointer to global memory (`global_buffer`).
    GlobalBuffer,
    /// A value copied into the kernarg segment (`by_value`).
    ByValue,
    /// Any other kind (images, samplers, pipes, dynamic LDS pointers...): not launchable here.
    Other(String),
}

/// One explicit parameter of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub kind: ParamKind,
    /// Bytes in the kernarg segment.
    pub size: u64,
    /// Offset in the kernarg segment.
    pub offset: u64,
    /// The source name, when the compiler kept it.
    pub name: Option<String>,
}

/// A kernel of a code object, with its explicit parameters in order (the hidden ones that the
/// runtime fills in itself are left out).
///
/// ```
/// use hip_rt::code_object::{kernels, ParamKind};
/// let k = kernels(include_bytes!("../tests/fixtures/args-gfx90a.co")).unwrap();
/// let sizes: Vec<u64> = k[0].params.iter().map(|p| p.size).collect();
/// assert_eq!(sizes, [8, 4, 8, 4]);
/// assert!(k[0].params[1..].iter().all(|p| p.kind == ParamKind::ByValue));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: String,
    pub params: Vec<Param>,
    /// What one work-item, wave and work-group of the kernel hold.
    pub resources: Resources,
}

impl KernelInfo {
    /// Whether a dispatch of this kernel needs scratch (private segment) memory: a fixed
    /// private segment or a dynamic stack. ROCr sizes a queue's scratch from what its dispatches
    /// need, so a queue that only runs kernels without it never gets any.
    pub fn uses_scratch(&self) -> bool {
        self.resources.private_segment_fixed_size > 0 || self.resources.uses_dynamic_stack
    }
}

/// A kernel's register, LDS and scratch use, as the compiler declared it in the metadata (the
/// keys of LLVM's AMDGPUUsage, "Code Object V3 Metadata"). A key the note lacks reads as 0: all
/// of them are required for code object v3 and later, `.agpr_count` only on targets with
/// AccVGPRs (gfx908, gfx90a, gfx94x).
///
/// ```
/// let k = hip_rt::code_object::kernels(include_bytes!("../tests/fixtures/args-gfx90a.co")).unwrap();
/// let r = &k[0].resources;
/// assert_eq!((r.wavefront_size, r.group_segment_fixed_size), (64, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    /// `.vgpr_count`: VGPRs per work-item; on gfx90a/gfx94x the unified total (ArchVGPRs rounded
    /// up to 4, plus AccVGPRs).
    pub vgpr_count: u64,
    /// `.agpr_count`: AccVGPRs per work-item.
    pub agpr_count: u64,
    /// `.sgpr_count`: SGPRs per wave.
    pub sgpr_count: u64,
    pub vgpr_spill_count: u64,
    pub sgpr_spill_count: u64,
    /// `.group_segment_fixed_size`: static LDS per work-group, in bytes.
    pub group_segment_fixed_size: u64,
    /// `.private_segment_fixed_size`: scratch per work-item, in bytes.
    pub private_segment_fixed_size: u64,
    /// `.max_flat_workgroup_size`: the largest work-group the kernel was compiled for.
    pub max_flat_workgroup_size: u64,
    pub wavefront_size: u64,
    /// `.uses_dynamic_stack`: the stack size is not known at compile time (scratch at run time).
    pub uses_dynamic_stack: bool,
}

impl Resources {
    fn read(k: &Value) -> Resources {
        let n = |key: &str| k.get(key).and_then(Value::as_u64).unwrap_or(0);
        Resources {
            vgpr_count: n(".vgpr_count"),
            agpr_count: n(".agpr_count"),
            sgpr_count: n(".sgpr_count"),
            vgpr_spill_count: n(".vgpr_spill_count"),
            sgpr_spill_count: n(".sgpr_spill_count"),
            group_segment_fixed_size: n(".group_segment_fixed_size"),
            private_segment_fixed_size: n(".private_segment_fixed_size"),
            max_flat_workgroup_size: n(".max_flat_workgroup_size"),
            wavefront_size: n(".wavefront_size"),
            uses_dynamic_stack: k.get(".uses_dynamic_stack").and_then(Value::as_bool).unwrap_or(false),
        }
    }
}

const EM_AMDGPU: u16 = 224;
const SHT_NOTE: u32 = 7;
const NT_AMDGPU_METADATA: u32 = 32;

fn bad(why: impl std::fmt::Display) -> HipError {
    HipError::Invalid(format!("code object: {why}"))
}

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o.checked_add(2)?)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o.checked_add(4)?)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<usize> {
    let v = u64::from_le_bytes(b.get(o..o.checked_add(8)?)?.try_into().ok()?);
    usize::try_from(v).ok()
}

/// The descriptors of every `AMDGPU` note of type `NT_AMDGPU_METADATA` in the image's SHT_NOTE
/// sections.
fn metadata_notes(image: &[u8]) -> Result<Vec<&[u8]>, HipError> {
    if image.len() < 64 || &image[..4] != b"\x7fELF" {
        return Err(bad("not an ELF image"));
    }
    if image[4] != 2 || image[5] != 1 || u16_at(image, 0x12) != Some(EM_AMDGPU) {
        return Err(bad("not a 64-bit little-endian AMDGPU ELF"));
    }
    let truncated = || bad("truncated ELF section table");
    let shoff = u64_at(image, 0x28).ok_or_else(truncated)?;
    let shentsize = usize::from(u16_at(image, 0x3a).ok_or_else(truncated)?);
    let shnum = usize::from(u16_at(image, 0x3c).ok_or_else(truncated)?);
    if shnum > 0 && shentsize < 0x28 {
        return Err(truncated());
    }
    let mut notes = Vec::new();
    for i in 0..shnum {
        let sh = i
            .checked_mul(shentsize)
            .and_then(|o| o.checked_add(shoff))
            .ok_or_else(truncated)?;
        if u32_at(image, sh + 4).ok_or_else(truncated)? != SHT_NOTE {
            continue;
        }
        let (off, size) = (
            u64_at(image, sh + 0x18).ok_or_else(truncated)?,
            u64_at(image, sh + 0x20).ok_or_else(truncated)?,
        );
        let sec = off
            .checked_add(size)
            .and_then(|end| image.get(off..end))
            .ok_or_else(|| bad("note section past the end of the image"))?;
        let mut p = 0usize;
        while p + 12 <= sec.len() {
            let (namesz, descsz, ty) = (
                u32_at(sec, p).unwrap_or(0) as usize,
                u32_at(sec, p + 4).unwrap_or(0) as usize,
                u32_at(sec, p + 8).unwrap_or(0),
            );
            let name_at = p + 12;
            let desc_at = name_at
                .checked_add(namesz.next_multiple_of(4))
                .ok_or_else(|| bad("bad note"))?;
            let next = desc_at
                .checked_add(descsz.next_multiple_of(4))
                .ok_or_else(|| bad("bad note"))?;
            let name = sec.get(name_at..name_at + namesz).ok_or_else(|| bad("bad note"))?;
            let desc = sec.get(desc_at..desc_at + descsz).ok_or_else(|| bad("bad note"))?;
            if ty == NT_AMDGPU_METADATA && name.split(|&b| b == 0).next() == Some(b"AMDGPU") {
                notes.push(desc);
            }
            p = next;
        }
    }
    Ok(notes)
}

fn param(v: &Value) -> Result<Option<Param>, HipError> {
    let kind = v
        .get(".value_kind")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("a kernel argument without .value_kind"))?;
    if kind.starts_with("hidden_") {
        return Ok(None);
    }
    let num = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("a kernel argument without {k}")))
    };
    Ok(Some(Param {
        kind: match kind {
            "global_buffer" => ParamKind::GlobalBuffer,
            "by_value" => ParamKind::ByValue,
            other => ParamKind::Other(other.to_string()),
        },
        size: num(".size")?,
        offset: num(".offset")?,
        name: v.get(".name").and_then(Value::as_str).map(str::to_string),
    }))
}

/// The kernels of a code object, from its (single) AMDGPU metadata note.
pub fn kernels(image: &[u8]) -> Result<Vec<KernelInfo>, HipError> {
    let notes = metadata_notes(image)?;
    let [note] = notes.as_slice() else {
        return Err(bad(format!(
            "{} AMDGPU metadata notes (expected exactly one; code object v2 is not supported)",
            notes.len()
        )));
    };
    let root = msgpack::decode(note)?;
    let list = root
        .get("amdhsa.kernels")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("metadata without amdhsa.kernels"))?;
    list.iter()
        .map(|k| {
            let name = k
                .get(".name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("a kernel without .name"))?;
            let args = match k.get(".args") {
                None => &[][..],
                Some(a) => a.as_array().ok_or_else(|| bad(".args is not an array"))?,
            };
            let params = args
                .iter()
                .map(param)
                .filter_map(Result::transpose)
                .collect::<Result<_, _>>()?;
            Ok(KernelInfo {
                name: name.to_string(),
                params,
                resources: Resources::read(k),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &[u8] = include_bytes!("../tests/fixtures/args-gfx90a.co");

    #[test]
    fn reads_the_explicit_parameters_of_every_kernel() {
        let k = kernels(FIXTURE).unwrap();
        let names: Vec<&str> = k.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["fill", "noargs", "scratchy"]);
        let shape: Vec<(ParamKind, u64, u64)> =
            k[0].params.iter().map(|p| (p.kind.clone(), p.size, p.offset)).collect();
        assert_eq!(
            shape,
            [
                (ParamKind::GlobalBuffer, 8, 0),
                (ParamKind::ByValue, 4, 8),
                (ParamKind::ByValue, 8, 16),
                (ParamKind::ByValue, 4, 24),
            ]
        );
        assert!(k[1].params.is_empty());
    }

    /// Whether a kernel needs scratch comes from its own metadata (the fixture's `scratchy` indexes
    /// a private array at run time: 272 bytes per work-item, as llvm-readelf-19 --notes reports).
    #[test]
    fn reads_whether_a_kernel_needs_scratch() {
        let k = kernels(FIXTURE).unwrap();
        assert_eq!(
            (
                k[0].resources.private_segment_fixed_size,
                k[0].resources.uses_dynamic_stack
            ),
            (0, false)
        );
        assert!(!k[0].uses_scratch() && !k[1].uses_scratch());
        assert_eq!(k[2].resources.private_segment_fixed_size, 272);
        assert!(k[2].uses_scratch());
    }

    #[test]
    fn reads_the_resources_of_every_kernel() {
        // The fixture's values, as `llvm-readelf-19 --notes tests/fixtures/args-gfx90a.co` prints them.
        let k = kernels(FIXTURE).unwrap();
        let want = |vgpr_count, sgpr_count| Resources {
            vgpr_count,
            agpr_count: 0,
            sgpr_count,
            vgpr_spill_count: 0,
            sgpr_spill_count: 0,
            group_segment_fixed_size: 0,
            private_segment_fixed_size: 0,
            max_flat_workgroup_size: 1024,
            wavefront_size: 64,
            uses_dynamic_stack: false,
        };
        assert_eq!(k[0].resources, want(4, 11));
        assert_eq!(k[1].resources, want(0, 4));
    }

    #[test]
    fn refuses_what_is_not_an_amdgpu_code_object() {
        assert!(kernels(b"not an elf").is_err());
        let mut x86 = FIXTURE.to_vec();
        x86[0x12] = 62; // EM_X86_64
        assert!(kernels(&x86).unwrap_err().to_string().contains("AMDGPU"));
        // Every truncation is an error (or, while the note is intact, the same answer): no panic.
        for n in (0..FIXTURE.len()).step_by(61) {
            let _ = kernels(&FIXTURE[..n]);
        }
        // The note's type changed: no metadata.
        let notes_at = FIXTURE.windows(7).position(|w| w == b"AMDGPU\0").unwrap();
        let mut no_meta = FIXTURE.to_vec();
        no_meta[notes_at - 4] = 33;
        assert!(
            kernels(&no_meta)
                .unwrap_err()
                .to_string()
                .contains("0 AMDGPU metadata notes")
        );
    }
}
