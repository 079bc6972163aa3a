// RUN: flashlight-opt %s --split-input-file --attn-raise=explain=true --canonicalize --verify-diagnostics | FileCheck %s

// Attention spelled with named linalg ops ([B*H, N, D], as torch-mlir's
// linalg-on-tensors output has it): s = q @ k^T * 0.125; softmax with the
// row max subtracted; o = p @ v.
// CHECK-LABEL: func @named_ops_softmax
func.func @named_ops_softmax(%q: tensor<8x128x64xf32>, %k: tensor<8x128x64xf32>, %v: tensor<8x128x64xf32>) -> tensor<8x128x64xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.125 : f32
  %kt0 = tensor.empty() : tensor<8x64x128xf32>
  %kt = linalg.transpose ins(%k : tensor<8x128x64xf32>) outs(%kt0 : tensor<8x64x128xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<8x128x128xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<8x128x128xf32>) -> tensor<8x128x128xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<8x128x64xf32>, tensor<8x64x128xf32>) outs(%sf : tensor<8x128x128xf32>) -> tensor<8x128x128xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<8x128x128xf32>) outs(%s0 : tensor<8x128x128xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
  } -> tensor<8x128x128xf32>
  // m = max_j s
  %m0 = tensor.empty() : tensor<8x128xf32>
  %mf = linalg.fill ins(%ninf : f32) outs(%m0 : tensor<8x128xf32>) -> tensor<8x128xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ss : tensor<8x128x128xf32>) outs(%mf : tensor<8x128xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %y = arith.maximumf %acc, %x : f32
    linalg.yield %y : f32
  } -> tensor<8x128xf32>
  // e = exp(s - m)
  %e = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ss, %m : tensor<8x128x128xf32>, tensor<8x128xf32>) outs(%s0 : tensor<8x128x128xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %d = arith.subf %x, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<8x128x128xf32>
  // l = sum_j e; p = e / l
  %lf = linalg.fill ins(%zero : f32) outs(%m0 : tensor<8x128xf32>) -> tensor<8x128xf32>
  %l = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<8x128x128xf32>) outs(%lf : tensor<8x128xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %y = arith.addf %acc, %x : f32
    linalg.yield %y : f32
  } -> tensor<8x128xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %l : tensor<8x128x128xf32>, tensor<8x128xf32>) outs(%s0 : tensor<8x128x128xf32>) {
  ^bb0(%x: f32, %sum: f32, %o: f32):
    %y = arith.divf %x, %sum : f32
    linalg.yield %y : f32
  } -> tensor<8x128x128xf32>
  // o = p @ v
  %o0 = tensor.empty() : tensor<8x128x64xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<8x128x64xf32>) -> tensor<8x128x64xf32>
  // One batch-like dim is the head (B = 1): Q, K, V get layout copies to
  // [1, 8, 128, 64]; the 1/8 becomes the scale.
  // CHECK: %[[Q:.+]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<8x128x64xf32>) outs(%{{.*}} : tensor<1x8x128x64xf32>)
  // CHECK: attn.attention q(%[[Q]] : tensor<1x8x128x64xf32>) {{.*}} scale [1.250000e-01] normalizer softmax ->
  // CHECK-NOT: linalg.batch_matmul
  // expected-remark @+1 {{attn-raise: result 0 raised to attn.attention}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<8x128x128xf32>, tensor<8x128x64xf32>) outs(%of : tensor<8x128x64xf32>) -> tensor<8x128x64xf32>
  return %o : tensor<8x128x64xf32>
}

// -----

// A matrix product whose left factor is no softmax is not attention.
// CHECK-LABEL: func @negative_plain_matmul
func.func @negative_plain_matmul(%a: tensor<128x64xf32>, %b: tensor<64x32xf32>) -> tensor<128x32xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<128x32xf32>
  %cf = linalg.fill ins(%zero : f32) outs(%c0 : tensor<128x32xf32>) -> tensor<128x32xf32>
  // CHECK: linalg.generic
  // expected-remark @+1 {{attn-raise: result 0 is not raised: the PV weights are neither a softmax (E / sum E) nor a sigmoid}}
  %c = linalg.matmul ins(%a, %b : tensor<128x64xf32>, tensor<64x32xf32>) outs(%cf : tensor<128x32xf32>) -> tensor<128x32xf32>
  return %c : tensor<128x32xf32>
}

// -----

// exp(s) normalized over the *query* index is not a softmax over the keys.
// CHECK-LABEL: func @negative_softmax_over_queries
func.func @negative_softmax_over_queries(%q: tensor<16x8xf32>, %k: tensor<16x8xf32>, %v: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<16x16xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j, c) -> (i, c)>, affine_map<(i, j, c) -> (j, c)>, affine_map<(i, j, c) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %k : tensor<16x8xf32>, tensor<16x8xf32>) outs(%sf : tensor<16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %y = arith.addf %acc, %m : f32
    linalg.yield %y : f32
  } -> tensor<16x16xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<16x16xf32>) outs(%s0 : tensor<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.exp %x : f32
    linalg.yield %y : f32
  } -> tensor<16x16xf32>
  %l0 = tensor.empty() : tensor<16xf32>
  %lf = linalg.fill ins(%zero : f32) outs(%l0 : tensor<16xf32>) -> tensor<16xf32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]} ins(%e : tensor<16x16xf32>) outs(%lf : tensor<16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %y = arith.addf %acc, %x : f32
    linalg.yield %y : f32
  } -> tensor<16xf32>
  // expected-remark @+1 {{nothing inside result 0 is raised; the closest value stopped at: the PV weights are neither a softmax (E / sum E) nor a sigmoid}}
  %p = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%e, %l : tensor<16x16xf32>, tensor<16xf32>) outs(%s0 : tensor<16x16xf32>) {
  ^bb0(%x: f32, %sum: f32, %o: f32):
    %y = arith.divf %x, %sum : f32
    linalg.yield %y : f32
  } -> tensor<16x16xf32>
  %o0 = tensor.empty() : tensor<16x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<16x8xf32>) -> tensor<16x8xf32>
  // CHECK-NOT: attn.attention
  // expected-remark @+1 {{attn-raise: result 0 is not raised: the softmax denominator is not a sum over the keys}}
  %o = linalg.matmul ins(%p, %v : tensor<16x16xf32>, tensor<16x8xf32>) outs(%of : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %o : tensor<16x8xf32>
}

// -----

// IPA-style logits under a sigmoid: s = q.k / 4 - 0.5 * sum_{p,x} (qp - kp)^2
// over 2 points of 3 coordinates (one reduction over two dims). The cross
// term joins the contraction: Q and K widen from 16 to 16 + 6 columns,
// padded to 32, Q's extra ones scaled by -2 * -0.5 / 0.25 = 4; the squares
// of each side become captures (a sigmoid sees the row's too).
// CHECK-LABEL: func @ipa_distance
// CHECK: %[[FOUR:.+]] = arith.constant 4.000000e+00 : f32
// Q' and K': the view, then the points flattened, then zeros.
// CHECK: %[[QW:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x16x32xf32>)
// CHECK: arith.mulf %{{.*}}, %[[FOUR]] : f32
// CHECK: %[[KW:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x16x32xf32>)
// The squares, summed over the 6 coordinates.
// CHECK: %[[ROWS:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x16xf32>)
// CHECK: %[[COLS:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1x2x16xf32>)
// CHECK: attn.attention q(%[[QW]] : tensor<1x2x16x32xf32>) k(%[[KW]] : tensor<1x2x16x32xf32>) {{.*}} captures(%[[ROWS]], %[[COLS]] : {{.*}}) scale [2.500000e-01] normalizer sigmoid
// CHECK: ^bb0(%[[S:.+]]: f32, %[[B:.+]]: index, %[[H:.+]]: index, %[[I:.+]]: index, %[[J:.+]]: index, %[[R:.+]]: tensor<1x2x16xf32>, %[[C:.+]]: tensor<1x2x16xf32>):
// CHECK-DAG: tensor.extract %[[R]][%[[B]], %[[H]], %[[I]]]
// CHECK-DAG: tensor.extract %[[C]][%[[B]], %[[H]], %[[J]]]
func.func @ipa_distance(%q: tensor<2x16x16xf32>, %k: tensor<2x16x16xf32>, %v: tensor<2x16x16xf32>,
                        %qp: tensor<2x16x2x3xf32>, %kp: tensor<2x16x2x3xf32>) -> tensor<2x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %quarter = arith.constant 0.25 : f32
  %half = arith.constant 0.5 : f32
  %s0 = tensor.empty() : tensor<2x16x16xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%sf : tensor<2x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %y = arith.addf %acc, %m : f32
    linalg.yield %y : f32
  } -> tensor<2x16x16xf32>
  // d2 = sum over points and coordinates of (qp - kp)^2
  %d2 = linalg.generic {indexing_maps = [affine_map<(h, i, j, p, x) -> (h, i, p, x)>, affine_map<(h, i, j, p, x) -> (h, j, p, x)>, affine_map<(h, i, j, p, x) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%qp, %kp : tensor<2x16x2x3xf32>, tensor<2x16x2x3xf32>) outs(%sf : tensor<2x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %sq = arith.mulf %d, %d : f32
    %y = arith.addf %acc, %sq : f32
    linalg.yield %y : f32
  } -> tensor<2x16x16xf32>
  // p = sigmoid(s / 4 - d2 / 2)
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %d2 : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%s0 : tensor<2x16x16xf32>) {
  ^bb0(%x: f32, %d: f32, %o: f32):
    %xs = arith.mulf %x, %quarter : f32
    %dw = arith.mulf %d, %half : f32
    %l = arith.subf %xs, %dw : f32
    %n = arith.negf %l : f32
    %e = math.exp %n : f32
    %den = arith.addf %one, %e : f32
    %y = arith.divf %one, %den : f32
    linalg.yield %y : f32
  } -> tensor<2x16x16xf32>
  %o0 = tensor.empty() : tensor<2x16x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  // expected-remark @+1 {{attn-raise: result 0 raised to attn.attention}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%of : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  return %o : tensor<2x16x16xf32>
}

// -----

// A distance weighted per key is not folded: its cross term's coefficient
// would vary along the contraction's rows of K.
// CHECK-LABEL: func @negative_ipa_weight_per_key
// CHECK-NOT: attn.attention
func.func @negative_ipa_weight_per_key(%q: tensor<2x16x16xf32>, %k: tensor<2x16x16xf32>, %v: tensor<2x16x16xf32>,
                                       %qp: tensor<2x16x2x3xf32>, %kp: tensor<2x16x2x3xf32>,
                                       %w: tensor<16xf32>) -> tensor<2x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %s0 = tensor.empty() : tensor<2x16x16xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%sf : tensor<2x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %y = arith.addf %acc, %m : f32
    linalg.yield %y : f32
  } -> tensor<2x16x16xf32>
  %d2 = linalg.generic {indexing_maps = [affine_map<(h, i, j, p, x) -> (h, i, p, x)>, affine_map<(h, i, j, p, x) -> (h, j, p, x)>, affine_map<(h, i, j, p, x) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%qp, %kp : tensor<2x16x2x3xf32>, tensor<2x16x2x3xf32>) outs(%sf : tensor<2x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %sq = arith.mulf %d, %d : f32
    %y = arith.addf %acc, %sq : f32
    linalg.yield %y : f32
  } -> tensor<2x16x16xf32>
  // expected-remark @+1 {{nothing inside result 0 is raised; the closest value stopped at: the PV weights are neither a softmax (E / sum E) nor a sigmoid}}
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %d2, %w : tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<16xf32>) outs(%s0 : tensor<2x16x16xf32>) {
  ^bb0(%x: f32, %d: f32, %wj: f32, %o: f32):
    %dw = arith.mulf %d, %wj : f32
    %l = arith.subf %x, %dw : f32
    %n = arith.negf %l : f32
    %e = math.exp %n : f32
    %den = arith.addf %one, %e : f32
    %y = arith.divf %one, %den : f32
    linalg.yield %y : f32
  } -> tensor<2x16x16xf32>
  %o0 = tensor.empty() : tensor<2x16x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  // expected-remark @+1 {{attn-raise: result 0 is not raised: a squared distance's coefficient varies along the keys}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%of : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  return %o : tensor<2x16x16xf32>
}

// -----

// GQA (4 query heads, 2 KV heads) with key points per KV head: K's extra
// columns are built per KV head.
// CHECK-LABEL: func @ipa_gqa
// CHECK: attn.attention q(%{{.*}} : tensor<1x4x16x32xf32>) k(%{{.*}} : tensor<1x2x16x32xf32>)
func.func @ipa_gqa(%q: tensor<4x16x16xf32>, %k: tensor<2x16x16xf32>, %v: tensor<2x16x16xf32>,
                        %qp: tensor<4x16x2x3xf32>, %kp: tensor<2x16x2x3xf32>) -> tensor<4x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %s0 = tensor.empty() : tensor<4x16x16xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h floordiv 2, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<4x16x16xf32>, tensor<2x16x16xf32>) outs(%sf : tensor<4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %y = arith.addf %acc, %m : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  %d2 = linalg.generic {indexing_maps = [affine_map<(h, i, j, p, x) -> (h, i, p, x)>, affine_map<(h, i, j, p, x) -> (h floordiv 2, j, p, x)>, affine_map<(h, i, j, p, x) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%qp, %kp : tensor<4x16x2x3xf32>, tensor<2x16x2x3xf32>) outs(%sf : tensor<4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %sq = arith.mulf %d, %d : f32
    %y = arith.addf %acc, %sq : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %d2 : tensor<4x16x16xf32>, tensor<4x16x16xf32>) outs(%s0 : tensor<4x16x16xf32>) {
  ^bb0(%x: f32, %d: f32, %o: f32):
    %l = arith.subf %x, %d : f32
    %n = arith.negf %l : f32
    %e = math.exp %n : f32
    %den = arith.addf %one, %e : f32
    %y = arith.divf %one, %den : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  %o0 = tensor.empty() : tensor<4x16x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // expected-remark @+1 {{attn-raise: result 0 raised to attn.attention}}
  %o = linalg.generic {indexing_maps = [affine_map<(h, i, d, j) -> (h, i, j)>, affine_map<(h, i, d, j) -> (h floordiv 2, j, d)>, affine_map<(h, i, d, j) -> (h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<4x16x16xf32>, tensor<2x16x16xf32>) outs(%of : tensor<4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %y = arith.addf %acc, %m : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  return %o : tensor<4x16x16xf32>
}

// -----

// GQA with key points per *query* head: K's extra columns, built per KV
// head, cannot hold them.
// CHECK-LABEL: func @negative_ipa_gqa_points_per_query_head
// CHECK-NOT: attn.attention
func.func @negative_ipa_gqa_points_per_query_head(%q: tensor<4x16x16xf32>, %k: tensor<2x16x16xf32>, %v: tensor<2x16x16xf32>,
                        %qp: tensor<4x16x2x3xf32>, %kp: tensor<4x16x2x3xf32>) -> tensor<4x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %s0 = tensor.empty() : tensor<4x16x16xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h floordiv 2, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<4x16x16xf32>, tensor<2x16x16xf32>) outs(%sf : tensor<4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %y = arith.addf %acc, %m : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  %d2 = linalg.generic {indexing_maps = [affine_map<(h, i, j, p, x) -> (h, i, p, x)>, affine_map<(h, i, j, p, x) -> (h, j, p, x)>, affine_map<(h, i, j, p, x) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%qp, %kp : tensor<4x16x2x3xf32>, tensor<4x16x2x3xf32>) outs(%sf : tensor<4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %sq = arith.mulf %d, %d : f32
    %y = arith.addf %acc, %sq : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  // expected-remark @+1 {{nothing inside result 0 is raised; the closest value stopped at: the PV weights are neither a softmax (E / sum E) nor a sigmoid}}
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %d2 : tensor<4x16x16xf32>, tensor<4x16x16xf32>) outs(%s0 : tensor<4x16x16xf32>) {
  ^bb0(%x: f32, %d: f32, %o: f32):
    %l = arith.subf %x, %d : f32
    %n = arith.negf %l : f32
    %e = math.exp %n : f32
    %den = arith.addf %one, %e : f32
    %y = arith.divf %one, %den : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  %o0 = tensor.empty() : tensor<4x16x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<4x16x16xf32>) -> tensor<4x16x16xf32>
  // expected-remark @+1 {{attn-raise: result 0 is not raised: a squared distance's key side varies within a group of query heads that share a KV head}}
  %o = linalg.generic {indexing_maps = [affine_map<(h, i, d, j) -> (h, i, j)>, affine_map<(h, i, d, j) -> (h floordiv 2, j, d)>, affine_map<(h, i, d, j) -> (h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<4x16x16xf32>, tensor<2x16x16xf32>) outs(%of : tensor<4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %y = arith.addf %acc, %m : f32
    linalg.yield %y : f32
  } -> tensor<4x16x16xf32>
  return %o : tensor<4x16x16xf32>
}

// -----

// A short sum in the logits (a row bias sum_t x[h, i, t] * w[t] over t < 2,
// x a concatenation of two columns) is unrolled in the score region, and
// each term reads the piece its constant index falls in.
// CHECK-LABEL: func @short_sum
// CHECK: score {
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %[[H:.+]]: index, %[[I:.+]]: index, %{{.*}}: index, %[[A:.+]]: tensor<2x16x1xf32>, %[[B:.+]]: tensor<2x16x1xf32>, %[[W:.+]]: tensor<2xf32>):
// CHECK: tensor.extract %[[A]][%[[H]], %[[I]], %c0]
// CHECK: tensor.extract %[[W]][%c0]
// CHECK: tensor.extract %[[B]][%[[H]], %[[I]], %c0]
// CHECK: tensor.extract %[[W]][%c1]
// CHECK-NOT: linalg.generic
// CHECK: attn.yield
func.func @short_sum(%q: tensor<2x16x16xf32>, %k: tensor<2x16x16xf32>, %v: tensor<2x16x16xf32>,
                     %a: tensor<2x16x1xf32>, %bb: tensor<2x16x1xf32>, %w: tensor<2xf32>) -> tensor<2x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %s0 = tensor.empty() : tensor<2x16x16xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%sf : tensor<2x16x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x16x16xf32>
  %x = tensor.concat dim(2) %a, %bb : (tensor<2x16x1xf32>, tensor<2x16x1xf32>) -> tensor<2x16x2xf32>
  %bias = linalg.generic {indexing_maps = [affine_map<(h, i, j, t) -> (h, i, t)>, affine_map<(h, i, j, t) -> (t)>, affine_map<(h, i, j, t) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %w : tensor<2x16x2xf32>, tensor<2xf32>) outs(%sf : tensor<2x16x16xf32>) {
  ^bb0(%e: f32, %f: f32, %acc: f32):
    %m = arith.mulf %e, %f : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x16x16xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %bias : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%s0 : tensor<2x16x16xf32>) {
  ^bb0(%l0: f32, %b0: f32, %o: f32):
    %l = arith.addf %l0, %b0 : f32
    %n = arith.negf %l : f32
    %e = math.exp %n : f32
    %den = arith.addf %one, %e : f32
    %y = arith.divf %one, %den : f32
    linalg.yield %y : f32
  } -> tensor<2x16x16xf32>
  %o0 = tensor.empty() : tensor<2x16x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  // expected-remark @+1 {{attn-raise: result 0 raised to attn.attention}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%of : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  return %o : tensor<2x16x16xf32>
}

// -----

// Overlapping insert_slice boxes are no concatenation: the value is not
// followed, and the remark says why.
// CHECK-LABEL: func @negative_overlapping_boxes
func.func @negative_overlapping_boxes(%x: tensor<4x3xf32>, %y: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %e = tensor.empty() : tensor<4x5xf32>
  %a = tensor.insert_slice %x into %e[0, 0] [4, 3] [1, 1] : tensor<4x3xf32> into tensor<4x5xf32>
  // expected-remark @+1 {{attn-raise: result 0 is not raised: cannot follow the program: insert_slices write overlapping boxes}}
  %b = tensor.insert_slice %y into %a[0, 2] [4, 3] [1, 1] : tensor<4x3xf32> into tensor<4x5xf32>
  return %b : tensor<4x5xf32>
}
