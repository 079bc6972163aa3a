#!/usr/bin/env python3
"""A corpus of real-world PyTorch attention programs, exported with
`flashlight.export` (Core ATen): the attention of HF transformers' model
families and attention-gym's mask_mods and score_mods.

Every program CALLS the library's own code; nothing here re-types it:

- transformers: each model module's `eager_attention_forward`, the SDPA
  integration's `sdpa_attention_forward`, the masks of
  `transformers.masking_utils` (`create_causal_mask`,
  `create_sliding_window_causal_mask`, `create_chunked_causal_mask`,
  `create_bidirectional_mask`, ...), the model's own helpers (Bloom/Falcon
  `build_alibi_tensor`, T5Attention's `compute_bias`, Gemma 3's
  `get_block_sequence_ids_for_mask` and `create_masks_for_vision_model`),
  and whole attention modules (LlamaAttention, Qwen3Attention, ...) built
  from a tiny config with random weights (bf16) and the model's rotary
  embedding. The `module` argument of an attention function is the model's
  own attention module built from the tiny config.
- attention-gym: every mask_mod and score_mod it ships, evaluated as plain
  PyTorch on broadcast `torch.arange` index tensors (b [B,1,1,1], h
  [1,H,1,1], q_idx [1,1,M,1], kv_idx [1,1,1,N]) — or, for the two mods
  that index per element (flamingo's `interval[0]`, MLA's `torch.dot`),
  through torch's `_vmap_for_bhqkv` under `TransformGetItemToIndex` as
  attention-gym's own `create_score_mod` does. A mask_mod's mask goes into
  `F.scaled_dot_product_attention(attn_mask=mask)`; a score_mod modifies
  the f32 scores, then softmax(.) @ V.

Shapes are small and static: batch 2, sequence 64-128, 2-8 heads, bf16.

    python3 scripts/corpus/torch_corpus.py OUTDIR [NAME...]
    python3 scripts/corpus/torch_corpus.py --reference OUTDIR [--seed S] [NAME...]
    python3 scripts/corpus/torch_corpus.py --check EXPORT_DIR REFERENCE_DIR [NAME...]
    python3 scripts/corpus/torch_corpus.py --list

Export mode writes OUTDIR/<name>.json (flashlight-graph v1, Core ATen),
the captured tensors as OUTDIR/<name>.<constant>.bin and OUTDIR/index.json
({name: {library, library_version, torch_version, description, inputs:
[{name, shape, dtype, kind}], constants, targets}}, plus "_generator":
the command, the versions and the input kinds; with NAMEs given, the other
entries already in index.json are kept).

Reference mode draws fresh inputs per program (from --seed and the name),
evaluates the same function in f32 (floating inputs and module weights
cast to f32: the weights are the exported bf16 constants, exactly) and
writes OUTDIR/<name>.inputs.npz (each input in its declared dtype; bf16 as
its uint16 bit pattern), OUTDIR/<name>.expected.npy (f32) and
OUTDIR/index.json (as above, with "expected" and the seed).

Input kinds (how reference mode draws them):
  normal        N(0, 1)
  param         N(0, 1): a learned parameter passed in as an argument (none yet)
  padding_mask  [B, N] int64, 1 = token, 0 = padding: row 0 is left-padded
                by 1..N/4 tokens (under a causal mask its first query rows
                see no token), the last row is fully padded (all 0), rows
                in between are right-padded by 0..N/4 tokens
  positions     [B, N] int64: HF generate's position ids (cumsum of the
                program's padding_mask - 1, 1 where padded), else arange
  packed_positions [B, N] int64: positions restarting at 0 at each packed
                document (2-4 documents per row)
  token_types   [B, N] int64: 0 = text, 1 = image: 1-2 image blocks of
                16-32 tokens per row
  bool_mask     [B, 1, M, N] bool, True = attend: causal (and sliding, if
                the input has a window) and the padding_mask rule above
  additive_mask [B, 1, M, N]: the same pattern as 0 / finfo(dtype).min
"""

import argparse
import json
import os
import sys
import traceback
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import flashlight  # noqa: E402
from flashlight.export import _modules_of, dtype_name  # noqa: E402

# --- Shapes ------------------------------------------------------------------

B = 2          # batch
N = 128        # sequence
H = 4          # query heads
HKV = 2        # key/value heads (GQA 4/2)
D = 64         # head dim
HIDDEN = 128   # hidden size of the tiny configs

DTYPES = {
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "f32": torch.float32,
    "i32": torch.int32,
    "i64": torch.int64,
    "bool": torch.bool,
}


@dataclass(frozen=True)
class Input:
    name: str
    shape: tuple
    dtype: str = "bf16"
    kind: str = "normal"
    window: int = 0  # bool_mask/additive_mask: sliding window (0: none)


@dataclass
class Program:
    name: str
    library: str
    description: str
    build: Callable  # () -> fn(*inputs)
    inputs: list


PROGRAMS = {}


def program(library, description, inputs):
    """Registers `build` (returning the function to export) under its name."""

    def register(build):
        PROGRAMS[build.__name__] = Program(build.__name__, library, description, build,
                                           list(inputs))
        return build

    return register


def qkv(n=N, h=H, hkv=HKV, d=D, dv=None, m=None, b=B):
    """q [b, h, m, d], k [b, hkv, n, d], v [b, hkv, n, dv] (BHND, bf16)."""
    m = m or n
    return [Input("q", (b, h, m, d)), Input("k", (b, hkv, n, d)), Input("v", (b, hkv, n, dv or d))]


def padding(n=N, b=B):
    return Input("attention_mask", (b, n), "i64", "padding_mask")


def bf16(module):
    """A freshly built module with its weights rounded to bf16, in eval mode."""
    return module.to(torch.bfloat16).eval()


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    return fn


# --- transformers -------------------------------------------------------------

import transformers  # noqa: E402
from transformers import masking_utils as mu  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402


def tiny(config_cls, impl="eager", **kwargs):
    """A tiny config: hidden 128, 4 heads over 2 KV heads of 64, 1 layer."""
    base = dict(hidden_size=HIDDEN, num_attention_heads=H, num_key_value_heads=HKV, head_dim=D,
                num_hidden_layers=1, intermediate_size=256,
                max_position_embeddings=4 * N, attention_dropout=0.0)
    base.update(kwargs)
    base = {k: v for k, v in base.items() if v is not None}  # None: the config's default
    config = config_cls(**base)
    config._attn_implementation = impl
    return config


def model_module(family):
    import importlib

    return importlib.import_module(f"transformers.models.{family}.modeling_{family}")


#: masking_utils creators by the name the programs use.
MASKS = {
    "causal": mu.create_causal_mask,
    "sliding": mu.create_sliding_window_causal_mask,
    "chunked": mu.create_chunked_causal_mask,
    "bidirectional": mu.create_bidirectional_mask,
    "bidirectional_sliding": mu.create_bidirectional_sliding_window_mask,
}


def make_mask(kind, config, embeds, attention_mask, position_ids=None):
    """The 4D mask masking_utils builds for `config._attn_implementation`
    (eager: additive 0/min of embeds.dtype; sdpa: bool, or None when sdpa's
    is_causal can do)."""
    kwargs = dict(config=config, inputs_embeds=embeds, attention_mask=attention_mask,
                  past_key_values=None)
    if position_ids is not None:
        kwargs["position_ids"] = position_ids
    return MASKS[kind](**kwargs)


def hf_function(name, family, attn_cls, config, mask, interface="eager", call=None,
                module=None):
    """fn(q, k, v[, attention_mask | mask | position_ids]) calling the family's
    attention function (`eager_attention_forward` of the model module, or
    `sdpa_attention_forward`) with the family's own attention module.

    mask: a masking_utils creator name (the function takes `attention_mask`
    [B, N] and builds the mask inside), "mask4d" (the 4D mask is an input),
    "packed" (create_causal_mask from packed `position_ids`), "none"."""
    mm = model_module(family)
    if module is None:
        module = bf16(getattr(mm, attn_cls)(config, 0))
    attend = mm.eager_attention_forward if interface == "eager" else sdpa_attention_forward
    call = dict(call or {})
    if "scaling" not in call and hasattr(module, "scaling"):
        call["scaling"] = module.scaling
    elif "scaling" not in call and hasattr(module, "head_dim"):
        call["scaling"] = module.head_dim ** -0.5  # as ModernBertAttention passes it

    if mask in MASKS:
        def fn(q, k, v, attention_mask):
            m = make_mask(mask, config, q.transpose(1, 2), attention_mask)
            return attend(module, q, k, v, m, dropout=0.0, **call)[0]
    elif mask == "mask4d":
        def fn(q, k, v, mask):
            return attend(module, q, k, v, mask, dropout=0.0, **call)[0]
    elif mask == "packed":
        def fn(q, k, v, position_ids):
            m = mu.create_causal_mask(config=config, inputs_embeds=q.transpose(1, 2),
                                      attention_mask=None, past_key_values=None,
                                      position_ids=position_ids)
            return attend(module, q, k, v, m, dropout=0.0, **call)[0]
    elif mask == "none":
        def fn(q, k, v):
            return attend(module, q, k, v, None, dropout=0.0, **call)[0]
    else:
        raise ValueError(mask)
    return _named(fn, name)


def hf_module(name, family, attn_cls, rotary_cls, config, mask, layer_idx=0, rotary_args=()):
    """fn(hidden_states, attention_mask, position_ids): the family's whole
    attention module (projections, RoPE from the model's rotary embedding,
    QK-norm where the model has it, output projection), the mask from
    masking_utils."""
    mm = model_module(family)
    attn = bf16(getattr(mm, attn_cls)(config, layer_idx))
    rotary = getattr(mm, rotary_cls)(config).eval()  # inv_freq stays f32, as HF keeps it

    def fn(hidden_states, attention_mask, position_ids):
        cos_sin = rotary(hidden_states, position_ids, *rotary_args)
        m = make_mask(mask, config, hidden_states, attention_mask, position_ids)
        return attn(hidden_states, position_embeddings=cos_sin, attention_mask=m)[0]

    return _named(fn, name)


def module_inputs(n=N, hidden=HIDDEN):
    return [Input("hidden_states", (B, n, hidden)), padding(n),
            Input("position_ids", (B, n), "i64", "positions")]


T = "transformers"

# Llama ------------------------------------------------------------------------


@program(T, "llama eager_attention_forward, GQA 4/2, mask from create_causal_mask (eager: "
            "additive 0/min) over a [B, N] padding mask", qkv() + [padding()])
def hf_llama_eager_causal_padding():
    from transformers import LlamaConfig
    return hf_function("hf_llama_eager_causal_padding", "llama", "LlamaAttention",
                       tiny(LlamaConfig), "causal")


@program(T, "llama eager_attention_forward, GQA 4/2, the 4D additive mask [B, 1, N, N] an input",
         qkv() + [Input("mask", (B, 1, N, N), "bf16", "additive_mask")])
def hf_llama_eager_mask4d():
    from transformers import LlamaConfig
    return hf_function("hf_llama_eager_mask4d", "llama", "LlamaAttention", tiny(LlamaConfig),
                       "mask4d")


@program(T, "sdpa_attention_forward (llama module), mask from create_causal_mask (sdpa: bool) "
            "over a padding mask; GQA by repeat_kv since a mask is given", qkv() + [padding()])
def hf_llama_sdpa_causal_padding():
    from transformers import LlamaConfig
    return hf_function("hf_llama_sdpa_causal_padding", "llama", "LlamaAttention",
                       tiny(LlamaConfig, "sdpa"), "causal", "sdpa")


@program(T, "sdpa_attention_forward (llama module), no mask: is_causal=True and enable_gqa",
         qkv())
def hf_llama_sdpa_is_causal():
    from transformers import LlamaConfig
    return hf_function("hf_llama_sdpa_is_causal", "llama", "LlamaAttention",
                       tiny(LlamaConfig, "sdpa"), "none", "sdpa")


@program(T, "LlamaAttention module (q/k/v/o projections, RoPE from LlamaRotaryEmbedding), "
            "eager, create_causal_mask over a padding mask", module_inputs())
def hf_llama_module():
    from transformers import LlamaConfig
    return hf_module("hf_llama_module", "llama", "LlamaAttention", "LlamaRotaryEmbedding",
                     tiny(LlamaConfig), "causal")


# Mistral ------------------------------------------------------------------------


@program(T, "mistral eager_attention_forward, sliding window 32 from "
            "create_sliding_window_causal_mask over a padding mask", qkv() + [padding()])
def hf_mistral_eager_sliding_padding():
    from transformers import MistralConfig
    return hf_function("hf_mistral_eager_sliding_padding", "mistral", "MistralAttention",
                       tiny(MistralConfig, sliding_window=32), "sliding")


@program(T, "sdpa_attention_forward (mistral module), the 4D bool sliding-window mask an input",
         qkv() + [Input("mask", (B, 1, N, N), "bool", "bool_mask", window=32)])
def hf_mistral_sdpa_sliding_mask4d():
    from transformers import MistralConfig
    return hf_function("hf_mistral_sdpa_sliding_mask4d", "mistral", "MistralAttention",
                       tiny(MistralConfig, "sdpa", sliding_window=32), "mask4d", "sdpa")


# Gemma 2 / Gemma 3 ---------------------------------------------------------------


def gemma2_config(impl="eager"):
    from transformers import Gemma2Config
    return tiny(Gemma2Config, impl, sliding_window=32, query_pre_attn_scalar=64,
                attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                layer_types=["sliding_attention"])


@program(T, "gemma2 eager_attention_forward: logit soft-cap 50 (tanh), scaling "
            "query_pre_attn_scalar**-0.5, sliding window 32 from "
            "create_sliding_window_causal_mask over a padding mask", qkv() + [padding()])
def hf_gemma2_eager_softcap_sliding():
    config = gemma2_config()
    return hf_function("hf_gemma2_eager_softcap_sliding", "gemma2", "Gemma2Attention", config,
                       "sliding", call={"softcap": config.attn_logit_softcapping})


@program(T, "gemma2 eager_attention_forward: soft-cap 50, the 4D additive causal mask an input",
         qkv() + [Input("mask", (B, 1, N, N), "bf16", "additive_mask")])
def hf_gemma2_eager_softcap_mask4d():
    config = gemma2_config()
    return hf_function("hf_gemma2_eager_softcap_mask4d", "gemma2", "Gemma2Attention", config,
                       "mask4d", call={"softcap": config.attn_logit_softcapping})


@program(T, "Gemma2Attention module of a sliding layer (soft-cap 50, window 32, RoPE), eager, "
            "create_sliding_window_causal_mask over a padding mask", module_inputs())
def hf_gemma2_module():
    return hf_module("hf_gemma2_module", "gemma2", "Gemma2Attention", "Gemma2RotaryEmbedding",
                     gemma2_config(), "sliding")


def gemma3_config(impl="eager"):
    from transformers import Gemma3TextConfig
    return tiny(Gemma3TextConfig, impl, sliding_window=32, query_pre_attn_scalar=64,
                layer_types=["sliding_attention"])


@program(T, "gemma3 eager_attention_forward, sliding window 32 from "
            "create_sliding_window_causal_mask over a padding mask", qkv() + [padding()])
def hf_gemma3_eager_sliding_padding():
    return hf_function("hf_gemma3_eager_sliding_padding", "gemma3", "Gemma3Attention",
                       gemma3_config(), "sliding")


@program(T, "gemma3 multimodal mask: image blocks attend bidirectionally "
            "(get_block_sequence_ids_for_mask of token_type_ids, create_masks_for_vision_model's "
            "sliding mask: AND(sliding 32, OR(causal, blockwise)) built with vmap), eager",
         qkv() + [padding(), Input("token_type_ids", (B, N), "i64", "token_types")])
def hf_gemma3_vision_blocks():
    mm = model_module("gemma3")
    config = gemma3_config()
    module = bf16(mm.Gemma3Attention(config, 0))

    def hf_gemma3_vision_blocks(q, k, v, attention_mask, token_type_ids):
        blocks = mm.get_block_sequence_ids_for_mask(token_type_ids, device=q.device)
        masks = mm.create_masks_for_vision_model(config, q.transpose(1, 2), attention_mask, None,
                                                 None, blocks)
        return mm.eager_attention_forward(module, q, k, v, masks["sliding_attention"],
                                          dropout=0.0, scaling=module.scaling)[0]

    return hf_gemma3_vision_blocks


# Qwen 2 / Qwen 3 ---------------------------------------------------------------------


@program(T, "sdpa_attention_forward (qwen2 module), bool mask from create_causal_mask over a "
            "padding mask", qkv() + [padding()])
def hf_qwen2_sdpa_causal_padding():
    from transformers import Qwen2Config
    return hf_function("hf_qwen2_sdpa_causal_padding", "qwen2", "Qwen2Attention",
                       tiny(Qwen2Config, "sdpa"), "causal", "sdpa")


@program(T, "qwen2 eager_attention_forward over packed sequences: create_causal_mask with no "
            "attention_mask finds the documents from position_ids (find_packed_sequence_indices)",
         qkv() + [Input("position_ids", (B, N), "i64", "packed_positions")])
def hf_qwen2_eager_packed():
    from transformers import Qwen2Config
    return hf_function("hf_qwen2_eager_packed", "qwen2", "Qwen2Attention", tiny(Qwen2Config),
                       "packed")


@program(T, "Qwen3Attention module: per-head RMSNorm of q and k (QK-norm) before RoPE, "
            "eager, create_causal_mask over a padding mask", module_inputs())
def hf_qwen3_module():
    from transformers import Qwen3Config
    return hf_module("hf_qwen3_module", "qwen3", "Qwen3Attention", "Qwen3RotaryEmbedding",
                     tiny(Qwen3Config), "causal")


@program(T, "Qwen3Attention module with attn_implementation sdpa (sdpa_attention_forward, bool "
            "mask) over a padding mask", module_inputs())
def hf_qwen3_module_sdpa():
    from transformers import Qwen3Config
    return hf_module("hf_qwen3_module_sdpa", "qwen3", "Qwen3Attention", "Qwen3RotaryEmbedding",
                     tiny(Qwen3Config, "sdpa"), "causal")


# Phi-3 ----------------------------------------------------------------------------------


@program(T, "phi3 eager_attention_forward, 8 query heads over 2 KV heads (GQA 4:1), "
            "create_causal_mask over a padding mask", qkv(h=8, hkv=2) + [padding()])
def hf_phi3_eager_causal_padding():
    from transformers import Phi3Config
    return hf_function("hf_phi3_eager_causal_padding", "phi3", "Phi3Attention",
                       tiny(Phi3Config, hidden_size=256, num_attention_heads=8,
                            num_key_value_heads=2, head_dim=None), "causal")


# GPT-OSS --------------------------------------------------------------------------------


def gpt_oss_config(impl="eager"):
    from transformers import GptOssConfig
    return tiny(GptOssConfig, impl, sliding_window=32, layer_types=["sliding_attention"],
                num_local_experts=2, num_experts_per_tok=1)


@program(T, "gpt_oss eager_attention_forward: a learned sink logit per head (the module's "
            "`sinks`) joins the softmax and is dropped; sliding window 32 over a padding mask",
         qkv() + [padding()])
def hf_gpt_oss_eager_sinks_sliding():
    mm = model_module("gpt_oss")
    config = gpt_oss_config()
    module = mm.GptOssAttention(config, 0)
    with torch.no_grad():
        module.sinks.normal_()  # torch.empty in __init__; a trained model's sinks
    return hf_function("hf_gpt_oss_eager_sinks_sliding", "gpt_oss", "GptOssAttention", config,
                       "sliding", module=bf16(module))


@program(T, "GptOssAttention module (sinks, RoPE, biases), eager, causal (full-attention layer) "
            "over a padding mask", module_inputs())
def hf_gpt_oss_module():
    mm = model_module("gpt_oss")
    config = gpt_oss_config()
    config.layer_types = ["full_attention"]
    attn = mm.GptOssAttention(config, 0)
    with torch.no_grad():
        attn.sinks.normal_()
    attn = bf16(attn)
    rotary = mm.GptOssRotaryEmbedding(config).eval()

    def hf_gpt_oss_module(hidden_states, attention_mask, position_ids):
        cos_sin = rotary(hidden_states, position_ids)
        m = make_mask("causal", config, hidden_states, attention_mask, position_ids)
        return attn(hidden_states, position_embeddings=cos_sin, attention_mask=m)[0]

    return hf_gpt_oss_module


# BLOOM / Falcon: ALiBi ----------------------------------------------------------------------


@program(T, "BloomAttention module (2 heads of 64): ALiBi from bloom's build_alibi_tensor "
            "(positions = cumsum of the padding mask) fed to baddbmm, fused QKV, eager "
            "create_causal_mask, residual add",
         [Input("hidden_states", (B, N, HIDDEN)), padding()])
def hf_bloom_alibi_module():
    from transformers import BloomConfig
    mm = model_module("bloom")
    config = tiny(BloomConfig, num_attention_heads=2, num_key_value_heads=None, head_dim=None,
                  n_layer=1)
    attn = bf16(mm.BloomAttention(config, 0))

    def hf_bloom_alibi_module(hidden_states, attention_mask):
        alibi = mm.build_alibi_tensor(attention_mask, config.n_head, hidden_states.dtype)
        m = make_mask("causal", config, hidden_states, attention_mask)
        return attn(hidden_states, hidden_states, alibi, m)[0]

    return hf_bloom_alibi_module


@program(T, "FalconAttention module with alibi=True (falcon-rw, 2 heads of 64): falcon's "
            "build_alibi_tensor over the padding mask, f32 logits, eager create_causal_mask",
         [Input("hidden_states", (B, N, HIDDEN)), padding()])
def hf_falcon_alibi_module():
    from transformers import FalconConfig
    mm = model_module("falcon")
    config = tiny(FalconConfig, num_attention_heads=2, alibi=True,
                  multi_query=False, new_decoder_architecture=False, parallel_attn=False,
                  bias=True, num_kv_heads=2, head_dim=None, num_key_value_heads=None)
    attn = bf16(mm.FalconAttention(config, 0))

    def hf_falcon_alibi_module(hidden_states, attention_mask):
        alibi = mm.build_alibi_tensor(attention_mask, config.num_attention_heads,
                                      hidden_states.dtype)
        m = make_mask("causal", config, hidden_states, attention_mask)
        return attn(hidden_states, alibi, m)[0]

    return hf_falcon_alibi_module


# T5: relative position bias ----------------------------------------------------------------


def t5_config(impl="eager", decoder=False):
    from transformers import T5Config
    config = T5Config(d_model=HIDDEN, d_kv=D, num_heads=H, num_layers=1, d_ff=256,
                      relative_attention_num_buckets=32,
                      relative_attention_max_distance=128, dropout_rate=0.0,
                      is_decoder=decoder)
    config._attn_implementation = impl
    return config


@program(T, "T5Attention encoder module: bucketed relative position bias from compute_bias "
            "(log buckets, bidirectional) added to unscaled scores, create_bidirectional_mask "
            "over a padding mask, eager (softmax in bf16)",
         [Input("hidden_states", (B, N, HIDDEN)), padding()])
def hf_t5_encoder_relbias_module():
    mm = model_module("t5")
    config = t5_config()
    attn = bf16(mm.T5Attention(config, has_relative_attention_bias=True, layer_idx=0))

    def hf_t5_encoder_relbias_module(hidden_states, attention_mask):
        m = make_mask("bidirectional", config, hidden_states, attention_mask)
        return attn(hidden_states, mask=m)[0]

    return hf_t5_encoder_relbias_module


@program(T, "t5 eager_attention_forward of a decoder: position_bias from a decoder T5Attention's "
            "compute_bias (unidirectional buckets), create_causal_mask over a padding mask",
         qkv(hkv=H) + [padding()])
def hf_t5_decoder_eager_relbias():
    mm = model_module("t5")
    config = t5_config(decoder=True)
    module = bf16(mm.T5Attention(config, has_relative_attention_bias=True, layer_idx=0,
                                 is_causal=True))

    def hf_t5_decoder_eager_relbias(q, k, v, attention_mask):
        bias = module.compute_bias(q.shape[2], k.shape[2], device=q.device)
        m = make_mask("causal", config, q.transpose(1, 2), attention_mask)
        return mm.eager_attention_forward(module, q, k, v, m, scaling=module.scaling,
                                          position_bias=bias)[0]

    return hf_t5_decoder_eager_relbias


@program(T, "sdpa_attention_forward with T5's position_bias (create_position_bias_mask: the bias "
            "where the bool mask keeps, min elsewhere) and scaling 1.0; encoder compute_bias, "
            "create_bidirectional_mask (sdpa) over a padding mask", qkv(hkv=H) + [padding()])
def hf_t5_sdpa_position_bias():
    mm = model_module("t5")
    config = t5_config("sdpa")
    module = bf16(mm.T5Attention(config, has_relative_attention_bias=True, layer_idx=0))

    def hf_t5_sdpa_position_bias(q, k, v, attention_mask):
        bias = module.compute_bias(q.shape[2], k.shape[2], device=q.device)
        m = make_mask("bidirectional", config, q.transpose(1, 2), attention_mask)
        return sdpa_attention_forward(module, q, k, v, m, scaling=module.scaling,
                                      position_bias=bias)[0]

    return hf_t5_sdpa_position_bias


# DeepSeek-V3: MLA ---------------------------------------------------------------------------


def deepseek_config(impl="eager"):
    from transformers import DeepseekV3Config
    return tiny(DeepseekV3Config, impl, num_attention_heads=2, num_key_value_heads=2,
                head_dim=None, q_lora_rank=64, kv_lora_rank=64, qk_nope_head_dim=128,
                qk_rope_head_dim=64, v_head_dim=128, n_routed_experts=2, num_experts_per_tok=1,
                n_group=1, topk_group=1, first_k_dense_replace=1, rope_interleave=True)


@program(T, "deepseek_v3 eager_attention_forward with MLA head dims: q/k 192 (128 nope + 64 "
            "rope), v 128, scaling 192**-0.5, create_causal_mask over a padding mask",
         qkv(h=4, hkv=4, d=192, dv=128) + [padding()])
def hf_deepseek_v3_eager_mla():
    config = deepseek_config()
    config.num_attention_heads = config.num_key_value_heads = 4
    return hf_function("hf_deepseek_v3_eager_mla", "deepseek_v3", "DeepseekV3Attention", config,
                       "causal")


@program(T, "DeepseekV3Attention module (MLA: q LoRA + RMSNorm, compressed KV + RMSNorm, "
            "kv_b_proj expansion, interleaved RoPE on 64 of 192 dims, v 128), eager, "
            "create_causal_mask over a padding mask", module_inputs())
def hf_deepseek_v3_module():
    return hf_module("hf_deepseek_v3_module", "deepseek_v3", "DeepseekV3Attention",
                     "DeepseekV3RotaryEmbedding", deepseek_config(), "causal")


# Encoders: BERT / RoBERTa / ModernBERT -----------------------------------------------------


@program(T, "BertSelfAttention module (q/k/v projections with bias, 2 heads of 64), eager, "
            "encoder mask from create_bidirectional_mask over a padding mask (softmax in bf16)",
         [Input("hidden_states", (B, N, HIDDEN)), padding()])
def hf_bert_module():
    from transformers import BertConfig
    mm = model_module("bert")
    config = BertConfig(hidden_size=HIDDEN, num_attention_heads=2, num_hidden_layers=1,
                        intermediate_size=256, attention_probs_dropout_prob=0.0)
    config._attn_implementation = "eager"
    attn = bf16(mm.BertSelfAttention(config, layer_idx=0))

    def hf_bert_module(hidden_states, attention_mask):
        m = make_mask("bidirectional", config, hidden_states, attention_mask)
        return attn(hidden_states, attention_mask=m)[0]

    return hf_bert_module


@program(T, "sdpa_attention_forward (roberta self-attention module, not causal), bool encoder "
            "mask from create_bidirectional_mask over a padding mask", qkv(hkv=H) + [padding()])
def hf_roberta_sdpa_padding():
    from transformers import RobertaConfig
    mm = model_module("roberta")
    config = RobertaConfig(hidden_size=HIDDEN * 2, num_attention_heads=H, num_hidden_layers=1,
                           intermediate_size=256)
    config._attn_implementation = "sdpa"
    module = bf16(mm.RobertaSelfAttention(config, layer_idx=0))
    return hf_function("hf_roberta_sdpa_padding", "roberta", None, config, "bidirectional",
                       "sdpa", module=module)


@program(T, "modernbert eager_attention_forward with a local (bidirectional sliding window "
            "+-32) mask from create_bidirectional_sliding_window_mask over a padding mask",
         qkv(hkv=H) + [padding()])
def hf_modernbert_eager_local():
    from transformers import ModernBertConfig
    config = ModernBertConfig(hidden_size=HIDDEN * 2, num_attention_heads=H, num_hidden_layers=1,
                              intermediate_size=256, local_attention=64,
                              layer_types=["sliding_attention"])
    config._attn_implementation = "eager"
    return hf_function("hf_modernbert_eager_local", "modernbert", "ModernBertAttention", config,
                       "bidirectional_sliding")


# Cohere / OLMo 2 / StarCoder2 / Llama 4 --------------------------------------------------


@program(T, "CohereAttention module with use_qk_norm (per-head LayerNorm of q and k), "
            "interleaved RoPE (rotate_half on even/odd pairs), eager, create_causal_mask over a "
            "padding mask", module_inputs())
def hf_cohere_module():
    from transformers import CohereConfig
    return hf_module("hf_cohere_module", "cohere", "CohereAttention", "CohereRotaryEmbedding",
                     tiny(CohereConfig, use_qk_norm=True), "causal")


@program(T, "cohere eager_attention_forward, create_causal_mask over a padding mask",
         qkv() + [padding()])
def hf_cohere_eager_causal_padding():
    from transformers import CohereConfig
    return hf_function("hf_cohere_eager_causal_padding", "cohere", "CohereAttention",
                       tiny(CohereConfig), "causal")


@program(T, "Olmo2Attention module: RMSNorm of the whole q and k projections (before the head "
            "split), RoPE, eager, create_causal_mask over a padding mask", module_inputs())
def hf_olmo2_module():
    from transformers import Olmo2Config
    return hf_module("hf_olmo2_module", "olmo2", "Olmo2Attention", "Olmo2RotaryEmbedding",
                     tiny(Olmo2Config), "causal")


@program(T, "sdpa_attention_forward (starcoder2 module), sliding window 32 bool mask from "
            "create_sliding_window_causal_mask (sdpa) over a padding mask", qkv() + [padding()])
def hf_starcoder2_sdpa_sliding():
    from transformers import Starcoder2Config
    return hf_function("hf_starcoder2_sdpa_sliding", "starcoder2", "Starcoder2Attention",
                       tiny(Starcoder2Config, "sdpa", sliding_window=32), "sliding", "sdpa")


@program(T, "llama4 text eager_attention_forward (softmax not upcast), chunked attention "
            "(chunk 32, counted from the first real token) from create_chunked_causal_mask over "
            "a padding mask", qkv() + [padding()])
def hf_llama4_eager_chunked():
    from transformers import Llama4TextConfig
    config = tiny(Llama4TextConfig, attention_chunk_size=32, num_local_experts=2,
                  intermediate_size_mlp=256, no_rope_layers=[1])
    return hf_function("hf_llama4_eager_chunked", "llama4", "Llama4TextAttention", config,
                       "chunked")


# --- attention-gym -------------------------------------------------------------------------

G = "attention-gym"


def index_grids(batch, heads, q_len, kv_len, device):
    """Broadcast index tensors b [B,1,1,1], h [1,H,1,1], q_idx [1,1,M,1],
    kv_idx [1,1,1,N] (int64)."""
    b = torch.arange(batch, device=device)[:, None, None, None]
    h = torch.arange(heads, device=device)[None, :, None, None]
    q_idx = torch.arange(q_len, device=device)[None, None, :, None]
    kv_idx = torch.arange(kv_len, device=device)[None, None, None, :]
    return b, h, q_idx, kv_idx


def vmapped(mod, batch, heads, q_len, kv_len, device, scores=None):
    """A mod evaluated per element, as attention-gym's create_score_mod and
    FlexAttention's reference do: torch's `_vmap_for_bhqkv` over 1-D aranges
    under `TransformGetItemToIndex`."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    from torch.nn.attention.flex_attention import _vmap_for_bhqkv

    idx = [torch.arange(n, device=device) for n in (batch, heads, q_len, kv_len)]
    with TransformGetItemToIndex():
        if scores is None:
            return _vmap_for_bhqkv(mod, prefix=())(*idx)
        return _vmap_for_bhqkv(mod, prefix=(0,))(scores, *idx)


def mask_mod_attention(name, mask_mod, per_element=False):
    """fn(q, k, v): the mask_mod's boolean mask into F.scaled_dot_product_attention."""

    def fn(q, k, v):
        shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        if per_element:
            mask = vmapped(mask_mod, *shape, q.device)
        else:
            mask = mask_mod(*index_grids(*shape, q.device))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    return _named(fn, name)


def score_mod_attention(name, score_mod, mask_mod=None, per_element=False):
    """fn(q, k, v): f32 scores q k^T / sqrt(D), the score_mod (and the mask_mod
    as -inf), softmax, @ v."""

    def fn(q, k, v):
        return scored(q, k, v, score_mod, mask_mod, per_element)

    return _named(fn, name)


def scored(q, k, v, score_mod, mask_mod=None, per_element=False):
    shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    grids = index_grids(*shape, q.device)
    s = torch.matmul(q, k.transpose(-2, -1)).float() * q.shape[-1] ** -0.5
    if per_element:
        s = vmapped(score_mod, *shape, q.device, scores=s)
    else:
        s = score_mod(s, *grids)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(*grids), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p.to(v.dtype), v)


def gym_qkv(n=N, m=None):
    return qkv(n=n, m=m, hkv=H)


def _gym_program(description, inputs=None):
    return program(G, description, inputs if inputs is not None else gym_qkv())


@_gym_program("attn_gym.masks.causal_mask")
def gym_causal():
    from attn_gym.masks import causal_mask
    return mask_mod_attention("gym_causal", causal_mask)


@_gym_program("attn_gym.masks.generate_sliding_window(32): causal, q - kv <= 32")
def gym_sliding_window():
    from attn_gym.masks import generate_sliding_window
    return mask_mod_attention("gym_sliding_window", generate_sliding_window(32))


@_gym_program("attn_gym.masks.generate_prefix_lm_mask(32): bidirectional prefix of 32, causal "
              "after")
def gym_prefix_lm():
    from attn_gym.masks import generate_prefix_lm_mask
    return mask_mod_attention("gym_prefix_lm", generate_prefix_lm_mask(32))


DOC_LENGTHS = [20, 45, 13, 50]  # 4 documents packed into N = 128


@_gym_program("attn_gym.masks.generate_doc_mask_mod(causal_mask, offsets): 4 packed documents "
              f"{DOC_LENGTHS}, causal within each (document ids gathered with q_idx/kv_idx)")
def gym_document_causal():
    from attn_gym.masks import causal_mask, generate_doc_mask_mod
    from attn_gym.masks.document_mask import length_to_offsets
    return mask_mod_attention("gym_document_causal",
                              generate_doc_mask_mod(causal_mask,
                                                    length_to_offsets(DOC_LENGTHS, "cpu")))


@_gym_program("attn_gym.masks.generate_packed_causal_doc_mask_mod(offsets): causal from the "
              f"document start, documents {DOC_LENGTHS}")
def gym_packed_causal_doc():
    from attn_gym.masks import generate_packed_causal_doc_mask_mod
    from attn_gym.masks.document_mask import length_to_offsets
    return mask_mod_attention("gym_packed_causal_doc", generate_packed_causal_doc_mask_mod(
        length_to_offsets(DOC_LENGTHS, "cpu")))


@_gym_program("attn_gym.masks.generate_dilated_sliding_window(32, 2): |q - kv| <= 32 and "
              "|q - kv| % 2 == 0")
def gym_dilated_sliding_window():
    from attn_gym.masks import generate_dilated_sliding_window
    return mask_mod_attention("gym_dilated_sliding_window", generate_dilated_sliding_window(32, 2))


@_gym_program("attn_gym.masks.generate_global_sliding_window(16, is_global): Longformer, "
              "|q - kv| <= 16 or either token global (tokens 0, 1, 64)")
def gym_global_sliding_window():
    from attn_gym.masks import generate_global_sliding_window
    is_global = torch.zeros(N, dtype=torch.bool)
    is_global[[0, 1, 64]] = True
    return mask_mod_attention("gym_global_sliding_window",
                              generate_global_sliding_window(16, is_global))


@_gym_program("attn_gym.masks.generate_natten(16, 8, 5, 3): neighborhood attention on a 16x8 "
              "canvas, 5x3 kernel (//, %, clamp of the indices)")
def gym_natten():
    from attn_gym.masks import generate_natten
    return mask_mod_attention("gym_natten", generate_natten(16, 8, 5, 3))


@_gym_program("attn_gym.masks.generate_tiled_natten(16, 8, 5, 3, 4, 4): NATTEN on 4x4 tiles")
def gym_tiled_natten():
    from attn_gym.masks import generate_tiled_natten
    return mask_mod_attention("gym_tiled_natten", generate_tiled_natten(16, 8, 5, 3, 4, 4))


@_gym_program("attn_gym.masks.generate_morton_natten(16, 8, 5, 3): NATTEN in Z-order (bit "
              "de-interleaving: &, |, >>)")
def gym_morton_natten():
    from attn_gym.masks import generate_morton_natten
    return mask_mod_attention("gym_morton_natten", generate_morton_natten(16, 8, 5, 3))


@_gym_program("attn_gym.masks.generate_shared_prefix_mask_mod: a prompt document (32) shared by "
              "3 continuations (32 each): causal within, continuations see the whole prompt")
def gym_shared_prefix():
    from attn_gym.masks import generate_shared_prefix_mask_mod
    from attn_gym.masks.document_mask import length_to_offsets
    offsets = length_to_offsets([32, 32, 32, 32], "cpu")
    prefix = torch.tensor([0, 0, 0, 0], dtype=torch.int32)
    return mask_mod_attention("gym_shared_prefix",
                              generate_shared_prefix_mask_mod(offsets, prefix))


@_gym_program("attn_gym.masks.generate_vision_cross_attention_mask_mod: Flamingo cross "
              "attention, 128 text queries over 2 images x 32 tokens (intervals [16, 64), "
              "[64, 128)); text before the first image sees nothing; evaluated with vmap",
              gym_qkv(n=64, m=N))
def gym_flamingo():
    from attn_gym.masks import generate_vision_cross_attention_mask_mod
    intervals = torch.tensor([[16, 64], [64, 128]])
    return mask_mod_attention("gym_flamingo",
                              generate_vision_cross_attention_mask_mod(intervals, 32),
                              per_element=True)


@_gym_program("attn_gym.masks.generate_block_diffusion_mask(64, 16): BD3-LM training over "
              "noised + clean halves (block diagonal, offset block causal, block causal)")
def gym_block_diffusion():
    from attn_gym.masks import generate_block_diffusion_mask
    return mask_mod_attention("gym_block_diffusion", generate_block_diffusion_mask(N // 2, 16))


@_gym_program("attn_gym.masks.batchify_mask_mod(causal_mask, 32): causal within groups of 32")
def gym_batchify_causal():
    from attn_gym.masks import batchify_mask_mod, causal_mask
    return mask_mod_attention("gym_batchify_causal", batchify_mask_mod(causal_mask, 32))


@_gym_program("attn_gym.masks.generate_jetspec_tree_causal_mask_mod: 64 tree nodes (binary "
              "tree) over a 64-token prefix: queries see the prefix and their ancestors "
              "(ancestor matrix gathered at [q_idx, kv_idx - 64])", gym_qkv(n=N, m=64))
def gym_jetspec_tree():
    from attn_gym.masks import build_tree_ancestor_matrix, generate_jetspec_tree_causal_mask_mod
    parents = [-1] + [(i - 1) // 2 for i in range(1, 64)]
    ancestors = build_tree_ancestor_matrix(parents, device="cpu")
    return mask_mod_attention("gym_jetspec_tree",
                              generate_jetspec_tree_causal_mask_mod(64, ancestors))


@_gym_program("attn_gym.masks.generate_jetspec_training_mask_mod(64, 16): 4 sampled blocks of "
              "16 over a 64-token prefix, causal within each block", gym_qkv(n=N, m=64))
def gym_jetspec_training():
    from attn_gym.masks import generate_jetspec_training_mask_mod
    return mask_mod_attention("gym_jetspec_training", generate_jetspec_training_mask_mod(64, 16))


@_gym_program("attn_gym.masks.generate_sta_mask_mod_2d((8, 16), (4, 8), (2, 4)): sliding tile "
              "attention on an 8x16 canvas of 2x4 tiles")
def gym_sta_2d():
    from attn_gym.masks import generate_sta_mask_mod_2d
    return mask_mod_attention("gym_sta_2d", generate_sta_mask_mod_2d((8, 16), (4, 8), (2, 4)))


@_gym_program("attn_gym.masks.generate_sta_mask_mod_3d((2, 8, 8), (2, 4, 4), (1, 2, 2)): sliding "
              "tile attention on a 2x8x8 video of 1x2x2 tiles")
def gym_sta_3d():
    from attn_gym.masks import generate_sta_mask_mod_3d
    return mask_mod_attention("gym_sta_3d",
                              generate_sta_mask_mod_3d((2, 8, 8), (2, 4, 4), (1, 2, 2)))


SVG = dict(prompt_length=16, num_frames=4, token_per_frame=28, width=1)


@_gym_program("attn_gym.masks.generate_spatial_head_mask_mod: Sparse VideoGen spatial head, "
              "prompt 16 + 4 frames x 28 tokens, width 1 frame (rounded to 16)")
def gym_svg_spatial():
    from attn_gym.masks import generate_spatial_head_mask_mod
    return mask_mod_attention("gym_svg_spatial",
                              generate_spatial_head_mask_mod(**SVG, round_width=16))


@_gym_program("attn_gym.masks.generate_temporal_head_mask_mod: Sparse VideoGen temporal head "
              "(same token of other frames), prompt 16 + 4 frames x 28")
def gym_svg_temporal():
    from attn_gym.masks import generate_temporal_head_mask_mod
    return mask_mod_attention("gym_svg_temporal", generate_temporal_head_mask_mod(**SVG))


@_gym_program("attn_gym.masks.generate_vsa_mask_mod: video sparse attention, top-3 of 8 KV "
              "tiles of 16 per query tile, per batch and head (a captured [B, H, 8, 3] table; "
              "== and any over the top-k dim)")
def gym_vsa():
    from attn_gym.masks import generate_vsa_mask_mod
    gen = torch.Generator().manual_seed(7)
    tiles = N // 16
    topk = torch.stack([torch.randperm(tiles, generator=gen)[:3]
                        for _ in range(B * H * tiles)]).view(B, H, tiles, 3)
    return mask_mod_attention("gym_vsa", generate_vsa_mask_mod(topk, 16))


@_gym_program("attn_gym.mods.generate_alibi_bias(4): score + (kv - q) * exp2(-(h + 1) * 8 / H), "
              "with causal_mask (as the mod's example)")
def gym_alibi():
    from attn_gym.masks import causal_mask
    from attn_gym.mods import generate_alibi_bias
    return score_mod_attention("gym_alibi", generate_alibi_bias(H), causal_mask)


@_gym_program("attn_gym.mods.generate_tanh_softcap(30): 30 * tanh(score / 30)")
def gym_softcap():
    from attn_gym.mods import generate_tanh_softcap
    return score_mod_attention("gym_softcap", generate_tanh_softcap(30))


@_gym_program("attn_gym.mods.generate_tanh_softcap(30, approx=True): the soft-cap through "
              "attention-gym's custom op approx::tanh (tanh.approx.f32), causal")
def gym_softcap_approx():
    from attn_gym.masks import causal_mask
    from attn_gym.mods import generate_tanh_softcap
    return score_mod_attention("gym_softcap_approx", generate_tanh_softcap(30, approx=True),
                               causal_mask)


@_gym_program("attn_gym.mods.generate_activation_score_mod(gelu) + undo_softmax: GELU attention "
              "gelu(S) @ V via the log(f(s) + 1) score_mod, logsumexp and the V-sum correction")
def gym_activation_gelu():
    from attn_gym.mods import generate_activation_score_mod, undo_softmax
    score_mod = generate_activation_score_mod(F.gelu, offset=1.0)

    def gym_activation_gelu(q, k, v):
        grids = index_grids(q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.device)
        s = torch.matmul(q, k.transpose(-2, -1)).float() * q.shape[-1] ** -0.5
        s = score_mod(s, *grids)
        out = torch.matmul(torch.softmax(s, dim=-1), v.float())
        lse = torch.logsumexp(s, dim=-1)
        return undo_softmax(out, lse, v.float().sum(dim=-2, keepdim=True), offset=1.0)

    return gym_activation_gelu


def _graph(n, seed):
    """A random sparse symmetric adjacency [B, n, n] (a ring plus chords)."""
    gen = torch.Generator().manual_seed(seed)
    ring = torch.zeros(n, n, dtype=torch.bool)
    i = torch.arange(n)
    ring[i, (i + 1) % n] = True
    adj = ring | (torch.rand(B, n, n, generator=gen) < 0.03)
    return adj | adj.transpose(-1, -2)


@_gym_program("attn_gym.mods.generate_graphormer_spatial_bias: + spatial_bias[h, distances[b, "
              "q, kv]] (Floyd-Warshall shortest paths of a 64-node graph, a captured table)",
              gym_qkv(n=64))
def gym_graphormer_spatial():
    from attn_gym.mods import generate_graphormer_spatial_bias, shortest_path_distances
    distances = shortest_path_distances(_graph(64, 1), max_distance=8)
    table = torch.randn(H, 10, generator=torch.Generator().manual_seed(2))
    return score_mod_attention("gym_graphormer_spatial",
                               generate_graphormer_spatial_bias(table, distances))


@_gym_program("attn_gym.mods.generate_graphormer_edge_bias: mean over the first 3 edges of the "
              "shortest path of edge_bias[h, n, edge_type] (where, clamp, gathers)", gym_qkv(n=64))
def gym_graphormer_edge():
    from attn_gym.mods import generate_graphormer_edge_bias, shortest_path_edge_types
    adj = _graph(64, 3)
    types = torch.randint(0, 4, (B, 64, 64), generator=torch.Generator().manual_seed(4))
    path_types, lengths = shortest_path_edge_types(adj, types, max_path_len=3)
    table = torch.randn(H, 3, 4, generator=torch.Generator().manual_seed(5))
    return score_mod_attention("gym_graphormer_edge",
                               generate_graphormer_edge_bias(table, path_types, lengths))


@_gym_program("attn_gym.mods.generate_mla_rope_score_mod: MLA's decoupled RoPE term, score + "
              "dot(query_rope[b, h, q], key_rope[b, h // H, kv]) (inputs), evaluated with vmap, "
              "causal", gym_qkv() + [Input("query_rope", (B, H, N, 32)),
                                     Input("key_rope", (B, 1, N, 32))])
def gym_mla_rope():
    from attn_gym.masks import causal_mask
    from attn_gym.mods import generate_mla_rope_score_mod

    def gym_mla_rope(q, k, v, query_rope, key_rope):
        score_mod = generate_mla_rope_score_mod(query_rope, key_rope, H, scale=0.125)
        return scored(q, k, v, score_mod, causal_mask, per_element=True)

    return gym_mla_rope


@_gym_program("attn_gym.mods.generate_sandwich_bias(4, 128): + rel_bias[q - kv + 127] * "
              "head_scale[h] (a captured cosine table), causal")
def gym_sandwich():
    from attn_gym.masks import causal_mask
    from attn_gym.mods import generate_sandwich_bias
    return score_mod_attention("gym_sandwich", generate_sandwich_bias(H, N, d_bar=64),
                               causal_mask)


# --- Inputs --------------------------------------------------------------------------------


def _padding_rows(b, n, rng):
    rows = np.ones((b, n), dtype=np.int64)
    rows[0, : rng.integers(1, n // 4 + 1)] = 0          # left padding
    for r in range(1, b - 1):
        pad = rng.integers(0, n // 4 + 1)
        if pad:
            rows[r, n - pad:] = 0                         # right padding
    if b > 1:
        rows[b - 1] = 0                                   # a fully padded row
    return rows


def draw_inputs(prog, seed):
    """Reference inputs of `prog` (torch tensors in their declared dtypes)."""
    rng = np.random.default_rng([seed, zlib.crc32(prog.name.encode())])
    gen = torch.Generator().manual_seed(int(rng.integers(1 << 62)))
    out, pad = {}, None
    specs = sorted(prog.inputs, key=lambda i: i.kind != "padding_mask")  # padding first
    for spec in specs:
        dtype = DTYPES[spec.dtype]
        if spec.kind in ("normal", "param"):
            t = torch.randn(spec.shape, generator=gen).to(dtype)
        elif spec.kind == "padding_mask":
            pad = _padding_rows(*spec.shape, rng)
            t = torch.from_numpy(pad).to(dtype)
        elif spec.kind == "positions":
            b, n = spec.shape
            if pad is not None:
                p = np.cumsum(pad, axis=-1) - 1
                p[pad == 0] = 1
            else:
                p = np.broadcast_to(np.arange(n), (b, n))
            t = torch.from_numpy(np.ascontiguousarray(p)).to(dtype)
        elif spec.kind == "packed_positions":
            b, n = spec.shape
            p = np.zeros((b, n), dtype=np.int64)
            for r in range(b):
                cuts = np.sort(rng.choice(np.arange(8, n - 8), rng.integers(1, 4), replace=False))
                starts = np.concatenate([[0], cuts])
                for s, e in zip(starts, np.concatenate([cuts, [n]])):
                    p[r, s:e] = np.arange(e - s)
            t = torch.from_numpy(p).to(dtype)
        elif spec.kind == "token_types":
            b, n = spec.shape
            p = np.zeros((b, n), dtype=np.int64)
            for r in range(b):
                start = int(rng.integers(4, 24))
                for _ in range(int(rng.integers(1, 3))):
                    length = int(rng.integers(16, 33))
                    if start + length > n:
                        break
                    p[r, start:start + length] = 1
                    start += length + int(rng.integers(4, 16))
            t = torch.from_numpy(p).to(dtype)
        elif spec.kind in ("bool_mask", "additive_mask"):
            b, _, m, n = spec.shape
            keys = _padding_rows(b, n, rng).astype(bool)[:, None, None, :]
            i = np.arange(m)[:, None] + (n - m)
            j = np.arange(n)[None, :]
            keep = (j <= i)
            if spec.window:
                keep &= (i - j) < spec.window
            keep = keep[None, None] & keys
            t = torch.from_numpy(np.ascontiguousarray(keep))
            if spec.kind == "additive_mask":
                t = torch.where(t, torch.tensor(0.0, dtype=dtype), torch.finfo(dtype).min)
        else:
            raise ValueError(f"{prog.name}: input kind {spec.kind}")
        assert tuple(t.shape) == tuple(spec.shape) and t.dtype == dtype, (spec, t.shape, t.dtype)
        out[spec.name] = t
    return [out[spec.name] for spec in prog.inputs]


def example_inputs(prog):
    """Export's example inputs: a draw with a fixed seed (export reads only
    shapes and dtypes; real values keep value-dependent library code honest)."""
    return draw_inputs(prog, 0)


# --- Export / reference -------------------------------------------------------------------


def library_version(library):
    if library == T:
        return transformers.__version__
    if library == G:
        from importlib.metadata import version
        return version("attn-gym")
    return torch.__version__


def build(prog):
    torch.manual_seed(zlib.crc32(prog.name.encode()))  # module weights: the same every run
    fn = prog.build()
    fn.__name__ = prog.name
    return fn


def entry(prog):
    return {
        "library": prog.library,
        "library_version": library_version(prog.library),
        "torch_version": torch.__version__.split("+")[0],
        "description": prog.description,
        "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": dtype_name(DTYPES[i.dtype]),
                    "kind": i.kind} for i in prog.inputs],
    }


def generator_info(argv):
    return {
        "command": "python3 scripts/corpus/torch_corpus.py " + " ".join(argv),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "attn-gym": library_version(G), "numpy": np.__version__,
                     "python": sys.version.split()[0]},
        "kinds": input_kinds(),
    }


def input_kinds():
    """{kind: how reference mode draws it}, from this module's docstring."""
    kinds, kind = {}, None
    for line in __doc__[__doc__.index("Input kinds"):].splitlines()[1:]:
        if line.startswith("  ") and not line.startswith("   "):
            kind, _, text = line.strip().partition(" ")
            kinds[kind] = text.strip()
        elif kind and line.strip():
            kinds[kind] += " " + line.strip()
    return kinds


def write_index(outdir, index, names, meta):
    path = os.path.join(outdir, "index.json")
    listed = {}
    if names and os.path.exists(path):
        with open(path) as f:
            listed = json.load(f)
    listed.update(index)
    listed["_generator"] = meta
    ordered = {"_generator": meta}
    ordered.update({k: listed[k] for k in sorted(listed) if k != "_generator"})

    def line(key, value):
        if key == "inputs":
            rows = ",\n".join(f"      {json.dumps(x)}" for x in value)
            return f'    "inputs": [\n{rows}\n    ]'
        return f"    {json.dumps(key)}: {json.dumps(value)}"

    parts = []
    for name, e in ordered.items():
        body = ",\n".join(line(k, v) for k, v in e.items())
        parts.append(f"  {json.dumps(name)}: {{\n{body}\n  }}")
    with open(path, "w") as f:  # one line per field and per input: readable, diffable
        f.write("{\n" + ",\n".join(parts) + "\n}\n")


def export_all(outdir, names, argv, preserve=()):
    os.makedirs(outdir, exist_ok=True)
    index, failed = {}, []
    for name, prog in PROGRAMS.items():
        if names and name not in names:
            continue
        try:
            fn = build(prog)
            graph = flashlight.export(fn, *example_inputs(prog),
                                      path=os.path.join(outdir, f"{name}.json"),
                                      preserve=preserve)
        except Exception:
            print(f"{name}: export failed:\n{traceback.format_exc()}", file=sys.stderr)
            failed.append(name)
            continue
        e = entry(prog)
        e["constants"] = [c["name"] for c in graph["constants"]]
        e["targets"] = sorted({n["target"] for n in graph["nodes"]})
        index[name] = e
        print(f"{name}: {len(graph['nodes'])} nodes, {len(graph['constants'])} constants")
    write_index(outdir, index, names, generator_info(argv))
    return index, failed


def _to_f32(x):
    return x.float() if x.is_floating_point() else x


def reference_all(outdir, names, seed, argv):
    os.makedirs(outdir, exist_ok=True)
    index, failed = {}, []
    for name, prog in PROGRAMS.items():
        if names and name not in names:
            continue
        try:
            fn = build(prog)
            for _, m in _modules_of(fn):
                m.float().eval()
            inputs = draw_inputs(prog, seed)
            with torch.no_grad():
                out = fn(*[_to_f32(x) for x in inputs])
            if isinstance(out, (tuple, list)):
                out = out[0]
            expected = out.detach().float().cpu().numpy()
            arrays = {}
            for spec, x in zip(prog.inputs, inputs):
                if x.dtype == torch.bfloat16:
                    arrays[spec.name] = x.view(torch.uint16).numpy()  # bf16 bit patterns
                else:
                    arrays[spec.name] = x.numpy()
            np.savez(os.path.join(outdir, f"{name}.inputs.npz"), **arrays)
            np.save(os.path.join(outdir, f"{name}.expected.npy"), expected)
        except Exception:
            print(f"{name}: reference failed:\n{traceback.format_exc()}", file=sys.stderr)
            failed.append(name)
            continue
        e = entry(prog)
        e["expected"] = {"file": f"{name}.expected.npy", "dtype": "f32",
                         "shape": list(expected.shape),
                         "nonfinite": int((~np.isfinite(expected)).sum())}
        e["inputs_file"] = f"{name}.inputs.npz"
        e["bf16_encoding"] = "bf16 inputs are stored as uint16 bit patterns"
        e["seed"] = seed
        index[name] = e
        print(f"{name}: expected {list(expected.shape)}")
    meta = generator_info(argv)
    meta["seed"] = seed
    write_index(outdir, index, names, meta)
    return index, failed


# --- Check: interpret the written JSON graphs on the reference inputs ------------------------

_NP_DTYPES = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
              "i1": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "i32": np.int32,
              "i64": np.int64}
_TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                 "f64": torch.float64, "i1": torch.bool, "i8": torch.int8, "u8": torch.uint8,
                 "i16": torch.int16, "i32": torch.int32, "i64": torch.int64}


def interpret(path, inputs):
    """Runs the flashlight-graph JSON at `path` with torch's ATen operators on
    `inputs` ({name: tensor}): what the file says, read back (a check of the
    exporter, independent of torch.export)."""
    directory = os.path.dirname(path)
    with open(path) as f:
        graph = json.load(f)
    values = dict(inputs)
    for c in graph["constants"]:
        raw = np.fromfile(os.path.join(directory, c["file"]), dtype=_NP_DTYPES[c["dtype"]])
        t = torch.from_numpy(raw.copy()).reshape(c["shape"])
        values[c["name"]] = t.view(torch.bfloat16) if c["dtype"] == "bf16" else t

    def decode(a):
        if isinstance(a, list):
            return [decode(x) for x in a]
        if not isinstance(a, dict):
            return a
        if "ref" in a:
            v = values[a["ref"]]
            return v[a["index"]] if "index" in a else v
        if "float" in a:
            return float(a["float"])
        if "dtype" in a:
            return _TORCH_DTYPES[a["dtype"]]
        if "device" in a:
            return torch.device("cpu")
        if "enum" in a:
            return getattr(torch, a["enum"].rsplit(".", 1)[-1])
        if "str" in a:
            return a["str"]
        raise ValueError(a)

    for n in graph["nodes"]:
        namespace, op, overload = n["target"].split(".")
        if n["target"] == "aten.view.default":
            # A view in the graph is a reshape of the value: export's clones
            # (.contiguous()) are gone, the graph has value semantics.
            op = "reshape"
        target = getattr(getattr(getattr(torch.ops, namespace), op), overload)
        out = target(*decode(n["args"]), **{k: decode(v) for k, v in n["kwargs"].items()})
        values[n["name"]] = out
    return [decode(o) for o in graph["outputs"]]


def check_all(export_dir, reference_dir, names):
    """Interprets each exported graph on the reference inputs (bf16 as given)
    and compares with the f32 reference: relative Frobenius error."""
    import attn_gym.mods.softcapping  # noqa: F401  (registers approx::tanh)

    with open(os.path.join(reference_dir, "index.json")) as f:
        reference = json.load(f)
    results = []
    for name in PROGRAMS:
        if (names and name not in names) or name not in reference:
            continue
        path = os.path.join(export_dir, f"{name}.json")
        if not os.path.exists(path):
            continue
        arrays = np.load(os.path.join(reference_dir, f"{name}.inputs.npz"))
        inputs = {}
        for spec in reference[name]["inputs"]:
            t = torch.from_numpy(arrays[spec["name"]].copy())
            inputs[spec["name"]] = t.view(torch.bfloat16) if spec["dtype"] == "bf16" else t
        expected = torch.from_numpy(np.load(os.path.join(reference_dir, f"{name}.expected.npy")))
        try:
            got = interpret(path, inputs)[0].float()
            err = ((got - expected).norm() / expected.norm().clamp_min(1e-30)).item()
        except Exception as e:  # noqa: BLE001
            err, got = float("nan"), None
            print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
        results.append((name, err))
        print(f"{name:36} rel_err {err:.2e}")
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", nargs="?")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--reference", metavar="OUTDIR", help="write f32 reference outputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preserve", action="append", default=[], metavar="OP",
                        help="export: keep this operator undecomposed (e.g. "
                             "aten.scaled_dot_product_attention.default); repeatable")
    parser.add_argument("--list", action="store_true", help="list the programs")
    parser.add_argument("--check", nargs=2, metavar=("EXPORT_DIR", "REFERENCE_DIR"),
                        help="interpret the exported JSON graphs on the reference inputs with "
                             "torch's ATen ops and print the relative error to the f32 reference")
    args = parser.parse_intermixed_args()
    if args.check:
        names = ([args.outdir] if args.outdir else []) + args.names
        results = check_all(*args.check, names)
        bad = [n for n, e in results if not e < 3e-2]
        print(f"{len(results) - len(bad)}/{len(results)} within 3e-2" +
              (f"; over: {' '.join(bad)}" if bad else ""))
        return 1 if bad else 0
    if args.list:
        for name, prog in PROGRAMS.items():
            print(f"{name:36} {prog.library:14} {prog.description}")
        return 0
    if args.reference:
        names = ([args.outdir] if args.outdir else []) + args.names
        _, failed = reference_all(args.reference, names, args.seed, sys.argv[1:])
    else:
        if not args.outdir:
            parser.error("OUTDIR is required")
        _, failed = export_all(args.outdir, args.names, sys.argv[1:], args.preserve)
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
