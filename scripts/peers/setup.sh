#!/usr/bin/env bash
# Installs the PyTorch peer's environment into .venv at the repository root
# (override with VENV=/some/dir). Idempotent: re-running only checks.
#
# Only PyPI is needed. Its Linux torch wheel is the CUDA build, so this pulls
# the nvidia-* wheels too (~5.4 GB installed, about a minute on a fast link);
# `pip install --no-deps torch` is not enough: libtorch.so links libtorch_cuda.so,
# which needs libcudart/libcublas/libcudnn/... at import time, even on CPU.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${VENV:-$root/.venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    echo "creating $venv" >&2
    "$python" -m venv "$venv"
fi
# Whether every version pinned in file $1 is installed (a local suffix such
# as +cu132 is ignored), so that pip is skipped entirely on re-runs.
pinned_ok() {
    "$venv/bin/python" - "$1" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, want = line.split("==")
        if version(name).split("+")[0] != want:
            sys.exit(1)
PY
}
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
pinned_ok "$here/requirements.txt" || "${pip[@]}" -r "$here/requirements.txt"
pinned_ok "$here/requirements-nodeps.txt" || "${pip[@]}" --no-deps -r "$here/requirements-nodeps.txt"
"$venv/bin/python" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "mkldnn available:", torch.backends.mkldnn.is_available())'
