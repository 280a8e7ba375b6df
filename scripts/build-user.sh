#!/usr/bin/env bash
# Builds the toolkit where its users are: an MI308X node or a ROCm container, as an ordinary
# user (no root, no apt). docs/building.md, "Building without root (ROCm nodes and containers)".
#
#   scripts/build-user.sh [--check] [--install-rust] [--install-maturin] [--no-python]
#
# What it does, in order, printing what it finds and one line per missing piece:
#   1. Rust: cargo on PATH (or in ~/.cargo/bin, where rustup puts it), at least the workspace's
#      rust-version. Missing: prints rustup's own installer command; --install-rust runs it.
#   2. Python (unless --no-python): the active environment, a venv (VIRTUAL_ENV) or a
#      conda/micromamba one (CONDA_PREFIX), its Python (>= 3.9) and maturin. Missing maturin:
#      prints the pip command; --install-maturin runs it (into that environment).
#   3. ROCm: $ROCM_PATH, /opt/rocm and /opt/rocm-*, and every libamdhip64 on LD_LIBRARY_PATH, with
#      their versions; which libamdhip64 preempt-lat and libpreempt_kfd will load (hip-rt's order,
#      hip-rt/src/loader.rs), and, when PyTorch is in the environment, that preempt_kfd uses
#      PyTorch's own HIP runtime after 'import torch' (hip-rt takes the runtime already in the
#      process first), and what a session opened before 'import torch' would load instead. The
#      build needs no ROCm: HIP is loaded at run time, and the host device runs without it.
#   4. Unless --check: cargo build --release of preempt-lat, the host device's worker, the HIP
#      interposer and its stand-in runtime (acceptance's interposer stage), then
#      maturin develop --release of the Python package into the active environment.
# --check stops after 3 (nothing is built or downloaded). Exit status: 0 when everything needed
# is there (and built), 1 when something is missing or a step failed, 2 on a bad option.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

check=0 install_rust=0 install_maturin=0 python=1
for a in "$@"; do
  case "$a" in
    --check) check=1 ;;
    --install-rust) install_rust=1 ;;
    --install-maturin) install_maturin=1 ;;
    --no-python) python=0 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-user: unknown option $a (expected --check, --install-rust, --install-maturin, --no-python)" >&2; exit 2 ;;
  esac
done

missing=()
say() { printf '%-8s %s\n' "$1" "$2"; }
miss() { say "$1" "MISSING: $2"; missing+=("$1"); }

# ---- 1. Rust ------------------------------------------------------------------------------
# rustup's documented installer (rustup.rs): installs into ~/.rustup and ~/.cargo, no root.
RUSTUP_CMD="curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal"
need_rust=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml | head -1)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
if ! command -v cargo >/dev/null && [ -x "$cargo_home/bin/cargo" ]; then
  PATH=$cargo_home/bin:$PATH   # rustup installed it, but this shell's PATH predates that
fi
if ! command -v cargo >/dev/null && [ "$install_rust" = 1 ] && [ "$check" = 0 ]; then
  say rust "cargo not found: running rustup's installer: $RUSTUP_CMD"
  if ! command -v curl >/dev/null; then
    miss rust "curl is needed to download rustup's installer; install Rust another way and rerun"
  elif sh -c "$RUSTUP_CMD"; then
    PATH=$cargo_home/bin:$PATH
  else
    miss rust "rustup's installer failed (above)"
  fi
fi
if command -v cargo >/dev/null; then
  rv=$(rustc --version 2>/dev/null | awk '{print $2}')
  if [ -n "$rv" ] && [ "$(printf '%s\n%s\n' "$need_rust" "${rv%%-*}" | sort -V | head -1)" = "$need_rust" ]; then
    say rust "ok: $(cargo --version) / rustc $rv (at $(command -v cargo); the workspace needs >= $need_rust)"
  else
    miss rust "rustc ${rv:-?} is older than the workspace's $need_rust (edition 2024): rustup update stable"
  fi
elif [[ ! " ${missing[*]} " =~ " rust " ]]; then
  miss rust "cargo not found (nor in $cargo_home/bin). Install Rust for this user, no root needed, with rustup's installer:"
  echo "           $RUSTUP_CMD"
  echo "         then open a new shell (or: . \"$cargo_home/env\") and rerun; or rerun with --install-rust to have this script run it"
fi

# rustc links through the C compiler driver `cc`; containers sometimes have gcc or clang only.
if command -v cc >/dev/null; then
  say linker "ok: $(command -v cc)"
elif alt=$(command -v gcc || command -v clang); then
  host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')
  if [ -n "$host" ]; then
    v=CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$host")_LINKER
    export "$v=$alt"
    say linker "no cc, using $alt ($v)"
  else
    say linker "no cc; $alt will be tried once rustc is there"
  fi
else
  miss linker "no C compiler (cc, gcc or clang): rustc needs one to link; ask for gcc on the node, or use a container that has it"
fi

# ---- 2. Python environment and maturin ------------------------------------------------------
PY="" env_kind="" env_dir="" torch_dir=""
if [ "$python" = 1 ]; then
  # A venv activated on top of a conda environment is the venv (its python comes first on PATH).
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    env_kind=venv env_dir=$VIRTUAL_ENV
  elif [ -n "${CONDA_PREFIX:-}" ] && [ -x "$CONDA_PREFIX/bin/python" ]; then
    env_kind="conda/micromamba" env_dir=$CONDA_PREFIX
  fi
  if [ -z "$env_kind" ]; then
    miss python "no active Python environment (VIRTUAL_ENV or CONDA_PREFIX): activate the one your programs use (micromamba activate ENV, conda activate ENV, or . VENV/bin/activate), or pass --no-python"
  else
    PY=$env_dir/bin/python
    pv=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)
    if "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
      say python "ok: Python $pv, $env_kind environment at $env_dir"
    else
      miss python "Python ${pv:-?} at $PY: preempt_kfd needs >= 3.9"
    fi
    # maturin: in the environment, on PATH, or as a module.
    MATURIN=()
    if [ -x "$env_dir/bin/maturin" ]; then MATURIN=("$env_dir/bin/maturin")
    elif command -v maturin >/dev/null; then MATURIN=(maturin)
    elif "$PY" -m maturin --version >/dev/null 2>&1; then MATURIN=("$PY" -m maturin)
    fi
    pip_cmd="$PY -m pip install 'maturin>=1.9,<2'"
    if [ "${#MATURIN[@]}" = 0 ] && [ "$install_maturin" = 1 ] && [ "$check" = 0 ]; then
      say maturin "not found: $pip_cmd"
      if sh -c "$pip_cmd" && [ -x "$env_dir/bin/maturin" ]; then MATURIN=("$env_dir/bin/maturin"); fi
    fi
    if [ "${#MATURIN[@]}" -gt 0 ]; then
      say maturin "ok: $("${MATURIN[@]}" --version 2>/dev/null) (${MATURIN[*]})"
    else
      miss maturin "not in the environment nor on PATH; install it into the environment (pyproject.toml asks for >=1.9,<2):"
      echo "           $pip_cmd"
      echo "         or rerun with --install-maturin to have this script run it"
    fi
    # PyTorch, found without importing it (seconds saved, nothing initialised).
    torch_dir=$("$PY" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else "")' 2>/dev/null)
  fi
fi

# ---- 3. ROCm and which libamdhip64 hip-rt loads ---------------------------------------------
# The version of a ROCm tree: .info/version, else the versioned libamdhip64 file, else its name.
rocm_version() {
  local d=$1 f
  if [ -r "$d/.info/version" ]; then head -1 "$d/.info/version"; return; fi
  f=$(ls "$d"/lib/libamdhip64.so.*.* 2>/dev/null | sort -V | tail -1)
  if [ -n "$f" ]; then echo "HIP ${f##*/libamdhip64.so.}"; return; fi
  echo "unknown version"
}
# The version a libamdhip64 file says in its real (versioned) name.
hip_file_version() {
  local r; r=$(readlink -f "$1" 2>/dev/null || echo "$1"); r=${r##*/}
  case "$r" in libamdhip64.so.*) echo "HIP ${r#libamdhip64.so.}" ;; *) echo "$r" ;; esac
}
IFS=: read -r -a ldp <<<"${LD_LIBRARY_PATH:-}"
rocms=()
[ -n "${ROCM_PATH:-}" ] && rocms+=("${ROCM_PATH%/}")
for d in /opt/rocm /opt/rocm-*; do [ -d "$d" ] && rocms+=("$d"); done
seen=""
for d in "${rocms[@]}"; do
  r=$(readlink -f "$d" 2>/dev/null || echo "$d")
  case " $seen " in *" $r "*) continue ;; esac
  seen="$seen $r"
  if [ -d "$d" ]; then
    say rocm "$d$([ "$r" != "$d" ] && echo " (-> $r)"): $(rocm_version "$d")$([ "$d" = "${ROCM_PATH%/}" ] && echo "  [ROCM_PATH]")"
  else
    say rocm "ROCM_PATH=$d does not exist"
  fi
done
for d in "${ldp[@]}"; do
  for f in "$d"/libamdhip64.so.[0-9]; do
    [ -e "$f" ] && say rocm "on LD_LIBRARY_PATH: $f ($(hip_file_version "$f"))"
  done
done
[ -z "$seen" ] && say rocm "none found (ROCM_PATH unset, no /opt/rocm*): the build does not need it; hip:N needs a HIP runtime at run time (the host device runs without)"

# hip-rt's candidates (hip-rt/src/loader.rs): $ROCM_PATH/lib/<soname> by path, then each soname
# through the dynamic loader (LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib), then /opt/rocm/lib.
SONAMES=(libamdhip64.so.7 libamdhip64.so.6 libamdhip64.so.5 libamdhip64.so)
candidates=()
[ -n "${ROCM_PATH:-}" ] && for s in "${SONAMES[@]}"; do candidates+=("${ROCM_PATH%/}/lib/$s"); done
for s in "${SONAMES[@]}"; do candidates+=("$s"); done
for s in "${SONAMES[@]}"; do candidates+=("/opt/rocm/lib/$s"); done
# Where the loader finds a bare soname (empty: nowhere).
find_soname() {
  local s=$1 d
  for d in "${ldp[@]}"; do [ -n "$d" ] && [ -e "$d/$s" ] && { echo "$d/$s"; return; }; done
  d=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | awk -v s="$s" '$1 == s && /x86-64/ {print $NF; exit}')
  [ -n "$d" ] && { echo "$d"; return; }
  for d in /lib /usr/lib /lib64 /usr/lib64; do [ -e "$d/$s" ] && { echo "$d/$s"; return; }; done
}
# What hip-rt opens in a process where no HIP runtime is loaded yet: its candidate and the file
# that is, tab-separated. (Where one is loaded, hip-rt uses that one: see the PyTorch lines.)
hip_rt_loads() {
  local c f
  for c in "${candidates[@]}"; do
    if [[ "$c" == */* ]]; then
      [ -e "$c" ] && { printf '%s\t%s\n' "$c" "$c"; return; }
    else
      f=$(find_soname "$c"); [ -n "$f" ] && { printf '%s\t%s\n' "$c" "$f"; return; }
    fi
  done
}
# "CANDIDATE" or "CANDIDATE = FILE" (a soname and where the loader finds it).
describe_load() {
  local c=${1%%$'\t'*} f=${1#*$'\t'}
  if [ "$c" = "$f" ]; then echo "$c"; else echo "$c = $f"; fi
}
# A libamdhip64's soname: from the file where readelf can read it, else from its (real) name.
hip_soname() {
  local so r
  so=$(readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p' | head -1)
  if [ -z "$so" ]; then
    r=$(readlink -f "$1" 2>/dev/null || echo "$1"); r=${r##*/}
    [[ "$r" =~ ^libamdhip64\.so\.([0-9]+) ]] && so=libamdhip64.so.${BASH_REMATCH[1]}
  fi
  echo "$so"
}
cli=$(hip_rt_loads)
if [ -n "$cli" ]; then
  say hip "preempt-lat and libpreempt_kfd will load $(describe_load "$cli") ($(hip_file_version "${cli#*$'\t'}"))"
else
  say hip "no libamdhip64 where hip-rt looks: hip:N will say so at run time (set ROCM_PATH to a ROCm tree)"
fi

if [ -n "$torch_dir" ]; then
  thip=$(sed -n "s/^hip *= *['\"]\([^'\"]*\)['\"].*/\1/p" "$torch_dir/version.py" 2>/dev/null | head -1)
  tlib=$(ls "$torch_dir"/lib/libamdhip64.so* 2>/dev/null | head -1)
  if [ -z "$thip" ] || [ "$thip" = None ] || [ -z "$tlib" ]; then
    say torch "PyTorch at $torch_dir without a bundled HIP runtime (hip ${thip:-?}): preempt_kfd loads as preempt-lat does"
  else
    # Its soname; ROCm's carries the ROCm major (libamdhip64.so.6 for 6.x).
    tso=$(readelf -d "$tlib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p' | head -1)
    [ -n "$tso" ] || tso=libamdhip64.so.${thip%%.*}
    say torch "PyTorch at $torch_dir, HIP $thip, its own $tlib (soname $tso)"
    # hip-rt takes a HIP runtime already in the process before any candidate
    # (docs/kfd-facts.md#one-hip-runtime-per-process): after 'import torch', PyTorch's.
    say hip "ok: in Python after 'import torch', preempt_kfd uses PyTorch's own HIP runtime ($tlib, already in the process), whatever ROCM_PATH and LD_LIBRARY_PATH say: one runtime"
    same() { [ -n "$1" ] && [ "$(readlink -f "$1")" = "$(readlink -f "$tlib")" ]; }
    alone=${cli#*$'\t'}
    if [ -n "$alone" ] && ! same "$alone"; then
      # The other order: a session on hip:N opened before 'import torch' opens hip-rt's choice;
      # PyTorch's libraries (linked against $tso) then use it when its soname is $tso, else load
      # their own beside it.
      if [ "$(hip_soname "$alone")" = "$tso" ]; then
        then_="PyTorch then runs on that runtime instead of its own HIP $thip (same soname $tso)"
      else
        then_="PyTorch then loads its own beside it: two HIP runtimes in one process, and a stream handle of one is meaningless to the other (torch.cuda.ExternalStream(lp.handle) would fail or crash)"
      fi
      say hip "WARNING: a preempt_kfd session on hip:N opened BEFORE 'import torch' loads $(describe_load "$cli") ($(hip_file_version "$alone")); $then_"
      fix=""
      for s in "${SONAMES[@]}"; do [ -e "$torch_dir/lib/$s" ] && { fix=$torch_dir; break; }; done
      if [ -n "$fix" ]; then
        echo "         fix: import torch before opening a hip:N session; or run those programs with ROCM_PATH=$fix, so that hip-rt opens PyTorch's own file in either order"
      else
        echo "         fix: import torch before opening a hip:N session"
      fi
    fi
  fi
fi

# ---- 4. Build ---------------------------------------------------------------------------------
if [ "${#missing[@]}" -gt 0 ]; then
  echo "build-user: missing: ${missing[*]} (see above)$([ "$check" = 0 ] && echo "; nothing was built")"
  exit 1
fi
if [ "$check" = 1 ]; then
  echo "build-user: --check: everything needed is there; rerun without --check to build"
  exit 0
fi
target=${CARGO_TARGET_DIR:-$REPO/target}
echo "==> cargo build --release --locked -p preempt-lat -p host-device -p hip-interpose -p hip-standin (target: $target)"
if ! cargo build --release --locked -p preempt-lat -p host-device -p hip-interpose -p hip-standin; then
  echo "build-user: cargo build failed (above)"; exit 1
fi
say built "$target/release/preempt-lat and its host-device worker $target/release/preempt-host-worker"
if [ "$python" = 1 ]; then
  echo "==> maturin develop --release --locked (into the $env_kind environment at $env_dir)"
  # maturin refuses to guess when both are set: hand it only the environment chosen above.
  if [ "$env_kind" = venv ]; then unset CONDA_PREFIX; else unset VIRTUAL_ENV; fi
  if ! (cd preempt-py && CARGO_TARGET_DIR=$target "${MATURIN[@]}" develop --release --locked); then
    echo "build-user: maturin develop failed (above)"; exit 1
  fi
  if ! where=$("$PY" -c 'import preempt_kfd; print(preempt_kfd.__file__)'); then
    echo "build-user: preempt_kfd was installed but does not import (above)"; exit 1
  fi
  say built "preempt_kfd in $env_dir ($where)"
fi
echo "build-user: done. Next: $target/release/preempt-lat doctor"
