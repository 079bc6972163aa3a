#!/usr/bin/env python3
"""A corpus of real-world JAX attention programs: attention as other people's
libraries write it (flax.linen, flax.nnx, jax.nn, equinox, haiku, Gemma,
RecurrentGemma, AlphaFold), exported to StableHLO for Flashlight's importer.

Every program CALLS the library's own functions and modules; the wrappers
here only wire arrays in (module parameters are function inputs, never
closed-over constants) and pick the result.

`PROGRAMS` maps a name to a `Program`: its library, a one-line description
and `build(dtype)`, which returns the function and its input specs for a
floating dtype (bf16 for the export where the library allows it, f32 for the
reference). Input specs are `Input(name, shape, dtype, kind)`; `kind` says
how to draw random values:

  normal         floats ~ N(0, 1)
  param          weights ~ N(0, 1) / sqrt(fan_in) (`fan_in` in the index)
  bias           small floats ~ 0.1 N(0, 1) (biases, norm offsets)
  norm_scale     ~ 1 + 0.1 N(0, 1) (layer/RMS norm scales)
  padding_mask   bool [..., N]: True for the first `length` positions of
                 each row; with `empty` one row has length 0 (so every query
                 attending to it is fully masked)
  float_mask     the same as padding_mask, as 0/1 floats (AlphaFold)
  pair_mask      float [N, N] = m[:, None] * m[None, :] for a residue mask m
                 of a random length < N (rows past it fully masked)
  bool_mask      bool, True with p = 0.75 and on the diagonal of the last two
                 dims; with `empty` one query row is all False
  lengths        int32 sequence lengths in [1, high] ([0, high] with `empty`)
  ids            int32 segment (document) ids, nondecreasing along the row
  positions      int32 token positions: arange(N) per row
  doc_positions  int32 positions restarting at 0 at each document start

    python3 scripts/corpus/jax_corpus.py OUTDIR [NAME...]
        writes OUTDIR/<name>.stablehlo.mlir and OUTDIR/index.json
        ({name: {library, library_version, description, inputs:[{name,
        shape, dtype, kind, ...}], outputs}}).
    python3 scripts/corpus/jax_corpus.py --reference OUTDIR [--seed S] [NAME...]
        draws random inputs, evaluates the same library function on f32
        copies of the floating inputs, and writes OUTDIR/<name>.inputs.npz
        (declared dtypes; bf16 as uint16 bit patterns), OUTDIR/<name>.expected.npy
        (f32; a second result as <name>.expected.1.npy) and OUTDIR/index.json.
    python3 scripts/corpus/jax_corpus.py --list

Committed output: test/Corpus/jax/. Runs on a CPU-only JAX install.

Libraries that could not be used are listed in UNAVAILABLE (with why);
optional libraries that fail to import are skipped with a note.
"""

import argparse
import copy
import importlib.metadata
import json
import math
import os
import sys
import zlib
from dataclasses import dataclass
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # gemma imports TensorFlow
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

B, H, N, D = 2, 4, 128, 64
E = H * D  # model width of the module programs

DTYPE_NAMES = {
    jnp.dtype(jnp.bfloat16): "bf16",
    jnp.dtype(jnp.float16): "f16",
    jnp.dtype(jnp.float32): "f32",
    jnp.dtype(jnp.int32): "i32",
    jnp.dtype(jnp.bool_): "bool",
}
DTYPES = {v: k for k, v in DTYPE_NAMES.items()}

#: Libraries (or parts of them) that could not be used here, and why.
UNAVAILABLE = {}


# --- Specs and programs ------------------------------------------------------


@dataclass
class Input:
    name: str
    shape: tuple
    dtype: str  # bf16, f16, f32, i32, bool
    kind: str
    fan_in: int | None = None  # for kind "param"
    empty: bool = False  # masks/lengths: include a fully masked row
    high: int = N  # lengths: the length of the sequence they count

    def struct(self):
        return jax.ShapeDtypeStruct(self.shape, DTYPES[self.dtype])

    def to_json(self):
        d = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "kind": self.kind}
        if self.fan_in is not None:
            d["fan_in"] = self.fan_in
        if self.empty:
            d["empty"] = True
        if self.kind == "lengths":
            d["high"] = self.high
        return d


@dataclass
class Program:
    name: str
    library: str  # distribution name, for the version
    description: str
    build: Callable  # build(dtype) -> (fn(*arrays), [Input])
    dtype: object = jnp.bfloat16  # the export dtype

    def export_fn(self):
        return self._named(*self.build(self.dtype))

    def reference_fn(self):
        return self._named(*self.build(jnp.float32))

    def _named(self, fn, specs):
        fn.__name__ = self.name  # the module's name: @jit_<name>
        return fn, specs


PROGRAMS = {}


def program(library, description, dtype=jnp.bfloat16):
    """Registers `build(dtype)` under its own name."""

    def register(build):
        PROGRAMS[build.__name__] = Program(build.__name__, library, description, build, dtype)
        return build

    return register


def dname(dtype):
    return DTYPE_NAMES[jnp.dtype(dtype)]


def leaf_name(path):
    """The last key of a pytree path, as a string."""
    k = path[-1]
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def path_name(prefix, path):
    return prefix + jax.tree_util.keystr(path, simple=True, separator=".")


def param_specs(abstract, prefix, fan_in_rule, stacked=0):
    """Input specs of the array leaves of a pytree of ShapeDtypeStructs; the
    first `stacked` dims of every leaf stack layers (layer_stack)."""
    specs = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(abstract)[0]:
        name = path_name(prefix, path)
        last = leaf_name(path)
        shape = tuple(leaf.shape)
        core = shape[stacked:]
        dt = dname(leaf.dtype)
        if "scale" in last and len(core) == 1:
            specs.append(Input(name, shape, dt, "norm_scale"))
        elif last in ("bias", "b", "offset") or last.endswith("_b") or len(core) <= 1:
            specs.append(Input(name, shape, dt, "bias"))
        else:
            specs.append(Input(name, shape, dt, "param", fan_in=int(fan_in_rule(name, core))))
    return specs


def fan_in_flax(name, shape):
    parts = name.split(".")
    if any(p in ("out", "output", "output_w", "proj_final") for p in parts):
        return math.prod(shape[:-1])
    return shape[0]


def with_params(abstract_params, data_specs, apply, prefix, fan_in_rule, stacked=0):
    """fn(*data, *param_leaves) = apply(params, *data): module parameters as
    function inputs, after the data inputs."""
    leaves, treedef = jax.tree_util.tree_flatten(abstract_params)
    nd = len(data_specs)

    def fn(*args):
        params = jax.tree_util.tree_unflatten(treedef, args[nd:])
        return apply(params, *args[:nd])

    return fn, list(data_specs) + param_specs(abstract_params, prefix, fan_in_rule, stacked)


def x_spec(dt, shape=(B, N, E), name="x"):
    return Input(name, shape, dname(dt), "normal")


def qkv_specs(dt, q_shape=(B, N, H, D), kv_shape=None):
    kv_shape = kv_shape or q_shape
    return [Input("q", q_shape, dname(dt), "normal"),
            Input("k", kv_shape, dname(dt), "normal"),
            Input("v", kv_shape, dname(dt), "normal")]


def valid_from_lengths(lengths, n):
    """[B] lengths -> [B, n] bool: position < length (the user's code)."""
    return jnp.arange(n)[None, :] < lengths[:, None]


# --- flax.linen --------------------------------------------------------------


def linen_program(module, data_specs, call):
    """call(module, params, *data) -> array; params from module.init, abstract."""
    structs = [s.struct() for s in data_specs]
    abstract = jax.eval_shape(lambda *d: call(module, None, *d, init=True), *structs)
    return with_params(abstract, data_specs,
                       lambda p, *d: call(module, p, *d), "params.", fan_in_flax)


def _linen_apply_or_init(module, params, *args, init=False, **kwargs):
    if init:
        return module.init(jax.random.PRNGKey(0), *args, **kwargs)["params"]
    return module.apply({"params": params}, *args, **kwargs)


@program("flax", "flax.linen.MultiHeadDotProductAttention (q/k/v/out projections), "
         "self-attention with nn.make_causal_mask")
def linen_mha_causal(dt):
    import flax.linen as nn
    m = nn.MultiHeadDotProductAttention(num_heads=H, qkv_features=E, dtype=dt, param_dtype=dt,
                                        deterministic=True, decode=False)

    def call(module, p, x, init=False):
        mask = nn.make_causal_mask(x[..., 0])
        return _linen_apply_or_init(module, p, x, mask=mask, init=init)

    return linen_program(m, [x_spec(dt)], call)


@program("flax", "flax.linen.MultiHeadDotProductAttention cross-attention (64 queries over "
         "128 keys) with nn.make_attention_mask of query/key padding from lengths; "
         "one batch has no keys (fully masked rows)")
def linen_mha_cross_padding(dt):
    import flax.linen as nn
    m = nn.MultiHeadDotProductAttention(num_heads=H, qkv_features=E, dtype=dt, param_dtype=dt,
                                        deterministic=True)

    def call(module, p, xq, xkv, q_len, kv_len, init=False):
        mask = nn.make_attention_mask(valid_from_lengths(q_len, xq.shape[1]),
                                      valid_from_lengths(kv_len, xkv.shape[1]))
        return _linen_apply_or_init(module, p, xq, xkv, mask=mask, init=init)

    specs = [x_spec(dt, (B, 64, E), "x_q"), x_spec(dt, (B, N, E), "x_kv"),
             Input("q_lengths", (B,), "i32", "lengths", high=64),
             Input("kv_lengths", (B,), "i32", "lengths", empty=True)]
    return linen_program(m, specs, call)


@program("flax", "flax.linen.MultiHeadDotProductAttention with normalize_qk=True (QK "
         "LayerNorm) and nn.combine_masks(make_attention_mask(ids, ids, jnp.equal), "
         "make_causal_mask): packed documents")
def linen_mha_qknorm_documents(dt):
    import flax.linen as nn
    m = nn.MultiHeadDotProductAttention(num_heads=H, qkv_features=E, dtype=dt, param_dtype=dt,
                                        deterministic=True, normalize_qk=True)

    def call(module, p, x, seg, init=False):
        mask = nn.combine_masks(nn.make_attention_mask(seg, seg, pairwise_fn=jnp.equal),
                                nn.make_causal_mask(seg))
        return _linen_apply_or_init(module, p, x, mask=mask, init=init)

    return linen_program(m, [x_spec(dt), Input("segment_ids", (B, N), "i32", "ids")], call)


@program("flax", "flax.linen.SelfAttention (deprecated alias kept in flax) with "
         "force_fp32_for_softmax=True and a key padding mask from lengths")
def linen_self_attention_fp32_softmax(dt):
    import flax.linen as nn
    m = nn.SelfAttention(num_heads=H, qkv_features=E, dtype=dt, param_dtype=dt,
                         deterministic=True, force_fp32_for_softmax=True)

    def call(module, p, x, lengths, init=False):
        valid = valid_from_lengths(lengths, x.shape[1])
        mask = nn.make_attention_mask(jnp.ones_like(valid), valid)
        return _linen_apply_or_init(module, p, x, mask=mask, init=init)

    return linen_program(m, [x_spec(dt), Input("lengths", (B,), "i32", "lengths")], call)


@program("flax", "flax.linen.dot_product_attention with a relative-position bias "
         "[1, H, N, N] and nn.combine_masks(make_causal_mask, padding from lengths)")
def linen_dpa_bias_mask(dt):
    import flax.linen as nn

    def fn(q, k, v, bias, lengths):
        valid = valid_from_lengths(lengths, q.shape[1])
        mask = nn.combine_masks(nn.make_causal_mask(valid), nn.make_attention_mask(valid, valid))
        return nn.dot_product_attention(q, k, v, bias=bias, mask=mask)

    return fn, qkv_specs(dt) + [Input("bias", (1, H, N, N), dname(dt), "normal"),
                                Input("lengths", (B,), "i32", "lengths")]


@program("flax", "flax.linen.dot_product_attention_weights (the probabilities "
         "[B, H, N, N], not the attention) under nn.make_causal_mask")
def linen_dpa_weights_causal(dt):
    import flax.linen as nn

    def fn(q, k):
        mask = nn.make_causal_mask(q[:, :, 0, 0])
        return nn.dot_product_attention_weights(q, k, mask=mask)

    return fn, qkv_specs(dt)[:2]


@program("flax", "flax.linen.dot_product_attention with force_fp32_for_softmax=True, "
         "cross-attention 64 queries over 128 keys, additive padding bias [B, 1, 1, N]")
def linen_dpa_fp32_softmax_cross(dt):
    import flax.linen as nn

    def fn(q, k, v, bias):
        return nn.dot_product_attention(q, k, v, bias=bias, force_fp32_for_softmax=True)

    return fn, qkv_specs(dt, (B, 64, H, D), (B, N, H, D)) + [
        Input("bias", (B, 1, 1, N), dname(dt), "normal")]


# --- flax.nnx ----------------------------------------------------------------


def nnx_program(make_module, data_specs, call):
    """The module's nnx.Param state as inputs (nnx.split), the rest of its
    state (if any) closed over."""
    from flax import nnx
    abstract_module = nnx.eval_shape(make_module)
    graphdef, params, rest = nnx.split(abstract_module, nnx.Param, ...)
    params_sds = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                                        nnx.to_pure_dict(params))
    if jax.tree_util.tree_leaves(rest):
        rest = nnx.state(make_module(), nnx.Not(nnx.Param))

    def apply(p, *data):
        state = nnx.State(copy.deepcopy(nnx.to_pure_dict(params)))
        nnx.replace_by_pure_dict(state, p)
        module = nnx.merge(graphdef, state, rest)
        return call(module, *data)

    return with_params(params_sds, data_specs, apply, "params.", fan_in_flax)


@program("flax", "flax.nnx.MultiHeadAttention with num_kv_heads=2 (GQA) and "
         "is_causal=True; nnx.split Param state as inputs")
def nnx_mha_gqa_causal(dt):
    from flax import nnx

    def make():
        return nnx.MultiHeadAttention(num_heads=H, in_features=E, qkv_features=E, num_kv_heads=2,
                                      dtype=dt, param_dtype=dt, decode=False, deterministic=True,
                                      rngs=nnx.Rngs(0), keep_rngs=False)

    return nnx_program(make, [x_spec(dt)], lambda m, x: m(x, is_causal=True))


@program("flax", "flax.nnx.MultiHeadAttention with normalize_qk=True and "
         "nnx.make_attention_mask padding from lengths; one batch has length 0")
def nnx_mha_qknorm_padding(dt):
    from flax import nnx

    def make():
        return nnx.MultiHeadAttention(num_heads=H, in_features=E, qkv_features=E,
                                      normalize_qk=True, dtype=dt, param_dtype=dt, decode=False,
                                      deterministic=True, rngs=nnx.Rngs(0), keep_rngs=False)

    def call(m, x, lengths):
        valid = valid_from_lengths(lengths, x.shape[1])
        return m(x, mask=nnx.make_attention_mask(valid, valid))

    return nnx_program(make, [x_spec(dt), Input("lengths", (B,), "i32", "lengths", empty=True)],
                       call)


@program("flax", "flax.nnx.dot_product_attention, GQA (4 query heads, 1 kv head: MQA), "
         "is_causal=True and a key padding mask [B, 1, 1, N]")
def nnx_dpa_mqa_causal_padding(dt):
    from flax import nnx

    def fn(q, k, v, key_valid):
        mask = key_valid[:, None, None, :]
        mask = jnp.broadcast_to(mask, (q.shape[0], q.shape[2], q.shape[1], k.shape[1]))
        return nnx.dot_product_attention(q, k, v, mask=mask, is_causal=True)

    return fn, qkv_specs(dt, (B, N, H, D), (B, N, 1, D)) + [
        Input("key_valid", (B, N), "bool", "padding_mask")]


# --- jax.nn.dot_product_attention --------------------------------------------


@program("jax", "jax.nn.dot_product_attention(implementation='xla') with a bias "
         "[1, H, N, N] and scale=0.1")
def jnn_dpa_bias_scale(dt):
    def fn(q, k, v, bias):
        return jax.nn.dot_product_attention(q, k, v, bias=bias, scale=0.1, implementation="xla")

    return fn, qkv_specs(dt) + [Input("bias", (1, H, N, N), dname(dt), "normal")]


@program("jax", "jax.nn.dot_product_attention with a boolean mask [B, 1, N, N] "
         "and is_causal=True")
def jnn_dpa_mask_causal(dt):
    def fn(q, k, v, mask):
        return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True,
                                            implementation="xla")

    return fn, qkv_specs(dt) + [Input("mask", (B, 1, N, N), "bool", "bool_mask")]


@program("jax", "jax.nn.dot_product_attention with local_window_size=(32, 0) and "
         "is_causal=True: a causal sliding window of 33 keys")
def jnn_dpa_causal_window(dt):
    def fn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, local_window_size=(32, 0),
                                            implementation="xla")

    return fn, qkv_specs(dt)


@program("jax", "jax.nn.dot_product_attention with local_window_size=(16, 8), not causal: "
         "an asymmetric band")
def jnn_dpa_band_window(dt):
    def fn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, local_window_size=(16, 8),
                                            implementation="xla")

    return fn, qkv_specs(dt)


@program("jax", "jax.nn.dot_product_attention with query_seq_lengths and "
         "key_value_seq_lengths [B] int32; one batch has 0 keys")
def jnn_dpa_seq_lengths(dt):
    def fn(q, k, v, q_lengths, kv_lengths):
        return jax.nn.dot_product_attention(q, k, v, query_seq_lengths=q_lengths,
                                            key_value_seq_lengths=kv_lengths,
                                            implementation="xla")

    return fn, qkv_specs(dt) + [Input("q_lengths", (B,), "i32", "lengths"),
                                Input("kv_lengths", (B,), "i32", "lengths", empty=True)]


@program("jax", "jax.nn.dot_product_attention GQA (4 query heads over 2 kv heads), "
         "64 queries over 128 keys, is_causal=True")
def jnn_dpa_gqa_causal_cross(dt):
    def fn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")

    return fn, qkv_specs(dt, (B, 64, H, D), (B, N, 2, D))


@program("jax", "jax.nn.dot_product_attention(return_residual=True): the output and "
         "the softmax residual (logsumexp [B, H, N]), a tuple")
def jnn_dpa_return_residual(dt):
    def fn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True,
                                            implementation="xla")

    return fn, qkv_specs(dt)


@program("jax", "jax.nn.dot_product_attention on unbatched [N, H, D] f16 inputs with a "
         "bias [H, N, N] and a boolean mask [N, N] together", dtype=jnp.float16)
def jnn_dpa_f16_bias_mask(dt):
    def fn(q, k, v, bias, mask):
        return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, implementation="xla")

    return fn, qkv_specs(dt, (N, H, D)) + [Input("bias", (H, N, N), dname(dt), "normal"),
                                           Input("mask", (N, N), "bool", "bool_mask")]



# --- equinox -----------------------------------------------------------------


def eqx_program(module, data_specs, call):
    """The module's arrays as inputs (eqx.partition / eqx.combine)."""
    import equinox as eqx
    params, static = eqx.partition(module, eqx.is_array)
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)

    def apply(p, *data):
        return call(eqx.combine(p, static), *data)

    return with_params(abstract, data_specs, apply, "model.", lambda name, shape: shape[-1])


def _eqx_mha(dt):
    import equinox as eqx
    return eqx.nn.MultiheadAttention(num_heads=H, query_size=E, use_query_bias=True,
                                     use_key_bias=True, use_value_bias=True,
                                     use_output_bias=True, dtype=dt, inference=True,
                                     key=jax.random.PRNGKey(0))


@program("equinox", "equinox.nn.MultiheadAttention (unbatched module, jax.vmap over the "
         "batch), no mask; the module's arrays as inputs via eqx.partition/combine")
def eqx_mha_nomask(dt):
    return eqx_program(_eqx_mha(dt), [x_spec(dt)], lambda m, x: jax.vmap(lambda t: m(t, t, t))(x))


@program("equinox", "equinox.nn.MultiheadAttention with a causal mask [N, N] "
         "(jnp.tril) and RoPE on q/k through process_heads "
         "(equinox.nn.RotaryPositionalEmbedding, as equinox documents)")
def eqx_mha_causal_rope(dt):
    import equinox as eqx
    rope = eqx.nn.RotaryPositionalEmbedding(embedding_size=D, dtype=dt)

    def call(m, x):
        def one(t):
            mask = jnp.tril(jnp.ones((t.shape[0], t.shape[0]), dtype=bool))

            def process_heads(qh, kh, vh):
                qh = jax.vmap(rope, in_axes=1, out_axes=1)(qh)
                kh = jax.vmap(rope, in_axes=1, out_axes=1)(kh)
                return qh, kh, vh

            return m(t, t, t, mask=mask, process_heads=process_heads)

        return jax.vmap(one)(x)

    return eqx_program(_eqx_mha(dt), [x_spec(dt)], call)


@program("equinox", "equinox.nn.MultiheadAttention cross-attention with a per-head mask "
         "[H, 64, N] from key padding (the module vmaps the attention over heads)")
def eqx_mha_cross_headmask(dt):
    import equinox as eqx
    m = eqx.nn.MultiheadAttention(num_heads=H, query_size=E, key_size=E, value_size=E,
                                  dtype=dt, inference=True, key=jax.random.PRNGKey(0))

    def call(m, xq, xkv, key_valid):
        def one(tq, tkv, valid):
            mask = jnp.broadcast_to(valid[None, None, :], (H, tq.shape[0], tkv.shape[0]))
            return m(tq, tkv, tkv, mask=mask)

        return jax.vmap(one)(xq, xkv, key_valid)

    specs = [x_spec(dt, (B, 64, E), "x_q"), x_spec(dt, (B, N, E), "x_kv"),
             Input("key_valid", (B, N), "bool", "padding_mask")]
    return eqx_program(m, specs, call)


@program("equinox", "equinox.nn._attention.dot_product_attention (the [seq, dim] helper "
         "MultiheadAttention uses; not re-exported) vmapped over batch and heads, "
         "with a padding mask")
def eqx_dpa_helper_mask(dt):
    from equinox.nn import _attention

    def fn(q, k, v, key_valid):
        def one(qh, kh, vh, valid):  # [N, D] each
            mask = jnp.broadcast_to(valid[None, :], (qh.shape[0], kh.shape[0]))
            return _attention.dot_product_attention(qh, kh, vh, mask=mask)

        per_head = jax.vmap(one, in_axes=(1, 1, 1, None), out_axes=1)
        return jax.vmap(per_head)(q, k, v, key_valid)

    return fn, qkv_specs(dt) + [Input("key_valid", (B, N), "bool", "padding_mask")]


# --- haiku -------------------------------------------------------------------


def haiku_program(forward, data_specs, fan_in_rule=lambda name, shape: shape[0], stacked=0):
    """hk.transform(forward); the params dict as inputs."""
    import haiku as hk
    t = hk.without_apply_rng(hk.transform(forward))
    structs = [s.struct() for s in data_specs]
    abstract = jax.eval_shape(lambda *d: t.init(jax.random.PRNGKey(0), *d), *structs)
    return with_params(abstract, data_specs, lambda p, *d: t.apply(p, *d), "params.",
                       fan_in_rule, stacked)


@program("dm-haiku", "haiku.MultiHeadAttention via hk.transform (params as inputs) with a "
         "mask [B, 1, N, N] = causal & key padding")
def haiku_mha_causal_padding(dt):
    import haiku as hk

    def forward(x, key_valid):
        n = x.shape[1]
        mask = jnp.tril(jnp.ones((n, n), dtype=bool))[None, None] & key_valid[:, None, None, :]
        mha = hk.MultiHeadAttention(num_heads=H, key_size=D, model_size=E,
                                    w_init=hk.initializers.VarianceScaling(1.0))
        return mha(x, x, x, mask=mask)

    return haiku_program(forward, [x_spec(dt), Input("key_valid", (B, N), "bool",
                                                     "padding_mask")])


@program("dm-haiku", "haiku.MultiHeadAttention cross-attention (64 queries over 128 keys, "
         "value_size 32), no mask")
def haiku_mha_cross(dt):
    import haiku as hk

    def forward(xq, xkv):
        mha = hk.MultiHeadAttention(num_heads=H, key_size=D, value_size=32, model_size=E,
                                    w_init=hk.initializers.VarianceScaling(1.0))
        return mha(xq, xkv, xkv)

    return haiku_program(forward, [x_spec(dt, (B, 64, E), "x_q"), x_spec(dt, (B, N, E), "x_kv")])


# --- Gemma (gemma, gemma.gm.nn) ----------------------------------------------


def _gemma_modules():
    from gemma.gm.nn import _modules
    from gemma.gm.utils import _attention_mask
    return _modules, _attention_mask


def gemma_fan_in(name, shape):
    return math.prod(shape[:-1]) if "attn_vec" in name else shape[-2]


def _gemma_program(dt, **attn_kwargs):
    _modules, _attention_mask = _gemma_modules()
    m = _modules.Attention(num_heads=H, features=E, head_dim=D, **attn_kwargs)

    def apply(p, x, positions, input_mask, init=False):
        mask = _attention_mask.make_causal_bidirectional_attention_mask(input_mask)
        if init:
            return m.init(jax.random.PRNGKey(0), x, positions, None, mask)["params"]
        _, out = m.apply({"params": p}, x, positions, None, mask)
        return out

    specs = [x_spec(dt), Input("positions", (B, N), "i32", "positions"),
             Input("input_mask", (B, N), "bool", "padding_mask")]
    abstract = jax.eval_shape(lambda *d: apply(None, *d, init=True), *[s.struct() for s in specs])
    # gemma's Einsum creates f32 parameters; a bf16 model casts them (gemma's
    # checkpoints are bf16), so the parameters take the program's dtype.
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, dt), abstract)
    return with_params(abstract, specs, apply, "params.", gemma_fan_in)


@program("gemma", "gemma.gm.nn Attention (Gemma 2 style global layer): GQA 4 query / 2 kv "
         "heads, RoPE, attn_logits_soft_cap=50, mask from "
         "make_causal_bidirectional_attention_mask(padding)")
def gemma_global_gqa_softcap(dt):
    _modules, _ = _gemma_modules()
    return _gemma_program(dt, num_kv_heads=2, attn_type=_modules.AttentionType.GLOBAL,
                          query_pre_attn_scalar=D ** -0.5, attn_logits_soft_cap=50.0)


@program("gemma", "gemma.gm.nn Attention (Gemma 3 style local layer): LOCAL_SLIDING window "
         "32 from positions, QK RMSNorm, MQA (1 kv head), RoPE, causal+padding mask")
def gemma_local_sliding_qknorm(dt):
    _modules, _ = _gemma_modules()
    return _gemma_program(dt, num_kv_heads=1, attn_type=_modules.AttentionType.LOCAL_SLIDING,
                          query_pre_attn_scalar=D ** -0.5, sliding_window_size=32,
                          use_qk_norm=True)


@program("gemma", "gemma.gm.nn Attention, plain MHA (4 heads, fused qkv einsum), global, "
         "causal+padding mask")
def gemma_global_mha(dt):
    _modules, _ = _gemma_modules()
    return _gemma_program(dt, num_kv_heads=H, attn_type=_modules.AttentionType.GLOBAL,
                          query_pre_attn_scalar=D ** -0.5)


# --- RecurrentGemma (Griffin) -------------------------------------------------


def _import_recurrentgemma():
    """recurrentgemma pins typeguard<3 and wraps its modules in
    jaxtyping.jaxtyped(typechecker=typeguard.typechecked), which typeguard 4
    (needed by gemma/kauldron) cannot instrument. Only the run-time type
    check is switched off for the import; the modules are untouched."""
    if "recurrentgemma.jax" in sys.modules:
        return sys.modules["recurrentgemma.jax"]
    import typeguard
    saved = typeguard.typechecked
    if not importlib.metadata.version("typeguard").startswith("2."):
        typeguard.typechecked = lambda f=None, **kw: f if f is not None else (lambda g: g)
    try:
        import recurrentgemma.jax as rg
    finally:
        typeguard.typechecked = saved
    return rg


@program("recurrentgemma", "recurrentgemma.jax.LocalAttentionBlock (Griffin's local MQA "
         "block): window 32, RoPE on half the head dim, segment mask from "
         "positions restarting at document starts, f32 softmax")
def rgemma_local_attention(dt):
    rg = _import_recurrentgemma()
    m = rg.LocalAttentionBlock(width=E, num_heads=H, window_size=32, dtype=dt, param_dtype=dt)

    def apply(p, x, segment_pos, init=False):
        if init:
            return m.init(jax.random.PRNGKey(0), x, segment_pos, return_cache=False)["params"]
        out, _ = m.apply({"params": p}, x, segment_pos, return_cache=False)
        return out

    specs = [x_spec(dt), Input("segment_pos", (B, N), "i32", "doc_positions")]
    abstract = jax.eval_shape(lambda *d: apply(None, *d, init=True), *[s.struct() for s in specs])
    return with_params(abstract, specs, apply, "params.", fan_in_flax)


@program("recurrentgemma", "recurrentgemma.jax.LocalAttentionBlock with window 2048 > N: "
         "the block as global causal attention (single document)")
def rgemma_global_attention(dt):
    rg = _import_recurrentgemma()
    m = rg.LocalAttentionBlock(width=E, num_heads=H, window_size=2048, dtype=dt, param_dtype=dt)

    def apply(p, x, segment_pos, init=False):
        if init:
            return m.init(jax.random.PRNGKey(0), x, segment_pos, return_cache=False)["params"]
        out, _ = m.apply({"params": p}, x, segment_pos, return_cache=False)
        return out

    specs = [x_spec(dt), Input("segment_pos", (B, N), "i32", "positions")]
    abstract = jax.eval_shape(lambda *d: apply(None, *d, init=True), *[s.struct() for s in specs])
    return with_params(abstract, specs, apply, "params.", fan_in_flax)


# --- AlphaFold (alphafold-colabfold's alphafold.model) -----------------------

AF_SEQ, AF_RES, AF_CM, AF_CZ = 8, 64, 256, 128


def _af(subbatch_size=None):
    """AlphaFold's modules and the model_1_ptm Evoformer config, with
    subbatch_size as given (the library's default is 4)."""
    from alphafold.model import config, modules, layer_stack
    cfg = config.model_config("model_1_ptm")
    gc = copy.deepcopy(cfg.model.global_config)
    gc.subbatch_size = subbatch_size
    return modules, layer_stack, cfg.model.embeddings_and_evoformer.evoformer, gc


def af_fan_in(name, shape):
    return math.prod(shape[:-1]) if "output_w" in name else shape[0]


def _af_specs(dt, pair=True, msa=True):
    specs = []
    if msa:
        specs += [Input("msa_act", (AF_SEQ, AF_RES, AF_CM), dname(dt), "normal"),
                  Input("msa_mask", (AF_SEQ, AF_RES), dname(dt), "float_mask", empty=True)]
    if pair:
        specs += [Input("pair_act", (AF_RES, AF_RES, AF_CZ), dname(dt), "normal")]
    return specs


@program("alphafold-colabfold", "AlphaFold MSARowAttentionWithPairBias (Evoformer, Alg. 7): "
         "gated attention along residues, pair bias from LayerNorm(pair) @ W, mask bias; "
         "8 heads x 32")
def af_msa_row_attention_pair_bias(dt):
    modules, _, evo, gc = _af()

    def forward(msa, mask, pair):
        return modules.MSARowAttentionWithPairBias(evo.msa_row_attention_with_pair_bias, gc)(
            msa, mask, pair)

    return haiku_program(forward, _af_specs(dt), af_fan_in)


@program("alphafold-colabfold", "AlphaFold MSAColumnAttention (Alg. 8): gated attention "
         "along the MSA sequences (transposes around it)")
def af_msa_column_attention(dt):
    modules, _, evo, gc = _af()

    def forward(msa, mask):
        return modules.MSAColumnAttention(evo.msa_column_attention, gc)(msa, mask)

    return haiku_program(forward, _af_specs(dt, pair=False), af_fan_in)


@program("alphafold-colabfold", "AlphaFold MSAColumnGlobalAttention (Alg. 19): one "
         "averaged query per column, gated (global attention)")
def af_msa_column_global_attention(dt):
    # the module compares subbatch_size with the columns: a size that covers
    # them all runs the attention once, as subbatching off does elsewhere
    # (the extra-MSA stack builds it from the Evoformer's msa_column_attention)
    modules, _, evo, gc = _af(subbatch_size=1 << 20)
    cfg = evo.msa_column_attention

    def forward(msa, mask):
        return modules.MSAColumnGlobalAttention(cfg, gc)(msa, mask)

    return haiku_program(forward, _af_specs(dt, pair=False), af_fan_in)


def _pair_specs(dt):
    return [Input("pair_act", (AF_RES, AF_RES, AF_CZ), dname(dt), "normal"),
            Input("pair_mask", (AF_RES, AF_RES), dname(dt), "pair_mask")]


@program("alphafold-colabfold", "AlphaFold TriangleAttention starting node (Alg. 13) with "
         "the library's default subbatch_size=4 (inference_subbatch: a loop over row chunks)")
def af_triangle_attention_start_subbatched(dt):
    modules, _, evo, gc = _af(subbatch_size=4)

    def forward(pair, mask):
        return modules.TriangleAttention(evo.triangle_attention_starting_node, gc)(pair, mask)

    return haiku_program(forward, _pair_specs(dt), af_fan_in)


@program("alphafold-colabfold", "AlphaFold TriangleAttention ending node (Alg. 14, "
         "per_column: transposes around it), subbatching off")
def af_triangle_attention_end(dt):
    modules, _, evo, gc = _af()

    def forward(pair, mask):
        return modules.TriangleAttention(evo.triangle_attention_ending_node, gc)(pair, mask)

    return haiku_program(forward, _pair_specs(dt), af_fan_in)


@program("alphafold-colabfold", "AlphaFold modules.Attention with gating (AF2's gated "
         "attention core): [b, q, k] mask bias + a shared nonbatched bias [h, q, k], logit clip")
def af_gating_attention(dt):
    modules, _, evo, gc = _af()
    cfg = evo.msa_row_attention_with_pair_bias

    def forward(q_data, m_data, bias, nonbatched_bias):
        return modules.Attention(cfg, gc, q_data.shape[-1])(q_data, m_data, bias, nonbatched_bias)

    heads = cfg.num_head
    specs = [Input("q_data", (AF_SEQ, AF_RES, AF_CM), dname(dt), "normal"),
             Input("m_data", (AF_SEQ, AF_RES, AF_CM), dname(dt), "normal"),
             Input("bias", (AF_SEQ, 1, 1, AF_RES), dname(dt), "normal"),
             Input("nonbatched_bias", (heads, AF_RES, AF_RES), dname(dt), "normal")]
    return haiku_program(forward, specs, af_fan_in)


@program("alphafold-colabfold", "alphafold.model.layer_stack of 2 residual "
         "MSARowAttentionWithPairBias layers (a scan over stacked parameters)")
def af_layer_stack_msa_row(dt):
    modules, layer_stack, evo, gc = _af()

    def forward(msa, mask, pair):
        def layer(x):
            return x + modules.MSARowAttentionWithPairBias(
                evo.msa_row_attention_with_pair_bias, gc)(x, mask, pair)

        return layer_stack.layer_stack(2)(layer)(msa)

    return haiku_program(forward, _af_specs(dt), af_fan_in, stacked=1)


# --- Optional libraries --------------------------------------------------------

OPTIONAL = {
    "gemma": ("gemma_",),
    "recurrentgemma": ("rgemma_",),
    "alphafold-colabfold": ("af_",),
}


def _check_optional():
    """Drops the programs of optional libraries that do not import or whose
    first program does not build (lazy imports fail only there)."""
    for lib, prefixes in OPTIONAL.items():
        names = [n for n in PROGRAMS if n.startswith(prefixes)]
        try:
            if names:
                PROGRAMS[names[0]].export_fn()
        except Exception as e:  # noqa: BLE001 - any import failure drops the library
            UNAVAILABLE[lib] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
            for name in names:
                del PROGRAMS[name]
            print(f"note: {lib} unavailable ({UNAVAILABLE[lib]}); its programs are skipped",
                  file=sys.stderr)


UNAVAILABLE.update({
    "alphafold (DeepMind, PyPI 2.0.0)": "imports fail on numpy 2 (np.int in "
    "alphafold.common.residue_constants); alphafold-colabfold (a maintained fork of the "
    "same alphafold.model package) is used instead",
    "transformers (Flax models)": "transformers 5 removed its Flax models",
})


# --- Export ------------------------------------------------------------------


def library_version(lib):
    try:
        return importlib.metadata.version(lib)
    except importlib.metadata.PackageNotFoundError:
        return None


def header(prog):
    lib = f"; {prog.library} {library_version(prog.library)}" if prog.library != "jax" else ""
    return (f"// Generated by scripts/corpus/jax_corpus.py (jax {jax.__version__}{lib}) "
            f"-- do not edit.\n")


def lower(fn, specs):
    return jax.jit(fn).trace(*[s.struct() for s in specs]).lower(lowering_platforms=("cuda",))


def index_entry(prog, specs, out_struct):
    outs = out_struct if isinstance(out_struct, (tuple, list)) else [out_struct]
    return {
        "library": prog.library,
        "library_version": library_version(prog.library),
        "description": prog.description,
        "inputs": [s.to_json() for s in specs],
        "outputs": [{"shape": list(o.shape), "dtype": dname(o.dtype)} for o in outs],
    }


def write_index(outdir, index):
    with open(os.path.join(outdir, "index.json"), "w") as f:
        entries = [f"  {json.dumps(name)}: {json.dumps(entry)}" for name, entry in index.items()]
        f.write("{\n" + ",\n".join(entries) + "\n}\n")


def export(outdir, names):
    os.makedirs(outdir, exist_ok=True)
    index = {}
    for name in names:
        prog = PROGRAMS[name]
        fn, specs = prog.export_fn()
        lowered = lower(fn, specs)
        with open(os.path.join(outdir, f"{name}.stablehlo.mlir"), "w") as f:
            f.write(header(prog) + lowered.as_text())
        out = jax.eval_shape(fn, *[s.struct() for s in specs])
        index[name] = index_entry(prog, specs, out)
        print(f"{name}: {len(specs)} inputs", file=sys.stderr)
    write_index(outdir, index)
    return index


# --- Reference ---------------------------------------------------------------


def _lengths(rng, count, n, empty):
    lengths = rng.integers(1, n + 1, size=count)
    if count > 1:
        lengths[1] = n
    if empty:
        lengths[0] = 0
    elif count > 0:
        lengths[0] = max(1, int(lengths[0]))
    return lengths


def draw(rng, spec):
    """Random values for one input, in its declared dtype (numpy; bf16 as
    ml_dtypes.bfloat16)."""
    shape, kind = spec.shape, spec.kind
    dtype = np.dtype(DTYPES[spec.dtype])
    if kind == "normal":
        x = rng.standard_normal(shape)
    elif kind == "param":
        x = rng.standard_normal(shape) / math.sqrt(spec.fan_in)
    elif kind == "bias":
        x = 0.1 * rng.standard_normal(shape)
    elif kind == "norm_scale":
        x = 1.0 + 0.1 * rng.standard_normal(shape)
    elif kind in ("padding_mask", "float_mask"):
        n = shape[-1]
        rows = math.prod(shape[:-1])
        lengths = _lengths(rng, rows, n, spec.empty)
        x = (np.arange(n)[None, :] < lengths[:, None]).reshape(shape)
    elif kind == "pair_mask":
        n = shape[-1]
        m = np.arange(n) < rng.integers(n // 2, n)
        x = m[:, None] & m[None, :]
    elif kind == "bool_mask":
        x = rng.random(shape) < 0.75
        m, n = shape[-2], shape[-1]
        diag = np.eye(m, n, dtype=bool)
        x = x | diag
        if spec.empty:
            x.reshape(-1, m, n)[0, m // 3, :] = False
    elif kind == "lengths":
        x = _lengths(rng, math.prod(shape), spec.high, spec.empty).reshape(shape)
    elif kind == "ids":
        n = shape[-1]
        x = np.zeros(shape, np.int64).reshape(-1, n)
        for r in range(x.shape[0]):
            cuts = np.sort(rng.choice(np.arange(1, n), size=rng.integers(1, 4), replace=False))
            x[r] = np.searchsorted(cuts, np.arange(n), side="right")
        x = x.reshape(shape)
    elif kind == "positions":
        x = np.broadcast_to(np.arange(shape[-1]), shape).copy()
    elif kind == "doc_positions":
        n = shape[-1]
        x = np.zeros(shape, np.int64).reshape(-1, n)
        for r in range(x.shape[0]):
            starts = np.sort(np.concatenate([[0], rng.choice(np.arange(8, n), size=2,
                                                             replace=False)]))
            last = np.maximum.accumulate(np.where(np.isin(np.arange(n), starts),
                                                  np.arange(n), 0))
            x[r] = np.arange(n) - last
        x = x.reshape(shape)
    else:
        raise ValueError(f"unknown input kind {kind!r} of {spec.name}")
    return np.asarray(x).astype(dtype)


def to_storage(x):
    """bf16 as its uint16 bit pattern (npz has no bf16)."""
    if x.dtype == np.dtype(jnp.bfloat16):
        return x.view(np.uint16)
    return x


def reference(outdir, names, seed):
    os.makedirs(outdir, exist_ok=True)
    index = {}
    for name in names:
        prog = PROGRAMS[name]
        fn, specs = prog.export_fn()
        ref_fn, ref_specs = prog.reference_fn()
        assert [s.shape for s in specs] == [s.shape for s in ref_specs], name
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        values = [draw(rng, s) for s in specs]
        f32_args = []
        for v, rs in zip(values, ref_specs):
            if np.issubdtype(v.dtype, np.floating) or v.dtype == np.dtype(jnp.bfloat16):
                f32_args.append(jnp.asarray(v.astype(np.float32)).astype(DTYPES[rs.dtype]))
            else:
                f32_args.append(jnp.asarray(v))
        out = jax.jit(ref_fn)(*f32_args)
        outs = out if isinstance(out, (tuple, list)) else [out]
        np.savez(os.path.join(outdir, f"{name}.inputs.npz"),
                 **{s.name: to_storage(v) for s, v in zip(specs, values)})
        for i, o in enumerate(outs):
            suffix = "" if i == 0 else f".{i}"
            np.save(os.path.join(outdir, f"{name}.expected{suffix}.npy"),
                    np.asarray(o, dtype=np.float32))
        entry = index_entry(prog, specs, jax.eval_shape(fn, *[s.struct() for s in specs]))
        for inp in entry["inputs"]:
            if inp["dtype"] == "bf16":
                inp["storage"] = "uint16 bit pattern of bf16"
        entry["seed"] = seed
        entry["reference"] = "the same library function on f32 copies of the floating inputs"
        entry["expected"] = [f"{name}.expected{'' if i == 0 else f'.{i}'}.npy"
                             for i in range(len(outs))]
        nonfinite = int(sum(np.size(o) - np.isfinite(np.asarray(o)).sum() for o in outs))
        if nonfinite:
            entry["nonfinite_expected"] = nonfinite
        index[name] = entry
        print(f"{name}: reference {[tuple(o.shape) for o in outs]}"
              + (f" ({nonfinite} non-finite)" if nonfinite else ""), file=sys.stderr)
    write_index(outdir, index)
    return index


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", nargs="?")
    parser.add_argument("names", nargs="*", help="programs (default: all)")
    parser.add_argument("--reference", action="store_true",
                        help="write random inputs and the f32 reference outputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list the programs and exit")
    args = parser.parse_args()
    _check_optional()
    if args.list:
        for name, prog in PROGRAMS.items():
            print(f"{name:42s} {prog.library:20s} {prog.description}")
        for lib, why in UNAVAILABLE.items():
            print(f"unavailable: {lib}: {why}")
        return
    if not args.outdir:
        parser.error("OUTDIR is required")
    unknown = [n for n in args.names if n not in PROGRAMS]
    if unknown:
        parser.error(f"unknown programs: {', '.join(unknown)}")
    names = args.names or list(PROGRAMS)
    if args.reference:
        reference(args.outdir, names, args.seed)
    else:
        export(args.outdir, names)
    print(f"wrote {len(names)} programs to {args.outdir}")


if __name__ == "__main__":
    main()
