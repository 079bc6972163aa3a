// RUN: flashlight-opt %s --split-input-file --pass-pipeline="builtin.module(gpu.module(flashlight-tensor-map-params))" --verify-diagnostics | FileCheck %s

// The kernel's last parameters, as many as flashlight.tensor_maps lists,
// become 128-byte grid constants passed by value; the others are untouched.
// CHECK-LABEL: llvm.func @kernel(
// CHECK-SAME: %arg0: !llvm.ptr, %arg1: i64,
// CHECK-SAME: %arg2: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %arg3: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant})
// CHECK-LABEL: llvm.func @plain(
// CHECK-SAME: %arg0: !llvm.ptr) attributes
module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.func @kernel(%a: !llvm.ptr, %n: i64, %k: !llvm.ptr, %v: !llvm.ptr)
        attributes {gpu.kernel, nvvm.kernel,
                    flashlight.tensor_maps = [{box = [64, 128], param = 0 : i64},
                                              {box = [64, 128], param = 1 : i64}]} {
      llvm.return
    }
    llvm.func @plain(%a: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    // expected-error @+1 {{flashlight-tensor-map-params: parameter 1 is a tensor map but not a pointer}}
    llvm.func @kernel(%a: !llvm.ptr, %n: i64)
        attributes {gpu.kernel, nvvm.kernel,
                    flashlight.tensor_maps = [{box = [64, 128], param = 0 : i64}]} {
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @kernels {
    // expected-error @+1 {{flashlight-tensor-map-params: 2 tensor maps but 1 parameters}}
    llvm.func @kernel(%a: !llvm.ptr)
        attributes {gpu.kernel, nvvm.kernel,
                    flashlight.tensor_maps = [{box = [64, 128], param = 0 : i64},
                                              {box = [64, 128], param = 0 : i64}]} {
      llvm.return
    }
  }
}
