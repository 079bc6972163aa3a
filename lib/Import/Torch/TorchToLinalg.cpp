//===- TorchToLinalg.cpp - torch-mlir programs to linalg on tensors -------===//
//
// torch-mlir spells a PyTorch program as ATen calls whose scalar and list
// arguments are SSA values of constant operations. This pass reads those
// arguments back into the flashlight-graph encoding and hands each call to
// ATenLowering, the JSON importer's handlers: both PyTorch paths share one
// lowering per operator.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Import/ATen.h"
#include "flashlight/Import/Passes.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace flashlight {
#define GEN_PASS_DEF_IMPORTTORCH
#include "flashlight/Import/Passes.h.inc"
} // namespace flashlight

using namespace mlir;
using json = nlohmann::json;

namespace {

/// The ATen overload a torch operation calls, `aten.<op>.<overload>`
/// (`default` when unnamed), or empty for an operation that is not an ATen
/// call (`torch.prim.*`, `torch.constant.*`, ...).
std::string targetOf(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (name == "torch.operator") {
    auto attr = op->getAttrOfType<StringAttr>("name");
    name = attr ? attr.getValue() : StringRef();
  } else if (!name.consume_front("torch.")) {
    return "";
  }
  if (!name.starts_with("aten."))
    return "";
  return name.count('.') == 1 ? (name + ".default").str() : name.str();
}

bool isConstant(Operation *op) {
  return op->getName().getStringRef().starts_with("torch.constant.") ||
         op->getName().getStringRef() == "torch.prim.ListConstruct";
}

/// One function: its ATen calls lowered in order.
class FunctionImporter {
public:
  explicit FunctionImporter(func::FuncOp func)
      : func(func), aten(func.getContext()) {}

  LogicalResult run();

private:
  /// The flashlight-graph encoding of `v` as an argument of `user`.
  FailureOr<json> encode(Value v, Operation *user);
  /// Names the lowered `values` of `op`'s results and replaces the results.
  LogicalResult define(Operation *op, ArrayRef<Value> values);
  LogicalResult literal(Operation *op);
  LogicalResult call(Operation *op, StringRef target);

  func::FuncOp func;
  flashlight::ATenLowering aten;
  /// The reference of each tensor value already lowered.
  llvm::DenseMap<Value, json> refs;
  unsigned next = 0;
};

FailureOr<json> FunctionImporter::encode(Value v, Operation *user) {
  auto it = refs.find(v);
  if (it != refs.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  if (!def || !isConstant(def))
    return user->emitError("an argument is ")
           << (def ? "defined by '" + def->getName().getStringRef() + "'"
                   : Twine("not a tensor of the function"))
           << ", which the importer cannot read";
  StringRef kind = def->getName().getStringRef();
  if (kind == "torch.prim.ListConstruct") {
    json list = json::array();
    for (Value e : def->getOperands()) {
      FailureOr<json> x = encode(e, user);
      if (failed(x))
        return failure();
      list.push_back(*x);
    }
    return list;
  }
  kind.consume_front("torch.constant.");
  Attribute value = def->getAttr("value");
  if (kind == "none")
    return json(nullptr);
  if (auto i = dyn_cast_or_null<IntegerAttr>(value)) {
    if (kind == "bool")
      return json(i.getValue().getBoolValue());
    return json(i.getValue().getSExtValue());
  }
  if (auto f = dyn_cast_or_null<FloatAttr>(value)) {
    double d = f.getValueAsDouble();
    if (std::isnan(d))
      return json({{"float", "nan"}});
    if (std::isinf(d))
      return json({{"float", d > 0 ? "inf" : "-inf"}});
    return json(d);
  }
  if (auto s = dyn_cast_or_null<StringAttr>(value))
    return json({{kind == "device" ? "device" : "str", s.getValue().str()}});
  return def->emitError("malformed torch constant");
}

LogicalResult FunctionImporter::define(Operation *op, ArrayRef<Value> values) {
  std::string name = "%" + std::to_string(next++);
  if (failed(aten.define(name, values, op->getLoc())))
    return failure();
  for (auto [i, v] : llvm::enumerate(values)) {
    Value result = op->getResult(i);
    if (!v) {
      // A result the lowering does not compute (max.dim's indices).
      if (!result.use_empty())
        return op->emitError("result #")
               << i << " of '" << op->getName()
               << "' is used, and the importer does not compute it";
      continue;
    }
    refs[v] = json({{"ref", name}, {"index", i}});
    result.replaceAllUsesWith(v);
  }
  return success();
}

LogicalResult FunctionImporter::literal(Operation *op) {
  auto attr = dyn_cast_or_null<ElementsAttr>(op->getAttr("value"));
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!attr || !type)
    return op->emitError("expected a tensor literal of a !torch.vtensor");
  auto attrType = cast<ShapedType>(attr.getType());
  if (attrType.getShape() != type.getShape())
    return op->emitError("the literal's shape differs from its type's");
  // Signed integer data (si64) is stored as the signless type's.
  TypedAttr data;
  if (attrType.getElementType() == type.getElementType())
    data = cast<TypedAttr>(attr);
  else if (auto dense = dyn_cast<DenseElementsAttr>(attr);
           dense && attrType.getElementType().getIntOrFloatBitWidth() ==
                        type.getElementType().getIntOrFloatBitWidth())
    data = dense.bitcast(type.getElementType());
  else if (auto res = dyn_cast<DenseResourceElementsAttr>(attr))
    data = DenseResourceElementsAttr::get(type, res.getRawHandle());
  if (!data)
    return op->emitError("unsupported literal element type ")
           << attrType.getElementType();
  OpBuilder b(op);
  Value c = arith::ConstantOp::create(b, op->getLoc(), type, data);
  return define(op, c);
}

LogicalResult FunctionImporter::call(Operation *op, StringRef target) {
  if (op->getNumRegions())
    return op->emitError("'") << target << "' with regions is not supported";
  SmallVector<RankedTensorType> outs;
  for (Type t : op->getResultTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor)
      return op->emitError("'")
             << target << "' returns " << t
             << "; only calls returning tensors are supported";
    outs.push_back(tensor);
  }
  json args = json::array();
  for (Value operand : op->getOperands()) {
    FailureOr<json> a = encode(operand, op);
    if (failed(a))
      return failure();
    args.push_back(*a);
  }
  json node = {{"args", args}};
  aten.builder().setInsertionPoint(op);
  FailureOr<SmallVector<Value, 1>> results =
      aten.lower(target, node, outs, op->getLoc());
  if (failed(results))
    return failure();
  return define(op, *results);
}

LogicalResult FunctionImporter::run() {
  if (func.isExternal())
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitError("functions with control flow are not supported");
  for (BlockArgument arg : func.getArguments()) {
    if (!isa<RankedTensorType>(arg.getType()))
      return func.emitError("argument #")
             << arg.getArgNumber() << " is " << arg.getType()
             << "; only tensor arguments are supported";
    std::string name = "%arg" + std::to_string(arg.getArgNumber());
    if (failed(aten.define(name, arg, func.getLoc())))
      return failure();
    refs[arg] = json({{"ref", name}});
  }
  SmallVector<Operation *> torchOps;
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
    if (op.getName().getDialectNamespace() != "torch")
      continue;
    torchOps.push_back(&op);
    if (isConstant(&op))
      continue;
    StringRef name = op.getName().getStringRef();
    if (name == "torch.vtensor.literal") {
      if (failed(literal(&op)))
        return failure();
      continue;
    }
    std::string target = targetOf(&op);
    if (target.empty())
      return op.emitError("'")
             << name << "' is not an ATen call; the importer does not "
             << "support it";
    if (failed(call(&op, target)))
      return failure();
  }
  // Constants are read; everything torch is now dead, unless a non-tensor
  // value escapes (a returned !torch.int).
  for (Operation *op : llvm::reverse(torchOps)) {
    if (!op->use_empty())
      return op->emitError("a non-tensor value escapes the program: only "
                           "tensors can be returned");
    op->erase();
  }
  return success();
}

struct ImportTorch : flashlight::impl::ImportTorchBase<ImportTorch> {
  void runOnOperation() override {
    for (auto func :
         llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>()))
      if (failed(FunctionImporter(func).run()))
        return signalPassFailure();
  }
};

} // namespace
