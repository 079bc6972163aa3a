// RUN: flashlight-opt %s --split-input-file --verify-diagnostics --flashlight-import-torch

func.func @unsupported_aten(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  // expected-error @+1 {{ATen op 'aten.lgamma.default' is not supported by the PyTorch importers}}
  %0 = torch.aten.lgamma %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

func.func @not_an_aten_call(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  // expected-error @+1 {{'torch.prim.TupleConstruct' is not an ATen call; the importer does not support it}}
  %0 = torch.prim.TupleConstruct %x, %x : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32> -> !torch.tuple<vtensor<[4],f32>, vtensor<[4],f32>>
  return %x : !torch.vtensor<[4],f32>
}

// -----

// expected-error @+1 {{dynamic dimensions are not supported (export at static shapes)}}
func.func @dynamic(%x: !torch.vtensor<[?,4],f32>) {
  return
}

// -----

// expected-error @+1 {{!torch.tensor (a tensor with mutable storage) is not supported; export value semantics (!torch.vtensor)}}
func.func @non_value_tensor(%x: !torch.tensor<[4],f32>) {
  return
}

// -----

// expected-error @+1 {{unranked !torch.vtensor is not supported (the importer needs static shapes)}}
func.func @unranked(%x: !torch.vtensor<*,f32>) {
  return
}

// -----

func.func @scalar_result(%x: !torch.vtensor<[4],f32>) -> !torch.int {
  %int0 = torch.constant.int 0
  // expected-error @+1 {{'aten.size.int' returns '!torch.int'; only calls returning tensors are supported}}
  %0 = torch.aten.size.int %x, %int0 : !torch.vtensor<[4],f32>, !torch.int -> !torch.int
  return %0 : !torch.int
}

// -----

// expected-error @+1 {{argument #1 is '!torch.int'; only tensor arguments are supported}}
func.func @scalar_argument(%x: !torch.vtensor<[4],f32>, %n: !torch.int) -> !torch.vtensor<[4],f32> {
  return %x : !torch.vtensor<[4],f32>
}

// -----

func.func @used_indices(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,1],si64> {
  %int1 = torch.constant.int 1
  %true = torch.constant.bool true
  // expected-error @+1 {{result #1 of 'torch.aten.max.dim' is used, and the importer does not compute it}}
  %values, %indices = torch.aten.max.dim %x, %int1, %true : !torch.vtensor<[4,8],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4,1],f32>, !torch.vtensor<[4,1],si64>
  return %indices : !torch.vtensor<[4,1],si64>
}

// -----

func.func @dropout(%q: !torch.vtensor<[1,1,4,8],f32>) -> !torch.vtensor<[1,1,4,8],f32> {
  %none = torch.constant.none
  %p = torch.constant.float 1.000000e-01
  %false = torch.constant.bool false
  // expected-error @+1 {{dropout_p must be 0 (inference)}}
  %0 = torch.aten.scaled_dot_product_attention %q, %q, %q, %none, %p, %false, %none, %false : !torch.vtensor<[1,1,4,8],f32>, !torch.vtensor<[1,1,4,8],f32>, !torch.vtensor<[1,1,4,8],f32>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[1,1,4,8],f32>
  return %0 : !torch.vtensor<[1,1,4,8],f32>
}

// -----

func.func @wrong_declared_type(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  // expected-error @+1 {{'aten.transpose.int' computes a different type than the declared output}}
  %0 = torch.aten.transpose.int %x, %int0, %int1 : !torch.vtensor<[2,3],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

func.func @argument_not_constant(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[3,2],f32> {
  %int0 = torch.constant.int 0
  %d = arith.constant 1 : i64
  // expected-error @+1 {{an argument is defined by 'arith.constant', which the importer cannot read}}
  %0 = torch.aten.transpose.int %x, %d, %int0 : !torch.vtensor<[2,3],f32>, i64, !torch.int -> !torch.vtensor<[3,2],f32>
  return %0 : !torch.vtensor<[3,2],f32>
}

// -----

func.func @bad_constant() {
  // expected-error @+1 {{expected true or false}}
  %0 = torch.constant.bool maybe
  return
}
