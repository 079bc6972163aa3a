// jax.export with symbolic shapes ("b, n"), as JAX 0.10 prints it (cut to
// its first shape assertion).
#loc = loc(unknown)
module @jit_f attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<?x4x?x64xbf16> loc(unknown), %arg1: tensor<?x4x?x64xbf16> loc(unknown), %arg2: tensor<?x4x?x64xbf16> loc(unknown)) -> (tensor<?x4x?x64xbf16> {jax.result_info = "result"}) {
    %c = stablehlo.constant dense<1> : tensor<i32> loc(#loc)
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x4x?x64xbf16>) -> tensor<i32> loc(#loc)
    %6 = stablehlo.compare GE, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1> loc(#loc)
    stablehlo.custom_call @shape_assertion(%6, %0) {api_version = 2 : i32, error_message = "Expected value >= 1 for dimension variable 'b'.", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> () loc(#loc)
    return %arg0 : tensor<?x4x?x64xbf16> loc(#loc)
  } loc(#loc)
} loc(#loc)
