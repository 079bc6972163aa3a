// attn-plan: an attention in, its #attn.kernel_plan out; one case per rule
// of Plan.cpp.
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a" --verify-diagnostics | FileCheck %s --check-prefix=H100
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_80" 2>/dev/null | FileCheck %s --check-prefix=A100
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a tensor-cores=false" | FileCheck %s --check-prefix=REF
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-mask=false" --verify-diagnostics | FileCheck %s --check-prefix=VOTE
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a ping-pong=false" --verify-diagnostics | FileCheck %s --check-prefix=TURNS
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a producer-warpgroup=false" --verify-diagnostics | FileCheck %s --check-prefix=NOPROD
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a persistent=false" --verify-diagnostics | FileCheck %s --check-prefix=ONETILE
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a tma=false" 2>/dev/null | FileCheck %s --check-prefix=NOTMA
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a tile-counter=true" --verify-diagnostics | FileCheck %s --check-prefix=COUNTER

// Rule 1 (generator and tiles), lean causal attention at D = 128: wgmma on
// 128 x 128 tiles, two consumer warpgroups on mbarriers, a producer
// warpgroup handing them registers, consumers taking turns (rules 5, 6).
// Ampere: mma.sync, 32-row warps on 128 x 64 tiles. Without tensor cores:
// the reference generator's 4 x 32.
// H100-LABEL: func.func @causal_d128
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128, warp_rows = 16, consumer_groups = 2, producer = true, loop = mbarrier, ping_pong = true, lookahead = false, sparsity = none, query_in_smem = true, staged_reads = 0, shared_memory = 164928, min_blocks = 1, producer_registers = 56, consumer_registers = 224, runtime_strides = true, tma = true>
// A100-LABEL: func.func @causal_d128
// A100: #attn.kernel_plan<generator = mma_sync, block_m = 128, block_n = 64, warp_rows = 32, consumer_groups = 0, producer = false, loop = barrier, ping_pong = false, lookahead = false, sparsity = none, query_in_smem = true, staged_reads = 0, shared_memory = 69632, min_blocks = 2, producer_registers = 0, consumer_registers = 0, runtime_strides = true>
// REF-LABEL: func.func @causal_d128
// REF: #attn.kernel_plan<generator = reference, block_m = 4, block_n = 32, warp_rows = 1, consumer_groups = 0, producer = false, loop = barrier
// Rule 7 with a tile counter (on request): a persistent grid whose blocks
// draw their work tiles, the producer copying Q ahead (a second Q buffer,
// four more mbarriers and the two tile slots: 197,744 bytes).
// COUNTER-LABEL: func.func @causal_d128
// COUNTER: shared_memory = 197744, {{.*}} runtime_strides = true, persistent = true, query_ahead = true, tma = true, tile_counter = true>
// NOPROD-LABEL: func.func @causal_d128
// NOPROD: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128, {{.*}} producer = false, loop = mbarrier, ping_pong = false, {{.*}} min_blocks = 1, producer_registers = 0, consumer_registers = 0, runtime_strides = true>
func.func @causal_d128(%q: tensor<2x8x2048x128xbf16>, %k: tensor<2x8x2048x128xbf16>,
                       %v: tensor<2x8x2048x128xbf16>) -> tensor<2x8x2048x128xbf16> {
  %o = attn.attention q(%q : tensor<2x8x2048x128xbf16>) k(%k : tensor<2x8x2048x128xbf16>)
         v(%v : tensor<2x8x2048x128xbf16>) scale [0.088] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<2x8x2048x128xbf16>
  return %o : tensor<2x8x2048x128xbf16>
}

// -----

// Rule 1a's lengths count from 3/4 of them: N = 2000 takes the 2k rule's
// 192 x 128 (and 1536 would), N = 1200 the 128 x 64 below it.
// H100-LABEL: func.func @vanilla_d64_n2000
// H100: #attn.kernel_plan<generator = wgmma, block_m = 192, block_n = 128,
// H100-LABEL: func.func @vanilla_d64_n1200
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64,
func.func @vanilla_d64_n2000(%q: tensor<2x8x2000x64xbf16>, %k: tensor<2x8x2000x64xbf16>,
                             %v: tensor<2x8x2000x64xbf16>) -> tensor<2x8x2000x64xbf16> {
  %o = attn.attention q(%q : tensor<2x8x2000x64xbf16>) k(%k : tensor<2x8x2000x64xbf16>)
         v(%v : tensor<2x8x2000x64xbf16>) scale [0.125] normalizer softmax
         -> tensor<2x8x2000x64xbf16>
  return %o : tensor<2x8x2000x64xbf16>
}
func.func @vanilla_d64_n1200(%q: tensor<2x8x1200x64xbf16>, %k: tensor<2x8x1200x64xbf16>,
                             %v: tensor<2x8x1200x64xbf16>) -> tensor<2x8x1200x64xbf16> {
  %o = attn.attention q(%q : tensor<2x8x1200x64xbf16>) k(%k : tensor<2x8x1200x64xbf16>)
         v(%v : tensor<2x8x1200x64xbf16>) scale [0.125] normalizer softmax
         -> tensor<2x8x1200x64xbf16>
  return %o : tensor<2x8x1200x64xbf16>
}

// -----

// Rule 1a, no mask at D = 64 from N = 2048 with the producer copying with
// TMA: three consumer warpgroups on 192 x 128; rule 7: a persistent grid.
// H100-LABEL: func.func @vanilla_d64
// H100: #attn.kernel_plan<generator = wgmma, block_m = 192, block_n = 128, warp_rows = 16, consumer_groups = 3, producer = true, loop = mbarrier, ping_pong = true, lookahead = false, sparsity = none, query_in_smem = true, staged_reads = 0, shared_memory = 91200, min_blocks = 1, producer_registers = 32, consumer_registers = 160, runtime_strides = true, persistent = true, tma = true>
// ONETILE-LABEL: func.func @vanilla_d64
// ONETILE: block_m = 192, {{.*}} runtime_strides = true, tma = true>
// Without TMA (rule 5, lean at D = 64 and N = 2048): 128-key tiles with the
// producer warpgroup and ping-pong, one block per SM. Rule 7: no mask, two
// consumer warpgroups at D = 64, so a persistent grid whose producer copies
// Q ahead into a second buffer (96 KiB and 12 mbarriers, not 80 KiB and 8).
// NOTMA-LABEL: func.func @vanilla_d64
// NOTMA: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128, warp_rows = 16, consumer_groups = 2, producer = true, loop = mbarrier, ping_pong = true, lookahead = false, sparsity = none, query_in_smem = true, staged_reads = 0, shared_memory = 99424, min_blocks = 1, producer_registers = 56, consumer_registers = 224, runtime_strides = true, persistent = true, query_ahead = true>
func.func @vanilla_d64(%q: tensor<2x8x2048x64xbf16>, %k: tensor<2x8x2048x64xbf16>,
                       %v: tensor<2x8x2048x64xbf16>) -> tensor<2x8x2048x64xbf16> {
  %o = attn.attention q(%q : tensor<2x8x2048x64xbf16>) k(%k : tensor<2x8x2048x64xbf16>)
         v(%v : tensor<2x8x2048x64xbf16>) scale [0.125] normalizer softmax
         -> tensor<2x8x2048x64xbf16>
  return %o : tensor<2x8x2048x64xbf16>
}

// -----

// Rule 1a, one long branch at D = 64 (N >= 8192): three consumer
// warpgroups on 192 x 128, and the register file split 32 / 160. Rule 7:
// no mask, so a persistent grid (not with persistent=false).
// H100-LABEL: func.func @long_d64
// H100: #attn.kernel_plan<generator = wgmma, block_m = 192, block_n = 128, warp_rows = 16, consumer_groups = 3, producer = true, loop = mbarrier, ping_pong = true, {{.*}} producer_registers = 32, consumer_registers = 160, runtime_strides = true, persistent = true, tma = true>
// ONETILE-LABEL: func.func @long_d64
// ONETILE: consumer_registers = 160, runtime_strides = true, tma = true>
// NOPROD-LABEL: func.func @long_d64
// NOPROD: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64,
func.func @long_d64(%q: tensor<1x8x8192x64xbf16>, %k: tensor<1x8x8192x64xbf16>,
                    %v: tensor<1x8x8192x64xbf16>) -> tensor<1x8x8192x64xbf16> {
  %o = attn.attention q(%q : tensor<1x8x8192x64xbf16>) k(%k : tensor<1x8x8192x64xbf16>)
         v(%v : tensor<1x8x8192x64xbf16>) scale [0.125] normalizer softmax
         -> tensor<1x8x8192x64xbf16>
  return %o : tensor<1x8x8192x64xbf16>
}

// -----

// Rule 7: a causal mask's query tiles differ in work, which a static
// round-robin of work tiles would leave unbalanced: one tile per block.
// H100-LABEL: func.func @long_causal_d64
// H100: block_m = 192, {{.*}} runtime_strides = true, tma = true>
func.func @long_causal_d64(%q: tensor<1x8x8192x64xbf16>, %k: tensor<1x8x8192x64xbf16>,
                           %v: tensor<1x8x8192x64xbf16>) -> tensor<1x8x8192x64xbf16> {
  %o = attn.attention q(%q : tensor<1x8x8192x64xbf16>) k(%k : tensor<1x8x8192x64xbf16>)
         v(%v : tensor<1x8x8192x64xbf16>) scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<1x8x8192x64xbf16>
  return %o : tensor<1x8x8192x64xbf16>
}

// -----

// Rule 1a at D = 32: three consumer warpgroups on 192 x 128 from N = 2048
// with a causal mask too (at D = 64 only from 8192); one tile per block.
// H100-LABEL: func.func @causal_d32
// H100: #attn.kernel_plan<generator = wgmma, block_m = 192, block_n = 128, warp_rows = 16, consumer_groups = 3, producer = true, {{.*}} consumer_registers = 160, runtime_strides = true, tma = true>
// Without TMA: 128 x 128.
// NOTMA-LABEL: func.func @causal_d32
// NOTMA: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128,
func.func @causal_d32(%q: tensor<2x8x2048x32xbf16>, %k: tensor<2x8x2048x32xbf16>,
                      %v: tensor<2x8x2048x32xbf16>) -> tensor<2x8x2048x32xbf16> {
  %o = attn.attention q(%q : tensor<2x8x2048x32xbf16>) k(%k : tensor<2x8x2048x32xbf16>)
         v(%v : tensor<2x8x2048x32xbf16>) scale [0.17] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<2x8x2048x32xbf16>
  return %o : tensor<2x8x2048x32xbf16>
}

// -----

// Rule 1b: wgmma's V tiles hold whole 64-column atoms, and the fit counts
// them: D = 160 on 128 x 128 would need 246,848 bytes (past sm_90a's 227
// KiB), so 64-key tiles.
// H100-LABEL: func.func @d160
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64, {{.*}} shared_memory = 148544,
func.func @d160(%q: tensor<2x8x2048x160xbf16>, %k: tensor<2x8x2048x160xbf16>,
                %v: tensor<2x8x2048x160xbf16>) -> tensor<2x8x2048x160xbf16> {
  %o = attn.attention q(%q : tensor<2x8x2048x160xbf16>) k(%k : tensor<2x8x2048x160xbf16>)
         v(%v : tensor<2x8x2048x160xbf16>) scale [0.08] normalizer softmax
         -> tensor<2x8x2048x160xbf16>
  return %o : tensor<2x8x2048x160xbf16>
}

// -----

// Rule 1a: 192 x 128 takes Q.K's head dim, not the smallest one: Q.K 256
// with V 32 keeps 128 rows (192 rows of 256 columns do not fit).
// H100-LABEL: func.func @wide_qk_narrow_v
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128,
func.func @wide_qk_narrow_v(%q: tensor<2x8x2048x256xbf16>, %k: tensor<2x8x2048x256xbf16>,
                            %v: tensor<2x8x2048x32xbf16>) -> tensor<2x8x2048x32xbf16> {
  %o = attn.attention q(%q : tensor<2x8x2048x256xbf16>) k(%k : tensor<2x8x2048x256xbf16>)
         v(%v : tensor<2x8x2048x32xbf16>) scale [0.0625] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<2x8x2048x32xbf16>
  return %o : tensor<2x8x2048x32xbf16>
}

// -----

// Rule 4, a data-dependent mask: a block-mask pre-kernel on 128 x 128
// tiles, the producer warpgroup copying the kept tiles, the consumers
// taking turns; without the producer, consumers on mbarriers. With
// block-mask=false each block votes on its tiles: 64 x 64, a block-wide
// barrier per step.
// H100-LABEL: func.func @document
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128, {{.*}} producer = true, loop = mbarrier, ping_pong = true, lookahead = false, sparsity = block_mask,
// NOPROD-LABEL: func.func @document
// NOPROD: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128, {{.*}} producer = false, loop = mbarrier, ping_pong = false, lookahead = false, sparsity = block_mask,
// VOTE-LABEL: func.func @document
// VOTE: #attn.kernel_plan<generator = wgmma, block_m = 64, block_n = 64, {{.*}} loop = barrier, {{.*}} sparsity = tile_vote,
func.func @document(%q: tensor<2x4x1024x64xbf16>, %k: tensor<2x4x1024x64xbf16>,
                    %v: tensor<2x4x1024x64xbf16>, %doc: tensor<2x1024xi32>) -> tensor<2x4x1024x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x1024x64xbf16>) k(%k : tensor<2x4x1024x64xbf16>)
         v(%v : tensor<2x4x1024x64xbf16>) captures(%doc : tensor<2x1024xi32>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<2x1024xi32>):
           %di = tensor.extract %ids[%b, %i] : tensor<2x1024xi32>
           %dj = tensor.extract %ids[%b, %j] : tensor<2x1024xi32>
           %keep = arith.cmpi eq, %di, %dj : i32
           attn.yield %keep : i1
         } -> tensor<2x4x1024x64xbf16>
  return %o : tensor<2x4x1024x64xbf16>
}

// -----

// Rules 1a, 5, 6 with two logit branches at D = 64: 128 x 128, the
// producer's registers split 24 / 240. Branch lookahead only where the
// consumers do not take turns.
// H100-LABEL: func.func @two_branches
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128, {{.*}} producer = true, loop = mbarrier, ping_pong = true, lookahead = false, {{.*}} producer_registers = 24, consumer_registers = 240, runtime_strides = true, tma = true>
// TURNS-LABEL: func.func @two_branches
// TURNS: #attn.kernel_plan<generator = wgmma, {{.*}} ping_pong = false, lookahead = true,
// A100-LABEL: func.func @two_branches
// A100: #attn.kernel_plan<generator = mma_sync, block_m = 64, block_n = 64, warp_rows = 16, {{.*}} query_in_smem = false, staged_reads = 0, shared_memory = {{[0-9]+}}, min_blocks = 2,
func.func @two_branches(%q: tensor<2x4x1024x64xbf16>, %k: tensor<2x4x1024x64xbf16>,
                        %v: tensor<2x4x1024x64xbf16>) -> tensor<2x4x1024x64xbf16> {
  %o = attn.attention q(%q, %q : tensor<2x4x1024x64xbf16>, tensor<2x4x1024x64xbf16>)
         k(%k, %k : tensor<2x4x1024x64xbf16>, tensor<2x4x1024x64xbf16>)
         v(%v : tensor<2x4x1024x64xbf16>) scale [0.125, 0.125] normalizer softmax
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
           %r = arith.subf %o1, %o2 : f32
           attn.yield %r : f32
         } -> tensor<2x4x1024x64xbf16>
  return %o : tensor<2x4x1024x64xbf16>
}

// -----

// Rule 1b: four branches at D = 64 do not fit shared memory on 128-key
// tiles; 64-key ones do.
// H100-LABEL: func.func @four_branches
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64,
func.func @four_branches(%q: tensor<1x2x512x64xbf16>, %k: tensor<1x2x512x64xbf16>,
                         %v: tensor<1x2x512x64xbf16>) -> tensor<1x2x512x64xbf16> {
  %o = attn.attention q(%q, %q, %q, %q : tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>)
         k(%k, %k, %k, %k : tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>)
         v(%v : tensor<1x2x512x64xbf16>) scale [0.1, 0.1, 0.1, 0.1] normalizer softmax
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %o3: f32, %o4: f32, %b: index, %h: index, %i: index, %d: index):
           %r = arith.subf %o1, %o2 : f32
           %s = arith.addf %o3, %o4 : f32
           %t = arith.addf %r, %s : f32
           attn.yield %t : f32
         } -> tensor<1x2x512x64xbf16>
  return %o : tensor<1x2x512x64xbf16>
}

// -----

// Rule 1a, score regions at D = 128: plain arithmetic (ALiBi) takes
// 128 x 128 tiles; a math function (a tanh soft-cap) keeps 64 x 64.
// H100-LABEL: func.func @alibi
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128,
// H100-LABEL: func.func @softcap
// H100: #attn.kernel_plan<generator = wgmma, block_m = 64, block_n = 64,
func.func @alibi(%q: tensor<1x4x1024x128xbf16>, %k: tensor<1x4x1024x128xbf16>,
                 %v: tensor<1x4x1024x128xbf16>, %slopes: tensor<4xf32>) -> tensor<1x4x1024x128xbf16> {
  %o = attn.attention q(%q : tensor<1x4x1024x128xbf16>) k(%k : tensor<1x4x1024x128xbf16>)
         v(%v : tensor<1x4x1024x128xbf16>) captures(%slopes : tensor<4xf32>)
         scale [0.088] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
           %m = tensor.extract %sl[%h] : tensor<4xf32>
           %d = arith.subi %j, %i : index
           %di = arith.index_cast %d : index to i64
           %df = arith.sitofp %di : i64 to f32
           %bias = arith.mulf %m, %df : f32
           %r = arith.addf %s, %bias : f32
           attn.yield %r : f32
         } -> tensor<1x4x1024x128xbf16>
  return %o : tensor<1x4x1024x128xbf16>
}
func.func @softcap(%q: tensor<1x4x1024x128xbf16>, %k: tensor<1x4x1024x128xbf16>,
                   %v: tensor<1x4x1024x128xbf16>) -> tensor<1x4x1024x128xbf16> {
  %o = attn.attention q(%q : tensor<1x4x1024x128xbf16>) k(%k : tensor<1x4x1024x128xbf16>)
         v(%v : tensor<1x4x1024x128xbf16>) scale [0.088] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 30.0 : f32
           %x = arith.divf %s, %c : f32
           %t = math.tanh %x : f32
           %r = arith.mulf %t, %c : f32
           attn.yield %r : f32
         } -> tensor<1x4x1024x128xbf16>
  return %o : tensor<1x4x1024x128xbf16>
}

// -----

// Rule 2: head dim 80 fills its last wgmma atom partly: wgmma (Q.K in five
// k16 steps, P V with N = 80).
// H100-LABEL: func.func @head_dim_80
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64,
func.func @head_dim_80(%q: tensor<1x4x512x80xbf16>, %k: tensor<1x4x512x80xbf16>,
                       %v: tensor<1x4x512x80xbf16>) -> tensor<1x4x512x80xbf16> {
  %o = attn.attention q(%q : tensor<1x4x512x80xbf16>) k(%k : tensor<1x4x512x80xbf16>)
         v(%v : tensor<1x4x512x80xbf16>) scale [0.11] normalizer softmax
         -> tensor<1x4x512x80xbf16>
  return %o : tensor<1x4x512x80xbf16>
}

// -----

// Rules 1, 5: one KV tile (M and N within one tile) leaves no KV loop to
// pipeline or decouple: a plain step.
// H100-LABEL: func.func @one_tile
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64, {{.*}} loop = barrier,
func.func @one_tile(%q: tensor<1x4x48x64xbf16>, %k: tensor<1x4x48x64xbf16>,
                    %v: tensor<1x4x48x64xbf16>) -> tensor<1x4x48x64xbf16> {
  %o = attn.attention q(%q : tensor<1x4x48x64xbf16>) k(%k : tensor<1x4x48x64xbf16>)
         v(%v : tensor<1x4x48x64xbf16>) scale [0.125] normalizer softmax
         -> tensor<1x4x48x64xbf16>
  return %o : tensor<1x4x48x64xbf16>
}

// -----

// Rule 1: f32 inputs are the reference generator's, with a remark.
// H100-LABEL: func.func @f32_inputs
// H100: #attn.kernel_plan<generator = reference, block_m = 4, block_n = 32,
func.func @f32_inputs(%q: tensor<1x2x64x64xf32>, %k: tensor<1x2x64x64xf32>,
                      %v: tensor<1x2x64x64xf32>) -> tensor<1x2x64x64xf32> {
  // expected-remark @+1 {{tensor-core path not taken: Q/K/V are not f16 or bf16; using the reference kernel}}
  %o = attn.attention q(%q : tensor<1x2x64x64xf32>) k(%k : tensor<1x2x64x64xf32>)
      v(%v : tensor<1x2x64x64xf32>) scale [0.125] normalizer softmax
      -> tensor<1x2x64x64xf32>
  return %o : tensor<1x2x64x64xf32>
}

// -----

// Rule 7: a pair bias read at (b, h, i, j) is staged with K on wgmma (one
// read, its [128, 128] tile double-buffered: 65536 bytes beyond the Q, K and
// V tiles' 163840, the producer loop's 8 mbarriers' 64, 64 more to start the
// staged tile at 128 bytes and the 1024 of alignment); mma.sync gathers it.
// A [block-m, block-n] staged tile keeps the producer on per-thread copies
// (no tma).
// H100-LABEL: func.func @pair_bias
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 128, {{.*}} staged_reads = 1, shared_memory = 230528,
// H100-NOT: tma = true
// A100-LABEL: func.func @pair_bias
// A100: #attn.kernel_plan<generator = mma_sync, {{.*}} staged_reads = 0,
func.func @pair_bias(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                     %v: tensor<1x2x512x128xbf16>, %bias: tensor<1x2x512x512xbf16>)
    -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) captures(%bias : tensor<1x2x512x512xbf16>)
      scale [0.088] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
           %t: tensor<1x2x512x512xbf16>):
        %x = tensor.extract %t[%b, %h, %i, %j] : tensor<1x2x512x512xbf16>
        %xf = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %xf : f32
        attn.yield %r : f32
      } -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}

// -----

// Rule 1a, no normalizer at D = 128 (a gradient attention: P = exp(s - L)
// from a row statistic) takes 128 x 64 tiles, two consumer warpgroups.
// H100-LABEL: func.func @no_normalizer
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64,
func.func @no_normalizer(%q: tensor<1x4x1024x128xbf16>, %k: tensor<1x4x1024x128xbf16>,
                         %v: tensor<1x4x1024x128xbf16>, %l: tensor<1x4x1024xf32>) -> tensor<1x4x1024x128xbf16> {
  %o = attn.attention q(%q : tensor<1x4x1024x128xbf16>) k(%k : tensor<1x4x1024x128xbf16>)
         v(%v : tensor<1x4x1024x128xbf16>) captures(%l : tensor<1x4x1024xf32>)
         scale [0.088] normalizer none
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %lse: tensor<1x4x1024xf32>):
           %r = tensor.extract %lse[%b, %h, %i] : tensor<1x4x1024xf32>
           %x = arith.subf %s, %r : f32
           %p = math.exp %x : f32
           attn.yield %p : f32
         } -> tensor<1x4x1024x128xbf16>
  return %o : tensor<1x4x1024x128xbf16>
}

// -----

// Head dim 256 (Gemma): 64-key tiles fit sm_90a's 227 KiB (Q 64 KiB, K and
// V two buffers of 32 KiB each) on wgmma, with the producer warpgroup and
// ping-pong rather than the pipelined loop; mma.sync on sm_80 fits 163 KiB
// with one m16 tile per warp (Dv / 8 accumulator registers a thread).
// H100-LABEL: func.func @gemma_d256
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64, warp_rows = 16, consumer_groups = 2, producer = true, loop = mbarrier, ping_pong = true, {{.*}} shared_memory = 197696,
// A second Q buffer does not fit beside them: no tile counter.
// COUNTER-LABEL: func.func @gemma_d256
// COUNTER: shared_memory = 197696, {{.*}} runtime_strides = true, tma = true>
// A100-LABEL: func.func @gemma_d256
// A100: #attn.kernel_plan<generator = mma_sync, block_m = 128, block_n = 64, warp_rows = 16,
func.func @gemma_d256(%q: tensor<1x8x2048x256xbf16>, %k: tensor<1x8x2048x256xbf16>,
                      %v: tensor<1x8x2048x256xbf16>) -> tensor<1x8x2048x256xbf16> {
  %o = attn.attention q(%q : tensor<1x8x2048x256xbf16>) k(%k : tensor<1x8x2048x256xbf16>)
         v(%v : tensor<1x8x2048x256xbf16>) scale [0.0625] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<1x8x2048x256xbf16>
  return %o : tensor<1x8x2048x256xbf16>
}

// -----

// Head dim 192 on 128 x 64 tiles: with TMA the producer warpgroup and
// ping-pong (its cp.async copies spilled: the pipelined loop without TMA).
// H100-LABEL: func.func @wide_d192
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64, warp_rows = 16, consumer_groups = 2, producer = true, loop = mbarrier, ping_pong = true, {{.*}} tma = true>
// NOTMA-LABEL: func.func @wide_d192
// NOTMA: #attn.kernel_plan<generator = wgmma, block_m = 128, block_n = 64, warp_rows = 16, consumer_groups = 2, producer = false, loop = pipelined,
func.func @wide_d192(%q: tensor<1x8x2048x192xbf16>, %k: tensor<1x8x2048x192xbf16>,
                     %v: tensor<1x8x2048x192xbf16>) -> tensor<1x8x2048x192xbf16> {
  %o = attn.attention q(%q : tensor<1x8x2048x192xbf16>) k(%k : tensor<1x8x2048x192xbf16>)
         v(%v : tensor<1x8x2048x192xbf16>) scale [0.072] normalizer softmax
         -> tensor<1x8x2048x192xbf16>
  return %o : tensor<1x8x2048x192xbf16>
}

// -----

// MLA's head dims: Q.K 192, V 128, on wgmma (whole atoms).
// H100-LABEL: func.func @mla_d192
// H100: #attn.kernel_plan<generator = wgmma, block_m = 128,
// A100-LABEL: func.func @mla_d192
// A100: #attn.kernel_plan<generator = mma_sync, block_m = 128, block_n = 64, warp_rows = 32,
func.func @mla_d192(%q: tensor<1x8x2048x192xbf16>, %k: tensor<1x8x2048x192xbf16>,
                    %v: tensor<1x8x2048x128xbf16>) -> tensor<1x8x2048x128xbf16> {
  %o = attn.attention q(%q : tensor<1x8x2048x192xbf16>) k(%k : tensor<1x8x2048x192xbf16>)
         v(%v : tensor<1x8x2048x128xbf16>) scale [0.072] normalizer softmax
         -> tensor<1x8x2048x128xbf16>
  return %o : tensor<1x8x2048x128xbf16>
}
