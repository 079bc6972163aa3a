//===- Outline.cpp - One function per attention ---------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNOUTLINE
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Whether `func` is exactly `return attn.attention(arguments...)`, each
/// argument in one operand position (a kernel names and checks each
/// operand as its own parameter: q0, k0, v).
bool isKernelShaped(func::FuncOp func, AttentionOp op) {
  Block &body = func.getBody().front();
  if (&body.front() != op.getOperation() || body.getOperations().size() != 2)
    return false;
  llvm::SmallPtrSet<Value, 8> distinct(op->operand_begin(), op->operand_end());
  if (distinct.size() != op->getNumOperands())
    return false;
  if (!llvm::all_of(op->getOperands(), [&](Value v) {
        return isa<BlockArgument>(v) &&
               cast<BlockArgument>(v).getOwner() == &body;
      }))
    return false;
  return ValueRange(body.getTerminator()->getOperands()) ==
         ValueRange(op->getResults());
}

/// Whether `op` computes what the attention of `kernel` (outlined earlier)
/// computes, given the same operands: the same op, attributes, types and
/// regions. Such attentions share one kernel (a sub-batched loop unrolled
/// into copies of one attention).
bool sameKernel(AttentionOp op, func::FuncOp kernel) {
  auto outlined = cast<AttentionOp>(kernel.getBody().front().front());
  Block *args = &kernel.getBody().front();
  DenseMap<Value, Value> same;
  auto check = [&](Value l, Value r) -> LogicalResult {
    if (auto it = same.find(l); it != same.end())
      return success(it->second == r);
    // An operand of the attention itself: the kernel argument at its
    // position, of its type.
    auto arg = dyn_cast<BlockArgument>(r);
    return success(arg && arg.getOwner() == args &&
                   arg.getArgNumber() < op->getNumOperands() &&
                   op->getOperand(arg.getArgNumber()) == l &&
                   l.getType() == r.getType());
  };
  auto mark = [&](Value l, Value r) { same[l] = r; };
  return op->getNumOperands() == kernel.getNumArguments() &&
         op->getOperandTypes() == kernel.getArgumentTypes() &&
         OperationEquivalence::isEquivalentTo(
             op, outlined, check, mark,
             OperationEquivalence::Flags::IgnoreLocations);
}

/// `@<func>_attention<k>`: a kernel function holding a copy of `op` alone.
func::FuncOp outlineKernel(AttentionOp op, func::FuncOp func,
                           SymbolTable &symbols, unsigned k) {
  OpBuilder b(func);
  auto type = b.getFunctionType(op->getOperandTypes(), op->getResultTypes());
  auto kernel = func::FuncOp::create(
      b, op.getLoc(), (func.getName() + "_attention" + Twine(k)).str(), type);
  kernel->setAttr("attn.kernel", b.getUnitAttr());
  symbols.insert(kernel, Block::iterator(func));
  Block *body = kernel.addEntryBlock();
  b.setInsertionPointToStart(body);
  // Operand i is argument i, also where one value fills several operands
  // (self-attention on x as q, k and v): each is a parameter of its own.
  Operation *clone = b.clone(*op);
  for (auto [i, arg] : llvm::enumerate(body->getArguments()))
    clone->setOperand(i, arg);
  func::ReturnOp::create(b, op.getLoc(), clone->getResults());
  return kernel;
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
      SmallVector<func::FuncOp> outlined;
      for (AttentionOp op : ops) {
        auto *found = llvm::find_if(
            outlined, [&](func::FuncOp k) { return sameKernel(op, k); });
        func::FuncOp kernel =
            found != outlined.end()
                ? *found
                : outlineKernel(op, func, symbols, outlined.size());
        if (found == outlined.end())
          outlined.push_back(kernel);
        OpBuilder b(op);
        auto call =
            func::CallOp::create(b, op.getLoc(), kernel, op->getOperands());
        op->replaceAllUsesWith(call.getResults());
        op->erase();
      }
    }
  }
};

} // namespace
