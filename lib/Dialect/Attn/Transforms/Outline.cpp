//===- Outline.cpp - One function per attention ---------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNOUTLINE
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Whether `func` is exactly `return attn.attention(arguments...)`.
bool isKernelShaped(func::FuncOp func, AttentionOp op) {
  Block &body = func.getBody().front();
  if (&body.front() != op.getOperation() || body.getOperations().size() != 2)
    return false;
  if (!llvm::all_of(op->getOperands(), [&](Value v) {
        return isa<BlockArgument>(v) &&
               cast<BlockArgument>(v).getOwner() == &body;
      }))
    return false;
  return ValueRange(body.getTerminator()->getOperands()) ==
         ValueRange(op->getResults());
}

struct AttnOutlinePass
    : flashlight::attn::impl::AttnOutlineBase<AttnOutlinePass> {
  using AttnOutlineBase::AttnOutlineBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      SmallVector<AttentionOp> ops;
      func.walk([&](AttentionOp op) { ops.push_back(op); });
      if (func->hasAttr("attn.kernel") ||
          (!all && ops.size() == 1 && isKernelShaped(func, ops.front())))
        continue;
      for (auto [k, op] : llvm::enumerate(ops)) {
        OpBuilder b(func);
        auto type =
            b.getFunctionType(op->getOperandTypes(), op->getResultTypes());
        auto kernel = func::FuncOp::create(
            b, op.getLoc(), (func.getName() + "_attention" + Twine(k)).str(),
            type);
        kernel->setAttr("attn.kernel", b.getUnitAttr());
        symbols.insert(kernel, Block::iterator(func));
        Block *body = kernel.addEntryBlock();
        b.setInsertionPointToStart(body);
        IRMapping map;
        map.map(op->getOperands(), body->getArguments());
        Operation *clone = b.clone(*op, map);
        func::ReturnOp::create(b, op.getLoc(), clone->getResults());
        b.setInsertionPoint(op);
        auto call =
            func::CallOp::create(b, op.getLoc(), kernel, op->getOperands());
        op->replaceAllUsesWith(call.getResults());
        op->erase();
      }
    }
  }
};

} // namespace
