// Runtime shapes: a program compiled with --runtime-shapes-from (the same
// program at other shapes) gets kernels whose batch and sequence lengths
// are read at run time: the dims in which the two differ become dynamic,
// named by the attention dims they stand for (B, M, N); a captured
// tensor's dims follow them. Where the two programs differ otherwise (a
// constant that follows the shape, a head count, an extent no attention
// has), the program is refused with the reason.
// RUN: rm -rf %t && split-file %s %t
// RUN: flashlight-compile %t/a.mlir --runtime-shapes-from=%t/b.mlir -o %t/out --emit=mlir
// RUN: python3 -c "import json, sys; m = json.load(open(sys.argv[1])); [print(p['name'], p['shape'], p['extents']) for p in m['params']]" %t/out/a.json | FileCheck %s --check-prefix=MANIFEST
// RUN: FileCheck %s --check-prefix=KERNEL < %t/out/a.mlir
// RUN: python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(m['max_extent']); [print(c, a['block_m'], a['block_n'], a['aligned']['kernel'], a['aligned']['block_m'], a['aligned']['block_n']) for c, a in sorted(m['archs'].items())]" %t/out/a.json | FileCheck %s --check-prefix=ALIGNED
// RUN: not flashlight-compile %t/a.mlir --runtime-shapes-from=%t/window.mlir -o %t/w --emit=mlir 2>&1 | FileCheck %s --check-prefix=WINDOW
// RUN: not flashlight-compile %t/a.mlir --runtime-shapes-from=%t/heads.mlir -o %t/h --emit=mlir 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not flashlight-compile %t/table.mlir --runtime-shapes-from=%t/table-b.mlir -o %t/t --emit=mlir 2>&1 | FileCheck %s --check-prefix=TABLE
// RUN: not flashlight-compile %t/a.mlir --runtime-shapes-from=%t/missing.mlir -o %t/m --emit=mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// A captured tensor whose contents follow the length (a 1/N bias, exported
// by flashlight.export at N = 256 and 512): the same file name, other bytes.
// RUN: not flashlight-compile %S/Inputs/captured-256/program.json --runtime-shapes-from=%S/Inputs/captured-512/program.json -o %t/c --emit=mlir 2>&1 | FileCheck %s --check-prefix=CAPTURED
// CAPTURED: error: the captured tensor 'program.c_lifted_tensor_0.bin' differs between the two shapes (its contents or its shape follow the shape): one kernel cannot serve both

// MANIFEST: q0 [-1, 4, -1, 64] ['B', '', 'M', '']
// MANIFEST-NEXT: k0 [-1, 4, -1, 64] ['B', '', 'N', '']
// MANIFEST-NEXT: v [-1, 4, -1, 64] ['B', '', 'N', '']
// MANIFEST-NEXT: capture0 [-1, -1] ['B', 'N']
// MANIFEST-NEXT: out [-1, 4, -1, 64] ['B', '', 'M', '']

// Lengths that whole tiles divide take a second kernel, planned with
// aligned_lengths (no bounds tests).
// ALIGNED: 1073741823
// ALIGNED-NEXT: sm_80 [[BM:[0-9]+]] [[BN:[0-9]+]] window_aligned [[BM]] [[BN]]
// ALIGNED-NEXT: sm_90a [[BM:[0-9]+]] [[BN:[0-9]+]] window_aligned [[BM]] [[BN]]
// KERNEL: gpu.func @window(%{{.*}}: memref<?x4x?x64xbf16, strided<[?, ?, ?, 1]>>, {{.*}}, %{{.*}}: memref<?x?xi32, strided<[?, 1]>>, %{{.*}}: memref<?x4x?x64xbf16, strided<[?, ?, ?, 1]>>, %{{.*}}: memref<?x?x?x?xi8>)
// KERNEL: gpu.func @window_aligned({{.*}}aligned_lengths = true

// WINDOW: a.mlir:13:17: error: this program depends on its shapes beyond tensor extents, so one kernel cannot serve both shapes: the attributes of 'arith.constant' differ (a constant that follows the shape?)
// HEADS: a.mlir:5:{{[0-9]+}}: error: its head count differs at the other shapes (4 vs 8): runtime shapes take the batch and the sequence lengths only
// TABLE: table.mlir:{{[0-9]+}}:{{[0-9]+}}: error: a tensor's dim 0 is 512 here and 768 at the other shapes, as no attention's batch or sequence length is: runtime shapes take those only
// MISSING: cannot open {{.*}}missing.mlir

//--- a.mlir
// A sliding window of 256 keys within each sequence's segment (ids).
func.func @window(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x160x64xbf16>,
                  %v: tensor<2x4x160x64xbf16>, %ids: tensor<2x160xi32>)
    -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x160x64xbf16>)
                      v(%v : tensor<2x4x160x64xbf16>)
                      captures(%ids : tensor<2x160xi32>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index,
              %t: tensor<2x160xi32>):
           %c = arith.constant 256 : index
           %d = arith.subi %i, %j : index
           %near = arith.cmpi slt, %d, %c : index
           %si = tensor.extract %t[%b, %i] : tensor<2x160xi32>
           %sj = tensor.extract %t[%b, %j] : tensor<2x160xi32>
           %same = arith.cmpi eq, %si, %sj : i32
           %keep = arith.andi %near, %same : i1
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}

//--- b.mlir
func.func @window(%q: tensor<3x4x200x64xbf16>, %k: tensor<3x4x96x64xbf16>,
                  %v: tensor<3x4x96x64xbf16>, %ids: tensor<3x96xi32>)
    -> tensor<3x4x200x64xbf16> {
  %o = attn.attention q(%q : tensor<3x4x200x64xbf16>)
                      k(%k : tensor<3x4x96x64xbf16>)
                      v(%v : tensor<3x4x96x64xbf16>)
                      captures(%ids : tensor<3x96xi32>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index,
              %t: tensor<3x96xi32>):
           %c = arith.constant 256 : index
           %d = arith.subi %i, %j : index
           %near = arith.cmpi slt, %d, %c : index
           %si = tensor.extract %t[%b, %i] : tensor<3x96xi32>
           %sj = tensor.extract %t[%b, %j] : tensor<3x96xi32>
           %same = arith.cmpi eq, %si, %sj : i32
           %keep = arith.andi %near, %same : i1
           attn.yield %keep : i1
         } -> tensor<3x4x200x64xbf16>
  return %o : tensor<3x4x200x64xbf16>
}

//--- window.mlir
// The window follows the key length: not one kernel.
func.func @window(%q: tensor<3x4x200x64xbf16>, %k: tensor<3x4x96x64xbf16>,
                  %v: tensor<3x4x96x64xbf16>, %ids: tensor<3x96xi32>)
    -> tensor<3x4x200x64xbf16> {
  %o = attn.attention q(%q : tensor<3x4x200x64xbf16>)
                      k(%k : tensor<3x4x96x64xbf16>)
                      v(%v : tensor<3x4x96x64xbf16>)
                      captures(%ids : tensor<3x96xi32>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index,
              %t: tensor<3x96xi32>):
           %c = arith.constant 96 : index
           %d = arith.subi %i, %j : index
           %near = arith.cmpi slt, %d, %c : index
           %si = tensor.extract %t[%b, %i] : tensor<3x96xi32>
           %sj = tensor.extract %t[%b, %j] : tensor<3x96xi32>
           %same = arith.cmpi eq, %si, %sj : i32
           %keep = arith.andi %near, %same : i1
           attn.yield %keep : i1
         } -> tensor<3x4x200x64xbf16>
  return %o : tensor<3x4x200x64xbf16>
}

//--- heads.mlir
func.func @window(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x8x160x64xbf16>,
                  %v: tensor<2x8x160x64xbf16>, %ids: tensor<2x160xi32>)
    -> tensor<2x8x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x8x128x64xbf16>)
                      k(%k : tensor<2x8x160x64xbf16>)
                      v(%v : tensor<2x8x160x64xbf16>)
                      captures(%ids : tensor<2x160xi32>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index,
              %t: tensor<2x160xi32>):
           %c = arith.constant 256 : index
           %d = arith.subi %i, %j : index
           %near = arith.cmpi slt, %d, %c : index
           %si = tensor.extract %t[%b, %i] : tensor<2x160xi32>
           %sj = tensor.extract %t[%b, %j] : tensor<2x160xi32>
           %same = arith.cmpi eq, %si, %sj : i32
           %keep = arith.andi %near, %same : i1
           attn.yield %keep : i1
         } -> tensor<2x8x128x64xbf16>
  return %o : tensor<2x8x128x64xbf16>
}

//--- table.mlir
// A relative-position table of 2 N entries: an extent no attention has.
func.func @table(%q: tensor<1x4x256x64xbf16>, %k: tensor<1x4x256x64xbf16>,
                 %v: tensor<1x4x256x64xbf16>, %bias: tensor<512xf32>)
    -> tensor<1x4x256x64xbf16> {
  %o = attn.attention q(%q : tensor<1x4x256x64xbf16>)
                      k(%k : tensor<1x4x256x64xbf16>)
                      v(%v : tensor<1x4x256x64xbf16>)
                      captures(%bias : tensor<512xf32>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %t: tensor<512xf32>):
           %x = tensor.extract %t[%i] : tensor<512xf32>
           %y = arith.addf %s, %x : f32
           attn.yield %y : f32
         } -> tensor<1x4x256x64xbf16>
  return %o : tensor<1x4x256x64xbf16>
}

//--- table-b.mlir
func.func @table(%q: tensor<1x4x384x64xbf16>, %k: tensor<1x4x384x64xbf16>,
                 %v: tensor<1x4x384x64xbf16>, %bias: tensor<768xf32>)
    -> tensor<1x4x384x64xbf16> {
  %o = attn.attention q(%q : tensor<1x4x384x64xbf16>)
                      k(%k : tensor<1x4x384x64xbf16>)
                      v(%v : tensor<1x4x384x64xbf16>)
                      captures(%bias : tensor<768xf32>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %t: tensor<768xf32>):
           %x = tensor.extract %t[%i] : tensor<768xf32>
           %y = arith.addf %s, %x : f32
           attn.yield %y : f32
         } -> tensor<1x4x384x64xbf16>
  return %o : tensor<1x4x384x64xbf16>
}
