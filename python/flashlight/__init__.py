"""Flashlight's Python runtime: load a compiled attention kernel and call it
on PyTorch CUDA tensors, on the current stream.

    import flashlight
    attn = flashlight.load("out/causal.json")
    out = attn(q, k, v)            # outputs are allocated and returned

`flashlight.export(fn, *example_inputs, path=...)` goes the other way: it
writes a PyTorch function as a flashlight-graph JSON file (torch.export;
docs/json-graph.md), the input of Flashlight's JSON graph importer.

The manifest written by flashlight-compile gives the kernel symbol, its
parameters (name, dtype, shape), the launch geometry and the artifacts; the
kernel is loaded through the CUDA driver API (ctypes on libcuda.so.1) into
the context PyTorch uses.
"""

import ctypes
import json
import os
import threading
import warnings

from .export import export
from ._jit import CompileError, JitFunction, compile, jit, varlen_attention  # noqa: E402,F401

__all__ = ["load", "Kernel", "ManifestError", "export", "jit", "compile", "JitFunction",
           "CompileError", "varlen_attention"]

_DTYPES = None
# The dtypes of manifests (flashlight-compile's names).
_DTYPE_NAMES = ("f16", "bf16", "f32", "f64", "i1", "i8", "i32", "i64")


def _torch_dtypes():
    global _DTYPES
    if _DTYPES is None:
        import torch

        _DTYPES = {
            "f16": torch.float16,
            "bf16": torch.bfloat16,
            "f32": torch.float32,
            "f64": torch.float64,
            "i1": torch.bool,
            "i8": torch.int8,
            "i32": torch.int32,
            "i64": torch.int64,
        }
    return _DTYPES


class _Driver:
    """The few driver entry points the loader needs."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuGetErrorString.argtypes = [ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_char_p)]

    def check(self, result, what):
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(result, ctypes.byref(text))
            raise RuntimeError(f"{what} failed: {text.value.decode() if text.value else result}")


_driver = None


def _get_driver():
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def _ensure_context():
    """Makes the current CUDA device's primary context current on this
    thread where none is: PyTorch's autograd threads (a backward pass) may
    not have one for the driver API."""
    drv = _get_driver()
    context = ctypes.c_void_p()
    drv.check(drv.lib.cuCtxGetCurrent(ctypes.byref(context)), "cuCtxGetCurrent")
    if context.value:
        return
    import torch

    device = ctypes.c_int()
    drv.check(drv.lib.cuDeviceGet(ctypes.byref(device), torch.cuda.current_device()),
              "cuDeviceGet")
    drv.check(drv.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
              "cuDevicePrimaryCtxRetain")
    drv.check(drv.lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")


def _geometry(manifest, artifact):
    """block_m, block and dynamic shared memory of the arch whose artifact
    was loaded (the code generator can differ per arch), else the top
    level's."""
    geometry = {k: manifest.get(k)
                for k in ("block_m", "block_n", "block", "dynamic_shared_memory", "block_mask",
                      "pointer_alignment", "runtime_strides", "aligned", "persistent",
                      "tile_counter", "tensor_maps")}
    for info in manifest.get("archs", {}).values():
        if artifact in (info.get("cubin"), info.get("ptx")):
            geometry.update({k: info[k] for k in geometry if k in info})
    return geometry


def _block_mask_shape(geometry, q_shape, k_shape):
    """[B or 1, Hq or 1, query tiles, KV tiles]: the block mask's shape for
    the loaded arch's geometry (manifest `block_mask` says whether the mask
    reads b and h)."""
    info = geometry["block_mask"]
    bm, bn = geometry["block_m"], geometry["block_n"]
    return [q_shape[0] if info["batch"] else 1, q_shape[1] if info["heads"] else 1,
            (q_shape[2] + bm - 1) // bm, (k_shape[2] + bn - 1) // bn]


def _choose_artifact(archs, cc):
    own = f"sm_{cc}"
    for arch in (own + "a", own):
        if arch in archs and "cubin" in archs[arch]:
            return archs[arch]["cubin"]
    # PTX of the newest arch not newer than the device; arch-specific PTX
    # (sm_90a: wgmma) runs on that arch only, never JIT-compiled on a newer one.
    best, best_cc = None, -1
    for arch, info in archs.items():
        if not arch.startswith("sm_") or not arch[3:].isdigit():
            continue
        arch_cc = int(arch[3:])
        if best_cc < arch_cc <= cc and "ptx" in info:
            best, best_cc = info["ptx"], arch_cc
    if best is None:
        raise RuntimeError(f"no artifact for {own} in the manifest")
    return best


class ManifestError(ValueError):
    """A manifest that flashlight-compile did not write (or that was
    edited): says which field is wrong."""


def _check_manifest(m, path):
    """Raises ManifestError unless `m` has what the loader reads, with
    sizes a launch can take; nothing is allocated before this passes."""
    def bad(what):
        raise ManifestError(f"bad manifest {path}: {what}")

    def shape_ok(shape, extents=None):
        # A dynamic dim (-1) has its extent's symbol.
        extents = extents if isinstance(extents, list) else []
        return (isinstance(shape, list)
                and all(isinstance(d, int) and not isinstance(d, bool)
                        and (d >= 0 or (d == -1 and i < len(extents)
                                        and isinstance(extents[i], str) and extents[i]))
                        for i, d in enumerate(shape)))

    if not isinstance(m, dict):
        bad("not a JSON object")
    if m.get("manifest_version") not in (1, 2):
        bad(f"manifest_version {m.get('manifest_version')!r} (this loader reads 1 and 2)")
    attentions = m.get("attentions")
    if m.get("manifest_version") == 2 or attentions is not None:
        # Version 2: the program calls several attention kernels.
        if m.get("manifest_version") != 2 or not isinstance(attentions, list) or not attentions:
            bad("'attentions' (a non-empty list) goes with manifest_version 2")
        for k, a in enumerate(attentions):
            if not isinstance(a, dict):
                bad(f"attentions[{k}] must be an object")
            _check_manifest({**m, **a, "manifest_version": 1, "attentions": None,
                             "entry": None}, f"{path} (attentions[{k}])")
    if not isinstance(m.get("name"), str):
        bad("'name' must be a string")
    params = m.get("params")
    if not isinstance(params, list):
        bad("'params' must be a list")
    for i, p in enumerate(params):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            bad(f"params[{i}] must be an object with a 'name'")
        if p.get("direction") not in ("in", "out"):
            bad(f"params[{i}] ({p['name']}): direction must be 'in' or 'out'")
        if p.get("dtype") not in _DTYPE_NAMES:
            bad(f"params[{i}] ({p['name']}): unknown dtype {p.get('dtype')!r}")
        if "zero" in p and (p["zero"] is not True or p["direction"] != "out"):
            bad(f"params[{i}] ({p['name']}): 'zero' is true, on an output")
        if not shape_ok(p.get("shape"), p.get("extents")):
            bad(f"params[{i}] ({p['name']}): shape must be a list of non-negative "
                "integers, or -1 where 'extents' names the dim")
    if any(-1 in p["shape"] for p in params) and not (
            isinstance(m.get("max_extent"), int) and m["max_extent"] >= 1):
        bad("runtime extents need a positive integer 'max_extent'")
    if not isinstance(m.get("archs"), dict):
        bad("'archs' must be an object")
    kernel = m.get("kernel")
    if kernel is not None:
        if not isinstance(kernel, str):
            bad("'kernel' must be a string or null")
        block_m = m.get("block_m")
        if not isinstance(block_m, int) or not 1 <= block_m <= 1024:
            bad(f"block_m {block_m!r} is not in [1, 1024]")
        block = m.get("block")
        if (not isinstance(block, list) or len(block) != 3
                or not all(isinstance(b, int) and b >= 1 for b in block)
                or block[0] * block[1] * block[2] > 1024):
            bad(f"block {block!r} is not a CUDA block (3 sizes, 1 to 1024 threads)")
        q = next((p for p in params if p["name"] == "q0"), None)
        if q is None or len(q["shape"]) != 4:
            bad("no q0 parameter of rank 4")
        if q["shape"][0] > 65535 or q["shape"][1] > 65535:
            bad(f"q0 shape {q['shape']} exceeds the launch grid (B and H at most 65535)")
    entry = m.get("entry")
    if entry is not None:
        if not isinstance(entry, dict) or not isinstance(entry.get("inputs"), list):
            bad("'entry' must be an object with 'inputs'")
        for i, inp in enumerate(entry["inputs"]):
            if not isinstance(inp, dict) or not shape_ok(inp.get("shape"), inp.get("extents")):
                bad(f"entry.inputs[{i}] must have a shape of non-negative integers "
                    "(or -1 where 'extents' names the dim)")


class Kernel:
    """A compiled attention kernel; call it with the input tensors in
    manifest order (outputs are allocated and returned)."""

    def __init__(self, manifest_path):
        try:
            with open(manifest_path) as f:
                manifest = json.load(f)
        except json.JSONDecodeError as e:
            raise ManifestError(f"bad manifest {manifest_path}: {e}") from None
        _check_manifest(manifest, manifest_path)
        self._modules = {}  # artifact -> (module, image), shared by attentions
        self._init(manifest, os.path.dirname(os.path.abspath(manifest_path)))

    def _init(self, manifest, directory):
        import torch

        self.manifest = manifest
        self.directory = directory
        self.params = self.manifest["params"]
        self._param_names = [p["name"] for p in self.params]
        self.inputs = [p for p in self.params if p["direction"] == "in"]
        self.outputs = [p for p in self.params if p["direction"] == "out"]
        major, minor = torch.cuda.get_device_capability()
        cc = major * 10 + minor
        torch.empty(1, device="cuda")  # make PyTorch's context current
        # The attention kernel (none for a program without attention), and
        # the reference path's kernels (entry steps), each a module.
        self._function = self._mask_function = None
        if self.manifest.get("kernel"):
            self.artifact = _choose_artifact(self.manifest["archs"], cc)
            self._module = self._load_module(self.artifact)
            self.geometry = _geometry(self.manifest, self.artifact)
            self._general = self._variant(self.geometry, self.manifest["kernel"])
            self._function, self._mask_function, self._shared = self._general[:3]
            # Runtime shapes: the kernel for lengths whole tiles divide.
            self._aligned = None
            if self.geometry.get("aligned"):
                aligned = self.geometry["aligned"]
                self._aligned = self._variant(aligned, aligned["kernel"])
        # A program calling several attention kernels: one Kernel each
        # (the first is this one), loaded on first use.
        self._attentions = {0: self}
        entry = self.manifest.get("entry") or {}
        self._host_module = None
        self._host_functions = {}
        if "steps" in entry:
            self._host_module = self._load_module(_choose_artifact(entry["archs"], cc))

    def _variant(self, geometry, name):
        """(function, block-mask pre-kernel or None, dynamic shared memory,
        block, TMA tensor maps) of the kernel `name` whose launch geometry is
        `geometry`."""
        function = self._get_function(self._module, name)
        shared = geometry.get("dynamic_shared_memory") or 0
        # Past 48 KB of static + dynamic shared memory, the dynamic part is
        # opted into per function; static bytes count, so always opt in.
        if shared > 0:
            max_dynamic_shared_size_bytes = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _get_driver().check(_get_driver().lib.cuFuncSetAttribute(
                function, max_dynamic_shared_size_bytes, ctypes.c_int(shared)),
                "cuFuncSetAttribute")
        # Data-dependent masks: the block-mask pre-kernel.
        mask = (self._get_function(self._module, geometry["block_mask"]["kernel"])
                if geometry.get("block_mask") else None)
        return function, mask, shared, geometry["block"], geometry.get("tensor_maps") or []

    def _choose_variant(self, inputs):
        """The aligned kernel where every query length is a multiple of
        block_m and every key length of block_n, else the general one."""
        if self._aligned is None:
            return self._general
        bm, bn = self.geometry["aligned"]["block_m"], self.geometry["aligned"]["block_n"]
        for t, p in zip(inputs, self.inputs):
            name = p["name"]
            if name.startswith("q") and t.shape[2] % bm:
                return self._general
            if (name.startswith("k") or name == "v") and t.shape[2] % bn:
                return self._general
        return self._aligned

    def _load_module(self, artifact):
        if artifact in self._modules:
            return self._modules[artifact][0]
        drv = _get_driver()
        _ensure_context()
        with open(os.path.join(self.directory, artifact), "rb") as f:
            image = f.read() + b"\0"
        image = ctypes.create_string_buffer(image, len(image))
        module = ctypes.c_void_p()
        drv.check(drv.lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
        self._modules[artifact] = (module, image)  # the image kept alive
        return module

    @staticmethod
    def _get_function(module, name):
        drv = _get_driver()
        function = ctypes.c_void_p()
        drv.check(drv.lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()),
                  "cuModuleGetFunction")
        return function

    #: Fill outputs with NaN before each launch (for checks).
    poison = False

    def _check(self, tensor, param):
        import torch

        name = param["name"]
        if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
            raise TypeError(f"{name}: expected a CUDA tensor")
        if tensor.dtype != _torch_dtypes()[param["dtype"]]:
            raise TypeError(f"{name}: dtype {tensor.dtype}, expected {param['dtype']}")
        align = self.geometry.get("pointer_alignment") or 1
        if not tensor.is_contiguous():
            if not self.geometry.get("runtime_strides"):
                raise ValueError(f"{name}: must be contiguous (this kernel was compiled "
                                 "with --static-strides)")
            problem = _stride_problem(tensor, align, output=param["direction"] == "out")
            if problem:
                raise ValueError(f"{name}: {problem}")
        if tensor.data_ptr() % align:
            raise ValueError(f"{name}: data pointer not aligned to {align} bytes, "
                             "as this kernel's copies need (pass a fresh tensor)")

    def _check_inputs(self, inputs):
        if self._function is None:
            raise TypeError(f"{self.manifest['name']} has no attention kernel; "
                            "call it with call_entry")
        if len(inputs) != len(self.inputs):
            raise TypeError(f"{self.manifest['name']} takes {len(self.inputs)} tensors, "
                            f"got {len(inputs)}")
        import torch

        dtypes, align = _torch_dtypes(), self.geometry.get("pointer_alignment") or 1
        for t, p in zip(inputs, self.inputs):
            # The common case in one line; `_check` says what is wrong.
            if not (type(t) is torch.Tensor and t.is_cuda and t.dtype == dtypes[p["dtype"]]
                    and t.is_contiguous() and not t.data_ptr() % align):
                self._check(t, p)
        return _bind_extents(self.inputs, inputs, max_extent=self.manifest.get("max_extent"))

    def _block_mask_shape(self, inputs):
        names = [p["name"] for p in self.inputs]
        return _block_mask_shape(self.geometry, inputs[names.index("q0")].shape,
                                 inputs[names.index("k0")].shape)

    def build_block_mask(self, *inputs):
        """Runs the block-mask pre-kernel of a data-dependent mask on
        `inputs` (as for a call) and returns the mask (an int8 tensor; 0
        empty, 1 partial, 2 full per tile; tiles the KV loop never reaches
        are empty). A call given `block_mask=` skips the pre-kernel: reuse a mask only with the same mask inputs (e.g.
        document ids), as with FlexAttention's create_block_mask. None for
        kernels without a block mask."""
        self._check_inputs(inputs)
        return self._run_block_mask(inputs)

    def _run_block_mask(self, inputs):
        """`build_block_mask` of checked `inputs`."""
        import torch

        mask_function = self._choose_variant(inputs)[1]
        if mask_function is None:
            return None
        shape = self._block_mask_shape(inputs)
        mask = torch.empty(shape, dtype=torch.int8, device=inputs[0].device)
        grid = (shape[2] * shape[3], shape[1], shape[0])
        _launch(mask_function, list(inputs) + [mask], grid,
                self.geometry["block_mask"]["block"], inputs[0].device)
        return mask

    def __call__(self, *inputs, block_mask=None, out=None):
        """Runs the kernel on `inputs` (manifest order; with runtime strides
        any layout whose innermost dim is contiguous) and returns its
        outputs: new contiguous tensors, or `out` (a tensor or a tuple, in
        any such layout; the kernel writes through it)."""
        import torch

        extents = self._check_inputs(inputs)
        if block_mask is not None:
            if self._mask_function is None:
                raise TypeError(f"{self.manifest['name']} takes no block mask")
            expected = self._block_mask_shape(inputs)
            if (block_mask.dtype != torch.int8 or list(block_mask.shape) != expected
                    or not block_mask.is_contiguous()
                    or block_mask.device != inputs[0].device):
                raise ValueError(f"block_mask: expected contiguous int8 {expected} on "
                                 f"{inputs[0].device}, got {block_mask.dtype} "
                                 f"{tuple(block_mask.shape)} on {block_mask.device}")
        elif self._mask_function is not None:
            block_mask = self._run_block_mask(inputs)
        device = inputs[0].device
        if out is not None:
            outputs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outputs) != len(self.outputs):
                raise TypeError(f"{self.manifest['name']} has {len(self.outputs)} outputs, "
                                f"got {len(outputs)} in out=")
            for t, p in zip(outputs, self.outputs):
                self._check(t, p)
            _bind_extents(self.params, list(inputs) + outputs)
        else:
            outputs = [torch.empty(_resolve(p, extents), dtype=_torch_dtypes()[p["dtype"]],
                                   device=device) for p in self.outputs]
        if self.poison:  # checks: an element the kernel skips stays NaN
            for o in outputs:
                o.fill_(float("nan"))
        for o, p in zip(outputs, self.outputs):
            if p.get("zero"):  # the kernel adds to it (a key-side product)
                o.zero_()
        tensors = list(inputs) + outputs
        if block_mask is not None:
            tensors.append(block_mask)
        if self.geometry.get("tile_counter"):
            tensors.append(_tile_counter(device))
        q = tensors[self._param_names.index("q0")]
        block_m = self.geometry["block_m"]
        if q.shape[0] > 65535:
            raise ValueError(f"q0: batch {q.shape[0]} exceeds the launch grid (at most 65535); "
                             "split the batch over several calls")
        grid = ((q.shape[2] + block_m - 1) // block_m, q.shape[1], q.shape[0])
        if self.geometry.get("persistent"):
            # About one block per SM, each looping over work tiles.
            grid = (min(grid[0] * grid[1] * grid[2], _multiprocessors(device)), 1, 1)
        variant = self._choose_variant(inputs)
        self.last_variant = "aligned" if variant is self._aligned else "general"
        function, _, shared, block, tensor_maps = variant
        _launch(function, tensors, grid, block, device, shared, tensor_maps,
                self._param_names)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _attention(self, k):
        """The Kernel of the program's attention `k` (manifest
        `attentions[k]`; 0 is this one)."""
        if k not in self._attentions:
            listed = self.manifest.get("attentions") or []
            if not 0 <= k < len(listed):
                raise RuntimeError(f"{self.manifest['name']}: no attention {k}")
            sub = Kernel.__new__(Kernel)
            sub._modules = self._modules
            sub._init({**self.manifest, **listed[k], "manifest_version": 1,
                       "attentions": None, "entry": None}, self.directory)
            sub.poison = self.poison
            self._attentions[k] = sub
        return self._attentions[k]

    def _host_function(self, name):
        if name not in self._host_functions:
            self._host_functions[name] = self._get_function(self._host_module, name)
        return self._host_functions[name]


def _shape_text(info):
    """A manifest tensor's shape, its extents' symbols where dynamic."""
    extents = info.get("extents") or []
    return "(" + ", ".join(str(d) if d >= 0 else extents[i]
                           for i, d in enumerate(info["shape"])) + ")"


def _bind_extents(infos, tensors, names=None, max_extent=None):
    """The sizes of the dynamic extents (symbol -> size) that `tensors`
    give the manifest tensors `infos` (shape, extents); a ValueError naming
    the tensor where a static dim differs, two dims of one extent do, or an
    extent exceeds `max_extent` (the manifest's)."""
    values, source = {}, {}
    for i, (t, info) in enumerate(zip(tensors, infos)):
        shape = info["shape"]
        if t.shape == tuple(shape):  # static (no -1) and as expected
            continue
        name = names[i] if names else info["name"]
        if len(t.shape) != len(shape) or any(
                e >= 0 and e != s for e, s in zip(shape, t.shape)):
            raise ValueError(f"{name}: shape {tuple(t.shape)}, expected {_shape_text(info)}")
        for d, e in enumerate(shape):
            if e >= 0:
                continue
            symbol = info["extents"][d]
            if max_extent is not None and t.shape[d] > max_extent:
                raise ValueError(f"{name}: dim {d} is {t.shape[d]}; this kernel takes extents "
                                 f"up to {max_extent}")
            if symbol in values and values[symbol] != t.shape[d]:
                raise ValueError(f"{name}: dim {d} is {t.shape[d]}, but {source[symbol]} is "
                                 f"{values[symbol]}: both are extent {symbol}")
            values.setdefault(symbol, t.shape[d])
            source.setdefault(symbol, f"{name} dim {d}")
    return values


def _resolve(info, extents):
    """A manifest tensor's shape at the bound `extents`."""
    return [d if d >= 0 else extents[info["extents"][i]] for i, d in enumerate(info["shape"])]


def _stride_problem(t, align, output=False):
    """Why the kernel cannot take non-contiguous `t` through its runtime
    strides (None if it can): the innermost dim must be contiguous, the
    other strides multiples of the copies' alignment; an output must not
    overlap itself."""
    dims = [d for d in range(t.dim()) if t.shape[d] > 1]
    if dims and dims[-1] == t.dim() - 1 and t.stride(-1) != 1:
        return f"the innermost dim must be contiguous (strides {tuple(t.stride())})"
    elem = t.element_size()
    outer = [d for d in dims if d != t.dim() - 1]
    if align > elem and any((t.stride(d) * elem) % align for d in outer):
        return (f"strides {tuple(t.stride())} are not multiples of {align // elem} "
                f"elements, as this kernel's {align}-byte copies need")
    if output:
        # Each dim's stride clears the extent of the finer ones.
        extent = 1
        for d in sorted(dims, key=lambda d: t.stride(d)):
            if t.stride(d) < extent:
                return f"an output must not overlap itself (strides {tuple(t.stride())})"
            extent = t.stride(d) * t.shape[d]
    return None


# SM count per device index: the grid of a persistent kernel.
_multiprocessor_counts = {}


def _multiprocessors(device):
    """The SM count of `device` (a persistent kernel's grid)."""
    import torch

    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    if index not in _multiprocessor_counts:
        _multiprocessor_counts[index] = torch.cuda.get_device_properties(
            index).multi_processor_count
    return _multiprocessor_counts[index]


# cuda.h's CUtensorMapDataType of the kernels' element types.
_TENSOR_MAP_DTYPES = {"float16": 6, "float32": 7, "bfloat16": 9}


def _encode_tensor_map(t, box, name, swizzle=128):
    """The 128 bytes of a TMA tensor map (CUtensorMap) of `t` (innermost dim
    contiguous) with boxes `box` ([columns, rows]), the 128-byte swizzle
    (`swizzle` 0: none), zeros outside the tensor; a ValueError naming
    `name` where the driver refuses it."""
    drv = _get_driver()
    dtype = str(t.dtype).replace("torch.", "")
    if dtype not in _TENSOR_MAP_DTYPES or not 2 <= t.dim() <= 5:
        raise ValueError(f"{name}: no TMA tensor map for a {dtype} tensor of rank {t.dim()}")
    rank, elem = t.dim(), t.element_size()
    # Innermost dim first; an empty dim is described as one row, a dim of one
    # element gets the stride its inner dims would give it (never stepped).
    dims, strides, natural = [], [], elem
    for i in range(rank):
        d = rank - 1 - i
        dims.append(max(t.shape[d], 1))
        if i > 0:
            strides.append(t.stride(d) * elem if t.shape[d] > 1 else (natural + 15) // 16 * 16)
        natural *= dims[-1]
    boxes = [box[0], box[1]] + [1] * (rank - 2)
    raw = ctypes.create_string_buffer(128 + 128)
    address = (ctypes.addressof(raw) + 127) // 128 * 128
    result = drv.lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(address), ctypes.c_int(_TENSOR_MAP_DTYPES[dtype]),
        ctypes.c_uint(rank), ctypes.c_void_p(t.data_ptr()),
        (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
        (ctypes.c_uint32 * rank)(*boxes), (ctypes.c_uint32 * rank)(*([1] * rank)),
        ctypes.c_int(0), ctypes.c_int(3 if swizzle else 0), ctypes.c_int(3), ctypes.c_int(0))
    if result != 0:
        raise ValueError(f"{name}: the driver refused its TMA tensor map (error {result}, "
                         f"strides {tuple(t.stride())}): strides and the pointer must be "
                         "multiples of 16 bytes")
    return ctypes.string_at(address, 128)


# Encoded tensor maps by what they depend on (pointer, shape, strides,
# dtype, box): PyTorch's allocator hands a training loop the same buffers
# call after call, and encoding costs ~20 us of Python a map.
_tensor_maps = {}
_TENSOR_MAP_CACHE_SIZE = 512


def _cached_tensor_map(t, box, name, swizzle=128):
    key = (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, box[0], box[1], swizzle)
    found = _tensor_maps.get(key)
    if found is None:
        if len(_tensor_maps) >= _TENSOR_MAP_CACHE_SIZE:
            _tensor_maps.clear()
        found = _tensor_maps[key] = ctypes.create_string_buffer(
            _encode_tensor_map(t, box, name, swizzle), 128)
    return found


def _current_stream(device):
    """The raw handle of `device`'s current PyTorch stream."""
    import torch

    index = device.index if isinstance(device, torch.device) else torch.device(device).index
    if index is None:
        index = torch.cuda.current_device()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw else torch.cuda.current_stream(index).cuda_stream


# The tile counters of kernels whose blocks draw their work tiles (a plan's
# `tile_counter`): two int32 words per device and stream, zero when made.
# Every launch leaves its counter zero (the last block done resets it), so
# the launches of one stream, which run in order, share one; launches on
# other streams, which may run at once, take their own.
_tile_counters = {}


def _tile_counter(device):
    """The tile counter of `device`'s current stream."""
    import torch

    key = (device, _current_stream(device))
    found = _tile_counters.get(key)
    if found is None:
        found = _tile_counters[key] = torch.zeros(2, dtype=torch.int32, device=device)
    return found


# Each thread's launch parameters: one buffer of words and the table of
# their addresses (cuLaunchKernel's kernelParams), made once. The driver
# copies the parameters before cuLaunchKernel returns, so that every launch
# of the thread reuses them (building an address table per launch was a
# third of the launch's Python).
_launch_state = threading.local()


def _parameter_buffer(words):
    """This thread's (words, addresses) buffers, `words` long at least."""
    found = getattr(_launch_state, "buffers", None)
    if found is None or len(found[0]) < words:
        size = max(256, words)
        buffer = (ctypes.c_uint64 * size)()
        base = ctypes.addressof(buffer)
        addresses = (ctypes.c_uint64 * (size + 64))(*range(base, base + 8 * size, 8))
        found = _launch_state.buffers = (buffer, addresses)
    return found


def _thread_context():
    """`_ensure_context` once per thread: the context a thread made current
    stays current (PyTorch never pops it)."""
    if not getattr(_launch_state, "context", False):
        _ensure_context()
        _launch_state.context = True


def _launch(function, tensors, grid, block, device, shared=0, tensor_maps=(), names=None):
    """Launches `function` on the current stream; each memref parameter is
    its flattened descriptor: allocated ptr, aligned ptr, offset, sizes...,
    strides...; then the TMA tensor maps (manifest `tensor_maps`: the
    parameter and box), 128 bytes each, errors naming the parameter from
    `names` (the manifest's parameter names). A training step launches
    several kernels per attention, so this path is kept to a few
    microseconds of Python."""
    if 0 in grid:  # no query rows, heads or batch: nothing to compute
        return
    words = []
    for t in tensors:
        pointer = t.data_ptr()
        words += (pointer, pointer, 0, *t.shape, *t.stride())
    count = len(words)
    buffer, addresses = _parameter_buffer(count)
    buffer[:count] = words
    if len(tensor_maps) > 64:
        raise ValueError(f"{len(tensor_maps)} tensor maps; a launch takes at most 64")
    # The maps' addresses follow the words' (cached buffers: they outlive
    # the launch); the table's entries are restored after it.
    try:
        for i, m in enumerate(tensor_maps):
            param = m["param"]
            addresses[count + i] = ctypes.addressof(_cached_tensor_map(
                tensors[param], m["box"], names[param] if names else f"parameter {param}",
                m.get("swizzle", 128)))
        _thread_context()
        drv = _get_driver()
        drv.check(drv.lib.cuLaunchKernel(
            function, ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]), ctypes.c_uint(grid[2]),
            ctypes.c_uint(block[0]), ctypes.c_uint(block[1]), ctypes.c_uint(block[2]),
            ctypes.c_uint(shared), ctypes.c_void_p(_current_stream(device)), addresses,
            None), "cuLaunchKernel")
    finally:
        base = ctypes.addressof(buffer)
        for i in range(count, count + len(tensor_maps)):
            addresses[i] = base + 8 * i


def _run_steps(kernel, entry, args, views=False):
    """The reference path: the function's steps, in order, over numbered
    values (the inputs first). `views`: a slice that no later step reads
    (a result) stays a view of its source (`_call_entry`)."""
    import torch

    device = args[0].device
    infos = entry["values"]
    vals = [None] * len(infos)

    def new(v, fill=None):
        info = infos[v]
        dtype = _torch_dtypes()[info["dtype"]]
        t = torch.zeros(info["shape"], dtype=dtype, device=device)
        if fill is not None and dtype.is_floating_point:
            t.fill_(fill)
        return t

    def result(v):
        # A kernel writes every element of its results (the GPU checks
        # poison them with NaN to prove it): no zero fill (the backward's
        # [Q | dO] took 0.16 ms a call to zero at B * N = 16k).
        if kernel.poison:
            return new(v, float("nan"))
        info = infos[v]
        return torch.empty(info["shape"], dtype=_torch_dtypes()[info["dtype"]],
                           device=device)

    # An empty tensor (zeros) or a filled one (a kernel step marked `fill`)
    # is made where a step first reads it: a copy's destination never is,
    # nor a contraction's zero initial value.
    deferred = {}

    def val(v):
        if v in deferred:
            info = infos[v]
            vals[v] = torch.full(info["shape"], deferred.pop(v),
                                 dtype=_torch_dtypes()[info["dtype"]], device=device)
        return vals[v]

    for i, a in enumerate(args):
        vals[i] = a.contiguous()
    viewed = _slice_views(entry) if views else {}
    for step in entry["steps"]:
        op = step["op"]
        if op == "empty":
            deferred[step["result"]] = 0
        elif op == "kernel" and "fill" in step:
            deferred[step["results"][0]] = step["fill"]
        elif op == "kernel" and "copy" in step:
            r = step["results"][0]
            vals[r] = _copy(step["copy"], [val(v) for v in step["copy"]["sources"]],
                            view=r in viewed)
        elif op == "constant":
            info = dict(infos[step["result"]], file=step["file"])
            vals[step["result"]] = _load_constant(kernel, info, device)
        elif op == "reshape":
            shape = infos[step["result"]]["shape"]
            vals[step["result"]] = val(step["source"]).reshape(shape)
        elif op == "kernel" and "einsum" in step:
            # A contraction (a projection, a matmul): a library GEMM
            # (cuBLAS through torch.einsum) instead of the simple kernel,
            # in the accumulator's type, added to the initial value.
            a, b = val(step["args"][0]), val(step["args"][1])
            init, dtype = step["args"][2], _torch_dtypes()[infos[step["args"][2]]["dtype"]]
            product = _einsum(step["einsum"], a, b, dtype)
            # Into zeros (a fill not made yet): the product itself.
            vals[step["results"][0]] = (product if deferred.get(init, None) == 0
                                        else val(init) + product)
        elif op == "kernel":
            for r in step["results"]:
                # Poisoned: an element the kernel skips stays NaN.
                vals[r] = result(r)
            _launch(kernel._host_function(step["kernel"]),
                    [val(a) for a in step["args"]], (step["grid"], 1, 1),
                    (step["block"], 1, 1), device)
        elif op == "attention":
            attention = kernel._attention(step.get("attention", 0))
            outs = attention(*[val(a) for a in step["args"]])
            outs = outs if isinstance(outs, tuple) else (outs,)
            for r, o in zip(step["results"], outs):
                vals[r] = o
        else:
            raise RuntimeError(f"unknown step {op!r} in {kernel.manifest['name']}")
    results = [val(r) for r in entry["results"]]
    return results[0] if len(results) == 1 else tuple(results)


def _einsum(equation, a, b, acc):
    """`equation` of `a` and `b` widened to `acc`. 16-bit float operands
    widened to f32 are exact in TF32 (its 10 mantissa bits hold f16's and
    bf16's), so their f32 products run on TF32 tensor cores, the products
    exact and the sums in f32 as before (score-capture gradients' S and dP:
    two [B, H, N, N] products a call)."""
    import torch

    narrow = (torch.float16, torch.bfloat16)
    if acc != torch.float32 or a.dtype not in narrow or b.dtype not in narrow:
        return torch.einsum(equation, a.to(acc), b.to(acc))
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    matmul.fp32_precision = "tf32"
    try:
        return torch.einsum(equation, a.to(acc), b.to(acc))
    finally:
        matmul.fp32_precision = before


_slice_views_found = {}


def _slice_views(entry):
    """The values of `entry` (a manifest's entry with steps) that are
    slices no later step reads: {value: its slice step's copy}. Such a
    value can stay a view of its source (`call_entry(views=True)`)."""
    return _by_object(_slice_views_found, entry, _find_slice_views)


def _find_slice_views(entry):
    read = set()
    for step in entry["steps"]:
        # A kernel's results are among its arguments too.
        read.update(set(step.get("args", ())) - set(step.get("results", ())))
        read.update(step.get("copy", {}).get("sources", ()))
        if "source" in step:
            read.add(step["source"])
    return {step["results"][0]: step["copy"] for step in entry["steps"]
            if step["op"] == "kernel" and step.get("copy", {}).get("kind") == "slice"
            and step["results"][0] not in read}


def _copy(copy, sources, view=False):
    """A kernel step that only moves data (its `copy`: HostToGPU's
    flashlight.copy), with torch's copies instead of the reference kernel;
    a slice as a view of its source where `view`."""
    import torch

    if copy["kind"] == "concat":
        return torch.cat(sources, dim=copy["dim"])
    if copy["kind"] == "slice":
        x = sources[0]
        for d, (offset, size) in enumerate(zip(copy["offsets"], copy["sizes"])):
            if offset != 0 or size != x.shape[d]:
                x = x.narrow(d, offset, size)
        return x if view else x.contiguous()
    if copy["kind"] == "transpose":
        return sources[0].permute(copy["permutation"]).contiguous()
    raise RuntimeError(f"unknown copy {copy['kind']!r}")


def _by_object(table, obj, compute, *rest):
    """compute(obj, *rest) memoized in `table` by the object's identity and
    `rest` (the object kept alive with its result): the parts of a loaded
    manifest never change, and every call reads them."""
    key = (id(obj), *rest)
    found = table.get(key)
    if found is None or found[0] is not obj:
        if len(table) >= 4096:
            table.clear()
        found = table[key] = (obj, compute(obj, *rest))
    return found[1]


_layout_plans = {}


def _layout_plan(index, rank):
    """How a tensor whose dims `index` describes ({"dim": d}: the other
    side's dim d; {"const": c}: fixed at c) becomes the other side's layout
    of `rank` dims: the dims to fix (the last first, with their constants),
    the permutation of the rest, and the dims to insert. One plan for both
    directions and every framework (the torch and jax.numpy loaders)."""
    return _by_object(_layout_plans, index, _compute_layout_plan, rank)


def _compute_layout_plan(index, rank):
    fixed = [(p, e["const"]) for p, e in reversed(list(enumerate(index))) if "const" in e]
    dims = [e["dim"] for e in index if "dim" in e]
    perm = tuple(sorted(range(len(dims)), key=lambda p: dims[p]))
    inserted = [k for k in range(rank) if k not in dims]
    return fixed, perm, inserted


def _apply_layout(x, index, rank, select, permute, unsqueeze):
    """`x` through `_layout_plan(index, rank)`, with the framework's ops."""
    fixed, perm, inserted = _layout_plan(index, rank)
    for p, c in fixed:
        x = select(x, p, c)
    if any(p != k for k, p in enumerate(perm)):
        x = permute(x, perm)
    for k in inserted:
        x = unsqueeze(x, k)
    return x


_TORCH_LAYOUT_OPS = (lambda x, p, c: x.select(p, c), lambda x, perm: x.permute(perm),
                     lambda x, k: x.unsqueeze(k))


def _to_kernel_layout(x, index, shape):
    """The kernel's view of a user tensor (no copy): user dim p is indexed
    by kernel dim index[p]["dim"] (or fixed at index[p]["const"]); kernel
    dims the user tensor lacks broadcast."""
    x = _apply_layout(x, index, len(shape), *_TORCH_LAYOUT_OPS)
    return x if list(x.shape) == list(shape) else x.expand(tuple(shape))


_warned = set()


def _warn_once(text):
    if text not in _warned:
        _warned.add(text)
        warnings.warn(text, stacklevel=3)


def _kernel_operand(kernel, view, name):
    """`view` as the kernel takes it: itself where the kernel reads runtime
    strides and can take its layout, else a contiguous copy (with a
    one-time warning saying why, for a kernel that reads strides)."""
    if view.is_contiguous():
        return view
    if kernel.geometry.get("runtime_strides"):
        align = kernel.geometry.get("pointer_alignment") or 1
        problem = _stride_problem(view, align)
        if problem is None and view.data_ptr() % align:
            problem = f"its data pointer is not aligned to {align} bytes"
        if problem is None:
            return view
        _warn_once(f"flashlight: {kernel.manifest['name']}: copying {name} to a contiguous "
                   f"tensor: {problem}")
    return view.contiguous()


def _user_output_view(user, index, shape):
    """The kernel's view of a user output tensor when the result's layout
    is a permutation of it (each kernel dim one user dim): the kernel writes
    through it. None otherwise."""
    if len(index) != user.dim() or any("dim" not in e for e in index):
        return None
    view = user.permute([e["dim"] for e in index])
    return view if list(view.shape) == list(shape) else None


def _to_user_layout(y, index, shape):
    """The user's copy of a kernel result: kernel dim k is read at user dim
    index[k]["dim"] (or at index[k]["const"], a unit user-less dim)."""
    return _apply_layout(y, index, len(shape), *_TORCH_LAYOUT_OPS).reshape(shape).contiguous()


def _load_constant(kernel, info, device):
    import torch

    path = os.path.join(kernel.directory, info["file"])
    with open(path, "rb") as f:
        data = bytearray(f.read())
    dtype = _torch_dtypes()[info["dtype"]]
    return torch.frombuffer(data, dtype=dtype).reshape(info["shape"]).to(device)


_argument_names_found = {}


def _argument_names(entry):
    """The names of an entry's arguments in errors."""
    return _by_object(_argument_names_found, entry, lambda e: [
        f"{e['function']}: argument {i}" + (f" ({info['name']})" if "name" in info else "")
        for i, info in enumerate(e["inputs"])])


def _call_entry(kernel, *args, views=False):
    entry = kernel.manifest.get("entry")
    if entry is None:
        return kernel(*args)
    # Captured constants come from files beside the manifest, after the
    # caller's inputs.
    taken = [i for i in entry["inputs"] if "file" not in i]
    if len(args) != len(taken):
        raise TypeError(f"{entry['function']} takes {len(taken)} tensors, "
                        f"got {len(args)}")
    args = list(args) + [_load_constant(kernel, i, args[0].device)
                         for i in entry["inputs"] if "file" in i]
    extents = _bind_extents(entry["inputs"], args, _argument_names(entry),
                            max_extent=kernel.manifest.get("max_extent"))
    if "steps" in entry:
        return _run_steps(kernel, entry, args, views)
    # Each kernel tensor is a layout of a user input, or a constant of the
    # program stored beside the manifest.
    params = [_load_constant(kernel, {"file": s["constant"], **p}, args[0].device)
              if "constant" in s
              else _kernel_operand(kernel, _to_kernel_layout(args[s["input"]], s["index"],
                                                             _resolve(p, extents)), p["name"])
              for s, p in zip(entry["sources"], kernel.inputs)]
    # Outputs: where the kernel reads strides and a result is a permutation
    # of the user's layout, the kernel writes the user's tensor itself.
    import torch

    device = args[0].device
    outs = [None] * len(kernel.outputs)
    written = {}
    if kernel.geometry.get("runtime_strides"):
        for u, (r, info) in enumerate(zip(entry["results"], entry["outputs"])):
            k = r["result"]
            p = kernel.outputs[k]
            if outs[k] is not None or info["dtype"] != p["dtype"]:
                continue
            user = torch.empty(_resolve(info, extents), dtype=_torch_dtypes()[p["dtype"]],
                               device=device)
            view = _user_output_view(user, r["index"], _resolve(p, extents))
            align = kernel.geometry.get("pointer_alignment") or 1
            # A view the kernel cannot write through (its last dim strided,
            # strides off the 16-byte stores): a kernel output and a copy.
            if view is not None and (view.is_contiguous() or
                                     _stride_problem(view, align, output=True) is None):
                outs[k], written[u] = view, user
    outs = [o if o is not None else
            torch.empty(_resolve(p, extents), dtype=_torch_dtypes()[p["dtype"]], device=device)
            for o, p in zip(outs, kernel.outputs)]
    kernel(*params, out=outs)
    results = [written[u] if u in written else
               _to_user_layout(outs[r["result"]], r["index"], _resolve(info, extents))
               for u, (r, info) in enumerate(zip(entry["results"], entry["outputs"]))]
    return results[0] if len(results) == 1 else tuple(results)


Kernel.call_entry = _call_entry
Kernel.call_entry.__doc__ = """Calls the kernel as the user's function: the
arguments and results of the program it was compiled from (manifest
`entry`), in their own layouts; layout copies run here, in PyTorch.
`views=True`: results that are slices of one kernel output (the gradient
program's dK and dV, out of its one dK/dV kernel) are returned as views of
that output, sharing its storage, instead of copies."""


def load(manifest_path):
    """Loads the kernel described by `manifest_path` (a flashlight-compile
    manifest) and returns a callable."""
    return Kernel(manifest_path)
