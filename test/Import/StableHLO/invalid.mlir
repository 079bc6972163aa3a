// RUN: flashlight-opt %s --split-input-file --verify-diagnostics --flashlight-import-stablehlo

func.func @unsupported_op(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'stablehlo.popcnt' is not supported by the StableHLO importer}}
  %0 = stablehlo.popcnt %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @dynamic_shape(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{only statically shaped tensors of integers or floats are supported, got 'tensor<?xf32>'}}
  %0 = stablehlo.add %x, %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @broadcast_dim_out_of_range(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{broadcast dimension 2 is out of range}}
  %0 = stablehlo.broadcast_in_dim %x, dims = [2] : (tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @broadcast_size_mismatch(%x: tensor<3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{operand dim 0 (size 3) cannot broadcast to result dim 1 (size 4)}}
  %0 = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<3xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @dot_size_mismatch(%a: tensor<2x8x4xf32>, %b: tensor<2x16x5xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{batching or contracting dimension sizes differ}}
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x8x4xf32>, tensor<2x16x5xf32>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// -----

func.func @dot_dim_out_of_range(%a: tensor<8x4xf32>, %b: tensor<16x4xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{dot_general dimension out of range}}
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [2] x [1] : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

func.func @slice_out_of_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{slice bounds out of range in dim 0}}
  %0 = stablehlo.slice %x [1:5] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @bad_permutation(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{permutation is not a permutation}}
  %0 = stablehlo.transpose %x, dims = [1, 1] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @unknown_item(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{unexpected 'sizes' in stablehlo.broadcast_in_dim}}
  %0 = stablehlo.broadcast_in_dim %x, sizes = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @unknown_attribute(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{unsupported stablehlo attribute 'rounding'}}
  %0 = "stablehlo.compare"(%a, %a) <{comparison_direction = #stablehlo<rounding EVEN>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func @unknown_direction(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{unknown comparison direction 'ABOUT'}}
  %0 = stablehlo.compare ABOUT, %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

func.func private @elsewhere(tensor<4xf32>) -> tensor<4xf32>
func.func @external_call(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{cannot inline a call to 'elsewhere' (no single-block body here)}}
  %0 = call @elsewhere(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reducer_not_scalar(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  // expected-error @+1 {{could not convert the reducer}}
  %0 = stablehlo.reduce(%x init: %init) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>)  {
    // expected-error @+1 {{reducer ops must be scalar (rank-0) ops}}
    %t = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<2xf32>
    stablehlo.return %a : tensor<f32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @missing_types(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected ': type' or ': (types) -> types'}}
  %0 = stablehlo.add %x, %y : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @wrong_arity(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stablehlo.reshape' with 2 operands and 1 results is not supported}}
  %0 = "stablehlo.reshape"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @concat_mismatch(%x: tensor<2x3xf32>, %y: tensor<3x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{concatenate operands do not match the result}}
  %0 = stablehlo.concatenate %x, %y, dim = 1 : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @pad_interior(%x: tensor<4xf32>, %c: tensor<f32>) -> tensor<7xf32> {
  // expected-error @+1 {{interior padding is not supported}}
  %0 = stablehlo.pad %x, %c, low = [0], high = [0], interior = [1] : (tensor<4xf32>, tensor<f32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @reduce_window_base_dilation(%x: tensor<4xf32>, %c: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{reduce_window with base dilations is not supported}}
  %0 = "stablehlo.reduce_window"(%x, %c) <{base_dilations = array<i64: 2>, window_dimensions = array<i64: 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_window_shape(%x: tensor<4xf32>, %c: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{reduce_window result dim 0 should be 3}}
  %0 = "stablehlo.reduce_window"(%x, %c) <{window_dimensions = array<i64: 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @chlo_unsupported(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'chlo.lgamma' is not supported by the StableHLO importer}}
  %0 = chlo.lgamma %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @while_data_dependent(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{the loop condition is not a compile-time constant}}
  %r = stablehlo.while(%a = %x) : tensor<f32>
    cond {
      %z = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %p = stablehlo.compare LT, %a, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %d = stablehlo.add %a, %a : tensor<f32>
      stablehlo.return %d : tensor<f32>
    }
  return %r : tensor<f32>
}

// -----

func.func @while_too_long(%x: tensor<f32>) -> tensor<f32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // expected-error @+1 {{'stablehlo.while' runs more than 1024 trips; not unrolled}}
  %r:2 = stablehlo.while(%i = %c0, %a = %x) : tensor<i32>, tensor<f32>
    cond {
      %n = stablehlo.constant dense<100000> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %next, %a : tensor<i32>, tensor<f32>
    }
  return %r#1 : tensor<f32>
}

// -----

func.func @dynamic_slice_data_index(%x: tensor<4xf32>, %i: tensor<i32>) -> tensor<2xf32> {
  // expected-error @+1 {{start index 0 is not a compile-time constant}}
  %0 = stablehlo.dynamic_slice %x, %i, sizes = [2] : (tensor<4xf32>, tensor<i32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @custom_call(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'stablehlo.custom_call' is not supported by the StableHLO importer}}
  %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
