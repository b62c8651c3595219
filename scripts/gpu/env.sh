# shellcheck shell=bash
# Puts the folders holding cuDNN 9, cuBLAS/cuBLASLt and NVRTC (and NCCL,
# which only the multi-GPU commands need) on LD_LIBRARY_PATH; cnnbench loads them at run time (cudarc's dynamic loading).
#
#   . scripts/gpu/env.sh          (source it; safe under `set -u` and `set -e`)
#
# Where it looks, in order:
#   1. Python's pip packages: every folder of the `nvidia` namespace package
#      (nvidia.__path__, then nvidia/cudnn/lib, nvidia/cublas/lib,
#      nvidia/cuda_nvrtc/lib, CUDA 13's nvidia/cu13/lib, ...) and torch/lib,
#      asked of ${PYTHON:-python3} (torch is located, not imported);
#   2. only when Python finds none of them: a bounded look at the usual places
#      (/usr/local/cuda*/lib64, /usr/lib/x86_64-linux-gnu, /usr/lib64,
#      $CONDA_PREFIX/lib, /opt/conda/lib, the nvidia/*/lib folders of
#      $VIRTUAL_ENV, this checkout's .venv, conda's and the system's Python,
#      ~/.cache/cnnbench/nvidia-libs), never `find /`.
# It keeps one CUDA major: the driver's (nvidia-smi's "CUDA Version: 13.0")
# where cuBLAS or NVRTC of that major were found, else the highest found
# below it, else the highest found; folders whose cuBLAS/NVRTC are of
# another major are dropped. cuDNN 9 comes from the first folder holding it.
#
# Prints nothing when everything is found, else one line on stderr, e.g.
#   env.sh: missing libnvrtc.so.13 (pip install nvidia-cuda-nvrtc)
# It never exits the shell that sources it. Exports CNNBENCH_CUDA_MAJOR (the
# major kept) and CNNBENCH_LIB_DIRS (the folders it added, colon-separated).

_cb_nl='
'
_cb_dirs=""   # candidate folders, one per line
_cb_keep=""   # folders kept, one per line

# _cb_in LIST ITEM: is ITEM a line of LIST?
_cb_in() {
    case "$_cb_nl$1$_cb_nl" in
        *"$_cb_nl$2$_cb_nl"*) return 0 ;;
    esac
    return 1
}
# _cb_add_dir DIR: remember DIR when it holds one of the libraries.
_cb_add_dir() {
    for _cb_f in "$1"/libcudnn.so.9 "$1"/libcublas.so.1[0-9] "$1"/libcublasLt.so.1[0-9] \
        "$1"/libnvrtc.so.1[0-9] "$1"/libnccl.so.2; do
        if [ -e "$_cb_f" ]; then
            _cb_in "$_cb_dirs" "$1" || _cb_dirs="$_cb_dirs${_cb_dirs:+$_cb_nl}$1"
            return 0
        fi
    done
    return 0
}
# _cb_has NAME: is NAME in a kept folder?
_cb_has() {
    while IFS= read -r _cb_k; do
        [ -n "$_cb_k" ] && [ -e "$_cb_k/$1" ] && return 0
    done << EOF
$_cb_keep
EOF
    return 1
}

# 1. Python.
_cb_py=${PYTHON:-python3}
_cb_pyout=""
if command -v "$_cb_py" > /dev/null 2>&1; then
    _cb_pyout=$("$_cb_py" - 2> /dev/null << 'PY' || true
import importlib.util, os
roots = []
try:
    import nvidia  # a namespace package: one folder per site-packages
    roots += [os.path.realpath(p) for p in nvidia.__path__]
except Exception:
    pass
try:
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        roots += [os.path.join(os.path.realpath(p), "lib") for p in spec.submodule_search_locations]
except Exception:
    pass
seen = set()
for root in roots:
    if not os.path.isdir(root):
        continue
    for d in [root] + sorted(os.path.join(root, e, "lib") for e in os.listdir(root)):
        if d not in seen and os.path.isdir(d):
            seen.add(d)
            print(d)
PY
)
fi
while IFS= read -r _cb_d; do
    [ -n "$_cb_d" ] && _cb_add_dir "$_cb_d"
done << EOF
$_cb_pyout
EOF

# 2. The usual places, only when Python found nothing.
if [ -z "$_cb_dirs" ]; then
    _cb_repo=$(cd "$(dirname "${BASH_SOURCE:-$0}")/../.." 2> /dev/null && pwd) || _cb_repo=/nonexistent
    for _cb_d in /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib \
        /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 \
        "${CONDA_PREFIX:-/nonexistent}/lib" /opt/conda/lib \
        "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages/nvidia/*/lib \
        "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages/torch/lib \
        "$_cb_repo"/.venv/lib/python3*/site-packages/nvidia/*/lib \
        "${CONDA_PREFIX:-/nonexistent}"/lib/python3*/site-packages/nvidia/*/lib \
        /opt/conda/lib/python3*/site-packages/nvidia/*/lib \
        /usr/local/lib/python3*/dist-packages/nvidia/*/lib \
        /usr/local/lib/python3*/site-packages/nvidia/*/lib \
        /usr/lib/python3/dist-packages/nvidia/*/lib \
        "${HOME:-/nonexistent}"/.local/lib/python3*/site-packages/nvidia/*/lib \
        "${HOME:-/nonexistent}"/.cache/cnnbench/nvidia-libs/nvidia/*/lib; do
        [ -d "$_cb_d" ] && _cb_add_dir "$_cb_d"
    done
fi

# The driver's CUDA major, as nvidia-smi prints it ("CUDA Version: 13.0").
_cb_driver=""
if command -v nvidia-smi > /dev/null 2>&1; then
    if command -v timeout > /dev/null 2>&1; then _cb_smi="timeout 20 nvidia-smi"; else _cb_smi=nvidia-smi; fi
    _cb_driver=$($_cb_smi 2> /dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -n 1) || _cb_driver=""
fi
# The majors of the cuBLAS and NVRTC found, highest first.
_cb_majors=$(while IFS= read -r _cb_d; do
    [ -n "$_cb_d" ] || continue
    for _cb_f in "$_cb_d"/libcublas.so.1[0-9] "$_cb_d"/libcublasLt.so.1[0-9] "$_cb_d"/libnvrtc.so.1[0-9]; do
        if [ -e "$_cb_f" ]; then echo "${_cb_f##*.so.}"; fi
    done
done << EOF | sort -rnu
$_cb_dirs
EOF
)
CNNBENCH_CUDA_MAJOR=""
for _cb_m in $_cb_majors; do
    if [ -z "$_cb_driver" ] || [ "$_cb_m" -le "$_cb_driver" ]; then
        CNNBENCH_CUDA_MAJOR=$_cb_m
        break
    fi
done
if [ -z "$CNNBENCH_CUDA_MAJOR" ]; then
    # None at or below the driver's: the highest found; with none at all,
    # the driver's, else 13 (cnnbench's bindings are built for CUDA 13).
    for _cb_m in $_cb_majors; do
        CNNBENCH_CUDA_MAJOR=$_cb_m
        break
    done
fi
[ -n "$CNNBENCH_CUDA_MAJOR" ] || CNNBENCH_CUDA_MAJOR=${_cb_driver:-13}
export CNNBENCH_CUDA_MAJOR

# Keep the folders of that major, and the first folder holding cuDNN 9
# with no other major's cuBLAS/NVRTC beside it.
_cb_cudnn=""
while IFS= read -r _cb_d; do
    [ -n "$_cb_d" ] || continue
    _cb_mine=0
    _cb_other=0
    for _cb_f in "$_cb_d"/libcublas.so.1[0-9] "$_cb_d"/libcublasLt.so.1[0-9] "$_cb_d"/libnvrtc.so.1[0-9]; do
        [ -e "$_cb_f" ] || continue
        if [ "${_cb_f##*.so.}" = "$CNNBENCH_CUDA_MAJOR" ]; then _cb_mine=1; else _cb_other=1; fi
    done
    if [ "$_cb_mine" = 1 ] || { [ "$_cb_other" = 0 ] && [ -z "$_cb_cudnn" ]; }; then
        [ -e "$_cb_d/libcudnn.so.9" ] && [ -z "$_cb_cudnn" ] && _cb_cudnn=$_cb_d
        if [ "$_cb_mine" = 1 ] || [ "$_cb_cudnn" = "$_cb_d" ]; then
            _cb_keep="$_cb_keep${_cb_keep:+$_cb_nl}$_cb_d"
        fi
    fi
done << EOF
$_cb_dirs
EOF
# The first folder holding NCCL (pip's nvidia/nccl/lib has nothing else).
while IFS= read -r _cb_d; do
    if [ -n "$_cb_d" ] && [ -e "$_cb_d/libnccl.so.2" ]; then
        _cb_in "$_cb_keep" "$_cb_d" || _cb_keep="$_cb_keep${_cb_keep:+$_cb_nl}$_cb_d"
        break
    fi
done << EOF
$_cb_dirs
EOF
# A cuDNN found only beside another major's cuBLAS (a system CUDA) is
# better than none.
if [ -z "$_cb_cudnn" ]; then
    while IFS= read -r _cb_d; do
        if [ -n "$_cb_d" ] && [ -e "$_cb_d/libcudnn.so.9" ]; then
            _cb_keep="$_cb_keep${_cb_keep:+$_cb_nl}$_cb_d"
            break
        fi
    done << EOF
$_cb_dirs
EOF
fi

# What is still missing, in one line.
_cb_missing=""
_cb_m=$CNNBENCH_CUDA_MAJOR
# CUDA 13's pip packages drop the -cuNN suffix (nvidia-cublas, nvidia-cuda-nvrtc).
if [ "$_cb_m" -ge 13 ] 2> /dev/null; then _cb_sfx=""; else _cb_sfx="-cu$_cb_m"; fi
_cb_note() { _cb_missing="$_cb_missing${_cb_missing:+, }$1"; }
_cb_has libcudnn.so.9 || _cb_note "libcudnn.so.9 (pip install nvidia-cudnn-cu$_cb_m)"
if ! _cb_has "libcublas.so.$_cb_m"; then
    if _cb_has "libcublasLt.so.$_cb_m"; then
        _cb_note "libcublas.so.$_cb_m (pip install nvidia-cublas$_cb_sfx)"
    else
        _cb_note "libcublas.so.$_cb_m and libcublasLt.so.$_cb_m (pip install nvidia-cublas$_cb_sfx)"
    fi
elif ! _cb_has "libcublasLt.so.$_cb_m"; then
    _cb_note "libcublasLt.so.$_cb_m (pip install nvidia-cublas$_cb_sfx)"
fi
_cb_has "libnvrtc.so.$_cb_m" || _cb_note "libnvrtc.so.$_cb_m (pip install nvidia-cuda-nvrtc$_cb_sfx)"
# The driver is the system's, not pip's: libcuda.so.1 where the loader finds it.
_cb_drv=0
if command -v ldconfig > /dev/null 2>&1 && ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 '; then
    _cb_drv=1
fi
for _cb_f in /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 \
    /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/wsl/lib/libcuda.so.1 \
    /usr/lib/aarch64-linux-gnu/libcuda.so.1; do
    if [ -e "$_cb_f" ]; then _cb_drv=1; fi
done
while IFS= read -r _cb_d; do
    if [ -n "$_cb_d" ] && [ -e "$_cb_d/libcuda.so.1" ]; then _cb_drv=1; fi
done << EOF
$(printf '%s\n' "${LD_LIBRARY_PATH:-}" | tr ':' '\n')
EOF
[ "$_cb_drv" = 1 ] || _cb_note "libcuda.so.1 (the NVIDIA driver: no GPU driver here)"
if [ -n "$_cb_missing" ]; then echo "env.sh: missing $_cb_missing" >&2; fi

# Prepend the kept folders that LD_LIBRARY_PATH lacks.
CNNBENCH_LIB_DIRS=""
while IFS= read -r _cb_d; do
    [ -n "$_cb_d" ] || continue
    case ":${LD_LIBRARY_PATH:-}:" in
        *":$_cb_d:"*) ;;
        *) CNNBENCH_LIB_DIRS="$CNNBENCH_LIB_DIRS${CNNBENCH_LIB_DIRS:+:}$_cb_d" ;;
    esac
done << EOF
$_cb_keep
EOF
if [ -n "$CNNBENCH_LIB_DIRS" ]; then
    export LD_LIBRARY_PATH="$CNNBENCH_LIB_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export CNNBENCH_LIB_DIRS

unset _cb_nl _cb_dirs _cb_keep _cb_py _cb_pyout _cb_d _cb_f _cb_k _cb_repo _cb_driver _cb_smi \
    _cb_majors _cb_m _cb_cudnn _cb_mine _cb_other _cb_missing _cb_sfx _cb_drv
unset -f _cb_in _cb_add_dir _cb_has _cb_note
true
