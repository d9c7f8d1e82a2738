#!/usr/bin/env bash
# Python environment for flashattn's Python package: build backend, test tools
# and (optionally) PyTorch, all from PyPI. Idempotent: a second run installs
# nothing that is already there.
#
#   bash python/setup_env.sh                 # venv at .venv (or the active one), torch included
#   FLASHATTN_TORCH=none bash python/setup_env.sh   # NumPy-only: no torch
#   FLASHATTN_TORCH=lite bash python/setup_env.sh   # torch without PyPI's CUDA wheels (see below)
#   source .venv/bin/activate
#
# Environment:
#   FLASHATTN_VENV   venv folder (default: $VIRTUAL_ENV when one is active, else <repo>/.venv)
#   PYTHON           interpreter that creates the venv (default: python3)
#   FLASHATTN_TORCH  full (default) | lite | none
#       full: pip install torch==$TORCH_VERSION with its CUDA wheels from PyPI
#             (measured here: ~60 s, 4.6 GB on disk, 2 cores, no pip cache).
#       lite: torch --no-deps + its pure-Python deps + the three CUDA libraries
#             the machine's CUDA 13 toolkit lacks (cufile, cusparseLt, nvshmem);
#             the rest (cudart, cublas, cudnn, nccl, ...) are loaded from the
#             toolkit found through ld.so.conf. ~30 s, 1.7 GB. Falls back to
#             full when `import torch` then fails.
#   TORCH_VERSION    default 2.11.0 (the H200 machine's)
#
# torch is installed with --no-cache-dir: pip would otherwise keep a second
# copy of the downloaded wheels (about 3 GB for full) in ~/.cache/pip, and a
# CI run once failed with "No space left on device" in this step. The free
# space is logged before the install for the same reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FLASHATTN_VENV:-${VIRTUAL_ENV:-$ROOT/.venv}}"
PYTHON="${PYTHON:-python3}"
MODE="${FLASHATTN_TORCH:-full}"
TORCH_VERSION="${TORCH_VERSION:-2.11.0}"

log() { echo "[setup_env] $*"; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating venv $VENV with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check -q)
TORCH_PIP=("${PIP[@]}" install --no-cache-dir)
free_space() { df -Ph "$VENV" | awk 'NR == 2 { print $4 " free on " $6 }'; }

have() { "$PY" - "$@" <<'EOF' 2>/dev/null
import importlib.metadata as md, sys
for spec in sys.argv[1:]:
    name, _, ver = spec.partition("==")
    try:
        got = md.version(name)
    except md.PackageNotFoundError:
        sys.exit(1)
    if ver and got.split("+")[0] != ver:
        sys.exit(1)
EOF
}

BASE=(numpy pytest scikit-build-core ninja ml_dtypes)
if ! have "${BASE[@]}"; then
  log "installing ${BASE[*]}"
  "${PIP[@]}" install "${BASE[@]}"
fi

torch_ok() { "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_VERSION' else 1)" >/dev/null 2>&1; }

install_full() {
  log "installing torch==$TORCH_VERSION with its CUDA wheels (full; needs ~5 GB, $(free_space))"
  local t0=$SECONDS
  "${TORCH_PIP[@]}" "torch==$TORCH_VERSION"
  log "torch installed in $((SECONDS - t0)) s"
}

install_lite() {
  log "installing torch==$TORCH_VERSION without PyPI's CUDA stack (lite; needs ~2 GB, $(free_space); pip will warn about the CUDA wheels it leaves out)"
  local t0=$SECONDS
  "${TORCH_PIP[@]}" --no-deps "torch==$TORCH_VERSION"
  # torch's pure-Python requirements (its METADATA, less the CUDA wheels).
  "${PIP[@]}" install filelock "typing-extensions>=4.10.0" "setuptools<82" "sympy>=1.13.3" \
    "networkx>=2.5.1" jinja2 "fsspec>=0.8.5"
  "${TORCH_PIP[@]}" --no-deps "nvidia-cufile==1.15.1.6.*" "nvidia-cusparselt-cu13==0.8.0" \
    "nvidia-nvshmem-cu13==3.4.5"
  log "torch (lite) installed in $((SECONDS - t0)) s"
}

case "$MODE" in
  none) log "FLASHATTN_TORCH=none: torch not installed (torch tests will skip)" ;;
  full)
    torch_ok || install_full ;;
  lite)
    if ! torch_ok; then
      install_lite
      if ! torch_ok; then
        log "import torch failed after the lite install; falling back to the full install"
        "$PY" -c "import torch" 2>&1 | tail -3 || true
        install_full
      fi
    fi ;;
  *) echo "FLASHATTN_TORCH must be full, lite or none (got '$MODE')" >&2; exit 2 ;;
esac

if [[ "$MODE" != none ]]; then
  torch_ok || { echo "[setup_env] torch $TORCH_VERSION does not import" >&2; exit 1; }
  log "$("$PY" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available())' 2>/dev/null)"
fi
log "ready: $VENV"
