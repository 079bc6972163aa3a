// RUN: flashlight-opt %s --flashlight-attn-to-gpu | FileCheck %s

// A score region with x ** 2 as torch-mlir writes it (an i64 exponent):
// the kernel calls powi with an i32 one, what libdevice's __nv_powif takes.
// CHECK-LABEL: gpu.func @squared_score
// CHECK-NOT: math.fpowi {{.*}} : f32, i64
// CHECK: math.fpowi %{{.*}}, %{{.*}} : f32, i32
// CHECK-NOT: math.fpowi {{.*}} : f32, i64
func.func @squared_score(%q: tensor<1x1x16x8xf16>, %k: tensor<1x1x16x8xf16>, %v: tensor<1x1x16x8xf16>) -> tensor<1x1x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x1x16x8xf16>) k(%k : tensor<1x1x16x8xf16>)
      v(%v : tensor<1x1x16x8xf16>) scale [1.0] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %two = arith.constant 2 : i64
        %r = math.fpowi %s, %two : f32, i64
        attn.yield %r : f32
      } -> tensor<1x1x16x8xf16>
  return %o : tensor<1x1x16x8xf16>
}
