"""`flashlight.jit` and `flashlight.compile`: Flashlight from PyTorch code.

    @flashlight.jit
    def attention(q, k, v):
        s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        return torch.softmax(s, -1) @ v

    out = attention(q, k, v)                  # eager
    out = torch.compile(model)(x)             # inside torch.compile

On the first call per shape class (the shapes and dtypes of the tensor
arguments) the function is exported (`flashlight.export`), compiled by
`flashlight-compile` (a subprocess) and cached on disk; later calls of the
shape class run the cached kernel through `call_entry`, whatever the
tensors' strides (the kernels read runtime strides). Runtime shapes work as
torch.compile's automatic dynamic shapes: the first shape class gets a
kernel for its shapes; the second (same ranks and dtypes) a kernel with
runtime shapes, compiled against the first one's export
(`--runtime-shapes-from`), whose batch and sequence lengths are read at run
time where the two differ; it serves every later shape class that differs
only there, without exporting or compiling again. A program that depends on
its shapes otherwise (a constant that follows the length, or a guard that
torch.export finds exporting with those dims dynamic: Python control flow
on the length) gets one kernel per shape class, as does
`jit(fn, runtime_shapes=False)`. The call is the
custom operator `flashlight::jit_call` with a fake implementation (the
function itself on fake tensors gives the output shapes), so it works in
eager code, under `torch.compile` (an opaque op in the graph) and in CUDA
graphs (compile before capturing: the first call of a shape class
compiles). Code around the attention stays in PyTorch. Called on tensors
that are not on a CUDA device, the function compiles its kernel (when the
compiler is here) and runs as PyTorch: a CPU run fills the cache.

The disk cache (`FLASHLIGHT_CACHE`, default `~/.cache/flashlight`) holds one
folder per (graph, archs, flags) key and compiler:
`<cache>/<key>/<compiler sha256>/program.json`. The key hashes the exported
graph and its captured tensors, so the shapes, dtypes and every constant are
in it. A machine without the compiler (a GPU machine without MLIR) uses
whatever compiler filled the cache for the key: fill it on the build
machine and copy it over.

The compiler is `FLASHLIGHT_COMPILE`, else the one the pip package carries
(`flashlight/_bin`), else `flashlight-compile` on PATH, else the
repository's `build/bin/flashlight-compile`.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import threading

DEFAULT_ARCHS = ("sm_80", "sm_90a")


class CompileError(RuntimeError):
    """flashlight-compile failed (its output is in the message), or no
    compiler and no cached kernel."""


def find_compiler():
    """The flashlight-compile to run, or None: FLASHLIGHT_COMPILE, else the
    one the pip package carries, else flashlight-compile on PATH, else the
    repository's build."""
    path = os.environ.get("FLASHLIGHT_COMPILE")
    if path:
        return path if os.access(path, os.X_OK) else None
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "_bin", "flashlight-compile")
    if os.access(bundled, os.X_OK):
        return bundled
    found = shutil.which("flashlight-compile")
    if found:
        return found
    built = os.path.join(here, "..", "..", "build", "bin", "flashlight-compile")
    return os.path.normpath(built) if os.access(built, os.X_OK) else None


def _cuda_environment():
    """The compiler's environment: where no CUDA toolkit is found
    (CUDA_HOME, /usr/local/cuda, ptxas on PATH), CUDA_HOME is the ptxas and
    libdevice of the `nvidia-cuda-nvcc` wheel (the package's `cuda` extra),
    when installed."""
    env = dict(os.environ)
    if (env.get("CUDA_HOME") or os.access("/usr/local/cuda/bin/ptxas", os.X_OK)
            or shutil.which("ptxas")):
        return env
    try:
        import nvidia.cuda_nvcc as nvcc  # noqa: PLC0415
    except ImportError:
        return env
    root = next(iter(getattr(nvcc, "__path__", [])), None)
    if root and os.path.exists(os.path.join(root, "bin", "ptxas")):
        env["CUDA_HOME"] = root
    return env


def cache_root():
    return os.environ.get("FLASHLIGHT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "flashlight")


_compiler_ids = {}


def compiler_id(path):
    """The sha256 of the compiler binary: a cached kernel belongs to it."""
    if path not in _compiler_ids:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _compiler_ids[path] = digest.hexdigest()
    return _compiler_ids[path]


def compile(source, out_dir, *, name="program", archs=DEFAULT_ARCHS, flags=(),
            compiler=None):
    """Compiles `source` (StableHLO or torch-mlir text, a flashlight graph
    JSON) into `out_dir` with flashlight-compile and returns the manifest's
    path (`flashlight.load` it to call the kernel)."""
    compiler = compiler or find_compiler()
    if compiler is None:
        raise CompileError("no flashlight-compile (set FLASHLIGHT_COMPILE or put it on PATH)")
    command = [compiler, source, "-o", out_dir, f"--name={name}",
               f"--arch={','.join(archs)}", *flags]
    done = subprocess.run(command, capture_output=True, text=True, env=_cuda_environment())
    if done.returncode != 0:
        raise CompileError(f"flashlight-compile failed ({' '.join(command)}):\n"
                           f"{done.stderr.strip() or done.stdout.strip()}")
    manifest = os.path.join(out_dir, name + ".json")
    _copy_captured(os.path.dirname(os.path.abspath(source)), manifest)
    return manifest


def _copy_captured(source_dir, manifest):
    """Copies beside `manifest` the captured tensors of a JSON graph it
    reads (`<graph>.<name>.bin` beside the graph: the compiler names them,
    it does not copy them), so that the manifest's folder is complete."""
    with open(manifest) as f:
        entry = json.load(f).get("entry") or {}
    files = ([s["constant"] for s in entry.get("sources", []) if "constant" in s] +
             [i["file"] for i in entry.get("inputs", []) if "file" in i] +
             [s["file"] for s in entry.get("steps", []) if "file" in s])
    folder = os.path.dirname(manifest)
    for file in files:
        target, origin = os.path.join(folder, file), os.path.join(source_dir, file)
        if not os.path.exists(target) and os.path.exists(origin):
            shutil.copyfile(origin, target)


# The device an export ran on (factory ops' `device` kwargs) does not change
# the kernel: a cache filled from CPU tensors serves CUDA calls.
_DEVICE = re.compile(rb'\{"device": "[^"]*"\}')


def _hash_folder(folder, extra):
    digest = hashlib.sha256(json.dumps(extra, sort_keys=True).encode())
    for file in sorted(os.listdir(folder)):
        digest.update(file.encode())
        with open(os.path.join(folder, file), "rb") as f:
            data = f.read()
        if file.endswith(".json"):
            data = _DEVICE.sub(b'{"device": "any"}', data)
        digest.update(data)
    return digest.hexdigest()[:32]


_LOCATED_ERROR = re.compile(r":\d+:\d+: error: ")


def _raise_refusal(entry):
    """Raises the compiler's refusal of a cache entry, if it has one."""
    path = os.path.join(entry, "refused.txt")
    if os.path.exists(path):
        with open(path) as f:
            raise CompileError(f.read())


# Written into each cache entry: when it was compiled.
_COMPILED_AT = "compiled_at.txt"


def _compiled_at(entry):
    """How recently the cache entry `entry` was compiled, as a sort key:
    the time written into it; entries from before it was written rank
    below every such entry, by their mtime (which a copy resets)."""
    try:
        with open(os.path.join(entry, _COMPILED_AT)) as f:
            return (1, float(f.read()))
    except (OSError, ValueError):
        return (0, os.path.getmtime(entry))


def cached_compile(graph_dir, graph_file, *, archs=DEFAULT_ARCHS, flags=(), cache=None,
                   probe_dir=None):
    """The manifest for the exported graph in `graph_dir`: from the disk
    cache, else compiled into it. With `probe_dir` (the same function
    exported at other shapes, as `graph_file`), kernels with runtime shapes.
    Returns (manifest path, hit)."""
    cache = cache or cache_root()
    extra = {"archs": list(archs), "flags": list(flags)}
    if probe_dir is not None:
        extra["probe"] = _hash_folder(probe_dir, {})
        flags = (*flags, f"--runtime-shapes-from={os.path.join(probe_dir, graph_file)}")
    key = _hash_folder(graph_dir, extra)
    compiler = find_compiler()
    if compiler is None:
        # No compiler here: any compiler's kernels (or refusal) for this
        # key, the most recently compiled first (by the time written into
        # the entry: a copied cache need not keep its mtimes).
        entries = sorted((os.path.join(cache, key, c) for c in
                          (os.listdir(os.path.join(cache, key))
                           if os.path.isdir(os.path.join(cache, key)) else [])),
                         key=_compiled_at, reverse=True)
        for entry in entries:
            if os.path.exists(os.path.join(entry, "program.json")):
                return os.path.join(entry, "program.json"), True
            _raise_refusal(entry)
        raise CompileError(f"no flashlight-compile here and no cached kernel {key} in "
                           f"{cache} (flags {' '.join(extra['flags']) or 'none'}, archs "
                           f"{','.join(archs)}): fill the cache where the compiler is and "
                           "copy it")
    entry = os.path.join(cache, key, compiler_id(compiler))
    manifest = os.path.join(entry, "program.json")
    if os.path.exists(manifest):
        return manifest, True
    _raise_refusal(entry)
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".compile-", dir=os.path.dirname(entry))
    with open(os.path.join(staging, _COMPILED_AT), "w") as f:
        f.write(repr(time.time()))
    try:
        try:
            compile(os.path.join(graph_dir, graph_file), staging, archs=archs, flags=flags,
                    compiler=compiler)
        except CompileError as e:
            # A located diagnostic is the program's own (the same compiler
            # refuses it again): kept, so that a machine without the
            # compiler knows it too.
            if _LOCATED_ERROR.search(str(e)):
                with open(os.path.join(staging, "refused.txt"), "w") as f:
                    f.write(str(e))
                try:
                    os.rename(staging, entry)
                except OSError:
                    pass  # another process kept its own
            raise
        try:
            os.rename(staging, entry)  # atomic: another process may win
        except OSError:
            if not os.path.exists(manifest):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest, False


class ClassedFunction:
    """What flashlight.jit's and flashlight.jax.jit's functions share: the
    shape class of a call and the compile count of their ShapeClasses
    (`self._classes`)."""

    @property
    def compiles(self):
        """Cache misses this process compiled."""
        return self._classes.compiles

    @staticmethod
    def shape_class(args):
        return tuple((tuple(a.shape), str(a.dtype)) for a in args)


class ShapeClasses:
    """The kernels of a jit function per shape class (shapes and dtypes of
    its arguments), with automatic runtime shapes: per family (ranks and
    dtypes) the first shape class's export is kept as the probe of the
    next one, whose kernel then takes runtime shapes (`--runtime-shapes-
    from`) and serves every later shape class it fits without an export.
    Shared by `flashlight.jit` and `flashlight.jax.jit`; `dtype_name`
    gives a shape class's dtype string for a manifest dtype."""

    def __init__(self, runtime_shapes, dtype_name, check=None):
        self.runtime_shapes = runtime_shapes
        self.dtype_name = dtype_name
        # check(shape_class, probe_class): why the program may not take
        # runtime shapes over the dims the two differ in, or None.
        self.check = check
        self.manifests = {}  # shape class -> manifest path
        self._probes = {}  # family -> the probe's graph folder
        self._probe_classes = {}  # family -> the probe's shape class
        self._dynamic = []  # (pattern, manifest) of kernels with runtime shapes
        self._refusals = {}  # family -> refused runtime-shape compiles
        self._static_only = set()  # families whose program depends on its shapes
        self._folder = tempfile.TemporaryDirectory(prefix="flashlight-jit-")
        self.compiles = 0  # cache misses this process compiled

    def lookup(self, shape_class):
        """The manifest serving `shape_class`, or None (export and
        `compile`)."""
        if shape_class in self.manifests:
            return self.manifests[shape_class]
        for pattern, manifest in self._dynamic:
            if _fits(pattern, shape_class, self.dtype_name):
                self.manifests[shape_class] = manifest
                return manifest
        return None

    def new_folder(self):
        """A folder for an export, kept while this object lives."""
        return tempfile.mkdtemp(dir=self._folder.name)

    def compile(self, shape_class, graph_dir, graph_file, **options):
        """The manifest of the program exported as `graph_dir/graph_file`:
        with runtime shapes where a probe of its family exists (and the
        program allows), else for its shapes."""
        family = tuple((len(shape), dtype) for shape, dtype in shape_class)
        manifest = None
        probe = self._probes.get(family)
        problem = None
        if self.runtime_shapes and probe and family not in self._static_only \
                and self.check is not None:
            problem = self.check(shape_class, self._probe_classes[family])
            if problem:
                self._static_only.add(family)  # a guard holds for every pair
        if self.runtime_shapes and probe and family not in self._static_only:
            try:
                manifest, hit = cached_compile(graph_dir, graph_file, probe_dir=probe,
                                               **options)
                self._dynamic.append((_pattern(manifest), manifest))
            except CompileError:
                # The program depends on its shapes beyond the extents (or
                # computes more than layouts around its attention). Once
                # may be an export's own specialization (torch.export
                # specializes dims of size 1); twice, one kernel per shape
                # class from now on.
                self._refusals[family] = self._refusals.get(family, 0) + 1
                if self._refusals[family] >= 2:
                    self._static_only.add(family)
        if manifest is None:
            manifest, hit = cached_compile(graph_dir, graph_file, **options)
        # The probe: the first shape class without a dim of size 1, if any.
        if probe is None or (_has_unit_dim(self._probe_classes[family])
                             and not _has_unit_dim(shape_class)):
            self._probes[family] = graph_dir
            self._probe_classes[family] = shape_class
        self.compiles += not hit
        self.manifests[shape_class] = manifest
        return manifest


def _has_unit_dim(shape_class):
    return any(1 in shape for shape, _ in shape_class)


def _pattern(manifest):
    """The shape classes a kernel with runtime shapes serves: its entry's
    input shapes (None at a dynamic dim) and dtypes, and the extents."""
    with open(manifest) as f:
        m = json.load(f)
    return [i for i in m["entry"]["inputs"] if "file" not in i], m.get("max_extent")


def _fits(pattern, shape_class, dtype_name):
    """Whether `shape_class` is one the kernel of `pattern` serves: the
    dtypes and static dims equal, the dims of one extent equal, none past
    the kernel's max_extent."""
    from . import _bind_extents

    pattern, max_extent = pattern
    if len(pattern) != len(shape_class):
        return False
    for info, (shape, dtype) in zip(pattern, shape_class):
        if dtype != dtype_name(info["dtype"]):
            return False
    try:
        _bind_extents(pattern, [_Shaped(shape) for shape, _ in shape_class],
                      [f"argument {i}" for i in range(len(pattern))], max_extent)
    except ValueError:
        return False
    return True


def _torch_dtype_name(name):
    """str(torch dtype) of a manifest dtype."""
    from . import _torch_dtypes

    return str(_torch_dtypes()[name])


class _Shaped:
    def __init__(self, shape):
        self.shape = shape


_registry = {}
_op = None
_lock = threading.Lock()


_ops = {}


def _unaliased(outs, args):
    """`outs`, copied where one aliases an input: a custom op's outputs
    must not alias its inputs."""
    return [o.clone() if any(o.data_ptr() == a.data_ptr() for a in args) else o
            for o in outs]


def _register_op():
    """`flashlight::jit_call(key, args) -> outputs`: the call of a jit
    function, opaque to torch.compile; its fake runs the function itself on
    fake tensors for the output shapes."""
    global _op
    if _op is not None:
        return _op
    import torch

    @torch.library.custom_op("flashlight::jit_call", mutates_args=())
    def jit_call(key: str, args: list[torch.Tensor]) -> list[torch.Tensor]:
        return _unaliased(_registry[key]._run(args), args)

    @jit_call.register_fake
    def _(key, args):
        # Tracing (torch.compile) is when a shape class first shows up:
        # compile its kernel now, so that the compiled graph only calls it,
        # and its gradient program, which a traced backward cannot export.
        _registry[key]._prepare_examples(args, isolated=True)
        _registry[key]._prepare_gradient_quietly(args)
        with torch.no_grad():
            outs = _registry[key].fn(*args)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        return [o.new_empty(o.shape) for o in outs]

    # The gradient program is an op of its own, on the kernel's layouts:
    # torch.compile's autograd traces it as one opaque call too, and the
    # layouts around it as the views they are. Its outputs may not alias,
    # so results that are slices of one kernel output (dK and dV of the
    # one dK/dV kernel) leave it as that output, sliced after the op
    # (`_GradientSplit`): views in the traced graph, not copies.
    @torch.library.custom_op("flashlight::jit_grad", mutates_args=())
    def jit_grad(key: str, operands: list[torch.Tensor], dout: torch.Tensor,
                 saved: list[torch.Tensor], of: list[int]) -> list[torch.Tensor]:
        fn = _registry[key]
        found = fn._run_gradient(operands, dout, saved, views=True)
        return fn._gradient_split(operands, dout, saved).outputs(
            found, [*operands, dout, *saved])

    @jit_grad.register_fake
    def _(key, operands, dout, saved, of):
        # The gradients of the operands `of` (q, k, v, sinks, gates) that
        # are no slices, then the sliced values.
        return _registry[key]._gradient_split(operands, dout, saved).fake(operands, of)

    _ops["grad"] = jit_grad

    def setup_context(ctx, inputs, output):
        ctx.key = inputs[0]
        ctx.save_for_backward(*inputs[1])

    def backward(ctx, grads):
        args = list(ctx.saved_tensors)
        found = iter(_registry[ctx.key]._backward(args, grads, _run_gradient))
        return None, [next(found) if a.is_floating_point() else None for a in args]

    jit_call.register_autograd(backward, setup_context=setup_context)

    # A training call (eager): the forward that also returns the
    # attention's log-sum-exp, kept with the output for the gradient
    # program that takes them (no forward computed again).
    @torch.library.custom_op("flashlight::jit_train", mutates_args=())
    def jit_train(key: str, args: list[torch.Tensor]) -> list[torch.Tensor]:
        return _unaliased(_registry[key]._run_training(args), args)

    @jit_train.register_fake
    def _(key, args):
        fn = _registry[key]
        with torch.no_grad():
            out = fn.fn(*args)
        return [out.new_empty(out.shape), out.new_empty(fn._lse_shape(args), dtype=torch.float32)]

    def setup_training(ctx, inputs, output):
        ctx.key = inputs[0]
        ctx.save_for_backward(*inputs[1], *output)

    def backward_training(ctx, grads):
        *args, out, lse = ctx.saved_tensors
        found = iter(_registry[ctx.key]._backward(args, grads[:1], _run_gradient,
                                                  saved=(out, lse)))
        return None, [next(found) if a.is_floating_point() else None for a in args]

    jit_train.register_autograd(backward_training, setup_context=setup_training)
    _op = jit_call
    _ops["train"] = jit_train
    return _op


def _plain(tensors):
    """Whether `tensors` are plain tensors computed on now: not traced
    (torch.compile, fake tensors, a dispatch mode, torch.func)."""
    import torch
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return (not torch.compiler.is_compiling() and _get_current_dispatch_mode() is None
            and not torch._C._are_functorch_transforms_active()
            and all(type(t) is torch.Tensor for t in tensors))


def _run_gradient(key, operands, dout, saved, of):
    """The gradient program of a backward formula. Eager: the program
    itself, without the op's dispatch (~0.2 ms of Python a call), its dK
    and dV as views of the one dK/dV output (an op's outputs must not
    alias: two copies, ~0.16 ms of GPU time at B * N = 16k). The op
    `flashlight::jit_grad` where the backward is traced (torch.compile,
    fake tensors, dispatch modes) or differentiated again (create_graph)."""
    import torch

    fn = _registry[key]
    if not torch.is_grad_enabled() and _plain([*operands, dout, *saved]):
        return fn._run_gradient(operands, dout, saved, views=True)
    split = fn._gradient_split(operands, dout, saved)
    return split.results(_ops["grad"](key, operands, dout, saved, of))


class _GradientSplit:
    """How the gradient program's results leave `flashlight::jit_grad`,
    whose outputs may not alias each other: a result that is a slice no
    later step reads (`_slice_views`) leaves as the value it slices, once,
    after the other results, and is sliced again after the op."""

    def __init__(self, entry):
        from . import _slice_views

        self.entry = entry
        # (A slice of an input leaves as a result: `outputs` copies what
        # aliases an input.)
        self.viewed = {r: copy for r, copy in _slice_views(entry).items()
                       if copy["sources"][0] >= len(entry["inputs"])}
        self.sources = list(dict.fromkeys(self.viewed[r]["sources"][0]
                                          for r in entry["results"] if r in self.viewed))

    def outputs(self, found, inputs):
        """The op's outputs from the program's results (`found`, the
        slices as views of their values), none aliasing `inputs` or
        another output."""
        from . import _copy

        values = self.entry["values"]
        plain, sources = [], {}
        for r, g in zip(self.entry["results"], found):
            if r not in self.viewed:
                plain.append(g)
                continue
            v = self.viewed[r]["sources"][0]
            if v not in sources:
                # The kernel output the view slices (`_copy`'s narrow), or,
                # were it not one whole value, a new one the slice fills.
                base = g._base
                whole = (base is not None and base.is_contiguous()
                         and list(base.shape) == values[v]["shape"])
                sources[v] = base if whole else g.new_empty(values[v]["shape"])
            place = _copy(self.viewed[r], [sources[v]], view=True)
            if place.data_ptr() != g.data_ptr():
                place.copy_(g)
        outs, seen = [], {t.untyped_storage().data_ptr() for t in inputs}
        for t in plain + [sources[v] for v in self.sources]:
            storage = t.untyped_storage().data_ptr()
            outs.append(t.clone() if storage in seen else t)
            seen.add(storage)
        return outs

    def fake(self, operands, of):
        from . import _torch_dtypes

        values = self.entry["values"]
        plain = [operands[i].new_empty(operands[i].shape)
                 for r, i in zip(self.entry["results"], of) if r not in self.viewed]
        return plain + [operands[0].new_empty(values[v]["shape"],
                                              dtype=_torch_dtypes()[values[v]["dtype"]])
                        for v in self.sources]

    def results(self, outputs):
        """The program's results from the op's outputs."""
        from . import _copy

        plain = iter(outputs[:len(outputs) - len(self.sources)])
        sources = dict(zip(self.sources, outputs[len(outputs) - len(self.sources):]))
        return [_copy(self.viewed[r], [sources[self.viewed[r]["sources"][0]]], view=True)
                if r in self.viewed else next(plain) for r in self.entry["results"]]


_train_function = None


def _eager_training():
    """`flashlight::jit_train` as a torch.autograd.Function for eager calls
    (with stand-in kernels on the build machine: ~0.16 ms of Python a call
    through the custom op's autograd wrapper, ~0.04 ms through the Function): the training forward, its output and
    log-sum-exp kept for the gradient program. The op stays where the call
    is traced (torch.compile, dispatch modes, torch.func)."""
    global _train_function
    if _train_function is None:
        import torch

        class TrainingCall(torch.autograd.Function):
            @staticmethod
            def forward(ctx, key, *args):
                out, lse = _registry[key]._run_training(list(args))
                ctx.key = key
                ctx.save_for_backward(*args, out, lse)
                ctx.mark_non_differentiable(lse)
                # No zeros made for the log-sum-exp's gradient (it has
                # none): an allocation and a fill kernel a backward.
                ctx.set_materialize_grads(False)
                return out, lse

            @staticmethod
            def backward(ctx, dout, _):
                if dout is None:
                    return (None,) * (1 + len(ctx.saved_tensors) - 2)
                *args, out, lse = ctx.saved_tensors
                found = iter(_registry[ctx.key]._backward(args, [dout], _run_gradient,
                                                          saved=(out, lse)))
                return (None, *[next(found) if a.is_floating_point() else None
                                for a in args])

        _train_function = TrainingCall
    return _train_function


_dispatch_tls = None


def _default_dispatch_tls():
    """The dispatcher's thread-local include and exclude key sets as a new
    thread has them (not empty: autocast keys are excluded by default)."""
    global _dispatch_tls
    if _dispatch_tls is None:
        import torch

        found = []
        reader = threading.Thread(target=lambda: found.append(
            (torch._C._dispatch_tls_local_include_set(),
             torch._C._dispatch_tls_local_exclude_set())))
        reader.start()
        reader.join()
        _dispatch_tls = found[0]
    return _dispatch_tls


def _on_examples(prepare, shape_class, isolated):
    """`prepare` on zero CPU tensors of `shape_class`. With `isolated`
    (from inside the op: its fake implementation under torch.compile, or
    its real one) outside the fake mode and with the dispatcher's default
    thread state: inside an op's dispatch, torch.export lifts fake
    constants."""
    import contextlib

    import torch

    guards = contextlib.ExitStack()
    if isolated:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        guards.enter_context(unset_fake_temporarily())
        guards.enter_context(torch._C._ForceDispatchKeyGuard(*_default_dispatch_tls()))
    with guards, torch.no_grad():
        return prepare(*[torch.zeros(shape, dtype=getattr(torch, dtype.split(".")[-1]))
                         for shape, dtype in shape_class])


class JitFunction(ClassedFunction):
    """A PyTorch function compiled by Flashlight per shape class; see the
    module's docstring."""

    def __init__(self, fn, archs=DEFAULT_ARCHS, flags=(), cache=None, runtime_shapes=True):
        self.fn = fn
        self.archs = tuple(archs)
        self.flags = tuple(flags)
        self.cache = cache
        self.runtime_shapes = runtime_shapes
        self.key = f"{getattr(fn, '__qualname__', 'fn')}@{id(self):x}"
        self._classes = ShapeClasses(runtime_shapes, _torch_dtype_name, self._guards)
        self._manifests = self._classes.manifests  # shape class -> manifest path
        self._gradients = {}  # shape class -> the gradient program's manifest
        self._saved_gradients = {}  # the same, taking saved statistics
        self._training = {}  # shape class -> (training forward, its gradient) or None
        self._gradient_for = {}  # its operands' shapes -> the same manifest
        self._operand_plans = {}  # (manifest, shape class, device) -> `_operand_plan`
        self._permutation_plans = {}  # (forward, shape class, of) -> `_permutation_plan`
        # (forward, shape class, recomputing) -> the gradient program it
        # registered in `_gradient_for`.
        self._gradient_classes = {}
        self._gradient_errors = {}  # shape class -> why it has none
        # Shape classes whose gradient programs also differentiate the
        # captures the score reads (terms of the dQ kernel, or S and dP
        # materialized): those of calls where such an argument requires grad.
        self._score_capture_classes = set()
        self._manifest_json = {}  # manifest path -> its contents
        self._kernels = {}  # manifest path -> loaded Kernel
        with _lock:
            _registry[self.key] = self

    def _guards(self, shape_class, probe_class):
        """Why the function's graph may not serve other lengths of the dims
        in which the two shape classes differ (torch.export's guards on
        them), or None: two exports alone cannot see a branch on the length
        taken the same way at both."""
        import torch

        from .export import dynamic_dims_problem

        dims = [(i, d) for i, ((s, _), (p, _)) in enumerate(zip(shape_class, probe_class))
                for d, (x, y) in enumerate(zip(s, p)) if x != y]
        # Exported at the probe's shapes: the first without a unit dim,
        # which torch.export would specialize.
        examples = [torch.zeros(s, dtype=getattr(torch, dtype.split(".")[-1]))
                    for s, dtype in probe_class]
        self.last_guard_problem = dynamic_dims_problem(self.fn, examples, dims)
        return self.last_guard_problem

    def prepare(self, *args):
        """Exports and compiles (or finds in the cache) the kernel of
        `args`' shape class; returns its manifest path. Runs on any device
        (the export runs the function's tracing only). The first shape
        class of a family gets a kernel for its shapes; the next one, a
        kernel with runtime shapes (compiled against the first one's
        export) that serves every later shape class differing only in
        those extents, without exporting again."""
        shape_class = self.shape_class(args)
        manifest = self._classes.lookup(shape_class)
        if manifest is not None:
            return manifest
        from .export import export

        graph_dir = self._classes.new_folder()
        export(self.fn, *args, path=os.path.join(graph_dir, "program.json"))
        return self._classes.compile(shape_class, graph_dir, "program.json",
                                     archs=self.archs, flags=self.flags, cache=self.cache)

    def _prepare_examples(self, args, isolated=False):
        """`prepare` on zero CPU tensors of `args`' shape class
        (`_on_examples`)."""
        shape_class = self.shape_class(args)
        if shape_class in self._manifests:
            return self._manifests[shape_class]
        return _on_examples(self.prepare, shape_class, isolated)

    def prepare_gradient(self, *args, saved_statistics=False):
        """Exports the function at `args`' shapes and compiles (or finds in
        the cache) the gradient program of its attention
        (`flashlight-compile --gradient`); returns its manifest path. One
        per shape class: gradient programs take static shapes. With
        `saved_statistics`, the program that takes the forward's output and
        log-sum-exp (`--saved-statistics`; `gradient_from_statistics`)."""
        shape_class = self.shape_class(args)
        table = self._saved_gradients if saved_statistics else self._gradients
        if shape_class not in table:
            from .export import export

            graph_dir = self._classes.new_folder()
            export(self.fn, *args, path=os.path.join(graph_dir, "program.json"))
            flags = (*self.flags, "--gradient") + (
                ("--saved-statistics",) if saved_statistics else ()) + (
                ("--score-capture-gradients",)
                if shape_class in self._score_capture_classes else ())
            table[shape_class], _ = cached_compile(
                graph_dir, "program.json", archs=self.archs, flags=flags, cache=self.cache)
        return table[shape_class]

    def gradient_from_statistics(self, *args, dout, out, lse):
        """The gradients of the attention's operands given dO and the
        statistics of the whole attention: `out` and `lse` (f32) as its
        forward would give them, `dout`, `out` and `lse` in the
        attention's own layouts ([B, H, M, D], [B, H, M]). For a caller
        that computes an attention in parts and merges them by their
        log-sum-exps (flashlight.ring): with the merged output and
        log-sum-exp, each part's gradients are its share of the whole's.
        Returns {kernel operand index: gradient} (the kernel's layouts; a
        program whose operands are its arguments, as the ring's steps, has
        index i for argument i). One program with one attention, softmax,
        one branch, no epilogue."""
        shape_class = self.shape_class(args)
        forward = self._prepare_examples(args)
        sources = self._json(forward).get("entry", {}).get("sources", [])
        if any("input" not in s or s["input"] != k or
               any("dim" in i and i["dim"] != d for d, i in enumerate(s["index"]))
               for k, s in enumerate(sources)):
            raise NotImplementedError(
                f"{self.key}: gradient_from_statistics takes programs whose kernel "
                "operands are their arguments")
        manifest = self._saved_gradients.get(shape_class) or _on_examples(
            lambda *a: self.prepare_gradient(*a, saved_statistics=True), shape_class, False)
        _, _, _, operands = self._layouts(args, check=False, manifest=forward)
        grads = self._kernel(manifest).call_entry(*operands(*args), dout, out, lse)
        grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
        return dict(zip(self._json(manifest)["entry"]["gradient_of"], grads))

    def _prepare_gradient_examples(self, args, isolated=False):
        """`prepare_gradient` on zero CPU tensors of `args`' shape class;
        `isolated` as `_prepare_examples`'s."""
        shape_class = self.shape_class(args)
        if shape_class in self._gradients:
            return self._gradients[shape_class]
        if shape_class in self._gradient_errors:
            raise self._gradient_errors[shape_class]
        return _on_examples(self.prepare_gradient, shape_class, isolated)

    def _prepare_gradient_quietly(self, args):
        """The gradient program compiled ahead of a backward that may come
        (torch.compile traces it where nothing can be exported); a program
        without one keeps its error for that backward."""
        try:
            self._prepare_gradient_examples(args, isolated=True)
        except CompileError as e:
            self._gradient_errors[self.shape_class(args)] = e

    def _json(self, manifest):
        """A manifest's contents, read once (a backward reads it per call)."""
        if manifest not in self._manifest_json:
            with open(manifest) as f:
                self._manifest_json[manifest] = json.load(f)
        return self._manifest_json[manifest]

    def _kernel(self, manifest):
        if manifest not in self._kernels:
            from . import load

            self._kernels[manifest] = load(manifest)
        return self._kernels[manifest]

    def _run(self, args):
        manifest = self._prepare_examples(args, isolated=True)
        outs = self._kernel(manifest).call_entry(*args)
        return list(outs) if isinstance(outs, tuple) else [outs]

    def prepare_training(self, *args):
        """The training forward of `args`' shape class and its gradient
        program: the forward's entry also returns the attention's
        log-sum-exp (`flashlight-compile --return-lse`), and the gradient
        program takes it with the output (`--saved-statistics`), so the
        backward does not compute the forward again. Returns the two
        manifests, or None where the backward needs more than that (several
        branches, an epilogue, another normalizer: the gradient program then
        computes the forward again) or the output is more than a layout of
        the attention's."""
        shape_class = self.shape_class(args)
        if shape_class in self._training:
            return self._training[shape_class]
        from .export import export

        graph_dir = self._classes.new_folder()
        export(self.fn, *args, path=os.path.join(graph_dir, "program.json"))
        try:
            forward, _ = cached_compile(graph_dir, "program.json", archs=self.archs,
                                        flags=(*self.flags, "--return-lse"), cache=self.cache)
        except CompileError:
            # Refused, or no compiler and no cache entry here: the
            # recomputing pair, for this process (only a refusal is kept on
            # disk, by cached_compile).
            self._training[shape_class] = None
            return None
        entry = self._json(forward).get("entry") or {}
        results = entry.get("results", [])
        # One user result, a permutation (and reshape) of the attention's
        # output: the output's vector-Jacobian product maps it back.
        dims = [i["dim"] for i in results[0]["index"] if "dim" in i] if results else []
        if "steps" in entry or len(results) != 2 or len(set(dims)) != len(dims):
            self._training[shape_class] = None
            return None
        try:
            gradient = self.prepare_gradient(*args, saved_statistics=True)
        except CompileError:
            self._training[shape_class] = None
            return None
        self._training[shape_class] = (forward, gradient)
        return self._training[shape_class]

    def _prepare_call(self, args, grad, isolated=False, everything=False):
        """What a call of `args` compiles (on zero CPU tensors of their
        shape class): the forward, and with `grad` the training forward and
        its gradient program where it has one (returns True), else the
        forward and the gradient program that computes it again.
        `everything` (filling a cache on the CPU for a GPU machine): both,
        for eager calls and torch.compile's. An argument the score reads
        that requires grad switches the shape class's gradient programs to
        ones that differentiate such captures too (`--score-capture-
        gradients`), compiled again; where they do not take it either, the
        shape class keeps its programs and the call fails naming it."""
        shape_class = self.shape_class(args)
        try:
            return self._prepare_call_once(args, grad, isolated, everything)
        except _CaptureGradientMissing:
            if shape_class in self._score_capture_classes:
                raise
        self._switch_score_captures(shape_class, True)
        try:
            result = self._prepare_call_once(args, grad, isolated, everything)
        except (_CaptureGradientMissing, CompileError):
            self._switch_score_captures(shape_class, False)
            raise
        from . import _warn_once

        _warn_once(f"flashlight: {self.key}: a tensor the attention's score reads requires "
                   "grad; a pair bias's gradient comes from the dQ kernel as a "
                   "[B, H, M, N] f32 term, a per-head or per-query one's (slopes) as "
                   "[B, H, M] row sums, a table's read at computed indices from S and "
                   "dP materialized on the reference path ([B, H, M, N] f32 each per "
                   "call)")
        return result

    def _switch_score_captures(self, shape_class, on):
        """Whether `shape_class`'s gradient programs differentiate the
        score's captures; its programs compiled the other way are dropped
        (other shape classes, and backward passes under way, keep theirs)."""
        if on:
            self._score_capture_classes.add(shape_class)
        else:
            self._score_capture_classes.discard(shape_class)
        for table in (self._gradients, self._saved_gradients, self._training,
                      self._gradient_errors):
            table.pop(shape_class, None)

    def _prepare_call_once(self, args, grad, isolated, everything):
        if grad:
            shape_class = self.shape_class(args)
            training = (self._training[shape_class] if shape_class in self._training else
                        _on_examples(self.prepare_training, shape_class, isolated))
            if training is not None:
                self._check_differentiable(training[0], args, training[1])
                if not everything:
                    return True
        manifest = self._prepare_examples(args, isolated)
        if grad:
            self._prepare_backward(args, manifest)
        return False

    def _run_training(self, args):
        forward, _ = self._training[self.shape_class(args)]
        return list(self._kernel(forward).call_entry(*args))

    def _lse_shape(self, args):
        """The training forward's log-sum-exp shape (static shapes)."""
        forward, _ = self._training[self.shape_class(args)]
        entry = self._json(forward)["entry"]
        return entry["outputs"][entry["lse_result"]]["shape"]

    def _prepare_backward(self, args, manifest):
        """Compiles the gradient program of `args`' shape class, or says
        why there is none: the compiler's reason where the attention
        cannot be differentiated (the precise one), else why the function
        is more than the backward pass takes."""
        try:
            gradient = self._prepare_gradient_examples(args)
        except CompileError as e:
            if "expected one attention" in str(e):
                self._check_differentiable(manifest)
            raise
        self._check_differentiable(manifest, args, gradient)

    def _check_differentiable(self, manifest, args=None, gradient=None):
        """Raises NotImplementedError where the backward pass cannot take
        the function: more than one attention and its layouts, or an
        argument that requires grad read where its gradient is not derived
        (a captured tensor of the score or mask)."""
        m = self._json(manifest)
        entry = m.get("entry") or {}
        results = len(entry.get("results", [])) - ("lse_result" in entry)
        if "steps" in entry or results != 1:
            raise NotImplementedError(
                f"{self.key}: the backward pass takes functions that are one attention "
                "and its layouts, returning its output; decorate the attention alone "
                "(projections and norms stay in PyTorch, which differentiates them)")
        if gradient is None:
            return
        of = set(self._json(gradient)["entry"]["gradient_of"])
        inputs = [p for p in m["params"] if p["direction"] == "in"]
        for k, (s, p) in enumerate(zip(entry["sources"], inputs)):
            if k not in of and "input" in s and s["input"] < len(args) and \
                    args[s["input"]].requires_grad and args[s["input"]].is_floating_point():
                raise _CaptureGradientMissing(
                    f"{self.key}: argument {s['input']} requires grad, but it is read by "
                    f"the attention's score or mask ({p['name']}) where its gradient is not "
                    "derived: only captured tensors the score reads once get one (pair "
                    "biases, slopes, bucket tables), not those it reads twice or that the "
                    "epilogue reads too; detach it")

    def _layouts(self, args, check=True, manifest=None, shape_class=None):
        """The forward's (`manifest`'s) entry, the bound extents and the
        kernel operands of `args` (their kernel layouts; captured constants
        loaded), for the backward pass (`check`: that it takes them)."""
        from . import _to_kernel_layout

        manifest = manifest or self._prepare_examples(args, isolated=True)
        if check:
            self._check_differentiable(
                manifest, args, self._prepare_gradient_examples(args, isolated=True))
        forward, entry, extents, sources = self._operand_plan(manifest, args, shape_class)

        def operands(*inputs):
            return [source if kind == "constant" else
                    _to_kernel_layout(inputs[source], index, shape)
                    for kind, source, index, shape in sources]
        return forward, entry, extents, operands

    def _operand_plan(self, manifest, args, shape_class=None):
        """What `_layouts` derives from the manifest and the shape class of
        `args` alone, once per both (a backward pass reads it every call):
        the forward Kernel, its entry, the bound extents and per kernel
        operand ("constant", tensor, None, None) or ("input", argument,
        layout index, shape)."""
        from . import _bind_extents, _load_constant, _resolve, _to_kernel_layout

        key = (manifest, shape_class or self.shape_class(args), str(args[0].device))
        plan = self._operand_plans.get(key)
        if plan is not None:
            return plan
        forward = self._kernel(manifest)
        entry = forward.manifest["entry"]
        taken = [i for i in entry["inputs"] if "file" not in i]
        extents = _bind_extents(taken, args, [f"argument {i}" for i in range(len(taken))])
        device = args[0].device
        # Captured constants come after the arguments.
        constants = [_load_constant(forward, i, device) for i in entry["inputs"] if "file" in i]
        sources = []
        for s, p in zip(entry["sources"], forward.inputs):
            if "constant" in s:
                sources.append(("constant", _load_constant(
                    forward, {"file": s["constant"], **p}, device), None, None))
            elif s["input"] >= len(args):  # in its layout, as the arguments
                sources.append(("constant", _to_kernel_layout(
                    constants[s["input"] - len(args)], s["index"], _resolve(p, extents)),
                    None, None))
            else:
                sources.append(("input", s["input"], s["index"], _resolve(p, extents)))
        plan = self._operand_plans[key] = (forward, entry, extents, sources)
        return plan

    def _backward(self, args, grads, grad_op, saved=None):
        """The gradients of the floating-point arguments given the
        output's: the gradient program (`grad_op`, on the kernel's layouts)
        between the vector-Jacobian products of the layout views (a tensor
        feeding several operands, as q, k and v of self-attention, sums).
        `saved`: the training forward's output and log-sum-exp, for its
        gradient program."""
        import torch

        from . import _resolve, _to_user_layout

        shape_class = self.shape_class(args)
        if saved is None:
            forward, entry, extents, operands = self._layouts(args, shape_class=shape_class)
            gradient = self._prepare_gradient_examples(args, isolated=True)
        else:
            training, gradient = self._training[shape_class]
            forward, entry, extents, operands = self._layouts(
                args, check=False, manifest=training, shape_class=shape_class)
        floats = [i for i, a in enumerate(args) if a.is_floating_point()]
        # The operands the results are the gradients of.
        of = self._json(gradient)["entry"]["gradient_of"]

        def differentiated(*xs):
            full = list(args)
            for i, x in zip(floats, xs):
                full[i] = x
            ops = operands(*full)
            return tuple(ops[i] for i in of)

        ops = operands(*args)
        fast = self._backward_by_permutations(args, entry, forward, extents, ops, grads,
                                              grad_op, saved, of, floats, gradient,
                                              shape_class)
        if fast is not None:
            return fast
        r, info = entry["results"][0], entry["outputs"][0]
        kernel_out = torch.zeros(_resolve(forward.outputs[r["result"]], extents),
                                 dtype=ops[0].dtype, device=ops[0].device)
        _, pull_out = torch.func.vjp(
            lambda o: _to_user_layout(o, r["index"], _resolve(info, extents)), kernel_out)
        (dout,) = pull_out(grads[0].to(ops[0].dtype).expand(_resolve(info, extents)))
        dout = dout.contiguous()
        # The output in the kernel's layout: the layout is a permutation, so
        # its vector-Jacobian product is its inverse.
        extra = ([] if saved is None else
                 [pull_out(saved[0].to(kernel_out.dtype))[0].contiguous(), saved[1]])
        # The gradient program of the shape class, by its operands' shapes
        # (what the op sees).
        self._gradient_for[self.shape_class(ops + [dout] + extra)] = gradient
        grads = grad_op(self.key, ops, dout, extra, of)
        _, pull = torch.func.vjp(differentiated, *[args[i] for i in floats])
        return pull(tuple(grads))

    def _backward_by_permutations(self, args, entry, forward, extents, ops, grads, grad_op,
                                  saved, of, floats, gradient, shape_class=None):
        """`_backward` where every operand and the output are permutations
        of the caller's tensors (BHND, BNHD, HF's transposed views), unit
        dims dropped or added (a batch of 1): the vector-Jacobian products
        are the inverse views, taken without torch.func (~1 ms of Python a
        call). None otherwise."""
        import torch

        shape_class = shape_class or self.shape_class(args)
        plan = self._permutation_plan(args, entry, forward, extents, of, shape_class)
        if plan is None:
            return None
        out_layout, out_shape, layouts = plan
        dtype = ops[0].dtype
        dout = out_layout.pull(_as(grads[0], dtype, out_shape)).contiguous()
        extra = ([] if saved is None else
                 [out_layout.pull(_as(saved[0], dtype)).contiguous(), saved[1]])
        # The gradient program by its operands' shape class (what the op
        # sees), which the arguments' shape class fixes: registered once.
        key = (id(forward), shape_class, saved is None)
        if self._gradient_classes.get(key) != gradient:
            self._gradient_for[self.shape_class(ops + [dout] + extra)] = gradient
            self._gradient_classes[key] = gradient
        found = grad_op(self.key, ops, dout, extra, of)
        summed = {}
        for i, g, layout in zip(of, found, layouts):
            source = entry["sources"][i]["input"]
            g = layout.pull(g)
            # A tensor read as several operands sums their gradients in f32.
            summed[source] = g if source not in summed else summed[source].float() + g
        return tuple(_as(summed[i], args[i].dtype) if i in summed else torch.zeros_like(args[i])
                     for i in floats)

    def _permutation_plan(self, args, entry, forward, extents, of, shape_class):
        """The layouts `_backward_by_permutations` pulls gradients through
        (the output's, its kernel shape, the operands' `of`), or None where
        one is not a permutation; once per forward and shape class."""
        from . import _resolve

        key = (id(forward), shape_class, tuple(of))
        if key in self._permutation_plans:
            return self._permutation_plans[key]
        r, info = entry["results"][0], entry["outputs"][0]
        # The output: kernel layout -> the caller's; its gradient back.
        out_layout = _UnitLayout.of(r["index"], _resolve(forward.outputs[r["result"]], extents),
                                    _resolve(info, extents))
        sources = entry["sources"]
        # Captured constants (no caller argument: a closure's tensors come
        # after the arguments) leave the gradient to torch.func.
        layouts = [None if "constant" in sources[i] or sources[i]["input"] >= len(args)
                   else _UnitLayout.of(sources[i]["index"], args[sources[i]["input"]].shape,
                                       _resolve(forward.inputs[i], extents)) for i in of]
        plan = None
        if out_layout is not None and all(layout is not None for layout in layouts):
            plan = (out_layout, _resolve(info, extents), layouts)
        self._permutation_plans[key] = plan
        return plan

    def _gradient_split(self, operands, dout, saved=()):
        """The `_GradientSplit` of the gradient program of these operands."""
        manifest = self._gradient_for[self.shape_class(list(operands) + [dout] + list(saved))]
        return _GradientSplit(self._json(manifest)["entry"])

    def _run_gradient(self, operands, dout, saved=(), views=False):
        """The gradient program on kernel-layout operands (and the saved
        output and log-sum-exp): [dq, dk, dv, dsink...]; `views` as
        `call_entry`'s."""
        manifest = self._gradient_for[self.shape_class(list(operands) + [dout] + list(saved))]
        outs = self._kernel(manifest).call_entry(*operands, dout, *saved, views=views)
        return list(outs)

    def __call__(self, *args):
        import torch

        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{self.key}: argument {i} is a {type(a).__name__}; "
                                "flashlight.jit functions take tensors")
        # A backward pass ahead: its gradient program compiles with the
        # forward's, so that what it cannot take fails here, at the call.
        grad = torch.is_grad_enabled() and any(a.requires_grad for a in args)
        if not all(a.is_cuda for a in args):
            # Off the GPU: compile (so that a CPU run fills the cache for a
            # GPU machine without the compiler), then run the function.
            if find_compiler() is not None:
                self._prepare_call(args, grad, everything=True)
            return self.fn(*args)
        # Eager: compile before the op. A training call keeps the
        # log-sum-exp where its gradient program takes it; torch.compile's
        # trace keeps the op whose backward computes the forward again.
        if not torch.compiler.is_compiling() and self._prepare_call(args, grad):
            _register_op()
            if _plain(args):
                return _eager_training().apply(self.key, *args)[0]
            return _ops["train"](self.key, list(args))[0]
        outs = _register_op()(self.key, list(args))
        return outs[0] if len(outs) == 1 else tuple(outs)


def jit(fn=None, *, archs=DEFAULT_ARCHS, flags=(), cache=None, runtime_shapes=True):
    """Decorates `fn` (a function of tensors) as a JitFunction: compiled by
    Flashlight per shape class, cached on disk, called through a custom
    operator. `flags` are more flashlight-compile flags. With
    `runtime_shapes` (default), the second shape class compiles a kernel
    that takes the extents in which it differs from the first at run time;
    =False compiles one kernel per shape class."""
    if fn is None:
        return lambda f: JitFunction(f, archs, flags, cache, runtime_shapes)
    return JitFunction(fn, archs, flags, cache, runtime_shapes)


_varlen_programs = {}


def varlen_attention(q, k, v, cu_seqlens, *, causal=True, scale=None):
    """Attention over packed sequences (FlashAttention's varlen API): q, k,
    v are `[total, H, D]` (k and v may have fewer heads: GQA), `cu_seqlens`
    the `[sequences + 1]` int32 offsets of the sequences in them. Each
    sequence attends to itself only (causal by default). One fused kernel:
    the sequence of each position comes from the offsets (a document mask,
    whose block mask skips the tiles between sequences). Returns
    `[total, H, D]`."""
    key = (bool(causal), None if scale is None else float(scale))
    if key not in _varlen_programs:
        _varlen_programs[key] = jit(_varlen_program(*key))
    return _varlen_programs[key](q, k, v, cu_seqlens)


class _CaptureGradientMissing(NotImplementedError):
    """An argument that requires grad is read where its gradient program
    derives no gradient for it."""


def _as(t, dtype, shape=None):
    """`t` in `dtype` and broadcast to `shape`, without the ops where it
    already is (each a few microseconds of dispatch on a backward's path)."""
    if t.dtype != dtype:
        t = t.to(dtype)
    if shape is not None and list(t.shape) != list(shape):
        t = t.expand(shape)
    return t


class _UnitLayout:
    """A manifest layout (`index`, as `_to_kernel_layout` and
    `_to_user_layout` read it) that only permutes a tensor of `shape_from`
    into `shape_to` and drops or adds unit dims (a batch of 1 the export
    squeezed, as `_to_kernel_layout` selects and unsqueezes them): `pull`
    is the vector-Jacobian product of that view (the inverse view). None
    from `of` where the layout fixes a dim of more than one element,
    broadcasts or merges dims."""

    def __init__(self, fixed, perm, inserted):
        self.fixed, self.perm, self.inserted = fixed, perm, inserted
        self.back = [0] * len(perm)
        for k, p in enumerate(perm):
            self.back[p] = k

    @classmethod
    def of(cls, index, shape_from, shape_to):
        from . import _layout_plan

        fixed, perm, inserted = _layout_plan(index, len(shape_to))
        kept = [d for d in range(len(shape_from)) if d not in {p for p, _ in fixed}]
        if any(c != 0 or shape_from[p] != 1 for p, c in fixed) or \
                any(shape_to[k] != 1 for k in inserted) or len(perm) != len(kept):
            return None
        rest = [k for k in range(len(shape_to)) if k not in inserted]
        if [shape_from[kept[p]] for p in perm] != [shape_to[k] for k in rest]:
            return None
        return cls(fixed, perm, inserted)

    def pull(self, g):
        for k in reversed(self.inserted):
            g = g.squeeze(k)
        if any(p != k for k, p in enumerate(self.back)):
            g = g.permute(self.back)
        for p, _ in reversed(self.fixed):
            g = g.unsqueeze(p)
        return g


def _varlen_program(causal, scale):
    def varlen(q, k, v, cu_seqlens):
        import torch

        total = q.shape[0]
        pos = torch.arange(total, device=q.device, dtype=cu_seqlens.dtype)
        seq = torch.searchsorted(cu_seqlens[1:], pos, right=True)
        keep = seq[:, None] == seq[None, :]
        if causal:
            keep = keep & (pos[:, None] >= pos[None, :])
        groups = q.shape[1] // k.shape[1]
        qh = q.transpose(0, 1)
        kh = k.transpose(0, 1).repeat_interleave(groups, dim=0)
        vh = v.transpose(0, 1).repeat_interleave(groups, dim=0)
        s = (qh @ kh.transpose(-1, -2)).float()
        s = s * (scale if scale is not None else q.shape[-1] ** -0.5)
        s = s.masked_fill(~keep, float("-inf"))
        return (torch.softmax(s, -1).to(v.dtype) @ vh).transpose(0, 1)

    varlen.__qualname__ = f"varlen_attention(causal={causal}, scale={scale})"
    return varlen
