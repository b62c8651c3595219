# Source this on a GPU machine: puts the folders holding cuDNN, cuBLAS and
# NVRTC (pip's nvidia-* packages, as installed with PyTorch, or a system
# CUDA) on LD_LIBRARY_PATH. cnnbench loads them at run time.
_cnnbench_libs=$(find / -xdev \( -name 'libcudnn.so.9' -o -name 'libcublas.so.1[0-9]' \
    -o -name 'libcublasLt.so.1[0-9]' -o -name 'libnvrtc.so.1[0-9]' \) 2>/dev/null \
    | xargs -r -n1 dirname | sort -u | paste -sd: -)
if [ -n "$_cnnbench_libs" ]; then
    export LD_LIBRARY_PATH="$_cnnbench_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
unset _cnnbench_libs
