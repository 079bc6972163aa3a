"""The peers the benchmarks import only when they are installed
(`../shared/peers/` prepares them for the GPU machine)."""

_fa4_func = []


def fa4_func():
    """flash_attn.cute.flash_attn_func (FlashAttention-4), or None (said
    once)."""
    if not _fa4_func:
        try:
            from flash_attn.cute import flash_attn_func
        except ImportError as e:
            print(f"no FA4 ({e}): its records are left out")
            flash_attn_func = None
        _fa4_func.append(flash_attn_func)
    return _fa4_func[0]
