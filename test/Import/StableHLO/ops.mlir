// RUN: flashlight-opt %s --split-input-file --flashlight-import-stablehlo | FileCheck %s

// Pretty and generic forms read alike: both become the same generic op.
// CHECK-LABEL: func @dot_general_both_forms
func.func @dot_general_both_forms(%a: tensor<2x8x4xbf16>, %b: tensor<2x16x4xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) {
  // bf16 products accumulate in f32 from a zero fill, then round.
  // CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
  // CHECK: %[[FILL:.+]] = linalg.fill ins(%[[ZERO]] : f32)
  // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} outs(%[[FILL]] : tensor<2x8x16xf32>)
  // CHECK: arith.extf
  // CHECK: arith.mulf
  // CHECK: arith.addf
  // CHECK: arith.truncf {{.*}} f32 to bf16
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x8x4xbf16>, tensor<2x16x4xbf16>) -> tensor<2x8x16xbf16>
  %1 = "stablehlo.dot_general"(%a, %b) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<2x8x4xbf16>, tensor<2x16x4xbf16>) -> tensor<2x8x16xbf16>
  // CHECK-NOT: stablehlo
  return %0, %1 : tensor<2x8x16xbf16>, tensor<2x8x16xbf16>
}

// -----

// The `applies` form builds its reducer; reductions start from a fill.
// CHECK-LABEL: func @reduce_applies
func.func @reduce_applies(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  // CHECK: %[[INIT:.+]] = tensor.extract
  // CHECK: linalg.fill ins(%[[INIT]] : f32)
  // CHECK: linalg.generic {{.*}}["parallel", "reduction"]
  // CHECK: arith.maximumf
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The region form, with the reducer's (accumulator, element) arguments.
// CHECK-LABEL: func @reduce_region
func.func @reduce_region(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  // CHECK: linalg.generic {{.*}}["reduction", "parallel"]
  // CHECK: ^bb0(%[[IN:.+]]: f32, %[[ACC:.+]]: f32):
  // CHECK: arith.addf %[[ACC]], %[[IN]]
  %0 = stablehlo.reduce(%x init: %init) across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>)  {
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  return %0 : tensor<8xf32>
}

// -----

// Layout ops are index maps; a size-1 dim broadcasts through index 0.
// CHECK-DAG: #[[BCAST:.+]] = affine_map<(d0, d1, d2) -> (0, d2)>
// CHECK-DAG: #[[PERM:.+]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>
// CHECK-LABEL: func @layouts
func.func @layouts(%x: tensor<1x8xf32>, %y: tensor<2x3x4xf32>) -> (tensor<5x2x8xf32>, tensor<4x2x3xf32>) {
  // CHECK: linalg.generic {indexing_maps = [#[[BCAST]],
  %0 = stablehlo.broadcast_in_dim %x, dims = [1, 2] : (tensor<1x8xf32>) -> tensor<5x2x8xf32>
  // CHECK: linalg.generic {indexing_maps = [#[[PERM]],
  %1 = stablehlo.transpose %y, dims = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0, %1 : tensor<5x2x8xf32>, tensor<4x2x3xf32>
}

// -----

// Reshapes become collapse/expand; slices and concatenations tensor ops.
// CHECK-LABEL: func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %y: tensor<2x1xf32>) -> (tensor<6x4xf32>, tensor<2x3x1x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
  // CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]]
  %0 = stablehlo.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: tensor.expand_shape
  %1 = stablehlo.reshape %x : (tensor<2x3x4xf32>) -> tensor<2x3x1x4xf32>
  // CHECK: tensor.extract_slice %{{.*}}[0, 1, 0] [2, 1, 2] [1, 1, 2]
  %2 = stablehlo.slice %x [0:2, 1:2, 0:4:2] : (tensor<2x3x4xf32>) -> tensor<2x1x2xf32>
  %3 = stablehlo.reshape %2 : (tensor<2x1x2xf32>) -> tensor<2x2xf32>
  // CHECK: tensor.concat dim(1)
  %4 = stablehlo.concatenate %y, %y, dim = 1 : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
  return %0, %1, %3, %4 : tensor<6x4xf32>, tensor<2x3x1x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// Comparisons take their predicate from the direction and compare type;
// select with a predicate type first; iota is linalg.index.
// CHECK-LABEL: func @masks
func.func @masks(%s: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // CHECK: linalg.index 0
  %i = stablehlo.iota dim = 0 : tensor<4x4xi32>
  // CHECK: linalg.index 1
  %j = stablehlo.iota dim = 1 : tensor<4x4xi32>
  // CHECK: arith.cmpi sge
  %keep = stablehlo.compare GE, %i, %j, SIGNED : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x4xi1>
  %c = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %ninf = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
  // CHECK: arith.select
  %0 = stablehlo.select %keep, %s, %ninf : tensor<4x4xi1>, tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// Elementwise math; logistic is spelled out; clamp takes scalar bounds.
// CHECK-LABEL: func @elementwise
func.func @elementwise(%x: tensor<8xf32>) -> tensor<8xbf16> {
  // CHECK: math.exp
  %0 = stablehlo.exponential %x : tensor<8xf32>
  // CHECK: math.tanh
  %1 = stablehlo.tanh %0 : tensor<8xf32>
  // 1 / (1 + exp(-x))
  // CHECK: arith.negf
  // CHECK: math.exp
  // CHECK: arith.addf
  // CHECK: arith.divf
  %2 = stablehlo.logistic %1 : tensor<8xf32>
  // CHECK: math.rsqrt
  %3 = stablehlo.rsqrt %2 : tensor<8xf32>
  %lo = stablehlo.constant dense<0.0> : tensor<f32>
  %hi = stablehlo.constant dense<1.0> : tensor<f32>
  // CHECK: arith.maximumf
  // CHECK: arith.minimumf
  %4 = stablehlo.clamp %lo, %3, %hi : (tensor<f32>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  // CHECK: math.powf
  %5 = stablehlo.power %4, %x : tensor<8xf32>
  // CHECK: arith.truncf
  %6 = stablehlo.convert %5 : (tensor<8xf32>) -> tensor<8xbf16>
  return %6 : tensor<8xbf16>
}

// -----

// JAX's private helpers are inlined, then erased.
// CHECK-LABEL: func @calls
// CHECK-NOT: call
// CHECK-NOT: func.func private @_where
func.func @calls(%p: tensor<4xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = call @_where(%p, %x, %c) : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @_where(%p: tensor<4xi1>, %x: tensor<4xf32>, %c: tensor<f32>) -> tensor<4xf32> {
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %0 = stablehlo.select %p, %x, %b : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A gather reads its operand with tensor.extract at clamped starts.
// CHECK-LABEL: func @gather
func.func @gather(%table: tensor<2x9xf32>, %idx: tensor<4x4x1xi32>) -> tensor<2x4x4xf32> {
  // CHECK: linalg.generic
  // CHECK: tensor.extract %{{.*}} : tensor<4x4x1xi32>
  // CHECK: arith.maxsi
  // CHECK: arith.minsi
  // CHECK: tensor.extract %{{.*}} : tensor<2x9xf32>
  %0 = "stablehlo.gather"(%table, %idx) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 2, 1>}> : (tensor<2x9xf32>, tensor<4x4x1xi32>) -> tensor<2x4x4xf32>
  return %0 : tensor<2x4x4xf32>
}

// -----

// CHLO as JAX prints it (`jnp.square` in RMS norms, GELU's erf) is
// decomposed as upstream defines it: square(x) = x * x.
// CHECK-LABEL: func @chlo_square_erf
func.func @chlo_square_erf(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // CHECK: linalg.generic
  // CHECK: %[[SQ:.+]] = arith.mulf %[[IN:.+]], %[[IN]] : f32
  %0 = chlo.square %x : tensor<2x8xf32> -> tensor<2x8xf32>
  // CHECK: math.erf
  %1 = chlo.erf %0 : tensor<2x8xf32> -> tensor<2x8xf32>
  // CHECK-NOT: chlo
  return %1 : tensor<2x8xf32>
}

// -----

// is_finite: |x| < inf (false for NaN and +-inf); sign keeps +-0 and NaN.
// CHECK-LABEL: func @is_finite_sign
func.func @is_finite_sign(%x: tensor<2x8xf32>, %n: tensor<8xi32>) -> (tensor<2x8xi1>, tensor<2x8xf32>, tensor<8xi32>) {
  // CHECK: %[[ABS:.+]] = math.absf
  // CHECK: arith.cmpf olt, %[[ABS]], %{{.+}} : f32
  %0 = stablehlo.is_finite %x : (tensor<2x8xf32>) -> tensor<2x8xi1>
  // CHECK: %[[ONE:.+]] = math.copysign
  // CHECK: %[[ZERO:.+]] = arith.cmpf ueq
  // CHECK: arith.select %[[ZERO]], %{{.+}}, %[[ONE]]
  %1 = stablehlo.sign %x : tensor<2x8xf32>
  // (x > 0) - (x < 0) on integers
  // CHECK: arith.cmpi sgt
  // CHECK: arith.cmpi slt
  // CHECK: arith.subi
  %2 = stablehlo.sign %n : tensor<8xi32>
  return %0, %1, %2 : tensor<2x8xi1>, tensor<2x8xf32>, tensor<8xi32>
}

// -----

// pad as JAX prints it: a concatenation of the operand with filled pieces,
// per padded dim; a negative amount slices.
// CHECK-LABEL: func @pad_concat
func.func @pad_concat(%x: tensor<2x8xf32>, %c: tensor<f32>) -> (tensor<2x11xf32>, tensor<2x11xf32>, tensor<2x6xf32>) {
  // CHECK: %[[LO:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<2x1xf32>)
  // CHECK: %[[HI:.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<2x2xf32>)
  // CHECK: tensor.concat dim(1) %[[LO]], %{{.+}}, %[[HI]] : (tensor<2x1xf32>, tensor<2x8xf32>, tensor<2x2xf32>) -> tensor<2x11xf32>
  %0 = stablehlo.pad %x, %c, low = [0, 1], high = [0, 2], interior = [0, 0] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x11xf32>
  // CHECK: tensor.concat dim(1)
  %1 = "stablehlo.pad"(%x, %c) <{edge_padding_high = array<i64: 0, 2>, edge_padding_low = array<i64: 0, 1>, interior_padding = array<i64: 0, 0>}> : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x11xf32>
  // CHECK: tensor.extract_slice %{{.+}}[0, 1] [2, 6] [1, 1]
  %2 = stablehlo.pad %x, %c, low = [0, -1], high = [0, -1], interior = [0, 0] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x6xf32>
  return %0, %1, %2 : tensor<2x11xf32>, tensor<2x11xf32>, tensor<2x6xf32>
}

// -----

// jnp.cumsum: a reduce_window over a window of the whole dim padded by
// N - 1 on the left. out[o] = sum_w x[o + w - 7], 0 outside the operand.
// CHECK-LABEL: func @reduce_window_cumsum
func.func @reduce_window_cumsum(%x: tensor<2x8xi32>) -> tensor<2x8xi32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  // CHECK: %[[WIN:.+]] = tensor.empty() : tensor<1x8xi32>
  // CHECK: %[[FILL:.+]] = linalg.fill
  // CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%[[WIN]] : tensor<1x8xi32>) outs(%[[FILL]] : tensor<2x8xi32>)
  // CHECK: %[[IDX:.+]] = arith.subi
  // CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<2x8xi32>
  // CHECK: %[[X:.+]] = arith.select
  // CHECK: arith.addi %{{.+}}, %[[X]] : i32
  %1 = "stablehlo.reduce_window"(%x, %c) <{base_dilations = array<i64: 1, 1>, padding = dense<[[0, 0], [7, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 1, 8>, window_strides = array<i64: 1, 1>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %2 = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %2 : tensor<i32>
  }) : (tensor<2x8xi32>, tensor<i32>) -> tensor<2x8xi32>
  return %1 : tensor<2x8xi32>
}

// -----

// lax.fori_loop as JAX prints it: a counter from 0 below 3 slices the
// stacked rows and accumulates them. The loop is unrolled (3 trips) and each
// dynamic_slice reads at its trip's constant start; a start past the end is
// clamped (trip 2 asks for row 4 of a 4-row slice of 2: it reads row 2).
// CHECK-LABEL: func @while_fori_unrolled
func.func @while_fori_unrolled(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %acc = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // CHECK-NOT: stablehlo.while
  // CHECK: tensor.extract_slice %{{.+}}[0, 0] [2, 8] [1, 1]
  // CHECK: tensor.extract_slice %{{.+}}[2, 0] [2, 8] [1, 1]
  // CHECK: tensor.extract_slice %{{.+}}[2, 0] [2, 8] [1, 1]
  // CHECK-NOT: tensor.extract_slice
  %r:2 = stablehlo.while(%i = %c0, %a = %acc) : tensor<i32>, tensor<2x8xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %two = stablehlo.constant dense<2> : tensor<i32>
      %row = stablehlo.multiply %i, %two : tensor<i32>
      %z = stablehlo.constant dense<0> : tensor<i32>
      %s = stablehlo.dynamic_slice %x, %row, %z, sizes = [2, 8] : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x8xf32>
      %sum = stablehlo.add %a, %s : tensor<2x8xf32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %next, %sum : tensor<i32>, tensor<2x8xf32>
    }
  return %r#1 : tensor<2x8xf32>
}

// -----

// The generic form, a start index from an index table (AlphaFold's
// sub-batching: iota * 2), and dynamic_update_slice writing each trip's rows.
// CHECK-LABEL: func @while_generic_update
func.func @while_generic_update(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %iota = stablehlo.iota dim = 0 : tensor<2xi32>
  %c2 = stablehlo.constant dense<2> : tensor<i32>
  %b2 = stablehlo.broadcast_in_dim %c2, dims = [] : (tensor<i32>) -> tensor<2xi32>
  %starts = stablehlo.multiply %iota, %b2 : tensor<2xi32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // CHECK-NOT: stablehlo.while
  // CHECK: %[[A:.+]] = tensor.extract_slice %{{.+}}[0, 0] [2, 8] [1, 1]
  // CHECK: %[[NEG0:.+]] = linalg.generic {{.*}} ins(%[[A]]
  // CHECK: %[[W0:.+]] = tensor.insert_slice %[[NEG0]] into %{{.+}}[0, 0] [2, 8] [1, 1]
  // CHECK: %[[B:.+]] = tensor.extract_slice %{{.+}}[2, 0] [2, 8] [1, 1]
  // CHECK: %[[NEG1:.+]] = linalg.generic {{.*}} ins(%[[B]]
  // CHECK: tensor.insert_slice %[[NEG1]] into %[[W0]][2, 0] [2, 8] [1, 1]
  %r:3 = "stablehlo.while"(%c0, %starts, %x) ({
  ^bb0(%i: tensor<i32>, %t: tensor<2xi32>, %o: tensor<4x8xf32>):
    %n = stablehlo.constant dense<2> : tensor<i32>
    %p = "stablehlo.compare"(%i, %n) <{comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "stablehlo.return"(%p) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %t: tensor<2xi32>, %o: tensor<4x8xf32>):
    %e = "stablehlo.dynamic_slice"(%t, %i) <{slice_sizes = array<i64: 1>}> : (tensor<2xi32>, tensor<i32>) -> tensor<1xi32>
    %row = stablehlo.reshape %e : (tensor<1xi32>) -> tensor<i32>
    %z = stablehlo.constant dense<0> : tensor<i32>
    %s = "stablehlo.dynamic_slice"(%o, %row, %z) <{slice_sizes = array<i64: 2, 8>}> : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x8xf32>
    %neg = stablehlo.negate %s : tensor<2x8xf32>
    %w = stablehlo.dynamic_update_slice %o, %neg, %row, %z : (tensor<4x8xf32>, tensor<2x8xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    "stablehlo.return"(%next, %t, %w) : (tensor<i32>, tensor<2xi32>, tensor<4x8xf32>) -> ()
  }) : (tensor<i32>, tensor<2xi32>, tensor<4x8xf32>) -> (tensor<i32>, tensor<2xi32>, tensor<4x8xf32>)
  return %r#2 : tensor<4x8xf32>
}
