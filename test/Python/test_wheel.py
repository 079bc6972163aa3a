"""The pip package (ctest `python/wheel`): scripts/build-wheel.sh builds it,
pip installs it into a fresh folder, and the installed package, with no
repository on its path, compiles an example with the compiler it carries,
which links no MLIR or LLVM library. Skips (77) without the static
compiler's build (FLASHLIGHT_STATIC_COMPILER). The GPU side is
scripts/wheel_check.py."""

import os
import subprocess
import sys
import tempfile

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
build = os.environ.get("BUILD", os.path.join(root, "build"))
if not os.path.exists(os.path.join(build, "bin", "flashlight-compile-static")):
    print("no flashlight-compile-static in", build)
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([os.path.join(root, "scripts", "build-wheel.sh"), os.path.join(tmp, "dist")],
                   check=True, env={**os.environ, "BUILD": build})
    wheels = [f for f in os.listdir(os.path.join(tmp, "dist")) if f.endswith(".whl")]
    assert len(wheels) == 1 and wheels[0].endswith("-py3-none-linux_x86_64.whl"), wheels
    site = os.path.join(tmp, "site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site,
                    os.path.join(tmp, "dist", wheels[0])], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("FLASHLIGHT_COMPILE", "PYTHONPATH")}
    script = f"""
import os, subprocess, flashlight
from flashlight._jit import find_compiler
compiler = find_compiler()
assert compiler.startswith({site!r}), compiler
linked = subprocess.run(["ldd", compiler], capture_output=True, text=True).stdout
assert "libMLIR" not in linked and "libLLVM" not in linked, linked
manifest = flashlight.compile({os.path.join(root, "examples", "causal.mlir")!r},
                              {os.path.join(tmp, "out")!r}, name="causal", flags=("--emit=ptx",))
assert os.path.exists(manifest), manifest
print("packaged compiler", compiler, "compiled", manifest)
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp,
                   env={**env, "PYTHONPATH": site})
