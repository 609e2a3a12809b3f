# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "ppc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ppc_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in",
                   "unit", "e2e", "conformance", "Inputs"]
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
# Debian's interpreter has torch, onnx and numpy; lit's default %python (the
# interpreter running lit) may not, so ours goes first.
config.substitutions.insert(0, ("%python", config.python))
config.substitutions.append(("%ppc_src", config.ppc_src_root))
llvm_config.add_tool_substitutions(
    ["ppc", "ppc-opt", "ppc-calibrate-cpu"], [config.ppc_tools_dir])
llvm_config.add_tool_substitutions(["FileCheck", "not", "count"],
                                   [config.llvm_tools_dir])

# The CUDA target: `cuda-toolkit` when ppc was built with one (nvcc,
# cuBLASLt, NCCL: generated CUDA is compiled and linked), `cuda-gpu` when a
# GPU is visible too (the executables run). Tests that need them are
# reported UNSUPPORTED otherwise, so a CPU-only run shows what it skipped.
import shutil
import subprocess
if config.ppc_have_cuda:
    config.available_features.add("cuda-toolkit")
    smi = shutil.which("nvidia-smi")
    if smi and subprocess.run([smi, "-L"], capture_output=True).returncode == 0:
        config.available_features.add("cuda-gpu")
