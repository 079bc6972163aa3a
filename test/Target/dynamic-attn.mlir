// Attn IR may say `?` for the batch and the sequence lengths: Q, K, V and
// the output are named by their roles (B, M, N); a captured tensor's
// dynamic dims need their symbols (flashlight.extents).
// RUN: rm -rf %t
// RUN: split-file %s %t
// RUN: not flashlight-compile %t/unnamed.mlir -o %t/out --emit=mlir 2>&1 | FileCheck %s --check-prefix=UNNAMED
// RUN: flashlight-compile %t/named.mlir -o %t/named-out --emit=mlir
// Only the batch at run time (lengths static, 100): no aligned variant.
// RUN: flashlight-compile %t/batch.mlir -o %t/batch-out --emit=mlir
// RUN: python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(m['params'][0]['extents'], sorted('aligned' in a for a in m['archs'].values()))" %t/batch-out/batch.json | FileCheck %s --check-prefix=BATCH
// BATCH: ['B', '', '', ''] [False, False]
// RUN: python3 -c "import json, sys; m = json.load(open(sys.argv[1])); [print(p['name'], p['extents']) for p in m['params']]" %t/named-out/named.json | FileCheck %s --check-prefix=NAMED
// UNNAMED: unnamed.mlir:1:1: error: a tensor of type 'tensor<?xf32>' has a dynamic dim 0 that is not an attention's batch or sequence length; name it with {flashlight.extents = [...]} (symbols such as "B", "M", "N")
// NAMED: q0 ['B', '', 'M', '']
// NAMED-NEXT: k0 ['', '', 'N', '']
// NAMED-NEXT: v ['', '', 'N', '']
// NAMED-NEXT: capture0 ['N']
// NAMED-NEXT: out ['B', '', 'M', '']

//--- unnamed.mlir
func.func @unnamed(%q: tensor<?x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>,
                   %v: tensor<1x4x?x64xbf16>, %bias: tensor<?xf32>)
    -> tensor<?x4x?x64xbf16> {
  %o = attn.attention q(%q : tensor<?x4x?x64xbf16>)
                      k(%k : tensor<1x4x?x64xbf16>)
                      v(%v : tensor<1x4x?x64xbf16>)
                      captures(%bias : tensor<?xf32>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %t: tensor<?xf32>):
           %x = tensor.extract %t[%j] : tensor<?xf32>
           %y = arith.addf %s, %x : f32
           attn.yield %y : f32
         } -> tensor<?x4x?x64xbf16>
  return %o : tensor<?x4x?x64xbf16>
}

//--- named.mlir
// A key bias per position, shared by the batch (K and V have batch 1).
func.func @named(%q: tensor<?x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>,
                 %v: tensor<1x4x?x64xbf16>,
                 %bias: tensor<?xf32> {flashlight.extents = ["N"]})
    -> tensor<?x4x?x64xbf16> {
  %o = attn.attention q(%q : tensor<?x4x?x64xbf16>)
                      k(%k : tensor<1x4x?x64xbf16>)
                      v(%v : tensor<1x4x?x64xbf16>)
                      captures(%bias : tensor<?xf32>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %t: tensor<?xf32>):
           %x = tensor.extract %t[%j] : tensor<?xf32>
           %y = arith.addf %s, %x : f32
           attn.yield %y : f32
         } -> tensor<?x4x?x64xbf16>
  return %o : tensor<?x4x?x64xbf16>
}

//--- batch.mlir
func.func @batch(%q: tensor<?x4x100x64xbf16>, %k: tensor<?x4x100x64xbf16>,
                 %v: tensor<?x4x100x64xbf16>) -> tensor<?x4x100x64xbf16> {
  %o = attn.attention q(%q : tensor<?x4x100x64xbf16>)
                      k(%k : tensor<?x4x100x64xbf16>)
                      v(%v : tensor<?x4x100x64xbf16>)
         scale [0.125] normalizer softmax -> tensor<?x4x100x64xbf16>
  return %o : tensor<?x4x100x64xbf16>
}
