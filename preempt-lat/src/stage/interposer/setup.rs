//! What the interposer stage needs before it can run the program: the libraries cargo built with
//! this executable (the interposer; on the host device also the stand-in runtime and the host
//! worker), the program compiled with the system's C compiler against HIP's headers, the delay
//! kernels' code object, and on a GPU the device made the program's device 0. A prerequisite
//! that is not there is a [`Missing`], whose line names what provides it.
use super::program::PROGRAM_SOURCE;
use crate::acceptance::runner::{self, Steps};
use crate::error::{Context, Error, failed};
use crate::measure::control::stop_requested;
use gpu_device::hip_rt;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The interposer, as `cargo build -p hip-interpose` names it.
pub const INTERPOSER_LIB: &str = "libpreempt_hip.so";
/// The stand-in HIP runtime (`cargo build -p hip-standin`).
pub const STANDIN_LIB: &str = "libhip_standin.so";
/// The names a HIP program may ask the loader for (hip-rt's `HIP_SONAMES` and the linker's
/// unversioned name): the stand-in answers to each on the host device.
const HIP_NAMES: [&str; 4] = [
    "libamdhip64.so",
    "libamdhip64.so.5",
    "libamdhip64.so.6",
    "libamdhip64.so.7",
];

/// A prerequisite that is not here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Missing {
    /// Files of the workspace that cargo has not built with this profile.
    #[error("{} not built (not in {dir} nor its deps/): `{command}`", files.join(", "))]
    NotBuilt {
        files: Vec<String>,
        dir: String,
        command: String,
    },
    #[error("no C compiler: `cc` is not on PATH ({provides})")]
    Compiler { provides: &'static str },
    #[error("HIP's headers are not found (hip/hip_runtime_api.h; looked in {looked}): {provides}")]
    Headers { looked: String, provides: &'static str },
}

/// What provides cc and the headers on each kind of device.
pub const HOST_PROVIDES: &str = "`sudo scripts/install-deps.sh build` installs gcc and libamdhip64-dev";
pub const GPU_PROVIDES_CC: &str = "install gcc, or put a C compiler on PATH as `cc`";
pub const GPU_PROVIDES_HEADERS: &str =
    "install ROCm's HIP development headers, or set ROCM_PATH to a ROCm install that has them";

/// A stage step's failure: a prerequisite missing, or something that went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error(transparent)]
    Missing(#[from] Missing),
    #[error(transparent)]
    Failed(#[from] Error),
}

/// `target/<profile>/`: where cargo put this executable, and so the workspace's other outputs of
/// the same profile.
pub fn profile_dir() -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| failed!("{}: no directory", exe.display()))
}

/// Each `(file, package)` as cargo built it beside this executable: in `dir` (what `cargo build`
/// leaves), else in `dir/deps/` (where `cargo test` leaves a cdylib); every one that is not
/// there named at once, with the one command that builds them all.
pub fn built(dir: &Path, wanted: &[(&str, &str)]) -> Result<Vec<PathBuf>, Missing> {
    let mut found = Vec::new();
    let mut missing: Vec<(&str, &str)> = Vec::new();
    for &(file, package) in wanted {
        match [dir.join(file), dir.join("deps").join(file)]
            .into_iter()
            .find(|p| p.is_file())
        {
            Some(p) => found.push(p),
            None => missing.push((file, package)),
        }
    }
    if missing.is_empty() {
        return Ok(found);
    }
    Err(Missing::NotBuilt {
        files: missing.iter().map(|(f, _)| f.to_string()).collect(),
        dir: dir.display().to_string(),
        command: build_command(missing.iter().map(|(_, p)| *p)),
    })
}

/// `cargo build [--release] -p A -p B`: this executable's own profile, so that the libraries are
/// found where it looks.
pub fn build_command<'a>(packages: impl IntoIterator<Item = &'a str>) -> String {
    let release = if cfg!(debug_assertions) { "" } else { " --release" };
    let mut c = format!("cargo build{release}");
    for p in packages {
        c.push_str(" -p ");
        c.push_str(p);
    }
    c
}

/// A directory outside the stage's (whose files all go into the archive): the compiled program,
/// the code object and the stand-in's links, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> Result<Scratch, Error> {
        let p = std::env::temp_dir().join(format!("preempt-lat-interposer-{}", std::process::id()));
        // A leftover of an earlier process of the same pid (one killed at its bound) goes first.
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).with_context(|| format!("{}: cannot create", p.display()))?;
        Ok(Scratch(p))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory in `scratch` where the stand-in answers to every libamdhip64 name (as
/// hip-testkit's `standin_dir` makes it for the tests): the program's `LD_LIBRARY_PATH`.
pub fn standin_dir(scratch: &Path, standin: &Path) -> Result<PathBuf, Error> {
    let dir = scratch.join("standin");
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    for name in HIP_NAMES {
        let link = dir.join(name);
        std::os::unix::fs::symlink(standin, &link).with_context(|| format!("{}: cannot link", link.display()))?;
    }
    Ok(dir)
}

/// How the program is linked against libamdhip64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// `-L DIR -lamdhip64`: the stand-in's directory (the loader finds it there again through
    /// `LD_LIBRARY_PATH`).
    Dir(PathBuf),
    /// The very file the device layer loaded, its directory the program's run path: the program
    /// runs on the runtime the rest of the acceptance run used.
    File(PathBuf),
}

/// The compile of the program: `cc -O2 -Wall -D__HIP_PLATFORM_AMD__ [-I INCLUDE] SOURCE -o OUT`
/// and the link.
#[derive(Debug, Clone)]
pub struct Compile {
    pub source: PathBuf,
    pub output: PathBuf,
    pub include: Option<PathBuf>,
    pub link: Link,
}

impl Compile {
    pub fn args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = ["-O2", "-Wall", "-D__HIP_PLATFORM_AMD__"]
            .into_iter()
            .map(OsString::from)
            .collect();
        if let Some(i) = &self.include {
            a.push("-I".into());
            a.push(i.into());
        }
        a.push(self.source.clone().into());
        a.push("-o".into());
        a.push(self.output.clone().into());
        match &self.link {
            Link::Dir(d) => {
                a.push("-L".into());
                a.push(d.into());
                a.push("-lamdhip64".into());
            }
            Link::File(f) => {
                a.push(f.into());
                if let Some(d) = f.parent() {
                    let mut rpath = OsString::from("-Wl,-rpath,");
                    rpath.push(d);
                    a.push(rpath);
                }
            }
        }
        a
    }

    /// Runs cc (bounded by `bound`), its command line and output written to `log`. A missing
    /// compiler or header is [`Missing`], with `looked` (where headers were looked for) and what
    /// provides each.
    pub fn run(
        &self,
        log: &Path,
        bound: Duration,
        looked: &str,
        provides: (&'static str, &'static str),
    ) -> Result<(), Problem> {
        let args = self.args();
        let line = super::program::shell_line(&[], Path::new("cc"), &args);
        let out = std::fs::File::create(log).with_context(|| log.display().to_string())?;
        let err = out.try_clone().with_context(|| log.display().to_string())?;
        {
            use std::io::Write;
            writeln!(&out, "{line}").with_context(|| log.display().to_string())?;
        }
        let mut cmd = Command::new("cc");
        cmd.args(&args).stdout(out).stderr(err);
        let ended = match runner::run(cmd, bound, &stop_requested, QUICK_STOP) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Missing::Compiler { provides: provides.0 }.into());
            }
            r => r.context("starting cc")?,
        };
        if ended.status.is_some_and(|s| s.success()) && !ended.over_bound {
            return Ok(());
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("hip_runtime_api.h") && (text.contains("No such file") || text.contains("not found")) {
            return Err(Missing::Headers {
                looked: looked.to_string(),
                provides: provides.1,
            }
            .into());
        }
        let first_error = text
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("(no error line)")
            .trim();
        Err(failed!(
            "compiling {PROGRAM_SOURCE} ({}): {first_error} (the whole output: {})",
            ended.describe(),
            log.file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
        )
        .into())
    }
}

/// How a child of the stage (cc, the program) is stopped at its bound or when the stage is
/// stopped: SIGTERM ends them (neither handles it), so the steps are short.
pub const QUICK_STOP: Steps = Steps {
    after_term: Duration::from_secs(3),
    after_second_term: Duration::from_secs(1),
    after_kill: Duration::from_secs(10),
};

/// Where HIP's headers may be for the library `hip` (the file the device layer loaded, found as
/// hip-rt finds it: `ROCM_PATH`'s install, then the loader's own search, then ROCm's default
/// install): its own install's `include` first (headers of the same version), then
/// `ROCM_PATH`'s, then the default install's; each once.
pub fn include_candidates(hip: &Path, rocm_path: Option<&str>) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    let own = hip.parent().and_then(Path::parent).map(|root| root.join("include"));
    let rocm = rocm_path
        .filter(|p| !p.is_empty())
        .map(|p| Path::new(p).join("include"));
    // ROCm's default install as hip-rt names it: its last candidate's install.
    let default = hip_rt::library_candidates(&hip_rt::HIP_SONAMES, None)
        .last()
        .and_then(|l| Path::new(l).parent()?.parent().map(|root| root.join("include")));
    for c in [own, rocm, default].into_iter().flatten() {
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}

/// The first candidate that holds `hip/hip_runtime_api.h` (none: cc's own search path, where a
/// distribution's packages put them).
pub fn include_dir(candidates: &[PathBuf]) -> Option<PathBuf> {
    candidates
        .iter()
        .find(|d| d.join("hip").join("hip_runtime_api.h").is_file())
        .cloned()
}

/// The file of the libamdhip64 mapped into this process (the text of its memory map, procfs'
/// `maps`): the real file behind whatever name the loader was given.
pub fn mapped_hip(maps: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            p.starts_with('/')
                && Path::new(p)
                    .file_name()
                    .is_some_and(|f| f.to_string_lossy().starts_with("libamdhip64.so"))
        })
        .map(PathBuf::from)
}

/// `HIP_VISIBLE_DEVICES` for the program so that `hip:index` (HIP's numbering in this
/// environment) is its device 0: `index` itself, or the index-th entry of the list HIP already
/// honours here (`HIP_VISIBLE_DEVICES`, else `CUDA_VISIBLE_DEVICES`, which HIP reads when the
/// first is unset). `ROCR_VISIBLE_DEVICES` (Slurm's) acts below HIP and is left as it is.
pub fn visible_device(index: u32, hip: Option<&str>, cuda: Option<&str>) -> Result<String, String> {
    let (name, list) = match (hip.filter(|s| !s.is_empty()), cuda.filter(|s| !s.is_empty())) {
        (Some(l), _) => ("HIP_VISIBLE_DEVICES", l),
        (None, Some(l)) => ("CUDA_VISIBLE_DEVICES", l),
        (None, None) => return Ok(index.to_string()),
    };
    list.split(',')
        .map(str::trim)
        .nth(index as usize)
        .map(str::to_string)
        .ok_or_else(|| format!("hip:{index} is not in {name}={list}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_line_links_the_stand_in_or_the_very_runtime_loaded() {
        let host = Compile {
            source: "/s/two_priorities.c".into(),
            output: "/t/two_priorities".into(),
            include: None,
            link: Link::Dir("/t/standin".into()),
        };
        let line = |c: &Compile| super::super::program::shell_line(&[], Path::new("cc"), &c.args());
        assert_eq!(
            line(&host),
            "cc -O2 -Wall -D__HIP_PLATFORM_AMD__ /s/two_priorities.c -o /t/two_priorities -L /t/standin -lamdhip64"
        );
        let gpu = Compile {
            include: Some("/opt/rocm-6.4.1/include".into()),
            link: Link::File("/opt/rocm-6.4.1/lib/libamdhip64.so.6.4.43484".into()),
            ..host
        };
        assert_eq!(
            line(&gpu),
            "cc -O2 -Wall -D__HIP_PLATFORM_AMD__ -I /opt/rocm-6.4.1/include /s/two_priorities.c -o /t/two_priorities \
             /opt/rocm-6.4.1/lib/libamdhip64.so.6.4.43484 -Wl,-rpath,/opt/rocm-6.4.1/lib"
        );
    }

    #[test]
    fn headers_are_looked_for_beside_the_runtime_then_as_hip_rt_looks_for_it() {
        let lib = Path::new("/opt/rocm-6.4.1/lib/libamdhip64.so.6");
        let c = |rocm| include_candidates(lib, rocm);
        assert_eq!(
            c(Some("/opt/rocm-7.0")),
            [
                PathBuf::from("/opt/rocm-6.4.1/include"),
                "/opt/rocm-7.0/include".into(),
                "/opt/rocm/include".into()
            ]
        );
        assert_eq!(c(Some("/opt/rocm-6.4.1")).len(), 2, "each once");
        assert_eq!(include_dir(&[PathBuf::from("/nonexistent")]), None);
        let maps = "7f00-7f01 r--p 0 fd:01 1 /usr/lib/libc.so.6\n\
                    7f02-7f03 r-xp 0 fd:01 2 /opt/rocm-6.4.1/lib/libamdhip64.so.6.4.43484\n\
                    7f04-7f05 rw-p 0 00:00 0\n";
        assert_eq!(
            mapped_hip(maps),
            Some(PathBuf::from("/opt/rocm-6.4.1/lib/libamdhip64.so.6.4.43484"))
        );
        assert_eq!(mapped_hip("7f00-7f01 r--p 0 fd:01 1 /usr/lib/libc.so.6\n"), None);
    }

    #[test]
    fn the_programs_device_0_is_the_stages_device() {
        assert_eq!(visible_device(3, None, None).as_deref(), Ok("3"));
        assert_eq!(visible_device(1, Some("4,6"), Some("0")).as_deref(), Ok("6"));
        assert_eq!(visible_device(0, Some(""), Some("5, 7")).as_deref(), Ok("5"));
        assert_eq!(
            visible_device(2, Some("4,6"), None),
            Err("hip:2 is not in HIP_VISIBLE_DEVICES=4,6".into())
        );
    }

    #[test]
    fn what_is_not_built_is_named_with_the_command_that_builds_it() {
        let dir = std::env::temp_dir().join(format!("preempt-lat-built-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("deps")).unwrap();
        std::fs::write(dir.join("deps").join(STANDIN_LIB), b"").unwrap();
        let found = built(&dir, &[(STANDIN_LIB, "hip-standin")]).unwrap();
        assert_eq!(
            found,
            [dir.join("deps").join(STANDIN_LIB)],
            "deps/ as cargo test leaves it"
        );
        let e = built(
            &dir,
            &[
                (INTERPOSER_LIB, "hip-interpose"),
                (STANDIN_LIB, "hip-standin"),
                ("x", "y"),
            ],
        )
        .unwrap_err();
        let release = if cfg!(debug_assertions) { "" } else { " --release" };
        assert_eq!(
            e.to_string(),
            format!(
                "libpreempt_hip.so, x not built (not in {} nor its deps/): `cargo build{release} -p hip-interpose -p y`",
                dir.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_header_not_found_is_missing_and_another_compile_error_a_failure() {
        if Command::new("cc").arg("--version").output().is_err() {
            eprintln!("SKIPPED: no cc here");
            return;
        }
        let dir = std::env::temp_dir().join(format!("preempt-lat-cc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let compile = |text: &str| {
            let source = dir.join("p.c");
            std::fs::write(&source, text).unwrap();
            let c = Compile {
                source,
                output: dir.join("p"),
                include: None,
                link: Link::Dir(dir.clone()),
            };
            c.run(
                &dir.join("compile.txt"),
                Duration::from_secs(60),
                "X",
                ("cc?", "headers?"),
            )
        };
        match compile("#include <no-such-dir/hip_runtime_api.h>\n") {
            Err(Problem::Missing(m)) => assert_eq!(
                m,
                Missing::Headers {
                    looked: "X".into(),
                    provides: "headers?"
                }
            ),
            other => panic!("{other:?}"),
        }
        match compile("int main(void) { return undeclared; }\n") {
            Err(Problem::Failed(e)) => {
                let e = e.to_string();
                assert!(e.starts_with("compiling two_priorities.c (exit status: 1): "), "{e}");
                assert!(
                    e.contains("undeclared") && e.ends_with("(the whole output: compile.txt)"),
                    "{e}"
                );
            }
            other => panic!("{other:?}"),
        }
        let log = std::fs::read_to_string(dir.join("compile.txt")).unwrap();
        assert!(log.starts_with("cc -O2 -Wall "), "the command line first: {log}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
