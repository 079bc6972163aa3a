"""`flashlight.export`: a PyTorch function as a Flashlight JSON graph.

    import flashlight
    flashlight.export(attention, q, k, v, path="attention.json")

runs `torch.export.export` on the function (non-strict, in eval mode) and,
by default, reduces the exported program to the Core ATen opset with
torch's own decomposition table (`ExportedProgram.run_decompositions`
with `torch.export.default_decompositions()`): `matmul` becomes
`expand`/`view`/`bmm`, `softmax` `_softmax`, `.to(dtype)` `_to_copy`,
`transpose` `permute`, `scaled_dot_product_attention` the math it
defines. The graph is then cleaned of what carries no computation in a
functional graph (`clone`, `alias`, `detach`, `lift_fresh_copy`,
`_assert_tensor_metadata`, `copy` of a same-typed value, ...; a `view`
then reads its operand as a value, in row-major order, as `reshape`
does), captured tensors nothing reads are dropped, and lifted 0-d tensor
constants (`torch.tensor(0.0)`) are folded into `aten.scalar_tensor`
nodes; other captured tensors (lifted constants, parameters, buffers)
stay constants. The modules `fn` reaches (itself, closure cells, globals
it names) are registered under the exported wrapper, so their weights are
exported as parameters and buffers (`p_<var>_<path>`, `b_<var>_<path>`).
`decompose=False` keeps the ATen operations as the program called them
(`aten.matmul.default`, `aten.softmax.int`, ...), as flashlight.export
wrote before (scripts/torch_fixtures.py's committed fixtures);
`preserve=[...]` keeps named operators undecomposed.

It writes `path` in the "flashlight-graph" schema, version 1
(docs/json-graph.md), the input of Flashlight's JSON graph importer.
Captured tensors are written beside it as raw data, `<stem>.<name>.bin`.

torch is imported only when `export` is called.
"""

import enum
import inspect
import json
import math
import operator
import os

FORMAT = "flashlight-graph"
VERSION = 1

_DTYPE_NAMES = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "bool": "i1",
    "int8": "i8",
    "uint8": "u8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
}


class ExportError(ValueError):
    """The exported program holds something the schema cannot express."""


def dtype_name(dtype):
    """The schema's name of a torch.dtype ("bf16", "i1", ...)."""
    name = str(dtype).rsplit(".", 1)[-1]
    if name not in _DTYPE_NAMES:
        raise ExportError(f"dtype {dtype} has no name in {FORMAT} v{VERSION}")
    return _DTYPE_NAMES[name]


def _shape(tensor):
    shape = []
    for s in tensor.shape:
        if not isinstance(s, int):  # a SymInt: a dynamic dimension
            raise ExportError(f"dynamic dimension {s} in a shape {tuple(tensor.shape)}")
        shape.append(s)
    return shape


def target_name(target):
    """`str(target)` as "<namespace>.<op>.<overload>" ("aten.softmax.int")."""
    import torch

    if isinstance(target, torch._ops.OpOverload):
        namespace, op = target._schema.name.split("::")
        return f"{namespace}.{op}.{target._overloadname or 'default'}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if name is None:
        return str(target)
    if module in ("_operator", "operator"):
        module = "operator"
    return f"{module}.{name}" if module else name


def _float(x):
    if math.isfinite(x):
        return x
    return {"float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


class _Encoder:
    """Encodes fx arguments; `names` maps an fx node to its name in the JSON."""

    def __init__(self, names):
        import torch

        self.torch = torch
        self.names = names

    def node(self, n):
        if n.op == "call_function" and n.target is operator.getitem:
            source, index = n.args
            if not isinstance(index, int) or source.op not in ("call_function", "placeholder"):
                raise ExportError(f"{n.name}: getitem({source}, {index!r}) is not an output index")
            if source.target is operator.getitem:
                raise ExportError(f"{n.name}: nested getitem")
            return {"ref": self.names[source], "index": index}
        if n.op not in ("call_function", "placeholder") or n not in self.names:
            raise ExportError(f"{n.name}: a use of a {n.op} node ({n.target})")
        return {"ref": self.names[n]}

    def arg(self, a):
        torch = self.torch
        if isinstance(a, torch.fx.Node):
            return self.node(a)
        if a is None or isinstance(a, (bool, int)):  # bool before int: bool is an int
            return a
        if isinstance(a, str):
            return {"str": a}
        if isinstance(a, float):
            return _float(a)
        if isinstance(a, (list, tuple)):
            return [self.arg(x) for x in a]
        if isinstance(a, torch.dtype):
            return {"dtype": dtype_name(a)}
        if isinstance(a, torch.device):
            return {"device": str(a)}
        if isinstance(a, (torch.layout, torch.memory_format)):
            return {"enum": str(a)}
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise ExportError(f"symbolic value {a} (dynamic shapes are not supported)")
        if isinstance(a, torch.Tensor):
            raise ExportError("a tensor literal in an argument")
        if isinstance(a, enum.Enum):
            return {"enum": str(a)}
        raise ExportError(f"argument {a!r} of type {type(a).__name__}")

    def value(self, v, what):
        """dtype/shape of a node's meta value (one tensor)."""
        torch = self.torch
        if isinstance(v, torch.Tensor):
            return {"dtype": dtype_name(v.dtype), "shape": _shape(v)}
        if v is None or isinstance(v, (bool, int, float)):
            # A non-tensor result (None from an assertion op, an int):
            # written as its value so that indices stay aligned.
            return {"value": self.arg(v)}
        raise ExportError(f"{what}: result {v!r} of type {type(v).__name__}")

    def outputs(self, n):
        v = n.meta.get("val")
        if v is None and "tensor_meta" in n.meta:
            v = n.meta["tensor_meta"]
            if v is not None and not isinstance(v, (list, tuple)):
                return [{"dtype": dtype_name(v.dtype), "shape": list(v.shape)}]
        if v is None:
            return []
        if isinstance(v, (list, tuple)):
            return [self.value(x, n.name) for x in v]
        return [self.value(v, n.name)]


def _parameter_names(fn, count):
    """fn's parameter names when it takes `count` positional arguments."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) < count or any(p.kind not in positional for p in params[:count]):
        return None
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if any(p.default is inspect.Parameter.empty and p.kind not in variadic
           for p in params[count:]):
        return None
    return [p.name for p in params[:count]]


def _module(fn, count):
    """An nn.Module whose forward calls fn, with fn's parameter names (so the
    exported placeholders are named like fn's parameters)."""
    import torch

    class Function(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)

    names = _parameter_names(fn, count)
    if names is not None:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        Function.forward.__signature__ = inspect.Signature(
            [inspect.Parameter("self", kind)] + [inspect.Parameter(n, kind) for n in names])
    Function.__name__ = Function.__qualname__ = getattr(fn, "__name__", "Function")
    return Function(), names


def _tensor_bytes(t):
    import torch

    t = t.detach().cpu().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.view(torch.uint8).numpy().tobytes()


def _write_json(graph, path):
    """One line per input, constant, node and output: readable and diffable."""

    def items(key):
        rows = [f"    {json.dumps(x)}" for x in graph[key]]
        return f'  "{key}": [\n' + ",\n".join(rows) + "\n  ]" if rows else f'  "{key}": []'

    head = [f"  {json.dumps(k)}: {json.dumps(graph[k])}"
            for k in ("format", "version", "producer", "function")]
    body = [items(k) for k in ("inputs", "constants", "nodes", "outputs")]
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(head + body) + "\n}\n")


def to_graph(ep, function="", input_names=None):
    """The flashlight-graph dict of an ExportedProgram, and the constants'
    tensors ({name: tensor}). `input_names` renames the user inputs."""
    import torch
    from torch.export.graph_signature import InputKind, OutputKind

    graph = ep.graph
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    names = {}
    taken = {n.name for n in graph.nodes}
    inputs, constants, tensors = [], [], {}
    user = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if input_names is not None and len(input_names) != len(user):
        input_names = None
    for spec in ep.graph_signature.input_specs:
        if spec.kind not in (InputKind.USER_INPUT, InputKind.PARAMETER, InputKind.BUFFER,
                             InputKind.CONSTANT_TENSOR):
            raise ExportError(f"input {spec.arg} of kind {spec.kind.name}")
        arg_name = getattr(spec.arg, "name", None)
        node = placeholders.get(arg_name)
        if node is None:
            raise ExportError(f"input {spec.arg} is not a tensor placeholder "
                              "(every example input must be a tensor)")
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise ExportError(f"input {arg_name} is not a tensor")
        name = node.name
        if spec.kind == InputKind.USER_INPUT:
            if input_names is not None:
                wanted = input_names[len(inputs)]
                if wanted == name or wanted not in taken:
                    taken.discard(name)
                    taken.add(wanted)
                    name = wanted
            names[node] = name
            inputs.append({"name": name, "dtype": dtype_name(val.dtype), "shape": _shape(val)})
            continue
        if spec.kind == InputKind.CONSTANT_TENSOR or spec.target not in ep.state_dict:
            tensor = ep.constants[spec.target]
        else:
            tensor = ep.state_dict[spec.target]
        if not isinstance(tensor, torch.Tensor):
            raise ExportError(f"constant {spec.target} is not a tensor")
        names[node] = name
        constants.append({"name": name, "dtype": dtype_name(tensor.dtype),
                          "shape": _shape(tensor)})
        tensors[name] = tensor

    enc = _Encoder(names)
    nodes = []
    for n in graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            if n.op in ("get_attr", "call_module", "call_method"):
                raise ExportError(f"{n.name}: a {n.op} node ({n.target})")
            continue
        names[n] = n.name
        nodes.append({
            "name": n.name,
            "target": target_name(n.target),
            "args": [enc.arg(a) for a in n.args],
            "kwargs": {k: enc.arg(v) for k, v in n.kwargs.items()},
            "outputs": enc.outputs(n),
        })

    output_node = next(n for n in graph.nodes if n.op == "output")
    results = output_node.args[0]
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    outputs = []
    for spec, value in zip(ep.graph_signature.output_specs, results):
        if spec.kind not in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT):
            raise ExportError(f"output {spec.arg} of kind {spec.kind.name} "
                              "(the function mutates an input or a buffer)")
        outputs.append(enc.arg(value))

    version = torch.__version__.split("+")[0]
    return {
        "format": FORMAT,
        "version": VERSION,
        "producer": f"flashlight.export (torch {version})",
        "function": function,
        "inputs": inputs,
        "constants": constants,
        "nodes": nodes,
        "outputs": outputs,
    }, tensors


def _modules_of(fn):
    """The nn.Modules `fn` is or reaches directly, as [(name, module)]: fn
    itself, a bound method's object, closure cells (named after the free
    variable), globals it names, functools.partial arguments, default
    values. Export puts them
    in eval mode and registers them under the wrapper, so that their
    parameters and buffers are exported as such (`p_<name>_<path>`)."""
    import functools

    import torch

    found, seen = [], set()

    def visit(x, name, depth):
        if id(x) in seen or depth > 3:
            return
        seen.add(id(x))
        if isinstance(x, torch.nn.Module):
            found.append((name, x))
            return
        if isinstance(x, functools.partial):
            visit(x.func, name, depth + 1)
            for i, a in enumerate(x.args):
                visit(a, f"{name}_{i}", depth + 1)
            for k, a in x.keywords.items():
                visit(a, k, depth + 1)
            return
        if isinstance(x, (list, tuple)):
            for i, a in enumerate(x):
                visit(a, f"{name}_{i}", depth + 1)
            return
        if isinstance(x, dict):
            for k, a in x.items():
                visit(a, f"{name}_{k}", depth + 1)
            return
        owner = getattr(x, "__self__", None)
        if owner is not None:
            visit(owner, name, depth + 1)
        code = getattr(x, "__code__", None)
        freevars = code.co_freevars if code is not None else ()
        for var, cell in zip(freevars, getattr(x, "__closure__", None) or ()):
            try:
                visit(cell.cell_contents, var, depth + 1)
            except ValueError:  # an empty cell
                pass
        for i, a in enumerate(getattr(x, "__defaults__", None) or ()):
            visit(a, f"{name}_default{i}", depth + 1)
        module_globals = getattr(x, "__globals__", None)
        if code is not None and module_globals is not None:
            for var in code.co_names:  # modules the function names as globals
                if isinstance(module_globals.get(var), torch.nn.Module):
                    visit(module_globals[var], var, depth + 1)

    visit(fn, "fn", 0)
    names, result = set(), []
    for name, m in found:
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "m"
        while name in names or name == "training":
            name += "_"
        names.add(name)
        result.append((name, m))
    return result


#: Operators that carry no computation in a functional graph: a use of one
#: is a use of its first argument.
_IDENTITY_OPS = (
    "aten.clone.default",
    "aten.alias.default",
    "aten.detach.default",
    "aten.detach_.default",
    "aten.lift_fresh_copy.default",
    "aten.lift_fresh.default",
    "aten.contiguous.default",
    "aten.dropout.default",  # only with train=False (checked)
    "aten.feature_dropout.default",
)

#: Operators with no result that only check what the graph already says.
_CHECK_OPS = (
    "aten._assert_tensor_metadata.default",
    "aten._assert_scalar.default",
    "aten._assert_async.msg",
    "aten._assert_async.default",
    "aten.sym_constrain_range_for_size.default",
    "aten.sym_constrain_range.default",
    "aten._functional_assert_async.msg",
)

#: Random operators: their presence means dropout in training mode.
_RANDOM_OPS = ("aten.native_dropout.default", "aten.bernoulli.p", "aten.bernoulli.default",
               "aten.rand.default", "aten.rand_like.default", "aten.randn.default",
               "aten.randn_like.default")


def _clean(ep):
    """Removes the identity and check nodes of `ep`'s graph and folds 0-d
    lifted constants into `aten.scalar_tensor` nodes, in place; returns ep."""
    import torch
    from torch.export.graph_signature import InputKind

    graph = ep.graph
    for n in list(graph.nodes):
        if n.op != "call_function":
            continue
        name = target_name(n.target)
        if name in _RANDOM_OPS:
            raise ExportError(f"{n.name}: {name}: a random operation (dropout in training "
                              "mode?); export the function in eval mode")
        if name in ("aten.dropout.default", "aten.feature_dropout.default"):
            train = n.args[2] if len(n.args) > 2 else n.kwargs.get("train", False)
            if train:
                raise ExportError(f"{n.name}: dropout in training mode")
        if name in _IDENTITY_OPS and n.args and isinstance(n.args[0], torch.fx.Node):
            source = n.args[0]
            src_val, val = source.meta.get("val"), n.meta.get("val")
            if (isinstance(src_val, torch.Tensor) and isinstance(val, torch.Tensor)
                    and (src_val.dtype != val.dtype or tuple(src_val.shape) != tuple(val.shape))):
                continue
            n.replace_all_uses_with(source)
            graph.erase_node(n)
        elif name in _CHECK_OPS and not n.users:
            graph.erase_node(n)
        elif name == "aten.copy.default" and len(n.args) >= 2:
            # The functional form of `dst.copy_(src)` (a write into a new
            # tensor): with src of dst's shape and dtype, the result is src.
            dst, src = n.args[0], n.args[1]
            dv = dst.meta.get("val") if isinstance(dst, torch.fx.Node) else None
            sv = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
            if (isinstance(dv, torch.Tensor) and isinstance(sv, torch.Tensor)
                    and dv.dtype == sv.dtype and tuple(dv.shape) == tuple(sv.shape)):
                n.replace_all_uses_with(src)
                graph.erase_node(n)

    # 0-d lifted tensor constants (torch.tensor(0.0)) become scalar_tensor
    # nodes: a value in the graph rather than a 1-element file.
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    folded = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind != InputKind.CONSTANT_TENSOR:
            continue
        tensor = ep.constants.get(spec.target)
        node = placeholders.get(getattr(spec.arg, "name", None))
        if (node is None or not isinstance(tensor, torch.Tensor) or tensor.dim() != 0
                or not (tensor.dtype.is_floating_point or tensor.dtype in (
                    torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64))):
            continue
        first = next(n for n in graph.nodes if n.op != "placeholder")
        with graph.inserting_before(first):
            value = tensor.item()
            new = graph.call_function(torch.ops.aten.scalar_tensor.default, (value,),
                                      {"dtype": tensor.dtype})
        new.meta["val"] = node.meta.get("val")
        node.replace_all_uses_with(new)
        folded.append((spec, node))
    for spec, node in folded:
        graph.erase_node(node)
        ep.graph_signature.input_specs.remove(spec)
        ep.constants.pop(spec.target, None)
    graph.eliminate_dead_code()
    # Captured tensors nothing reads (a buffer the module keeps but this
    # computation does not use) are not written.
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    for spec in list(ep.graph_signature.input_specs):
        node = placeholders.get(getattr(spec.arg, "name", None))
        if spec.kind != InputKind.USER_INPUT and node is not None and not node.users:
            graph.erase_node(node)
            ep.graph_signature.input_specs.remove(spec)
    graph.lint()
    return ep


def decompositions(preserve=()):
    """torch's Core ATen decomposition table, less the operators named in
    `preserve` (OpOverloads or "aten.op.overload" names)."""
    import torch

    table = torch.export.default_decompositions()
    names = {p if isinstance(p, str) else target_name(p) for p in preserve}
    for op in list(table.keys()):
        if target_name(op) in names:
            del table[op]
    return table


def distinct_inputs(example_inputs):
    """The example inputs, each in storage of its own. torch.export merges
    inputs that share memory (`f(x, x, x)`, `q = k = v = torch.zeros(..)`)
    into one placeholder, and the graph would compute f(v, v, v) whatever
    the caller later passes; every input of the graph must stay distinct, so
    aliased ones are copied first (the values are the same)."""
    seen = set()
    out = []
    for x in example_inputs:
        key = (x.device, x.untyped_storage().data_ptr()) if x.numel() else None
        if key is not None and key in seen:
            x = x.clone()
        elif key is not None:
            seen.add(key)
        out.append(x)
    return tuple(out)


def export_program(fn, *example_inputs, decompose=True, preserve=()):
    """`torch.export` of `fn(*example_inputs)` as flashlight.export sees it:
    in eval mode, reduced to Core ATen unless `decompose` is false, cleaned
    (see the module's docstring). Returns (ExportedProgram, input names)."""
    import torch

    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"example input {i} is a {type(x).__name__}, not a tensor")
    example_inputs = distinct_inputs(example_inputs)
    module, names = _module(fn, len(example_inputs))
    named = _modules_of(fn)
    modules = [m for _, m in named]
    for name, m in named:
        module.add_module(name, m)
    module.eval()
    training = [m.training for m in modules]
    try:
        for m in modules:
            m.eval()
        ep = torch.export.export(module, tuple(example_inputs), strict=False)
        if decompose:
            ep = ep.run_decompositions(decompositions(preserve))
    finally:
        for m, t in zip(modules, training):
            m.train(t)
    if decompose:
        ep = _clean(ep)
    return ep, names


def dynamic_dims_problem(fn, example_inputs, dims):
    """Why `fn` does not stay one program over the dims `dims` ((input,
    dim) pairs) of its inputs, or None: torch.export with those dims
    dynamic (`Dim.AUTO`) specializes one of them, or bounds it (a guard:
    Python control flow on the length, a size-1 specialization aside),
    which an export at fixed shapes cannot show."""
    import torch
    from torch.export import Dim

    example_inputs = distinct_inputs(example_inputs)
    module, _ = _module(fn, len(example_inputs))
    for name, m in _modules_of(fn):
        module.add_module(name, m)
    module.eval()
    spec = [{d: Dim.AUTO for i2, d in dims if i2 == i} or None
            for i in range(len(example_inputs))]
    try:
        ep = torch.export.export(module, tuple(example_inputs), dynamic_shapes=tuple(spec),
                                 strict=False)
    except Exception as e:  # a guard the export cannot express
        return f"torch.export with dynamic dims failed: {type(e).__name__}: {str(e)[:200]}"
    inputs = [n for n in ep.graph.nodes if n.op == "placeholder"][-len(example_inputs):]
    for i, d in dims:
        size = inputs[i].meta["val"].shape[d]
        if not isinstance(size, torch.SymInt):
            return f"input {i} dim {d} is specialized to {size}"
        bounds = ep.range_constraints.get(size.node.expr)
        if bounds is not None and str(bounds.upper) not in ("int_oo", "oo"):
            return f"input {i} dim {d} is bounded by a guard ({bounds})"
    return None


def export(fn, *example_inputs, path, decompose=True, preserve=()):
    """Exports `fn(*example_inputs)` with torch.export and writes `path`
    (flashlight-graph JSON) and its constants beside it; returns the graph
    as a dict. The example inputs must be tensors; their shapes and dtypes
    are the graph's (static shapes). `fn` and the modules it reaches run in
    eval mode (dropout is the identity). With `decompose` (the default) the
    graph is reduced to Core ATen; `decompose=False` keeps the operators as
    called. `preserve` names operators to keep undecomposed, e.g.
    `["aten.scaled_dot_product_attention.default"]`."""
    ep, names = export_program(fn, *example_inputs, decompose=decompose, preserve=preserve)
    graph, tensors = to_graph(ep, getattr(fn, "__name__", "function"), names)

    directory = os.path.dirname(os.path.abspath(path))
    stem = os.path.basename(path)
    if stem.endswith(".json"):
        stem = stem[: -len(".json")]
    os.makedirs(directory, exist_ok=True)
    for entry in graph["constants"]:
        entry["file"] = f"{stem}.{entry['name']}.bin"
        with open(os.path.join(directory, entry["file"]), "wb") as f:
            f.write(_tensor_bytes(tensors[entry["name"]]))
    _write_json(graph, path)
    return graph
