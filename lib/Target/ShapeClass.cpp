//===- ShapeClass.cpp - Kernels that take runtime extents -----------------===//
//
// The program and its probe are walked in lockstep: the same ops, operands,
// attributes and regions, in the same order. Types may differ only in
// their extents; the pairs of extents (here, in the probe) that differ are
// named after the attention dims they stand for, and every tensor dim
// carrying such a pair becomes dynamic.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Target/ShapeClass.h"

#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <map>

using namespace mlir;
using namespace flashlight;

namespace {

using ExtentPair = std::pair<int64_t, int64_t>;

/// `a` with `?` where its extents differ from `b`'s (same rank and element
/// type); `a` itself when the types are equal; null when they differ
/// otherwise.
Type generalize(Type a, Type b) {
  if (a == b)
    return a;
  auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
  if (!ta || !tb || ta.getRank() != tb.getRank() ||
      ta.getElementType() != tb.getElementType())
    return nullptr;
  SmallVector<int64_t> shape(ta.getShape());
  for (auto [i, d] : llvm::enumerate(tb.getShape()))
    if (shape[i] != d)
      shape[i] = ShapedType::kDynamic;
  return RankedTensorType::get(shape, ta.getElementType(), ta.getEncoding());
}

/// The lockstep walk and what it learns: each program value's probe value.
class Lockstep {
public:
  DenseMap<Value, Value> probeOf;

  LogicalResult matchFunction(func::FuncOp a, func::FuncOp b) {
    return matchOp(*a, *b);
  }

private:
  static InFlightDiagnostic differs(Operation *op) {
    return op->emitError()
           << "this program depends on its shapes beyond tensor extents, "
              "so one kernel cannot serve both shapes: ";
  }

  LogicalResult matchValues(Operation *where, ValueRange a, ValueRange b) {
    if (a.size() != b.size())
      return differs(where)
             << "'" << where->getName() << "' has a different number of values";
    for (auto [x, y] : llvm::zip(a, b)) {
      if (!generalize(x.getType(), y.getType()))
        return differs(where)
               << "a value of type " << x.getType() << " has type "
               << y.getType() << " at the other shapes";
      probeOf[x] = y;
    }
    return success();
  }

  /// The op's attributes, without those that spell its types (a function's
  /// signature is compared through its arguments and return).
  static DictionaryAttr comparedAttributes(Operation &op) {
    if (!isa<func::FuncOp>(op))
      return op.getAttrDictionary();
    NamedAttrList kept;
    for (NamedAttribute attr : op.getAttrs())
      if (attr.getName() != "function_type")
        kept.push_back(attr);
    return kept.getDictionary(op.getContext());
  }

  LogicalResult matchOp(Operation &a, Operation &b) {
    if (a.getName() != b.getName())
      return differs(&a) << "'" << a.getName() << "' is '" << b.getName()
                         << "' at the other shapes";
    if (a.getNumOperands() != b.getNumOperands())
      return differs(&a) << "'" << a.getName()
                         << "' has a different number of operands";
    for (auto [x, y] : llvm::zip(a.getOperands(), b.getOperands()))
      if (probeOf.lookup(x) != y)
        return differs(&a) << "'" << a.getName() << "' reads different values";
    if (comparedAttributes(a) != comparedAttributes(b))
      return differs(&a) << "the attributes of '" << a.getName()
                         << "' differ (a constant that follows the shape?)";
    if (failed(matchValues(&a, a.getResults(), b.getResults())))
      return failure();
    if (a.getNumRegions() != b.getNumRegions())
      return differs(&a) << "'" << a.getName()
                         << "' has a different number of regions";
    for (auto [ra, rb] : llvm::zip(a.getRegions(), b.getRegions())) {
      if (ra.getBlocks().size() != rb.getBlocks().size())
        return differs(&a) << "a region of '" << a.getName()
                           << "' has a different number of blocks";
      for (auto [ba, bb] : llvm::zip(ra, rb)) {
        if (failed(matchValues(&a, ba.getArguments(), bb.getArguments())))
          return failure();
        if (ba.getOperations().size() != bb.getOperations().size())
          return differs(&a) << "a block of '" << a.getName()
                             << "' holds a different number of ops";
        for (auto [oa, ob] : llvm::zip(ba, bb))
          if (failed(matchOp(oa, ob)))
            return failure();
      }
    }
    return success();
  }
};

/// The attention of a kernel function, if it is one.
attn::AttentionOp findAttention(func::FuncOp func) {
  attn::AttentionOp found;
  func.walk([&](attn::AttentionOp op) { found = op; });
  return found;
}

/// The values of an attention whose dims 1 and 3 (heads, head dim) stay
/// static, and the names of its dims 0 and 2 (the batch and its rows:
/// queries or keys); an LSE's dims 0 and 2 are the batch and the queries.
struct Role {
  Value value;
  bool keys;
};
SmallVector<Role> attentionRoles(attn::AttentionOp op) {
  SmallVector<Role> roles;
  for (Value q : op.getQueries())
    roles.push_back({q, false});
  for (Value k : op.getKeys())
    roles.push_back({k, true});
  roles.push_back({op.getValue(), true});
  roles.push_back({op.getOutput(), false});
  for (Value lse : op.getLse())
    roles.push_back({lse, false});
  return roles;
}

/// Names extent pairs (or single extents, as pairs (d, d)) after the
/// attention dims they stand for.
class ExtentNames {
public:
  /// The name of `extent`, or "" if it has none.
  std::string lookup(ExtentPair extent) const {
    auto it = names.find(extent);
    return it == names.end() ? "" : it->second;
  }

  /// Names `extent` `base` (then `base1`, `base2`, ... for the extents of
  /// later attentions), unless it has a name.
  void name(ExtentPair extent, StringRef base) {
    if (names.count(extent))
      return;
    unsigned &uses = counts[base.str()];
    names[extent] = base.str() + (uses ? std::to_string(uses) : "");
    ++uses;
  }

private:
  std::map<ExtentPair, std::string> names;
  std::map<std::string, unsigned> counts;
};

/// The dims in which `a` and `b` (ranked tensors) differ, as extent pairs.
SmallVector<std::pair<unsigned, ExtentPair>> differingDims(Type a, Type b) {
  SmallVector<std::pair<unsigned, ExtentPair>> dims;
  auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
  if (!ta || !tb)
    return dims;
  for (unsigned d = 0; d < ta.getRank(); ++d)
    if (ta.getDimSize(d) != tb.getDimSize(d))
      dims.push_back({d, {ta.getDimSize(d), tb.getDimSize(d)}});
  return dims;
}

/// The `flashlight.extents` attribute for `a` generalized against `b`.
ArrayAttr extentsAttr(MLIRContext *ctx, Type a, Type b,
                      const ExtentNames &names) {
  auto ta = dyn_cast<RankedTensorType>(a);
  if (!ta)
    return ArrayAttr::get(ctx, {});
  SmallVector<Attribute> symbols(ta.getRank(), StringAttr::get(ctx, ""));
  for (auto [d, extent] : differingDims(a, b))
    symbols[d] = StringAttr::get(ctx, names.lookup(extent));
  return ArrayAttr::get(ctx, symbols);
}

/// Retypes `func`'s signature: each argument and returned value generalized
/// against its probe value, with its extent symbols recorded. (The body's
/// own values keep their types: the caller retypes kernels only.)
void retypeSignature(func::FuncOp func, const DenseMap<Value, Value> &probeOf,
                     const ExtentNames &names) {
  MLIRContext *ctx = func.getContext();
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Type> args, results;
  for (BlockArgument arg : body.getArguments()) {
    Value probe = probeOf.lookup(arg);
    args.push_back(generalize(arg.getType(), probe.getType()));
    func.setArgAttr(arg.getArgNumber(), kExtentsAttrName,
                    extentsAttr(ctx, arg.getType(), probe.getType(), names));
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Value probe = probeOf.lookup(v);
    results.push_back(generalize(v.getType(), probe.getType()));
    func.setResultAttr(i, kExtentsAttrName,
                       extentsAttr(ctx, v.getType(), probe.getType(), names));
  }
  func.setFunctionType(FunctionType::get(ctx, args, results));
}

/// The captured constants of a JSON graph (function arguments naming a file
/// beside the program, `flashlight.constant`) must be the same tensor at
/// both shapes: the same type and the same bytes. A constant that follows
/// the shape cannot be a runtime input.
LogicalResult sameConstants(func::FuncOp f, StringRef dir, func::FuncOp g,
                            StringRef probeDir) {
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto file = f.getArgAttrOfType<StringAttr>(i, "flashlight.constant");
    if (!file)
      continue;
    auto probeFile = g.getArgAttrOfType<StringAttr>(i, "flashlight.constant");
    auto bytes = [](StringRef folder, StringRef name) {
      SmallString<256> path(folder);
      llvm::sys::path::append(path, name);
      return llvm::MemoryBuffer::getFile(path);
    };
    auto here = bytes(dir, file.getValue());
    auto there = probeFile
                     ? bytes(probeDir, probeFile.getValue())
                     : llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>>(
                           std::make_error_code(std::errc::invalid_argument));
    if (f.getArgumentTypes()[i] != g.getArgumentTypes()[i] || !here || !there ||
        (*here)->getBuffer() != (*there)->getBuffer())
      return f.emitError()
             << "the captured tensor '" << file.getValue()
             << "' differs between the two shapes (its contents or its shape "
                "follow the shape): one kernel cannot serve both";
  }
  return success();
}

} // namespace

LogicalResult flashlight::generalizeShapes(ModuleOp program, ModuleOp probe,
                                           StringRef programDir,
                                           StringRef probeDir) {
  SmallVector<func::FuncOp> funcs(program.getOps<func::FuncOp>());
  SmallVector<func::FuncOp> probeFuncs(probe.getOps<func::FuncOp>());
  if (funcs.size() != probeFuncs.size())
    return program.emitError()
           << "the program has " << funcs.size() << " functions here and "
           << probeFuncs.size()
           << " at the other shapes: its structure depends on its shapes";
  Lockstep lockstep;
  for (auto [f, g] : llvm::zip(funcs, probeFuncs))
    if (failed(lockstep.matchFunction(f, g)) ||
        failed(sameConstants(f, programDir, g, probeDir)))
      return failure();

  // Name the batch and the sequence lengths after the attentions' dims.
  ExtentNames names;
  for (func::FuncOp func : funcs)
    if (attn::AttentionOp op = findAttention(func))
      for (Role role : attentionRoles(op))
        for (auto [d, extent] :
             differingDims(role.value.getType(),
                           lockstep.probeOf.lookup(role.value).getType())) {
          if (d == 1 || d == 3)
            return op.emitError()
                   << "its " << (d == 1 ? "head count" : "head dim")
                   << " differs at the other shapes (" << extent.first << " vs "
                   << extent.second
                   << "): runtime shapes take the batch and the sequence "
                      "lengths only";
          names.name(extent, d == 0 ? "B" : role.keys ? "N" : "M");
        }
  // Every other extent that differs must be one of those.
  for (auto [value, probeValue] : lockstep.probeOf)
    for (auto [d, extent] :
         differingDims(value.getType(), probeValue.getType()))
      if (names.lookup(extent).empty()) {
        Operation *where = value.getDefiningOp();
        if (!where)
          where = cast<BlockArgument>(value).getOwner()->getParentOp();
        return where->emitError()
               << "a tensor's dim " << d << " is " << extent.first
               << " here and " << extent.second
               << " at the other shapes, as no attention's batch or "
                  "sequence length is: runtime shapes take those only";
      }

  for (func::FuncOp func : funcs) {
    // The host is only described (the manifest's entry): its signature.
    retypeSignature(func, lockstep.probeOf, names);
    if (!findAttention(func))
      continue;
    // Kernels are lowered: every value takes its generalized type.
    func.walk([&](Operation *op) {
      for (Value v : op->getResults())
        v.setType(
            generalize(v.getType(), lockstep.probeOf.lookup(v).getType()));
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(generalize(arg.getType(),
                                   lockstep.probeOf.lookup(arg).getType()));
    });
    if (failed(verify(func)))
      return failure();
  }
  return success();
}

LogicalResult flashlight::nameDynamicExtents(func::FuncOp func) {
  attn::AttentionOp op = findAttention(func);
  MLIRContext *ctx = func.getContext();
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Each dynamic dim's symbol, from the attention role of the value.
  auto symbolsOf = [&](Value v, ArrayAttr given) -> FailureOr<ArrayAttr> {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || type.hasStaticShape())
      return given ? given : ArrayAttr();
    std::optional<bool> keys;
    if (op)
      for (Role role : attentionRoles(op))
        if (role.value == v)
          keys = role.keys;
    SmallVector<Attribute> symbols;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      StringRef symbol;
      if (given && d < int64_t(given.size()))
        if (auto s = dyn_cast<StringAttr>(given[d]))
          symbol = s.getValue();
      if (type.isDynamicDim(d) && symbol.empty()) {
        if (!keys || d == 1 || d == 3)
          return func.emitError()
                 << "a tensor of type " << type << " has a dynamic dim " << d
                 << " that is not an attention's batch or sequence length; "
                 << "name it with {" << kExtentsAttrName
                 << " = [...]} (symbols such as \"B\", \"M\", \"N\")";
        symbol = d == 0 ? "B" : *keys ? "N" : "M";
      }
      symbols.push_back(
          StringAttr::get(ctx, type.isDynamicDim(d) ? symbol : ""));
    }
    return ArrayAttr::get(ctx, symbols);
  };
  for (BlockArgument arg : body.getArguments()) {
    FailureOr<ArrayAttr> symbols =
        symbolsOf(arg, func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(),
                                                        kExtentsAttrName));
    if (failed(symbols))
      return failure();
    if (*symbols)
      func.setArgAttr(arg.getArgNumber(), kExtentsAttrName, *symbols);
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    FailureOr<ArrayAttr> symbols =
        symbolsOf(v, func.getResultAttrOfType<ArrayAttr>(i, kExtentsAttrName));
    if (failed(symbols))
      return failure();
    if (*symbols)
      func.setResultAttr(i, kExtentsAttrName, *symbols);
  }
  return success();
}

std::vector<std::string> flashlight::extentSymbols(func::FuncOp func,
                                                   unsigned index) {
  unsigned numArgs = func.getNumArguments();
  ArrayAttr attr =
      index < numArgs
          ? func.getArgAttrOfType<ArrayAttr>(index, kExtentsAttrName)
          : func.getResultAttrOfType<ArrayAttr>(index - numArgs,
                                                kExtentsAttrName);
  Type type = index < numArgs ? func.getArgumentTypes()[index]
                              : func.getResultTypes()[index - numArgs];
  auto shaped = dyn_cast<ShapedType>(type);
  std::vector<std::string> symbols(shaped && shaped.hasRank() ? shaped.getRank()
                                                              : 0);
  if (attr)
    for (auto [d, s] : llvm::enumerate(attr))
      if (auto str = dyn_cast<StringAttr>(s); str && d < symbols.size())
        symbols[d] = str.str();
  return symbols;
}
