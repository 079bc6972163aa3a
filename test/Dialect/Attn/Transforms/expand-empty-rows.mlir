// RUN: flashlight-opt %s --split-input-file --attn-expand-empty-rows | FileCheck %s

// A mask read from data can empty a row: the attention returns its LSE and
// the row takes the mean of V over all keys where the LSE is -inf.
// CHECK-LABEL: func.func @data_mask_selects_the_mean
// CHECK: %[[O:.+]]:2 = attn.attention
// CHECK-NOT: mean_empty_rows
// CHECK: } -> tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>
// mean[b, h, d] = sum_j V[b, h, j, d] (then / N)
// CHECK: %[[SUM:.+]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]{{.*}} ins(%{{.+}} : tensor<1x2x16x8xbf16>) outs(%{{.+}} : tensor<1x2x8xf32>)
// out = lse == -inf ? mean / N : o
// CHECK: linalg.generic {{.*}} ins(%[[O]]#0, %[[O]]#1, %[[SUM]] : tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x8xf32>)
// CHECK: %[[EMPTY:.+]] = arith.cmpf oeq, %{{.+}}, %cst
// CHECK: %[[MEAN:.+]] = arith.divf %{{.+}}, %cst
// CHECK: %[[NARROW:.+]] = arith.truncf %[[MEAN]] : f32 to bf16
// CHECK: arith.select %[[EMPTY]], %[[NARROW]], %{{.+}} : bf16
func.func @data_mask_selects_the_mean(%q: tensor<1x2x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>, %keep: tensor<1x16xi1>) -> tensor<1x2x16x8xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xbf16>) k(%k : tensor<1x2x16x8xbf16>) v(%v : tensor<1x2x16x8xbf16>) captures(%keep : tensor<1x16xi1>) scale [0.35] normalizer softmax mask {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<1x16xi1>):
    %x = tensor.extract %m[%b, %j] : tensor<1x16xi1>
    attn.yield %x : i1
  } {mean_empty_rows} -> tensor<1x2x16x8xbf16>
  return %o : tensor<1x2x16x8xbf16>
}

// -----

// A causal mask keeps the diagonal in every row: nothing to do.
// CHECK-LABEL: func.func @causal_rows_never_empty
// CHECK: %[[O:.+]] = attn.attention
// CHECK-NOT: mean_empty_rows
// CHECK: } -> tensor<1x2x16x8xbf16>
// CHECK-NEXT: return %[[O]]
func.func @causal_rows_never_empty(%q: tensor<1x2x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>) -> tensor<1x2x16x8xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xbf16>) k(%k : tensor<1x2x16x8xbf16>) v(%v : tensor<1x2x16x8xbf16>) scale [0.35] normalizer softmax mask {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %keep = arith.cmpi sle, %j, %i : index
    attn.yield %keep : i1
  } {mean_empty_rows} -> tensor<1x2x16x8xbf16>
  return %o : tensor<1x2x16x8xbf16>
}

// -----

// A band that does not hold the diagonal can empty a row.
// CHECK-LABEL: func.func @band_off_the_diagonal
// CHECK: attn.attention
// CHECK: } -> tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>
func.func @band_off_the_diagonal(%q: tensor<1x2x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>) -> tensor<1x2x16x8xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xbf16>) k(%k : tensor<1x2x16x8xbf16>) v(%v : tensor<1x2x16x8xbf16>) scale [0.35] normalizer softmax mask {
  ^bb0(%b: index, %h: index, %i: index, %j: index):
    %c4 = arith.constant 4 : index
    %i4 = arith.addi %j, %c4 : index
    %keep = arith.cmpi sle, %i4, %i : index
    attn.yield %keep : i1
  } {mean_empty_rows} -> tensor<1x2x16x8xbf16>
  return %o : tensor<1x2x16x8xbf16>
}

// -----

// With an epilogue (a query-length mask zeroing padded queries), an empty
// row is the epilogue applied to the mean, not the mean itself.
// CHECK-LABEL: func.func @epilogue_applies_to_the_mean
// CHECK: %[[O:.+]]:2 = attn.attention
// CHECK: linalg.generic
// CHECK: linalg.generic {{.*}} ins(%[[O]]#0, %[[O]]#1
// CHECK: %[[MEAN:.+]] = arith.divf
// CHECK: %[[I:.+]] = linalg.index 2 : index
// CHECK: %[[VALID:.+]] = arith.cmpi slt, %[[I]]
// CHECK: %[[GATED:.+]] = arith.select %[[VALID]], %[[MEAN]]
// CHECK: arith.truncf %[[GATED]]
func.func @epilogue_applies_to_the_mean(%q: tensor<1x2x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>, %keep: tensor<1x16xi1>) -> tensor<1x2x16x8xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xbf16>) k(%k : tensor<1x2x16x8xbf16>) v(%v : tensor<1x2x16x8xbf16>) captures(%keep : tensor<1x16xi1>) scale [0.35] normalizer softmax mask {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<1x16xi1>):
    %x = tensor.extract %m[%b, %j] : tensor<1x16xi1>
    attn.yield %x : i1
  } epilogue {
  ^bb0(%o0: f32, %b: index, %h: index, %i: index, %d: index, %m: tensor<1x16xi1>):
    %c12 = arith.constant 12 : index
    %valid = arith.cmpi slt, %i, %c12 : index
    %zero = arith.constant 0.0 : f32
    %r = arith.select %valid, %o0, %zero : f32
    attn.yield %r : f32
  } {mean_empty_rows} -> tensor<1x2x16x8xbf16>
  return %o : tensor<1x2x16x8xbf16>
}
