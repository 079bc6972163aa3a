// RUN: flashlight-opt %s --split-input-file --flashlight-host-to-gpu | FileCheck %s

// A short row sum (8 elements): one thread per row (4 rows: 1 block of
// 256), the reduction a loop carrying the accumulator, which starts from
// the initial value.
// CHECK-LABEL: func.func @row_sum
// CHECK: linalg.generic {{.*}}flashlight.block = 256 : i64, flashlight.grid = 1 : i64, flashlight.kernel = "host1"
// CHECK: gpu.module @flashlight_host
// CHECK: gpu.func @host1(%[[IN:.+]]: memref<4x8xf32>, %[[INIT:.+]]: memref<4xf32>, %[[OUT:.+]]: memref<4xf32>) kernel
// Thread id -> row.
// CHECK: scf.if
// CHECK: %[[ROW:.+]] = arith.remui
// CHECK: %[[ACC:.+]] = memref.load %[[INIT]][%[[ROW]]]
// CHECK: %[[SUM:.+]] = scf.for %[[J:.+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[A:.+]] = %[[ACC]]) -> (f32)
// CHECK: %[[X:.+]] = memref.load %[[IN]][%[[ROW]], %[[J]]]
// CHECK: arith.addf
// CHECK: memref.store %[[SUM]], %[[OUT]][%[[ROW]]]
func.func @row_sum(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A norm's sum of squares over 256 elements: a warp per row (8 per block:
// 12 rows take 2 blocks). Lane l sums elements l, l + 32, ..., l + 224 in
// 8 steps one after another (no loop: its loads issue together); lane 0
// from the initial value, the others from 0; shuffles combine the lanes
// and lane 0 stores.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK: linalg.generic {{.*}}flashlight.block = 256 : i64, flashlight.grid = 2 : i64
// CHECK: gpu.func @host1(%[[IN:.+]]: memref<12x256xf32>, %[[INIT:.+]]: memref<12xf32>, %[[OUT:.+]]: memref<12xf32>) kernel
// CHECK: %[[C32:.+]] = arith.constant 32 : index
// CHECK: %[[LANE:.+]] = arith.remui %{{.*}}, %[[C32]]
// CHECK: %[[ROW:.+]] = arith.remui
// CHECK: %[[ACC:.+]] = memref.load %[[INIT]]
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[LANE]]
// CHECK: %[[START:.+]] = arith.select %[[FIRST]], %[[ACC]]
// CHECK-NOT: scf.for
// CHECK: %[[X0:.+]] = memref.load %[[IN]][%[[ROW]], %[[LANE]]]
// CHECK: %[[SQ0:.+]] = arith.mulf %[[X0]], %[[X0]]
// CHECK: %[[S0:.+]] = arith.addf %[[START]], %[[SQ0]]
// CHECK: %[[AT1:.+]] = arith.addi %[[LANE]], %c32
// CHECK: memref.load %[[IN]][%[[ROW]], %[[AT1]]]
// CHECK-COUNT-6: arith.addi %[[LANE]]
// CHECK-NOT: scf.for
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: scf.if %[[FIRST]]
// CHECK: memref.store
func.func @sum_of_squares(%x: tensor<12x256xf32>) -> tensor<12xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<12xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<12xf32>) -> tensor<12xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<12x256xf32>) outs(%init : tensor<12xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  } -> tensor<12xf32>
  return %s : tensor<12xf32>
}

// -----

// A row of 80 elements: 3 steps a lane, the last only for lanes 0-15
// (the others keep their sums).
// CHECK-LABEL: func.func @uneven_row
// CHECK: gpu.func @host0
// CHECK-NOT: scf.for
// CHECK: %[[AT:.+]] = arith.addi %{{.*}}, %c64
// CHECK: %[[IN_ROW:.+]] = arith.cmpi ult, %[[AT]], %c80
// CHECK: %[[LAST:.+]] = scf.if %[[IN_ROW]] -> (f32)
// CHECK: memref.load %{{.*}}[%{{.*}}, %[[AT]]]
// CHECK: } else {
// CHECK-NEXT: scf.yield
// CHECK: gpu.shuffle  xor %[[LAST]]
func.func @uneven_row(%x: tensor<12x80xf32>, %init: tensor<12xf32>) -> tensor<12xf32> {
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<12x80xf32>) outs(%init : tensor<12xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<12xf32>
  return %s : tensor<12xf32>
}

// -----

// A row past 8 steps a lane (512 elements) keeps the loop over its steps.
// CHECK-LABEL: func.func @long_row
// CHECK: gpu.func @host0
// CHECK: scf.for %{{.*}} = %{{.*}} to %c512 step %c32
func.func @long_row(%x: tensor<4x512xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x512xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A slice reads its source in the kernel, at offset + index * stride;
// concats select the part each index falls in, every part read at a clamped
// index. The concat is marked as a copy of its parts (parameters 2 and 3 of
// its kernel) for runtimes to move natively; the strided slice is not.
// CHECK-LABEL: func.func @slice_concat
// CHECK: linalg.generic
// CHECK-NOT: flashlight.copy
// CHECK-SAME: flashlight.kernel = "host0"
// CHECK: linalg.generic {{.*}}flashlight.copy = {dim = 0 : i64, kind = "concat", sources = array<i64: 2, 3>}{{.*}}flashlight.kernel = "host1"
// CHECK: gpu.func @host0(%{{.*}}: memref<3xf32>, %{{.*}}: memref<3xf32>, %[[SRC:.+]]: memref<8xf32>)
// CHECK: %[[I:.+]] = arith.muli %{{.*}}, %c2 : index
// CHECK: %[[AT:.+]] = arith.addi %c1{{(_[0-9]+)?}}, %[[I]] : index
// CHECK: memref.load %[[SRC]][%[[AT]]]
// CHECK: gpu.func @host1(%{{.*}}: memref<7xf32>, %{{.*}}: memref<7xf32>, %[[P0:.+]]: memref<3xf32>, %[[P1:.+]]: memref<4xf32>)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: memref.load %[[P0]]
// CHECK: memref.load %[[P1]]
// CHECK: arith.select
func.func @slice_concat(%x: tensor<8xf32>, %y: tensor<4xf32>) -> tensor<7xf32> {
  %s = tensor.extract_slice %x[1] [3] [2] : tensor<8xf32> to tensor<3xf32>
  %c = tensor.concat dim(0) %s, %y : (tensor<3xf32>, tensor<4xf32>) -> tensor<7xf32>
  return %c : tensor<7xf32>
}

// -----

// A unit-stride slice is marked as a copy of its source (its kernel's
// parameter 2), with its offsets and sizes.
// CHECK-LABEL: func.func @column_slice
// CHECK: linalg.generic {{.*}}flashlight.copy = {kind = "slice", offsets = array<i64: 0, 2>, sizes = array<i64: 4, 3>, sources = array<i64: 2>}
func.func @column_slice(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %s = tensor.extract_slice %x[0, 2] [4, 3] [1, 1] : tensor<4x8xf32> to tensor<4x3xf32>
  return %s : tensor<4x3xf32>
}

// -----

// A transpose (the gradient's key-major copy of a pair bias) is marked as a
// copy too, with torch's permutation (result dim j is the input's dim
// perm[j]); a generic that also computes is not.
// CHECK-LABEL: func.func @transposes
// CHECK: linalg.generic {{.*}}flashlight.copy = {kind = "transpose", permutation = array<i64: 0, 2, 1>, sources = array<i64: 0>}
// CHECK: linalg.generic
// CHECK-NOT: flashlight.copy
// CHECK-SAME: flashlight.kernel
func.func @transposes(%x: tensor<2x3x4xbf16>) -> (tensor<2x4x3xbf16>, tensor<2x4x3xf32>) {
  %e = tensor.empty() : tensor<2x4x3xbf16>
  %t = linalg.transpose ins(%x : tensor<2x3x4xbf16>) outs(%e : tensor<2x4x3xbf16>) permutation = [0, 2, 1]
  %f = tensor.empty() : tensor<2x4x3xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<2x3x4xbf16>) outs(%f : tensor<2x4x3xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %v = arith.extf %in : bf16 to f32
    linalg.yield %v : f32
  } -> tensor<2x4x3xf32>
  return %t, %w : tensor<2x4x3xbf16>, tensor<2x4x3xf32>
}

// -----

// insert_slice (TOSA's concat: a chain of them into an empty tensor): the
// source inside the box, at a clamped index, the destination outside it.
// CHECK-LABEL: func.func @insert_chain
// CHECK: gpu.func @host0(%{{.*}}: memref<2x5xf32>, %{{.*}}: memref<2x5xf32>, %[[SRC:.+]]: memref<2x4xf32>, %[[DST:.+]]: memref<2x5xf32>)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: memref.load %[[SRC]]
// CHECK: memref.load %[[DST]]
// CHECK: arith.select
// CHECK: gpu.func @host1(%{{.*}}: memref<2x5xf32>, %{{.*}}: memref<2x5xf32>, %{{.*}}: memref<2x1xf32>, %{{.*}}: memref<2x5xf32>)
func.func @insert_chain(%x: tensor<2x4xf32>, %y: tensor<2x1xf32>) -> tensor<2x5xf32> {
  %e = tensor.empty() : tensor<2x5xf32>
  %a = tensor.insert_slice %x into %e[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x5xf32>
  %b = tensor.insert_slice %y into %a[0, 4] [2, 1] [1, 1] : tensor<2x1xf32> into tensor<2x5xf32>
  return %b : tensor<2x5xf32>
}

// -----

// A slice from 0 with stride 1 (`x[..., :-1]`): the loops have the slice's
// extents, not the source's (read as an input through an identity map, the
// source made the generic invalid).
// CHECK-LABEL: func.func @slice_head
// CHECK: linalg.generic {indexing_maps = [#{{.+}}], iterator_types = ["parallel", "parallel"]} outs(%{{.*}} : tensor<4x8xf32>)
// CHECK: tensor.extract %{{.*}} : tensor<4x9xf32>
// CHECK: gpu.func @host0(%{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4x9xf32>)
func.func @slice_head(%x: tensor<4x9xf32>) -> tensor<4x8xf32> {
  %s = tensor.extract_slice %x[0, 0] [4, 8] [1, 1] : tensor<4x9xf32> to tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Functions with attention are left to attn-to-gpu.
// CHECK-LABEL: func.func @attention
// CHECK-NOT: gpu.module
func.func @attention(%q: tensor<1x1x4x8xf16>, %k: tensor<1x1x4x8xf16>, %v: tensor<1x1x4x8xf16>) -> tensor<1x1x4x8xf16> {
  %o = attn.attention q(%q : tensor<1x1x4x8xf16>) k(%k : tensor<1x1x4x8xf16>) v(%v : tensor<1x1x4x8xf16>) scale [1.0] normalizer softmax -> tensor<1x1x4x8xf16>
  return %o : tensor<1x1x4x8xf16>
}

// -----

// x ** 2 with an i64 exponent (torch-mlir): libdevice's powi takes i32.
// CHECK-LABEL: func.func @powi_i64
// CHECK: gpu.func @host0
// CHECK: %[[N:.+]] = arith.trunci %{{.*}} : i64 to i32
// CHECK: math.fpowi %{{.*}}, %[[N]] : f32, i32
func.func @powi_i64(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = arith.constant 2 : i64
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = math.fpowi %a, %two : f32, i64
    linalg.yield %p : f32
  } -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A contraction (`out += widen(a) * widen(b)` over the reduction loop,
// operands read through projected permutations) records its einsum, for a
// runtime to use a GEMM; the kernel is built all the same.
// CHECK-LABEL: func.func @projection
// CHECK: linalg.generic
// CHECK-SAME: flashlight.einsum = "ac,cb->ab"
// CHECK-SAME: flashlight.kernel = "host
func.func @projection(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %init: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%a: bf16, %b: bf16, %o: f32):
    %ae = arith.extf %a : bf16 to f32
    %be = arith.extf %b : bf16 to f32
    %m = arith.mulf %ae, %be : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// Rows of dot products (rowsum(dO * O) of a gradient program: every loop
// reduced or read by both operands) are no GEMM: no einsum, so runtimes
// keep the kernel (a warp per row) where a library would run a batch of
// 1 x 1 products.
// CHECK-LABEL: func.func @row_dots
// CHECK: linalg.generic
// CHECK-NOT: flashlight.einsum
// CHECK-SAME: flashlight.kernel = "host
func.func @row_dots(%a: tensor<2x64x32xbf16>, %b: tensor<2x64x32xbf16>, %init: tensor<2x64xf32>) -> tensor<2x64xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : tensor<2x64x32xbf16>, tensor<2x64x32xbf16>) outs(%init : tensor<2x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %o: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %m = arith.mulf %xe, %ye : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x64xf32>
  return %r : tensor<2x64xf32>
}

// -----

// A sum of squares is a reduction, not a contraction of two operands.
// CHECK-LABEL: func.func @squares
// CHECK: linalg.generic
// CHECK-NOT: flashlight.einsum
func.func @squares(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A generic writing one finite constant everywhere (a generalized fill) is
// marked with its value, for runtimes to make the tensor where it is read
// (and a contraction into zeros to skip its add); -inf is not (a manifest
// has no infinities).
// CHECK-LABEL: func.func @fills
// CHECK: linalg.generic {{.*}}flashlight.fill = 0.000000e+00 : f64
// CHECK: linalg.generic
// CHECK-NOT: flashlight.fill
// CHECK-SAME: flashlight.kernel
func.func @fills() -> (tensor<4x8xf32>, tensor<4xf32>) {
  %z = arith.constant 0.0 : f32
  %n = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.fill ins(%z : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %b = linalg.fill ins(%n : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// A table's gradient: out[h, t] sums the terms whose bucket (j mod 4) is t.
// The bucket dim t is only compared with: each thread takes all 4 values
// of t (4 accumulators, 4 stores; 2 threads: one block), so that a term
// is computed once per step and not once per entry.
// CHECK-LABEL: func.func @buckets
// CHECK: linalg.generic {{.*}}flashlight.grid = 1 : i64
// CHECK: gpu.func @host0(
// CHECK: scf.for {{.*}} iter_args({{.*}}, {{.*}}, {{.*}}, {{.*}}) -> (f32, f32, f32, f32)
// CHECK-COUNT-4: arith.cmpi eq
// CHECK: scf.yield
// CHECK-COUNT-4: memref.store
// CHECK-NOT: memref.store
// CHECK: gpu.return
#x = affine_map<(h, j, t) -> (h, j)>
#o = affine_map<(h, j, t) -> (h, t)>
func.func @buckets(%x: tensor<2x16xf32>, %init: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#x, #o], iterator_types = ["parallel", "reduction", "parallel"]} ins(%x : tensor<2x16xf32>) outs(%init : tensor<2x4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %j = linalg.index 1 : index
    %t = linalg.index 2 : index
    %c4 = arith.constant 4 : index
    %bucket = arith.remui %j, %c4 : index
    %hit = arith.cmpi eq, %bucket, %t : index
    %e = math.exp %v : f32
    %term = arith.select %hit, %e, %zero : f32
    %sum = arith.addf %acc, %term : f32
    linalg.yield %sum : f32
  } -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// A rowsum over 16384 rows (a gradient's Delta = rowsum(dO * O)): each warp
// takes 4 consecutive rows (512 blocks of 8 warps), all four in
// straight-line code where the last is in range, so that their loads issue
// together; else each row behind its own test.
// CHECK-LABEL: func.func @grouped_rows
// CHECK: linalg.generic {{.*}}flashlight.block = 256 : i64, flashlight.grid = 512 : i64
// CHECK: gpu.func @host1(
// CHECK: %[[BASE:.+]] = arith.muli %{{.*}}, %c4 : index
// CHECK: %[[LAST:.+]] = arith.addi %[[BASE]], %c3
// CHECK: %[[WHOLE:.+]] = arith.cmpi ult, %[[LAST]], %c16384
// CHECK: scf.if %[[WHOLE]] {
// CHECK-NOT: scf.if %{{.*}} {
// CHECK-COUNT-20: gpu.shuffle  xor
// CHECK: } else {
// CHECK-COUNT-4: scf.if
// CHECK: gpu.return
func.func @grouped_rows(%a: tensor<16384x64xbf16>, %b: tensor<16384x64xbf16>) -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16384xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<16384xf32>) -> tensor<16384xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : tensor<16384x64xbf16>, tensor<16384x64xbf16>) outs(%init : tensor<16384xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<16384xf32>
  return %s : tensor<16384xf32>
}
