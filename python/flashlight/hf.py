"""Flashlight as a transformers attention backend.

    import flashlight.hf
    flashlight.hf.register()          # once; then
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation="fl_attention")

The name is not "flashlight": transformers 5.17 takes every implementation
name that contains "flash" for FlashAttention (`is_flash_attention_requested`
tests the substring) and then looks for a flash-attn kernel.

`register()` adds "fl_attention" to transformers' `AttentionInterface` (the
attention function below) and to its `AttentionMaskInterface` (the SDPA
mask builder: a boolean `[B, 1, M, N]` mask where padding, windows or
documents need one, None where causality alone holds). Each layer's call
runs, through `flashlight.jit`, the program the model's eager attention
computes: GQA by repeating K/V (raised as GQA, nothing repeated), the scale
the module passes, the logit soft-cap (Gemma 2), a per-head sink logit that
joins the softmax (gpt-oss's `module.sinks`), the mask (masked scores
-inf, as SDPA reads a boolean mask: a query row with no key, a padded query,
is 0, where SDPA also gives 0 and the eager attention's additive mask the
mean of V), a softmax in f32, P.V in the inputs' dtype.
Every distinct configuration (scale, soft-cap, sinks, mask or causal) and
shape is one kernel, compiled once and cached on disk.

Off the GPU the function runs as PyTorch after compiling its kernel, so a
CPU run of a model fills the cache for a GPU machine without the compiler.
Kernels are compiled per shape (runtime shapes are not done): a decode step
(one query, a new key length each token) runs the same program as PyTorch
instead, with a one-time warning; prompts of new lengths compile once each.
Dropout in training mode and `output_attentions` are not supported (a
clear error).
"""

import functools

from ._jit import jit

NAME = "fl_attention"


def register(name=NAME):
    """Registers the attention function and mask builder as `name`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)


def _repeat_kv(x, groups):
    if groups == 1:
        return x
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)


@functools.lru_cache(maxsize=None)
def _program(scaling, softcap, causal, masked, sinks):
    """The jit function of one configuration: (q, k, v[, mask][, sinks])."""
    import torch

    def attention(q, k, v, *rest):
        rest = list(rest)
        mask = rest.pop(0) if masked else None
        sink = rest.pop(0) if sinks else None
        groups = q.shape[1] // k.shape[1]
        k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
        s = torch.matmul(q, k.transpose(2, 3)).float() * scaling
        if softcap is not None:
            s = softcap * torch.tanh(s / softcap)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        elif causal:
            m, n = q.shape[2], k.shape[2]
            i = torch.arange(m, device=q.device)[:, None] + (n - m)
            keep = i >= torch.arange(n, device=q.device)[None, :]
            s = s.masked_fill(~keep, float("-inf"))
        if sink is not None:
            column = sink.float().reshape(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1)
            both = torch.cat([s, column], dim=-1)
            p = torch.softmax(both - both.max(dim=-1, keepdim=True).values, dim=-1)[..., :-1]
        else:
            # A row with no key (a padded query) is 0, as SDPA gives, not
            # NaN: the kernel's convention, spelled so that PyTorch runs it
            # too (off the GPU, decode steps).
            empty = (s == float("-inf")).all(dim=-1, keepdim=True)
            p = torch.where(empty, 0.0, torch.softmax(s, dim=-1))
        # [B, M, H, D], as the model reads it: the kernel writes that layout.
        return torch.matmul(p.to(v.dtype), v).transpose(1, 2)

    attention.__qualname__ = (f"hf_attention(scale={scaling:g}, softcap={softcap}, "
                              f"causal={causal}, mask={masked}, sinks={sinks})")
    return jit(attention)


_noticed = False


def _decode_notice():
    global _noticed
    if not _noticed:
        _noticed = True
        import warnings

        warnings.warn("flashlight: decode steps (one query) run as PyTorch: Flashlight "
                      "compiles a kernel per shape", stacklevel=3)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0,
                      scaling=None, is_causal=None, softcap=None, **kwargs):
    """transformers' attention-function signature: [B, H, M, D] query,
    [B, Hkv, N, D] key and value; returns ([B, M, H, D] output, None)."""
    if dropout and module.training:
        raise NotImplementedError("flashlight attention: dropout in training mode is not "
                                  "supported (eval mode, or dropout 0)")
    if kwargs.get("output_attentions"):
        raise NotImplementedError("flashlight attention does not return the attention "
                                  "weights (use attn_implementation='eager')")
    if kwargs.get("position_bias") is not None:
        raise NotImplementedError("flashlight attention: position_bias (T5) is not wired "
                                  "into the backend yet")
    scaling = float(scaling if scaling is not None else query.shape[-1] ** -0.5)
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    mask = attention_mask
    if mask is not None and mask.dtype.is_floating_point:
        # An eager-style additive mask (0 kept, the dtype's lowest masked),
        # where the model builds one itself.
        mask = mask == 0
    sinks = getattr(module, "sinks", None)
    program = _program(scaling, None if softcap is None else float(softcap),
                       bool(is_causal and query.shape[2] > 1), mask is not None,
                       sinks is not None)
    args = [query, key, value]
    if mask is not None:
        args.append(mask)
    if sinks is not None:
        args.append(sinks)  # learned: the backward pass gives its gradient
    if query.shape[2] == 1 and query.is_cuda:
        # A decode step: one query per sequence, a new key length each token.
        # Flashlight compiles per shape (runtime shapes are not done), so
        # decoding would compile a kernel per token: the same program runs
        # as PyTorch instead.
        _decode_notice()
        return program.fn(*args), None
    return program(*args), None
