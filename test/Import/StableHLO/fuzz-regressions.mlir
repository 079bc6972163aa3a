// Inputs the fuzzer (scripts/fuzz.sh) found crashing, kept as tests.
// RUN: flashlight-opt %s --split-input-file --verify-diagnostics --flashlight-import-stablehlo

// Truncated text read past its end: the fuzz harness handed MLIR's lexer a
// buffer without the NUL that files have (the harness now copies its input
// into a string); the text itself is an ordinary parse error.
// Genesate/bf16>
    // expected-error @+1 {{custom op 'sax_f' is unknown}}
    %21 = sax_f

// -----

// A dimension named twice (rhs batching [2, 2]) wrote past the loop-size
// table of the contraction.
func.func @dot_dim_twice(%a: tensor<2x2x4xf32>, %b: tensor<2x16x4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{a dimension is named twice in dot_general's batching and contracting dimensions}}
  %0 = "stablehlo.dot_general"(%a, %b) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0, 1], rhs_batching_dimensions = [0, 0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>}> : (tensor<2x2x4xf32>, tensor<2x16x4xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// A reducer reading a value from outside its region built a yield of a
// null value.
func.func @reducer_reads_outside(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  // expected-error @+1 {{could not convert the reducer}}
  %0 = stablehlo.reduce(%x init: %init) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>)  {
    // expected-error @+1 {{the reducer may only use its arguments and its own results}}
    stablehlo.return %init : tensor<f32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A while loop whose body region has a block but no operation: its
// terminator was read past the block's end.
func.func @while_empty_body(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // expected-error @+1 {{'stablehlo.while' needs a cond and a body region, each one block ending in stablehlo.return}}
  %r:2 = stablehlo.while(%i = %c0, %a = %x) : tensor<i32>, tensor<2x8xf32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {    }
  return %r#1 : tensor<2x8xf32>
}

// -----

// A body that does not end in stablehlo.return.
func.func @while_no_return(%x: tensor<f32>) -> tensor<f32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // expected-error @+1 {{each one block ending in stablehlo.return}}
  %r:2 = stablehlo.while(%i = %c0, %a = %x) : tensor<i32>, tensor<f32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %d = stablehlo.add %a, %a : tensor<f32>
    }
  return %r#1 : tensor<f32>
}

// -----

// A body returning another type than the loop carries.
func.func @while_type_change(%x: tensor<f32>) -> tensor<f32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // expected-error @+1 {{'stablehlo.while' iteration values change type}}
  %r:2 = stablehlo.while(%i = %c0, %a = %x) : tensor<i32>, tensor<f32>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %f = stablehlo.convert %a : (tensor<f32>) -> tensor<f16>
      stablehlo.return %i, %f : tensor<i32>, tensor<f16>
    }
  return %r#1 : tensor<f32>
}
