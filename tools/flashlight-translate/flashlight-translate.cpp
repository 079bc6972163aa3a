//===- flashlight-translate.cpp - Framework graphs to MLIR ----------------===//
//
//   flashlight-translate --import-flashlight-graph model.json
//
// Prints the linalg-on-tensors program an importer builds from a file that
// is not MLIR text (the JSON graph of flashlight.export).
//
//===----------------------------------------------------------------------===//

#include "flashlight/Import/JSON/JSONGraph.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

int main(int argc, char **argv) {
  TranslateToMLIRRegistration json(
      "import-flashlight-graph",
      "flashlight-graph JSON (flashlight.export) to linalg on tensors",
      [](llvm::SourceMgr &sources,
         MLIRContext *ctx) -> OwningOpRef<Operation *> {
        const llvm::MemoryBuffer *buffer =
            sources.getMemoryBuffer(sources.getMainFileID());
        OwningOpRef<ModuleOp> module = flashlight::importJSONGraph(
            buffer->getBuffer(), buffer->getBufferIdentifier(), ctx);
        return OwningOpRef<Operation *>(module.release());
      },
      [](DialectRegistry &registry) {
        registry.insert<arith::ArithDialect, func::FuncDialect,
                        linalg::LinalgDialect, math::MathDialect,
                        tensor::TensorDialect>();
      });
  return failed(mlirTranslateMain(argc, argv, "Flashlight translator\n"));
}
