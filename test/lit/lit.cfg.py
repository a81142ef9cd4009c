# lit configuration of the ingot compiler tests (test/lit): ingot-opt + FileCheck.
# -*- Python -*-

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "INGOT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "README.md"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.ingot_lit_obj_root

# FileCheck, not, count from LLVM; ingot-opt from the build.
llvm_config.use_default_substitutions()
config.substitutions.append(("%ingot_src", config.ingot_src_root))
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.ingot_tools_dir, append_path=True)

tool_dirs = [config.ingot_tools_dir, config.llvm_tools_dir]
tools = [
    ToolSubst("ingot-opt", unresolved="fatal"),
    # Region bytecode printer/evaluator of codegen/cpu (test/lit/codegen).
    ToolSubst("ingot-region-bc", unresolved="ignore"),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)
# `ingot` (the user CLI, test/lit/driver) is found through PATH: a substitution for the
# bare word would also rewrite "ingot" inside other tool names.

# The real model (scripts/fetch_model.sh; scripts/test.sh exports its path). Tests that need
# it say `REQUIRES: smollm2`.
smollm2 = os.environ.get("INGOT_SMOLLM2_GGUF")
if smollm2 and os.path.isfile(smollm2):
    config.available_features.add("smollm2")
    config.substitutions.append(("%smollm2", smollm2))

# `ingot compile` builds CUDA attention kernels with NVRTC where the build has it. Tests share
# one kernel cache (the caller's $INGOT_KERNEL_CACHE, else one in the build tree), so the
# suite pays NVRTC once per kernel, not once per compile.
if config.ingot_enable_cuda.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("nvrtc")
config.environment["INGOT_KERNEL_CACHE"] = os.environ.get(
    "INGOT_KERNEL_CACHE", os.path.join(config.ingot_lit_obj_root, "kernel-cache"))
