#!/usr/bin/env python3
"""The check of the transformers backend, attn_implementation="fl_attention".

    scripts/hf_check.py fill CACHE            # where the compiler is (CPU)
    scripts/hf_check.py run CACHE OUT.json    # on the GPU machine

Tiny configurations (random weights, seed 0) of Llama (GQA), Gemma 2
(soft-cap, sliding and global layers), Mistral (sliding window), Phi (head
dim 80, partial rotary) and Phi-3 (head dim 96, GQA), bf16,
batch 2 x 128 tokens with a left-padded row. `fill` runs each model on the
CPU with the backend, which compiles every attention kernel into the disk
cache CACHE; `run` (no compiler there: the cache must serve) compares, per
model, the logits of the bf16 model with attn_implementation="fl_attention"
against the same model in f32 with "eager" (relative Frobenius error over
the tokens that are not padding), next to the bf16 "eager" model's error as
the bf16 noise it must stay within (at most 1.5x it, or 2e-2), and profiles
one attention call: the CUDA kernels it launches must be Flashlight's only
(no copies around the attention). It also generates 6 tokens greedily (the
prompt through the fused kernel, decode steps as PyTorch) and reports the
fraction equal to the eager bf16 model's (not a pass criterion: bf16 ties
may break either way). Training: the gradients of every attention
projection's weights under a next-token loss (the backward pass through
Flashlight's gradient program) against the f32 eager model's, within the
same bf16 noise bound as the logits.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402
from check_common import main, write_result  # noqa: E402
import flashlight.hf  # noqa: E402

B, N, VOCAB = 2, 128, 256


def configs():
    from transformers import (Gemma2Config, LlamaConfig, MistralConfig, Phi3Config,
                              PhiConfig)

    common = dict(vocab_size=VOCAB, hidden_size=256, intermediate_size=512,
                  num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=512)
    return {
        "llama": ("LlamaForCausalLM", LlamaConfig(num_key_value_heads=2, **common)),
        "gemma2": ("Gemma2ForCausalLM", Gemma2Config(
            num_key_value_heads=2, head_dim=64, attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0, sliding_window=32, query_pre_attn_scalar=64,
            **common)),
        "mistral": ("MistralForCausalLM", MistralConfig(
            num_key_value_heads=1, sliding_window=32, **common)),
        # Head dims that are not multiples of 64: wgmma reads V's last
        # swizzle atom in part.
        "phi": ("PhiForCausalLM", PhiConfig(**{**common, "hidden_size": 320})),
        "phi3": ("Phi3ForCausalLM", Phi3Config(
            num_key_value_heads=2, pad_token_id=0, eos_token_id=1, bos_token_id=1,
            **{**common, "hidden_size": 384})),
    }


def model(family, implementation, dtype, device):
    import transformers

    cls_name, config = configs()[family]
    torch.manual_seed(0)
    m = getattr(transformers, cls_name)(config)
    m.set_attn_implementation(implementation) if hasattr(m, "set_attn_implementation") \
        else setattr(m.config, "_attn_implementation", implementation)
    return m.to(device, dtype).eval()


def batch(device):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (B, N), generator=g)
    mask = torch.ones(B, N, dtype=torch.long)
    mask[1, :24] = 0  # left padding: the first query rows see no token
    return ids.to(device), mask.to(device)


def fill(cache):
    os.environ["FLASHLIGHT_CACHE"] = cache
    flashlight.hf.register()
    ids, mask = batch("cpu")
    for family in configs():
        with torch.no_grad():
            model(family, flashlight.hf.NAME, torch.bfloat16, "cpu")(ids, attention_mask=mask)
        # With grad: the gradient programs too.
        projection_grads(family, flashlight.hf.NAME, torch.bfloat16, ids, mask)
        print(f"{family}: cache filled")


def projection_grads(family, implementation, dtype, ids, mask):
    """The gradients of the attention projections' weights under a
    next-token loss over the positions that are not padding (nor predict
    from padding: a padded query row has no key, and the backend gives it 0
    where eager's finite mask fill gives the mean of V; neither is
    meaningful)."""
    import torch.nn.functional as F

    m = model(family, implementation, dtype, ids.device.type)
    logits = m(ids, attention_mask=mask).logits.float()
    target = mask[:, 1:].bool() & mask[:, :-1].bool()
    loss = F.cross_entropy(logits[:, :-1][target], ids[:, 1:][target])
    loss.backward()
    return {n: p.grad.float() for n, p in m.named_parameters()
            if p.grad is not None and "self_attn" in n}


def run(cache, out_path):
    import warnings

    warnings.simplefilter("always")
    caught = warnings.catch_warnings(record=True)
    seen = caught.__enter__()
    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    flashlight.hf.register()
    ids, mask = batch("cuda")
    keep = mask.bool()
    records, failures = [], 0
    for family in configs():
        with torch.no_grad():
            ref = model(family, "eager", torch.float32, "cuda")(ids, attention_mask=mask).logits
            eager = model(family, "eager", torch.bfloat16, "cuda")(ids, attention_mask=mask).logits
            fl_model = model(family, flashlight.hf.NAME, torch.bfloat16, "cuda")
            fl = fl_model(ids, attention_mask=mask).logits

        def err(x):
            d = (x.float() - ref)[keep]
            return (d.norm() / ref[keep].norm()).item()

        e_fl, e_eager = err(fl), err(eager)
        # One attention call under the profiler: what it launches.
        calls = []
        original = flashlight.hf.attention_forward

        def spy(*args, **kwargs):
            calls.append((args, kwargs))
            return original(*args, **kwargs)

        from transformers import AttentionInterface

        AttentionInterface.register(flashlight.hf.NAME, spy)
        with torch.no_grad():
            fl_model(ids, attention_mask=mask)
        AttentionInterface.register(flashlight.hf.NAME, original)
        args, kwargs = calls[0]
        with torch.no_grad():
            original(*args, **kwargs)  # warm
            torch.cuda.synchronize()
            with torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                original(*args, **kwargs)
                torch.cuda.synchronize()
        kernels = sorted({e.name for e in prof.events()
                          if e.device_type == torch.autograd.DeviceType.CUDA})
        # Flashlight's own: the attention kernel and its block-mask
        # pre-kernel (named after the exported function).
        others = [k for k in kernels if "_attention0" not in k]
        # Generation: the prompt through the fused kernel, the decode steps
        # (one query each) as PyTorch; greedy tokens against eager bf16's.
        with torch.no_grad():
            fl_tokens = fl_model.generate(ids, attention_mask=mask, max_new_tokens=6,
                                          do_sample=False)
            eager_model = model(family, "eager", torch.bfloat16, "cuda")
            eager_tokens = eager_model.generate(ids, attention_mask=mask, max_new_tokens=6,
                                                do_sample=False)
        same = (fl_tokens[:, N:] == eager_tokens[:, N:]).float().mean().item()
        ref_grads = projection_grads(family, "eager", torch.float32, ids, mask)

        def grad_err(grads):
            return max(((grads[n] - g).norm() / g.norm()).item() for n, g in ref_grads.items())

        g_fl = grad_err(projection_grads(family, flashlight.hf.NAME, torch.bfloat16, ids, mask))
        g_eager = grad_err(projection_grads(family, "eager", torch.bfloat16, ids, mask))
        ok = e_fl <= max(2e-2, 1.5 * e_eager) and not others and not torch.isnan(fl).any() \
            and g_fl <= max(2e-2, 1.5 * g_eager)
        failures += not ok
        copies = sorted({str(w.message) for w in seen if "flashlight" in str(w.message)})
        for text in copies:
            print("  warning:", text)
        records.append({"model": family, "rel_err": e_fl, "eager_bf16_rel_err": e_eager,
                        "grad_rel_err": g_fl, "eager_bf16_grad_rel_err": g_eager,
                        "warnings": copies,
                        "attention_kernels": kernels, "other_kernels": others,
                        "generated_tokens_equal_to_eager_bf16": same, "pass": ok})
        print(f"{family:<8} flashlight rel_err {e_fl:.2e} (eager bf16 {e_eager:.2e}); "
              f"projection gradients {g_fl:.2e} (eager bf16 {g_eager:.2e}); "
              f"attention launches {kernels}; generated tokens equal to eager's: "
              f"{same:.0%} {'pass' if ok else 'FAIL'}", flush=True)
    return write_result(out_path, "hf_check", records, failures)


if __name__ == "__main__":
    main(__doc__, fill, run)
