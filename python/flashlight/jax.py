"""`flashlight.jax.jit`: Flashlight kernels inside `jax.jit`.

    import flashlight.jax

    @flashlight.jax.jit
    def attention(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)

    out = jax.jit(lambda q, k, v: attention(q, k, v) * 2)(q, k, v)

On the first call per shape class the function is lowered to StableHLO
(`jax.jit(fn).lower`, for CUDA), compiled by flashlight-compile (a
subprocess) and cached on disk, keyed by the StableHLO text (the same cache
as `flashlight.jit`: `FLASHLIGHT_CACHE`). With `runtime_shapes=True`, as
with `flashlight.jit`, the second shape class compiles a kernel with
runtime shapes against the first one's lowering, which later shape classes
take without lowering or compiling again (`jax.jit` still traces the
calling program per shape); without a guard check, that is on request. The attention kernel runs as an
XLA FFI custom call (`flashlight_call`, `libflashlight_jax.so`, built
against jaxlib's FFI headers) on XLA's stream; the layouts around it (the
manifest entry's `sources` and `results`) are jnp transposes and reshapes
that XLA compiles with the rest of the program. Needs no PyTorch.

A program with more than layouts around its attention (projections,
norms: the manifest entry's reference-path steps) runs as XLA ops and custom
calls: contractions as `jnp.einsum` (XLA's GEMM), the other reference-path
kernels as FFI calls (`flashlight_host_kernel`), the attention as
`flashlight_call`. Decorating the attention alone keeps the rest in XLA
proper.
The shared library is `FLASHLIGHT_JAX_LIB`, else the pip package's
(`flashlight/_lib`), else the repository's `build/lib/libflashlight_jax.so`.
"""

import json
import os
import tempfile

from ._jit import DEFAULT_ARCHS, ClassedFunction, ShapeClasses

TARGET = "flashlight_call"
HOST_TARGET = "flashlight_host_kernel"

_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
           "i1": "bool", "i8": "int8", "i32": "int32", "i64": "int64"}


def library_path():
    path = os.environ.get("FLASHLIGHT_JAX_LIB")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "_lib", "libflashlight_jax.so")  # the pip package's
    if os.path.exists(bundled):
        return bundled
    return os.path.normpath(os.path.join(here, "..", "..", "build", "lib",
                                         "libflashlight_jax.so"))


_registered = False


def _register():
    global _registered
    if _registered:
        return
    import ctypes

    import jax

    path = library_path()
    if not os.path.exists(path):
        raise RuntimeError(f"flashlight.jax: no {path} (build with JAX installed, or set "
                           "FLASHLIGHT_JAX_LIB)")
    library = ctypes.cdll.LoadLibrary(path)
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(library.FlashlightCall),
                                platform="CUDA")
    jax.ffi.register_ffi_target(HOST_TARGET,
                                jax.ffi.pycapsule(library.FlashlightHostKernel),
                                platform="CUDA")
    _registered = True


def _dtype(name):
    import jax.numpy as jnp

    return jnp.dtype(_DTYPES[name])


def _jnp_layout_ops():
    import jax.numpy as jnp

    return (lambda x, p, c: jnp.take(x, c, axis=p), jnp.transpose, jnp.expand_dims)


def _to_kernel_layout(x, index, shape):
    """jax.numpy twin of the PyTorch loader's (one layout plan)."""
    import jax.numpy as jnp

    from . import _apply_layout

    return jnp.broadcast_to(_apply_layout(x, index, len(shape), *_jnp_layout_ops()),
                            tuple(shape))


def _to_user_layout(y, index, shape):
    import jax.numpy as jnp

    from . import _apply_layout

    return jnp.reshape(_apply_layout(y, index, len(shape), *_jnp_layout_ops()), tuple(shape))


class JaxFunction(ClassedFunction):
    """A JAX function whose attention Flashlight compiles per shape class;
    see the module's docstring."""

    def __init__(self, fn, archs=DEFAULT_ARCHS, flags=(), cache=None, runtime_shapes=False):
        self.fn = fn
        self.archs = tuple(archs)
        self.flags = tuple(flags)
        self.cache = cache
        self._classes = ShapeClasses(runtime_shapes, lambda name: _DTYPES[name])
        self._manifests = self._classes.manifests
        self._differentiable = None
        self._training = {}  # shape class -> the training forward's manifest, or None

    def stablehlo(self, *args):
        """The StableHLO text of the function at `args`' shapes and dtypes,
        lowered for CUDA (the compiler's input; the cache key)."""
        import jax

        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
        return jax.jit(self.fn).trace(*specs).lower(lowering_platforms=("cuda",)).as_text()

    def prepare(self, *args):
        """The manifest of `args`' shape class: cached, or compiled (with
        runtime shapes from the second shape class on, as flashlight.jit)."""
        shape_class = self.shape_class(args)
        manifest = self._classes.lookup(shape_class)
        if manifest is not None:
            return manifest
        folder = self._classes.new_folder()
        with open(os.path.join(folder, "program.stablehlo.mlir"), "w") as f:
            f.write(self.stablehlo(*args))
        return self._classes.compile(shape_class, folder, "program.stablehlo.mlir",
                                     archs=self.archs, flags=self.flags, cache=self.cache)

    def prepare_gradient(self, *args, saved_statistics=False, score_captures=False):
        """The manifest of the gradient program of the function's attention
        at `args`' shapes (`flashlight-compile --gradient`; cached). With
        `saved_statistics`, the one that takes the forward's output and
        log-sum-exp after dO (`--saved-statistics`); with `score_captures`,
        one that also differentiates the tensors the score reads at the
        attention's own indices (`--score-capture-gradients`)."""
        flags = ("--gradient",) + (
            ("--saved-statistics",) if saved_statistics else ()) + (
            ("--score-capture-gradients",) if score_captures else ())
        return self._compile_static(args, flags)

    def _compile_static(self, args, flags):
        """The manifest of the function at `args`' own shapes compiled
        with `flags` after the decorator's (cached)."""
        from ._jit import cached_compile

        folder = self._classes.new_folder()
        with open(os.path.join(folder, "program.stablehlo.mlir"), "w") as f:
            f.write(self.stablehlo(*args))
        manifest, _ = cached_compile(folder, "program.stablehlo.mlir", archs=self.archs,
                                     flags=(*self.flags, *flags), cache=self.cache)
        return manifest

    def prepare_training(self, *args):
        """The training forward of `args`' shape class, as
        flashlight.jit's: its entry also returns the attention's
        log-sum-exp (`flashlight-compile --return-lse`), which the gradient
        program takes with the output (`--saved-statistics`), so that the
        backward does not compute the forward again. Returns the forward's
        manifest path, or None where the backward needs more than that
        (several branches, an epilogue, another normalizer: refused by
        the compiler) or the output is more than a permutation of the
        attention's; the backward then runs the gradient program that
        computes the forward again."""
        from ._jit import CompileError

        shape_class = self.shape_class(args)
        if shape_class not in self._training:
            try:
                forward = self._compile_static(args, ("--return-lse",))
            except CompileError:
                forward = None
            if forward is not None:
                with open(forward) as f:
                    entry = json.load(f).get("entry") or {}
                results = entry.get("results", [])
                dims = ([i["dim"] for i in results[0]["index"] if "dim" in i]
                        if results else [])
                if ("steps" in entry or len(results) != 2 or "lse_result" not in entry
                        or len(set(dims)) != len(dims)):
                    forward = None
            self._training[shape_class] = forward
        return self._training[shape_class]

    def gradient_from_statistics(self, *args, dout, out, lse):
        """The gradients of the attention's operands given dO and the whole
        attention's output and log-sum-exp (f32), all in the attention's
        own layouts (as `flashlight.jit`'s): for callers that merge partial
        attentions (flashlight.jax_ring). For programs whose kernel
        operands are their arguments (the ring's steps): returns
        {argument index: gradient}."""
        manifest_path = self.prepare(*args)
        with open(manifest_path) as f:
            entry = json.load(f).get("entry") or {}
        if any("input" not in s or s["input"] != k or any("dim" in i and i["dim"] != d
                                                             for d, i in enumerate(s["index"]))
               for k, s in enumerate(entry.get("sources", []))):
            raise NotImplementedError(
                "flashlight.jax: gradient_from_statistics takes programs whose kernel "
                "operands are their arguments")
        gradient_path = self.prepare_gradient(*args, saved_statistics=True)
        with open(gradient_path) as f:
            gradient = json.load(f)
        _register()
        grads = _run_steps(gradient, os.path.dirname(gradient_path), gradient_path,
                           [*args, dout, out, lse])
        grads = grads if isinstance(grads, tuple) else (grads,)
        return dict(zip(gradient["entry"]["gradient_of"], grads))

    def __call__(self, *args):
        if self._differentiable is None:
            self._differentiable = self._make_differentiable()
        return self._differentiable(*args)

    def _make_differentiable(self):
        """The call as a jax.custom_vjp: the forward its kernel, the
        backward the attention's gradient program between the
        vector-Jacobian products of the layouts around it."""
        import jax

        call = jax.custom_vjp(self._forward)
        call.defvjp(self._training_forward, self._backward)
        return call

    def _training_forward(self, *args):
        """custom_vjp's forward rule: the training forward where the
        function has one, keeping its output and log-sum-exp for the
        backward; else the forward, keeping only the arguments."""
        training = self.prepare_training(*args)
        if training is None:
            return self._forward(*args), (args, None)
        with open(training) as f:
            lse = json.load(f)["entry"]["lse_result"]
        results = self._run(training, args)
        return results[1 - lse], (args, (results[1 - lse], results[lse]))

    def _backward(self, residuals, g):
        import jax
        import jax.numpy as jnp

        from . import _resolve

        args, saved = residuals
        manifest_path = self.prepare_training(*args) if saved else self.prepare(*args)
        with open(manifest_path) as f:
            manifest = json.load(f)
        entry = manifest.get("entry") or {}
        # The output's result (a training forward's entry returns the
        # log-sum-exp too).
        out = 1 - entry["lse_result"] if "lse_result" in entry else 0
        if "steps" in entry or len(entry.get("results", [])) != 1 + ("lse_result" in entry):
            raise NotImplementedError(
                "flashlight.jax: the backward pass takes functions that are one attention "
                "and its layouts, returning its output; decorate the attention alone")
        directory = os.path.dirname(manifest_path)
        params = manifest["params"]
        inputs = [p for p in params if p["direction"] == "in"]
        outputs = [p for p in params if p["direction"] == "out"]
        floats = [i for i, a in enumerate(args) if jnp.issubdtype(a.dtype, jnp.floating)]

        def operands(*xs):
            full = list(args)
            for i, x in zip(floats, xs):
                full[i] = x
            return [_constant(directory, s["constant"], p) if "constant" in s else
                    _to_kernel_layout(full[s["input"]], s["index"], p["shape"]).astype(
                        _dtype(p["dtype"]))
                    for s, p in zip(entry["sources"], inputs)]

        def missing(gradient):
            """The first float argument the gradient program derives no
            gradient for, with its operand's name."""
            of = gradient["entry"]["gradient_of"]
            for k, (s, p) in enumerate(zip(entry["sources"], inputs)):
                if k not in of and "input" in s and s["input"] in floats:
                    return s["input"], p["name"]
            return None

        for score_captures in (False, True):
            # A float argument the score reads (a pair bias, slopes, a
            # bucket table): the program that materializes S and dP for it.
            gradient_path = self.prepare_gradient(*args, saved_statistics=saved is not None,
                                                  score_captures=score_captures)
            with open(gradient_path) as f:
                gradient = json.load(f)
            if missing(gradient) is None:
                if score_captures:
                    from . import _warn_once

                    _warn_once("flashlight.jax: a tensor the attention's score reads is "
                               "differentiated; a pair bias's gradient comes from the dQ "
                               "kernel as a [B, H, M, N] f32 term, a per-head or per-query "
                               "one's (slopes) as [B, H, M] row sums, a table's read at "
                               "computed indices from S and dP materialized on the "
                               "reference path ([B, H, M, N] f32 each per call)")
                break
        else:
            arg, name = missing(gradient)
            raise NotImplementedError(
                f"flashlight.jax: argument {arg} is read by the attention's score or mask "
                f"({name}) where its gradient is not derived: only tensors the score reads "
                "once get one (pair biases, slopes, bucket tables), not those it reads twice "
                "or that the epilogue reads too; wrap it in "
                "jax.lax.stop_gradient")
        of = gradient["entry"]["gradient_of"]  # the operands the results are of
        r, info = entry["results"][out], entry["outputs"][out]
        kernel_out = jnp.zeros(_resolve(outputs[r["result"]], {}),
                               _dtype(outputs[r["result"]]["dtype"]))
        _, pull_out = jax.vjp(lambda o: _to_user_layout(o, r["index"], info["shape"]), kernel_out)
        (dout,) = pull_out(g.astype(kernel_out.dtype))
        # The saved output in the kernel's layout: the layout is a
        # permutation (prepare_training), so its vector-Jacobian product is
        # its inverse.
        extra = [] if saved is None else [pull_out(saved[0].astype(kernel_out.dtype))[0],
                                          saved[1]]
        ops = [*operands(*[args[i] for i in floats]), dout, *extra]
        layouts, result_layouts = _gradient_layouts(
            gradient, entry, args, inputs, (r, info, outputs[r["result"]]), g, saved, ops)
        grads = _run_steps(gradient, os.path.dirname(gradient_path), gradient_path,
                           ops, layouts, result_layouts)
        grads = grads if isinstance(grads, tuple) else (grads,)
        # Gradients returned in the caller's layout go back to the
        # kernel's for the layouts' vector-Jacobian product: XLA folds the
        # two transposes away.
        grads = [x if layout is None else jnp.transpose(x, layout[1])
                 for x, layout in zip(grads, result_layouts)]

        def differentiated(*xs):
            ops = operands(*xs)
            return tuple(ops[k] for k in of)
        _, pull = jax.vjp(differentiated, *[args[i] for i in floats])
        found = iter(pull(tuple(grads)))
        return tuple(next(found) if i in floats else None for i in range(len(args)))

    def _forward(self, *args):
        results = self._run(self.prepare(*args), args)
        return results[0] if len(results) == 1 else tuple(results)

    def _run(self, manifest_path, args):
        """The results of `manifest_path`'s entry on `args` (a list)."""
        with open(manifest_path) as f:
            manifest = json.load(f)
        entry = manifest.get("entry") or {}
        directory = os.path.dirname(manifest_path)
        _register()
        if "steps" in entry:
            results = _run_steps(manifest, directory, manifest_path, args)
            return list(results) if isinstance(results, tuple) else [results]
        if not manifest.get("kernel") or "sources" not in entry:
            raise NotImplementedError(f"flashlight.jax: {manifest_path} has no entry")
        import jax.numpy as jnp

        from . import _bind_extents, _resolve

        # Runtime shapes: the extents' sizes from the arguments.
        extents = _bind_extents([i for i in entry["inputs"] if "file" not in i], args,
                                [f"argument {i}" for i in range(len(args))],
                                manifest.get("max_extent"))
        params = manifest["params"]
        inputs = [p for p in params if p["direction"] == "in"]
        strided = _reads_strides(manifest)
        operands, layouts = [], []
        for source, p in zip(entry["sources"], inputs):
            shape = _resolve(p, extents)
            if "constant" in source:
                operands.append(_constant(directory, source["constant"], p))
                layouts.append(None)
                continue
            x = args[source["input"]].astype(_dtype(p["dtype"]))
            # A permutation of the argument (a [B, N, H, D] array as the
            # kernel's [B, H, N, D]): the array itself, read in place
            # through the kernel's strides; else XLA's copy in the
            # kernel's layout.
            layout = strided and _source_layout(source["index"], x, shape, manifest)
            operands.append(jnp.reshape(x, layout[0]) if layout else
                            _to_kernel_layout(x, source["index"], shape))
            layouts.append(layout[1] if layout else None)
        # Outputs written in the user's layout where the result is a
        # permutation of the kernel's output, likewise.
        outputs = [p for p in params if p["direction"] == "out"]
        written, buffers = {}, [None] * len(outputs)
        for u, (r, info) in enumerate(zip(entry["results"], entry["outputs"])):
            k, shape = r["result"], _resolve(info, extents)
            layout = (strided and buffers[k] is None and info["dtype"] == outputs[k]["dtype"]
                      and _result_layout(r["index"], shape, _resolve(outputs[k], extents),
                                         manifest, _dtype(info["dtype"]).itemsize))
            if layout:
                buffers[k], written[u] = layout, k
        outs = _attention(manifest, manifest_path, operands, extents, layouts=layouts,
                          buffers=buffers)
        return [jnp.reshape(outs[written[u]], _resolve(info, extents)) if u in written else
                _to_user_layout(outs[r["result"]], r["index"], _resolve(info, extents))
                for u, (r, info) in enumerate(zip(entry["results"], entry["outputs"]))]


def _gradient_layouts(gradient, forward, args, inputs, result, g, saved, ops):
    """For the gradient program's run: its inputs the kernel reads in
    the caller's layout (permutations of the arguments, of dO and of the
    saved output; `ops` replaced in place by the caller's arrays) and
    the gradients it can write there, as _run_steps takes them.
    `forward`: the forward's entry; `result`: its result, the result's
    entry output and its kernel output."""
    import jax.numpy as jnp

    layouts = [None] * len(ops)
    gradient_of = gradient["entry"]["gradient_of"]
    if not _reads_strides(gradient):
        return layouts, [None] * len(gradient_of)
    result, info, output = result
    by_operand = {}
    for k, (s, p) in enumerate(zip(forward["sources"], inputs)):
        if "input" not in s:
            continue
        x = args[s["input"]].astype(_dtype(p["dtype"]))
        layout = _source_layout(s["index"], x, p["shape"], gradient)
        if layout:
            ops[k], layouts[k], by_operand[k] = jnp.reshape(x, layout[0]), layout[1], layout
    # dO and the saved output: the result's layout read backwards.
    layout = _result_layout(result["index"], info["shape"], output["shape"], gradient,
                            _dtype(output["dtype"]).itemsize)
    if layout:
        n, dtype = len(inputs), _dtype(output["dtype"])
        ops[n], layouts[n] = jnp.reshape(g.astype(dtype), layout[0]), layout[1]
        if saved is not None:
            ops[n + 1], layouts[n + 1] = jnp.reshape(saved[0].astype(dtype), layout[0]), layout[1]
    return layouts, [by_operand.get(k) for k in gradient_of]


def _constant(directory, file, info):
    import jax.numpy as jnp
    import numpy as np

    data = np.fromfile(os.path.join(directory, file), dtype=_dtype(info["dtype"]))
    return jnp.asarray(data.reshape(info["shape"]))


def _varying_axes(x):
    """The mesh axes `x` varies over inside shard_map (empty outside)."""
    import jax

    t = jax.typeof(x)
    kind = getattr(t, "manual_axis_type", None)
    return set(kind.varying) if kind is not None else set(getattr(t, "vma", ()) or ())


def _vary_like(outs, operands):
    """`outs` of an FFI call, varying over the mesh axes its operands vary
    over: JAX types a custom call's results as the same on every device of
    a shard_map, which a custom_vjp's cotangent checks reject (the ring's
    backward inside shard_map)."""
    import jax

    axes = set().union(*(_varying_axes(o) for o in operands))
    if not axes:
        return outs
    cast = getattr(jax.lax, "pcast", None)
    result = []
    for o in outs:
        missing = tuple(sorted(axes - _varying_axes(o)))
        if missing:
            o = (cast(o, missing, to="varying") if cast is not None
                 else jax.lax.pvary(o, missing))
        result.append(o)
    return result


def _reads_strides(manifest):
    """Whether every arch's kernel of `manifest` reads runtime strides."""
    top = manifest.get("runtime_strides", False)
    archs = (manifest.get("archs") or {}).values()
    return all(a.get("runtime_strides", top) for a in archs) if archs else top


def _strides_fit(dims, perm, manifest, itemsize):
    """Whether the kernel can take a row-major buffer of `dims` as its
    tensor `perm` describes (kernel dim d is buffer dim perm[d]): the
    innermost dim contiguous, the others' strides multiples of the kernel's
    pointer alignment (the runtime's checkStrides, decided here at trace
    time so that a call never fails inside XLA)."""
    align = max([manifest.get("pointer_alignment") or 1] +
                [a.get("pointer_alignment") or 1 for a in (manifest.get("archs") or {}).values()])
    strides, step = [0] * len(dims), 1
    for d in reversed(range(len(dims))):
        strides[d], step = step, step * dims[d]
    rank = len(perm)
    if rank and dims[perm[-1]] > 1 and perm[-1] != rank - 1:
        return False
    return all(dims[perm[d]] <= 1 or strides[perm[d]] * itemsize % align == 0
               for d in range(rank - 1))


def _source_layout(index, x, shape, manifest):
    """How the kernel reads argument `x` in place as the operand of
    `shape` that `index` (a source's: user dim p is kernel dim
    index[p]["dim"], or fixed at index[p]["const"]) describes: (a shape of
    `x` without its unit dims fixed at 0, with a unit dim first for each
    unit kernel dim it lacks, which XLA's reshape makes without a copy;
    the permutation by which that buffer is the operand: kernel dim d is
    its dim perm[d]). None where the kernel cannot (a broadcast, a fixed
    dim past its first element, strides off the kernel's alignment)."""
    mapped = [(p, e["dim"]) for p, e in enumerate(index) if "dim" in e]
    if len(index) != x.ndim or any("dim" not in e and (e.get("const") != 0 or x.shape[p] != 1)
                                   for p, e in enumerate(index)):
        return None
    dims = [d for _, d in mapped]
    inserted = [d for d in range(len(shape)) if d not in dims]
    if len(set(dims)) != len(dims) or any(shape[d] != 1 for d in inserted) or \
            any(x.shape[p] != shape[d] for p, d in mapped):
        return None
    buffer = [1] * len(inserted) + [x.shape[p] for p, _ in mapped]
    perm = [0] * len(shape)
    for i, d in enumerate(inserted):
        perm[d] = i
    for j, (_, d) in enumerate(mapped):
        perm[d] = len(inserted) + j
    return (buffer, perm) if _strides_fit(buffer, perm, manifest, x.dtype.itemsize) else None


def _result_layout(index, user_shape, shape, manifest, itemsize):
    """Likewise for a result of `user_shape` that `index` (a result's:
    kernel dim k is user dim index[k]["dim"], or a unit dim the user's
    result lacks) makes of a kernel output of `shape`: (the user's shape
    without the unit dims the index does not name, with a unit dim first
    for each such kernel dim; the permutation by which that buffer is the
    output; the user's result is the buffer reshaped), or None."""
    if len(index) != len(shape):
        return None
    fixed = [k for k, e in enumerate(index) if "dim" not in e]
    mapped = [(k, e["dim"]) for k, e in enumerate(index) if "dim" in e]
    users = [u for _, u in mapped]
    if any(shape[k] != 1 for k in fixed) or len(set(users)) != len(users) or \
            any(not 0 <= u < len(user_shape) or user_shape[u] != shape[k] for k, u in mapped) or \
            any(user_shape[u] != 1 for u in range(len(user_shape)) if u not in users):
        return None
    named = sorted(users)
    buffer = [1] * len(fixed) + [user_shape[u] for u in named]
    perm = [0] * len(shape)
    for i, k in enumerate(fixed):
        perm[k] = i
    for k, u in mapped:
        perm[k] = len(fixed) + named.index(u)
    return (buffer, perm) if _strides_fit(buffer, perm, manifest, itemsize) else None


def _attention(manifest, manifest_path, operands, extents=None, k=0, layouts=None,
               buffers=None):
    """The program's attention kernel `k` (0: the manifest's top level,
    else `attentions[k]`) as an FFI custom call: its outputs (their runtime
    extents' sizes from `extents`). `layouts`: per operand, None (the
    kernel's own layout) or the permutation by which the operand is the
    kernel's tensor (kernel dim d is its dim perm[d]); `buffers`: per
    output, None or (the user's shape, its permutation likewise), which
    the kernel writes in place."""
    import jax
    import numpy as np

    from . import _resolve

    if k:
        manifest = {**manifest, **manifest["attentions"][k]}
    outputs = [p for p in manifest["params"] if p["direction"] == "out"]
    layouts = layouts or [None] * len(operands)
    buffers = buffers or [None] * len(outputs)
    shapes = [b[0] if b else _resolve(p, extents or {}) for b, p in zip(buffers, outputs)]
    flat = [d for x, perm in zip(operands, layouts) for d in (perm or range(x.ndim))] + \
        [d for shape, b in zip(shapes, buffers) for d in (b[1] if b else range(len(shape)))]
    call = jax.ffi.ffi_call(
        TARGET, [jax.ShapeDtypeStruct(shape, _dtype(p["dtype"]))
                 for shape, p in zip(shapes, outputs)])
    outs = call(*operands, manifest=os.path.abspath(manifest_path), attention=np.int64(k),
                layouts=np.array(flat, dtype=np.int64))
    return _vary_like(list(outs) if isinstance(outs, (list, tuple)) else [outs], operands)


def _host_module(entry, directory):
    """The path of the reference path's module for this device (the
    loader's choice: its arch's cubin, else the newest PTX the driver can
    JIT-compile; off a GPU, lowering on a CPU host, the sm_80 one)."""
    import jax

    from . import _choose_artifact

    cc = getattr(jax.devices()[0], "compute_capability", None) or "8.0"
    return os.path.join(directory, _choose_artifact(entry.get("archs") or {},
                                                    int(str(cc).replace(".", ""))))


class _Values:
    """The values of a manifest entry's steps, by index. A value may be
    held in a caller's layout: a buffer and the permutation that makes it
    the kernel's tensor (kernel dim d is buffer dim perm[d]); attention
    kernels that read strides take it in place (`held`), every other read
    gets XLA's transpose into the kernel's layout, made once."""

    def __init__(self, count):
        self._values = [None] * count
        self._held = {}

    def __setitem__(self, i, value):
        self._values[i] = value
        self._held.pop(i, None)

    def hold(self, i, buffer, perm):
        self._values[i], self._held[i] = None, (buffer, list(perm))

    def __getitem__(self, i):
        if self._values[i] is None and i in self._held:
            import jax.numpy as jnp

            buffer, perm = self._held[i]
            self._values[i] = jnp.transpose(buffer, perm)
        return self._values[i]

    def held(self, i):
        """(buffer, permutation) where value `i` is held in a caller's
        layout, else None."""
        return self._held.get(i)


def _attention_step(manifest, manifest_path, step, vals, wanted):
    """An entry's attention step: its operands held in a caller's layout
    passed in place where the kernel reads strides and can take them, and
    its results in `wanted` ({value: (user shape, permutation)}) written
    in the caller's layout likewise."""
    from . import _resolve

    k = step.get("attention", 0)
    if not 0 <= k < len(manifest.get("attentions") or [None]):
        raise RuntimeError(f"flashlight.jax: {manifest_path} has no attention {k}")
    own = {**manifest, **manifest["attentions"][k]} if k else manifest
    strided = _reads_strides(own)
    operands, layouts = [], []
    for a in step["args"]:
        held = vals.held(a)
        fits = held and strided and _strides_fit(list(held[0].shape), held[1], own,
                                                 held[0].dtype.itemsize)
        operands.append(held[0] if fits else vals[a])
        layouts.append(held[1] if fits else None)
    outputs = [p for p in own["params"] if p["direction"] == "out"]
    buffers = []
    for r, p in zip(step["results"], outputs):
        shape, perm = wanted.get(r, (None, None))
        fits = perm and strided and _strides_fit(list(shape), perm, own,
                                                 _dtype(p["dtype"]).itemsize)
        buffers.append((shape, perm) if fits and
                       [shape[i] for i in perm] == _resolve(p, {}) else None)
    outs = _attention(manifest, manifest_path, operands, k=k, layouts=layouts,
                      buffers=buffers)
    for r, o, b in zip(step["results"], outs, buffers):
        if b:
            vals.hold(r, o, b[1])
        else:
            vals[r] = o


def _run_steps(manifest, directory, manifest_path, args, layouts=None, result_layouts=None):
    """The entry's steps in XLA: contractions as jnp.einsum (XLA's GEMM),
    the other reference-path kernels and the attention as FFI custom calls,
    reshapes and constants as what they are. `layouts`: per argument, None
    (in the entry's layout) or the permutation by which it is the entry's
    input (kernel dim d is its dim perm[d]: a caller's [B, N, H, D] array
    as a [B, H, N, D] input), which attention kernels then read in place;
    `result_layouts`: per result, None or (the caller's shape, the
    permutation likewise), the result then returned in the caller's layout
    (written there by its attention kernel where it can)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    entry = manifest["entry"]
    infos = entry["values"]
    vals = _Values(len(infos))
    taken = [i for i in entry["inputs"] if "file" not in i]
    if len(args) != len(taken):
        raise TypeError(f"{entry.get('function')} takes {len(taken)} arrays, got {len(args)}")
    given = iter(zip(args, layouts or [None] * len(args)))
    for i, info in enumerate(entry["inputs"]):
        if "file" in info:
            vals[i] = _constant(directory, info["file"], info)
            continue
        x, perm = next(given)
        if perm is None:
            vals[i] = x
        else:
            vals.hold(i, x, perm)
    result_layouts = result_layouts or [None] * len(entry["results"])
    wanted = {r: tuple(layout) for r, layout in zip(entry["results"], result_layouts)
              if layout is not None}
    module = None
    for step in entry["steps"]:
        op = step["op"]
        if op == "empty":
            info = infos[step["result"]]
            vals[step["result"]] = jnp.zeros(info["shape"], _dtype(info["dtype"]))
        elif op == "constant":
            vals[step["result"]] = _constant(directory, step["file"], infos[step["result"]])
        elif op == "reshape":
            vals[step["result"]] = jnp.reshape(vals[step["source"]],
                                               infos[step["result"]]["shape"])
        elif op == "kernel" and "fill" in step:
            info = infos[step["results"][0]]
            vals[step["results"][0]] = jnp.full(info["shape"], step["fill"], _dtype(info["dtype"]))
        elif op == "kernel" and "copy" in step:
            # Data movement (HostToGPU's flashlight.copy): XLA's own ops.
            copy = step["copy"]
            sources = [vals[v] for v in copy["sources"]]
            if copy["kind"] == "concat":
                moved = jnp.concatenate(sources, axis=copy["dim"])
            elif copy["kind"] == "slice":
                moved = jax.lax.slice(sources[0], copy["offsets"],
                                      [o + n for o, n in zip(copy["offsets"], copy["sizes"])])
            elif copy["kind"] == "transpose":
                moved = jnp.transpose(sources[0], copy["permutation"])
            else:
                raise RuntimeError(f"flashlight.jax: unknown copy {copy['kind']!r}")
            vals[step["results"][0]] = moved
        elif op == "kernel" and "einsum" in step:
            a, b, init = (vals[i] for i in step["args"][:3])
            vals[step["results"][0]] = init + jnp.einsum(
                step["einsum"], a.astype(init.dtype), b.astype(init.dtype),
                preferred_element_type=init.dtype)
        elif op == "kernel":
            module = module or _host_module(entry, directory)
            results = step["results"]
            call = jax.ffi.ffi_call(HOST_TARGET, [
                jax.ShapeDtypeStruct(infos[r]["shape"], _dtype(infos[r]["dtype"]))
                for r in results])
            operands = [vals[a] for a in step["args"] if a not in results]
            outs = call(*operands,
                        module=module, kernel=step["kernel"], grid=np.int64(step["grid"]),
                        block=np.int64(step["block"]),
                        results=np.array([i for i, a in enumerate(step["args"])
                                          if a in results], dtype=np.int64))
            outs = _vary_like(outs if isinstance(outs, (list, tuple)) else [outs], operands)
            for r, o in zip(results, outs):
                vals[r] = o
        elif op == "attention":
            _attention_step(manifest, manifest_path, step, vals, wanted)
        else:
            raise RuntimeError(f"flashlight.jax: unknown step {op!r}")
    results = []
    for r, layout in zip(entry["results"], result_layouts):
        held = vals.held(r)
        if layout is None:
            results.append(vals[r])
        elif held and held[1] == list(layout[1]):
            results.append(held[0])
        else:
            results.append(jnp.transpose(vals[r], np.argsort(layout[1])))
    return results[0] if len(results) == 1 else tuple(results)


def jit(fn=None, *, archs=DEFAULT_ARCHS, flags=(), cache=None, runtime_shapes=False):
    """Decorates `fn` (a JAX function of arrays) as a JaxFunction. With
    `runtime_shapes` (off by default: unlike flashlight.jit there is no
    guard check, so a branch on the length that two lowerings take the same
    way goes unseen), kernels take runtime shapes as flashlight.jit's."""
    if fn is None:
        return lambda f: JaxFunction(f, archs, flags, cache, runtime_shapes)
    return JaxFunction(fn, archs, flags, cache, runtime_shapes)
