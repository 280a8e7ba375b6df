//! The environment stage: everything about the machine a bug report needs before any number
//! (kernel, amdgpu module and its parameters, KFD, ROCm installs, the HIP runtime, the GPUs and
//! which of them this process may see and open, the container), doctor's report beside it, and
//! the verdict that decides whether the other stages run: doctor's GPU path and gpu-device's
//! check of `hip:N`, or the host device's worker program.
use super::StageResult;
use crate::acceptance::summary::Status;
use crate::doctor::facts::{Fact, HipInfo};
use crate::error::{Error, failed};
use crate::options::Format;
use kfd::sysfs::SysRoot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Environment variables recorded, by prefix: the ROCm and HIP runtime's, the scheduler's (Slurm)
/// and ours. Nothing else of the environment is written (it may hold secrets).
const VARIABLES: [&str; 9] = [
    "ROCR_",
    "HIP_",
    "HSA_",
    "ROCM_",
    "CUDA_VISIBLE",
    "GPU_DEVICE_ORDINAL",
    "AMD_",
    "SLURM",
    "PREEMPT_",
];

/// What the environment stage found (its `stage.json` facts, and `environment.json`).
#[derive(Debug, Serialize)]
pub struct Environment {
    /// Kernel command-line words about the GPU or the IOMMU.
    pub kernel_cmdline_gpu: Vec<String>,
    pub amdgpu_module: Module,
    /// `$ROCM_PATH`, `/opt/rocm` and `/opt/rocm-*`, each with its `.info/version`.
    pub rocm: Vec<Install>,
    /// The HIP runtime's version as `major.minor.patch`.
    pub hip_version: Option<String>,
    /// `/dev/kfd` and `/dev/dri/renderD*`: mode, group, and whether this process opens them.
    pub device_nodes: Vec<DeviceNode>,
    /// The user's ids and groups (a GPU needs `video`/`render` for the device nodes).
    pub user: String,
    /// The variables that decide what the runtime sees ([`VARIABLES`]).
    pub variables: BTreeMap<String, String>,
    /// Signs of a container.
    pub container: Vec<String>,
    /// Doctor's note for a process that sees several GPUs.
    pub multi_gpu_note: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Module {
    pub version: Option<String>,
    pub srcversion: Option<String>,
    /// Every readable parameter.
    pub parameters: BTreeMap<String, String>,
    /// Parameters this user may not read.
    pub unreadable: Vec<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Install {
    pub path: String,
    pub version: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct DeviceNode {
    pub path: String,
    pub mode: String,
    pub gid: u32,
    /// `ok`, or why it does not open read-write.
    pub opens: String,
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn module(root: &Path) -> Module {
    let m = root.join("sys/module/amdgpu");
    let mut parameters = BTreeMap::new();
    let mut unreadable = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(m.join("parameters"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    names.sort();
    for n in names {
        let name = n.to_string_lossy().into_owned();
        match std::fs::read_to_string(m.join("parameters").join(&n)) {
            Ok(v) => {
                parameters.insert(name, v.trim().to_string());
            }
            Err(_) => unreadable.push(name),
        }
    }
    Module {
        version: read_trim(&m.join("version")),
        srcversion: read_trim(&m.join("srcversion")),
        parameters,
        unreadable,
    }
}

fn rocm(root: &Path, rocm_path: Option<&str>) -> Vec<Install> {
    let mut dirs: Vec<std::path::PathBuf> = rocm_path
        .map(|p| root.join(p.trim_start_matches('/')))
        .into_iter()
        .collect();
    dirs.push(root.join("opt/rocm"));
    let mut versioned: Vec<_> = std::fs::read_dir(root.join("opt"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rocm-")))
                .collect()
        })
        .unwrap_or_default();
    versioned.sort();
    dirs.extend(versioned);
    let mut seen = Vec::new();
    dirs.into_iter()
        .filter(|d| d.exists())
        .filter_map(|d| {
            let real = std::fs::canonicalize(&d).unwrap_or_else(|_| d.clone());
            if seen.contains(&real) {
                return None;
            }
            seen.push(real);
            Some(Install {
                path: format!("/{}", d.strip_prefix(root).unwrap_or(&d).display()),
                version: read_trim(&d.join(".info/version")),
            })
        })
        .collect()
}

fn device_nodes(root: &Path) -> Vec<DeviceNode> {
    let mut paths = vec![root.join("dev/kfd")];
    let mut render: Vec<_> = std::fs::read_dir(root.join("dev/dri"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("renderD"))
                })
                .collect()
        })
        .unwrap_or_default();
    render.sort();
    paths.extend(render);
    paths
        .into_iter()
        .map(|p| {
            let shown = format!("/{}", p.strip_prefix(root).unwrap_or(&p).display());
            match std::fs::metadata(&p) {
                Err(e) => DeviceNode {
                    path: shown,
                    mode: "-".into(),
                    gid: 0,
                    opens: format!("absent: {e}"),
                },
                Ok(m) => DeviceNode {
                    path: shown,
                    mode: format!("{:o}", m.permissions().mode() & 0o7777),
                    gid: m.gid(),
                    opens: match std::fs::File::options().read(true).write(true).open(&p) {
                        Ok(_) => "ok".into(),
                        Err(e) => e.to_string(),
                    },
                },
            }
        })
        .collect()
}

fn user(root: &Path) -> String {
    let status = std::fs::read_to_string(root.join("proc/self/status")).unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let groups_file = std::fs::read_to_string(root.join("etc/group")).unwrap_or_default();
    let name = |gid: &str| {
        groups_file
            .lines()
            .find(|l| l.split(':').nth(2) == Some(gid))
            .and_then(|l| l.split(':').next())
            .map_or_else(|| gid.to_string(), |n| format!("{n}({gid})"))
    };
    format!(
        "uid {} gid {} groups {}",
        field("Uid:").first().copied().unwrap_or("?"),
        field("Gid:").first().copied().unwrap_or("?"),
        field("Groups:").into_iter().map(name).collect::<Vec<_>>().join(",")
    )
}

fn container(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = ["/.dockerenv", "/run/.containerenv", "/singularity"]
        .into_iter()
        .filter(|p| root.join(p.trim_start_matches('/')).exists())
        .map(String::from)
        .collect();
    if let Some(c) = read_trim(&root.join("proc/1/cgroup")).filter(|c| {
        ["docker", "kubepods", "containerd", "libpod", "lxc"]
            .iter()
            .any(|k| c.contains(k))
    }) {
        v.push(format!("/proc/1/cgroup: {}", c.lines().next().unwrap_or("")));
    }
    v
}

/// Gathers the environment under `root` (`/`, or a fixture tree in tests); `vars` is the
/// process's environment.
pub fn gather(
    root: &Path,
    vars: impl Iterator<Item = (String, String)>,
    hip: &Fact<HipInfo>,
    gpus: usize,
) -> Environment {
    let variables: BTreeMap<String, String> = vars
        .filter(|(k, _)| VARIABLES.iter().any(|p| k.starts_with(p)))
        .collect();
    let cmdline = read_trim(&root.join("proc/cmdline")).unwrap_or_default();
    Environment {
        kernel_cmdline_gpu: cmdline
            .split_whitespace()
            .filter(|w| {
                ["amdgpu", "amdkfd", "kfd", "iommu", "amd_iommu"]
                    .iter()
                    .any(|k| w.contains(k))
            })
            .map(String::from)
            .collect(),
        amdgpu_module: module(root),
        rocm: rocm(root, variables.get("ROCM_PATH").map(String::as_str)),
        hip_version: hip.ok().map(|h| {
            let (a, b, c) = gpu_device::hip_rt::decode_version(h.runtime_version);
            format!("{a}.{b}.{c}")
        }),
        device_nodes: device_nodes(root),
        user: user(root),
        multi_gpu_note: crate::doctor::verdict::multi_gpu_note(
            gpus,
            variables.get("ROCR_VISIBLE_DEVICES").map(String::as_str),
            variables.get("HIP_VISIBLE_DEVICES").map(String::as_str),
        ),
        variables,
        container: container(root),
    }
}

/// Whether `device` can run its stages here: the reason it cannot, as every command gives it.
fn verdict(
    device: preempt_api::DeviceSpec,
    report: &crate::doctor::Report,
    env: &Environment,
) -> Result<String, Error> {
    use preempt_api::DeviceSpec;
    // By what the device is, so that a device like these joins their branch unchanged.
    if device.is_host() {
        return crate::host_direct::worker_exe().map(|w| {
            format!(
                "{device} device: worker program {}; {}",
                w.program.display(),
                report.summary
            )
        });
    }
    match device {
        DeviceSpec::Hip(n) => crate::gpu::runnable(&report.facts, n)
            .map(|()| {
                format!(
                    "hip:{n} can run: {} GPU node(s), KFD {}, HIP {}, amdgpu {}",
                    report.facts.gpu_nodes().len(),
                    report.facts.kfd_version.ok().map_or("-", String::as_str),
                    env.hip_version.as_deref().unwrap_or("-"),
                    env.amdgpu_module.version.as_deref().unwrap_or("(in-tree)")
                )
            })
            .map_err(|why| failed!("--device hip:{n}: cannot run: {why} (see `preempt-lat doctor`)")),
        _ => Err(failed!("internal: the stage needs host or hip:N, not {device}")),
    }
}

/// The stage: doctor's report (`doctor.txt`, `doctor.json`), the environment
/// (`environment.json`), and the verdict.
pub fn run(device: preempt_api::DeviceSpec, dir: &Path, hip: Fact<HipInfo>) -> StageResult {
    let report = crate::doctor::report(&SysRoot::default(), hip.clone());
    let gpus = report.facts.gpu_nodes().len();
    let env = gather(Path::new("/"), std::env::vars(), &hip, gpus);
    let mut problems = Vec::new();
    for (name, format) in [("doctor.txt", Format::Text), ("doctor.json", Format::Json)] {
        if let Err(e) = crate::atomic_file::write_file(&dir.join(name), |w| crate::output::export(format, &report, w)) {
            problems.push(e.to_string());
        }
    }
    if let Err(e) = crate::atomic_file::write_file(&dir.join("environment.json"), |w| {
        serde_json::to_writer_pretty(&mut *w, &env)?;
        writeln!(w)
    }) {
        problems.push(e.to_string());
    }
    let facts = serde_json::json!({
        "kernel": report.facts.kernel,
        "kfd_version": report.facts.kfd_version,
        "hip": report.facts.hip,
        "hip_version": env.hip_version,
        "gpus": report.facts.nodes,
        "gpu_usable": report.gpu_usable,
        "environment": env,
    });
    let (status, reason) = match verdict(device, &report, &env) {
        Ok(how) if problems.is_empty() => (Status::Pass, how),
        Ok(_) => (Status::Fail, problems.join("; ")),
        Err(why) => (Status::Fail, why.to_string()),
    };
    StageResult { status, reason, facts }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> std::path::PathBuf {
        let r = std::env::temp_dir().join(format!("preempt-lat-envfix-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&r);
        let w = |p: &str, s: &str| {
            let f = r.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, s).unwrap();
        };
        w("sys/module/amdgpu/version", "6.10.5\n");
        w("sys/module/amdgpu/parameters/cwsr_enable", "1\n");
        w("sys/module/amdgpu/parameters/sched_policy", "0\n");
        w("opt/rocm-6.4.1/.info/version", "6.4.1-120\n");
        w("opt/rocm-7.2.0/.info/version", "7.2.0\n");
        w(
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz root=/dev/sda1 amdgpu.cwsr_enable=1 iommu=pt quiet\n",
        );
        w(
            "proc/self/status",
            "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t44 109 1000\n",
        );
        w("etc/group", "video:x:44:u\nrender:x:109:u\nu:x:1000:\n");
        w("dev/dri/renderD128", "");
        w(".dockerenv", "");
        r
    }

    #[test]
    fn the_environment_is_read_from_the_tree_and_only_named_variables_are_kept() {
        let root = fixture();
        let vars = [
            ("ROCR_VISIBLE_DEVICES", "3"),
            ("ROCM_PATH", "/opt/rocm-6.4.1"),
            ("HOME", "/home/u"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("SLURM_ARRAY_TASK_ID", "3"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let hip = Fact::Ok(HipInfo {
            library: "libamdhip64.so".into(),
            origin: "opened".into(),
            runtime_version: 60_443_483,
            devices: Fact::Ok(8),
        });
        let e = gather(&root, vars.into_iter(), &hip, 8);
        assert_eq!(e.amdgpu_module.version.as_deref(), Some("6.10.5"));
        assert_eq!(
            e.amdgpu_module.parameters.get("cwsr_enable").map(String::as_str),
            Some("1")
        );
        assert_eq!(e.kernel_cmdline_gpu, ["amdgpu.cwsr_enable=1", "iommu=pt"]);
        let rocm: Vec<(&str, Option<&str>)> = e.rocm.iter().map(|i| (i.path.as_str(), i.version.as_deref())).collect();
        assert_eq!(
            rocm,
            [
                ("/opt/rocm-6.4.1", Some("6.4.1-120")),
                ("/opt/rocm-7.2.0", Some("7.2.0"))
            ],
            "ROCM_PATH first, each install once"
        );
        assert_eq!(e.hip_version.as_deref(), Some("6.4.43483"));
        let keys: Vec<&str> = e.variables.keys().map(String::as_str).collect();
        assert_eq!(keys, ["ROCM_PATH", "ROCR_VISIBLE_DEVICES", "SLURM_ARRAY_TASK_ID"]);
        assert_eq!(e.user, "uid 1000 gid 1000 groups video(44),render(109),u(1000)");
        assert_eq!(e.device_nodes[0].path, "/dev/kfd");
        assert!(e.device_nodes[0].opens.starts_with("absent"), "{:?}", e.device_nodes);
        assert_eq!(e.device_nodes[1].path, "/dev/dri/renderD128");
        assert_eq!(e.container, ["/.dockerenv"]);
        assert!(e.multi_gpu_note.is_none(), "restricted by ROCR_VISIBLE_DEVICES");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
