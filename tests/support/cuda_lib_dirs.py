#!/usr/bin/env python3
"""Prints the directories that hold the named CUDA libraries, joined by ':'.

    python3 cuda_lib_dirs.py nvrtc cublas

Looks in the NVIDIA pip wheels (site-packages/nvidia/*/lib: cu13/lib for the
CUDA 13 wheels, cuda_nvrtc/lib and friends for CUDA 12) and, with --toolkit,
adds the CUDA toolkit's and the container driver's usual directories that
exist. A directory is listed when it holds lib<NAME>.so* for any NAME given.
Prints an empty line when nothing is found. Used by tests/model/cuda_kernels.rs (to
rerun itself with NVRTC on LD_LIBRARY_PATH) and by bench/gpu_check.sh.
"""

import glob
import os
import sys

TOOLKIT_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nvidia/lib64")


def wheel_dirs(names):
    try:
        import nvidia
    except ImportError:
        return []
    return [
        d
        for base in nvidia.__path__
        for d in sorted(glob.glob(os.path.join(base, "*", "lib")))
        if any(glob.glob(os.path.join(d, f"lib{name}.so*")) for name in names)
    ]


def main(argv):
    toolkit = "--toolkit" in argv
    names = [a for a in argv if a != "--toolkit"]
    if not names:
        sys.exit("usage: cuda_lib_dirs.py [--toolkit] NAME... (e.g. nvrtc cublas)")
    dirs = wheel_dirs(names)
    if toolkit:
        dirs += [d for d in TOOLKIT_DIRS if os.path.isdir(d)]
    print(":".join(dirs))


if __name__ == "__main__":
    main(sys.argv[1:])
