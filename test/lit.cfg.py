# -*- Python -*-
# lit configuration for Flashlight: IR tests under test/, examples under
# examples/ (each example carries its own RUN line).

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Flashlight"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]

config.test_source_root = config.flashlight_src_root
config.test_exec_root = config.flashlight_obj_root

# Only test/ and examples/ hold tests; skip every other top-level entry
# (sources, docs, build directories).
config.excludes = [
    entry
    for entry in os.listdir(config.test_source_root)
    if entry not in ("test", "examples")
] + ["lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))

# ptxas and libdevice: tests that assemble PTX need them.
if config.cuda_path:
    config.available_features.add("ptxas")
    config.environment["CUDA_HOME"] = config.cuda_path
config.substitutions.append(
    ("%examples", os.path.join(config.flashlight_src_root, "examples"))
)

# Import a StableHLO program, raise its attention, print the analysis.
config.substitutions.append(
    ("%raise", "flashlight-opt --flashlight-import-stablehlo --canonicalize "
     "--attn-raise --canonicalize --attn-expand-empty-rows --attn-explain")
)

# Raise the attention of a linalg program on stdin, print the analysis.
config.substitutions.append(
    ("%linalg-raise", "flashlight-opt --canonicalize --attn-raise "
     "--canonicalize --attn-expand-empty-rows --attn-explain")
)

# Import a torch-mlir `torch` dialect program, raise its attention, print the
# analysis.
config.substitutions.append(
    ("%torch-raise", "flashlight-opt --flashlight-import-torch --canonicalize "
     "--attn-raise --canonicalize --attn-expand-empty-rows --attn-explain")
)

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.flashlight_tools_dir, config.llvm_tools_dir]
tools = ["flashlight-opt", "flashlight-compile", "flashlight-translate",
         "flashlight-run"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
