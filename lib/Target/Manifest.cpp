//===- Manifest.cpp - Describe compiled kernels as JSON -------------------===//

#include "flashlight/Target/Manifest.h"
#include "flashlight/Target/ShapeClass.h"

#include "flashlight/Conversion/HostToGPU.h"

#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace flashlight;
using json = nlohmann::json;

namespace {

/// "f16", "bf16", "f32", "i32", ...
std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Row-major strides of `shape` (dynamic dims give dynamic strides: -1).
json stridesOf(ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  bool dynamic = false;
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i) {
    dynamic |= ShapedType::isDynamic(shape[i + 1]);
    strides[i] = dynamic ? -1 : strides[i + 1] * shape[i + 1];
  }
  return strides;
}

json shapeOf(ArrayRef<int64_t> shape) {
  std::vector<int64_t> out;
  for (int64_t d : shape)
    out.push_back(ShapedType::isDynamic(d) ? -1 : d);
  return out;
}

/// The single attn.attention of `func`, if any.
attn::AttentionOp findAttention(func::FuncOp func) {
  attn::AttentionOp found;
  func.walk([&](attn::AttentionOp op) { found = op; });
  return found;
}

/// The ops the reference interpreter implements (runtime/Reference.cpp).
const llvm::StringSet<> &interpretedOps() {
  static const llvm::StringSet<> ops = {
      "arith.constant",   "arith.addf",         "arith.subf",
      "arith.mulf",       "arith.divf",         "arith.negf",
      "arith.remf",       "arith.maximumf",     "arith.minimumf",
      "arith.maxnumf",    "arith.minnumf",      "arith.addi",
      "arith.subi",       "arith.muli",         "arith.divsi",
      "arith.divui",      "arith.floordivsi",   "arith.ceildivsi",
      "arith.remsi",      "arith.remui",        "arith.maxsi",
      "arith.minsi",      "arith.maxui",        "arith.minui",
      "arith.andi",       "arith.ori",          "arith.xori",
      "arith.cmpi",       "arith.cmpf",         "arith.select",
      "arith.index_cast", "arith.index_castui", "arith.sitofp",
      "arith.uitofp",     "arith.fptosi",       "arith.fptoui",
      "arith.extf",       "arith.truncf",       "arith.extsi",
      "arith.extui",      "arith.trunci",       "math.exp",
      "math.exp2",        "math.expm1",         "math.log",
      "math.log2",        "math.log1p",         "math.tanh",
      "math.sqrt",        "math.rsqrt",         "math.absf",
      "math.absi",        "math.powf",          "math.sin",
      "math.cos",         "math.erf",           "math.floor",
      "math.ceil",        "math.roundeven",     "math.round",
      "math.fma",         "math.trunc",         "math.copysign",
      "arith.shli",       "arith.shrsi",        "arith.shrui",
      "tensor.extract"};
  return ops;
}

/// Serializes one region: value ids are block arguments first, then op
/// results in order.
FailureOr<json> exportRegion(Region &region) {
  if (region.empty())
    return json(nullptr);
  Block &block = region.front();
  DenseMap<Value, int64_t> ids;
  for (BlockArgument arg : block.getArguments())
    ids[arg] = ids.size();
  json ops = json::array();
  for (Operation &op : block.without_terminator()) {
    StringRef name = op.getName().getStringRef();
    if (!interpretedOps().contains(name) || op.getNumResults() != 1 ||
        op.getNumRegions() != 0)
      return op.emitError()
             << "the reference interpreter does not support '" << name << "'";
    json entry = {{"op", name.str()},
                  {"type", typeName(op.getResult(0).getType())}};
    json operands = json::array(), operandTypes = json::array();
    for (Value v : op.getOperands()) {
      operands.push_back(ids.lookup(v));
      operandTypes.push_back(typeName(v.getType()));
    }
    entry["operands"] = operands;
    entry["operand_types"] = operandTypes;
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      if (auto f = dyn_cast<FloatAttr>(c.getValue()))
        entry["value"] = f.getValueAsDouble();
      else if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
        entry["value"] = i.getType().isInteger(1)
                             ? double(i.getValue().getBoolValue())
                             : double(i.getInt());
      else
        return op.emitError("the reference interpreter supports scalar "
                            "constants only");
    }
    if (auto cmp = dyn_cast<arith::CmpIOp>(op))
      entry["predicate"] =
          arith::stringifyCmpIPredicate(cmp.getPredicate()).str();
    if (auto cmp = dyn_cast<arith::CmpFOp>(op))
      entry["predicate"] =
          arith::stringifyCmpFPredicate(cmp.getPredicate()).str();
    ids[op.getResult(0)] = ids.size();
    ops.push_back(entry);
  }
  json yields = json::array();
  for (Value v : block.getTerminator()->getOperands())
    yields.push_back(ids.lookup(v));
  return json{
      {"num_args", block.getNumArguments()}, {"ops", ops}, {"yield", yields}};
}

/// Position of `v` among the function's arguments, or -1.
int64_t argIndex(func::FuncOp func, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &func.getBody().front())
    return -1;
  return arg.getArgNumber();
}

} // namespace

json flashlight::describeParams(func::FuncOp func) {
  unsigned numArgs = func.getNumArguments();
  std::vector<std::string> roles(numArgs + func.getNumResults());
  for (unsigned i = 0; i < roles.size(); ++i)
    roles[i] = i < numArgs ? "arg" + std::to_string(i)
                           : "result" + std::to_string(i - numArgs);
  llvm::DenseSet<unsigned> zeroed;
  if (attn::AttentionOp op = findAttention(func)) {
    auto name = [&](ValueRange values, StringRef prefix, bool numbered) {
      for (auto [i, v] : llvm::enumerate(values))
        if (int64_t a = argIndex(func, v); a >= 0)
          roles[a] = prefix.str() + (numbered ? std::to_string(i) : "");
    };
    name(op.getQueries(), "q", true);
    name(op.getKeys(), "k", true);
    name(op.getValue(), "v", false);
    name(op.getSinks(), "sink", true);
    name(op.getCaptures(), "capture", true);
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (v == op.getOutput())
        roles[numArgs + i] = "out";
      for (auto [r, lse] : llvm::enumerate(op.getLse()))
        if (v == lse)
          roles[numArgs + i] = "lse" + std::to_string(r);
      if (v && v == op.getKeySide())
        roles[numArgs + i] = "key_side";
      for (auto [e, term] : llvm::enumerate(op.getTerms()))
        if (v == term) {
          roles[numArgs + i] = "term" + std::to_string(e);
          // A term the kernel stores at every element (it keeps every dim
          // and no mask skips a tile) needs no zeroing.
          auto dims = cast<DenseI64ArrayAttr>(op.getTermDimsAttr()[e]);
          if (dims.size() != 4 || !op.getMask().empty())
            zeroed.insert(numArgs + i);
        }
    }
  }
  json params = json::array();
  SmallVector<Type> types(func.getArgumentTypes());
  llvm::append_range(types, func.getResultTypes());
  for (auto [i, type] : llvm::enumerate(types)) {
    auto tensor = cast<RankedTensorType>(type);
    params.push_back({{"name", roles[i]},
                      {"index", i},
                      {"direction", i < numArgs ? "in" : "out"},
                      {"dtype", typeName(tensor.getElementType())},
                      {"shape", shapeOf(tensor.getShape())},
                      {"strides", stridesOf(tensor.getShape())}});
    if (!tensor.hasStaticShape())
      params.back()["extents"] = extentSymbols(func, i);
    // Every block adds to the key-side product and the terms (or skips
    // elements a mask empties): the launcher zeroes them.
    if (roles[i] == "key_side" || zeroed.contains(i))
      params.back()["zero"] = true;
  }
  return params;
}

FailureOr<json> flashlight::exportProgram(func::FuncOp func) {
  attn::AttentionOp op = findAttention(func);
  if (!op)
    return func.emitError("no attn.attention to export");
  auto indices = [&](ValueRange values) -> FailureOr<json> {
    json out = json::array();
    for (Value v : values) {
      int64_t a = argIndex(func, v);
      if (a < 0)
        return op.emitError("the reference interpreter needs every attention "
                            "operand to be a function argument");
      out.push_back(a);
    }
    return out;
  };
  FailureOr<json> queries = indices(op.getQueries()),
                  keys = indices(op.getKeys()), value = indices(op.getValue()),
                  sinks = indices(op.getSinks()),
                  captures = indices(op.getCaptures());
  FailureOr<json> score = exportRegion(op.getScore()),
                  mask = exportRegion(op.getMask()),
                  epilogue = exportRegion(op.getEpilogue());
  if (failed(queries) || failed(keys) || failed(value) || failed(sinks) ||
      failed(captures) || failed(score) || failed(mask) || failed(epilogue))
    return failure();
  json program{{"branches", op.getNumBranches()},
               {"normalizer", attn::stringifyNormalizer(op.getNormalizer())},
               {"scale", std::vector<double>(op.getScale())},
               {"queries", *queries},
               {"keys", *keys},
               {"value", (*value)[0]},
               {"sinks", *sinks},
               {"captures", *captures},
               {"num_lse", op.getLse().size()},
               {"score", *score},
               {"mask", *mask},
               {"epilogue", *epilogue}};
  if (std::optional<ArrayRef<int64_t>> columns = op.getValueColumns())
    program["value_columns"] = std::vector<int64_t>(*columns);
  if (std::optional<uint64_t> branch = op.getKeySideBranch())
    program["key_side_branch"] = *branch;
  if (ArrayAttr termDims = op.getTermDimsAttr()) {
    json terms = json::array();
    for (Attribute dims : termDims)
      terms.push_back(
          std::vector<int64_t>(cast<DenseI64ArrayAttr>(dims).asArrayRef()));
    program["term_dims"] = terms;
  }
  return program;
}

namespace {
/// Whether `op` only copies its single input through its indexing map.
bool isLayoutCopy(linalg::GenericOp op) {
  return op.getNumDpsInputs() == 1 && op.getNumDpsInits() == 1 &&
         op.getNumReductionLoops() == 0 &&
         op.getBody()->getOperations().size() == 1 &&
         op.getBody()->getTerminator()->getOperand(0) ==
             op.getBody()->getArgument(0);
}

/// `map`'s results as [{"dim": k} | {"const": c}], or failure.
FailureOr<json> layoutIndex(AffineMap map) {
  json index = json::array();
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      index.push_back({{"dim", d.getPosition()}});
    else if (auto c = dyn_cast<AffineConstantExpr>(e))
      index.push_back({{"const", c.getValue()}});
    else
      return failure();
  }
  return index;
}

json identityIndex(int64_t rank) {
  json index = json::array();
  for (int64_t d = 0; d < rank; ++d)
    index.push_back({{"dim", d}});
  return index;
}

json tensorInfo(Type type) {
  auto t = cast<RankedTensorType>(type);
  return {{"dtype", typeName(t.getElementType())},
          {"shape", shapeOf(t.getShape())}};
}

/// The dtype and shape of `func`'s argument (or, past the arguments,
/// result) `index`; with runtime shapes, the symbols of its extents.
json tensorInfo(func::FuncOp func, unsigned index) {
  unsigned numArgs = func.getNumArguments();
  auto t = cast<RankedTensorType>(index < numArgs
                                      ? func.getArgumentTypes()[index]
                                      : func.getResultTypes()[index - numArgs]);
  json info = tensorInfo(t);
  if (!t.hasStaticShape())
    info["extents"] = extentSymbols(func, index);
  return info;
}

/// A kernel step's `copy` (HostToGPU's flashlight.copy): its kind and
/// parameters, and its sources as value ids (`args`: the step's).
json copyStep(DictionaryAttr copy, const json &args) {
  json step = {{"kind", cast<StringAttr>(copy.get("kind")).str()}};
  for (NamedAttribute field : copy) {
    StringRef name = field.getName().strref();
    if (auto list = dyn_cast<DenseI64ArrayAttr>(field.getValue())) {
      json values = json::array();
      for (int64_t v : list.asArrayRef())
        values.push_back(name == "sources" ? args.at(v) : json(v));
      step[name.str()] = values;
    } else if (auto number = dyn_cast<IntegerAttr>(field.getValue())) {
      step[name.str()] = number.getInt();
    }
  }
  return step;
}

/// What the host function's marks say about its results: the inputs a
/// gradient program's results are the gradients of (attn-gradient), the
/// result that is the attention's log-sum-exp (attn-return-lse).
void markEntry(func::FuncOp host, json &entry) {
  if (auto of = host->getAttrOfType<DenseI64ArrayAttr>("attn.gradient_of"))
    entry["gradient_of"] = of.asArrayRef().vec();
  if (auto lse = host->getAttrOfType<IntegerAttr>("attn.lse_result"))
    entry["lse_result"] = lse.getInt();
}
} // namespace

FailureOr<json> flashlight::describeEntry(
    func::FuncOp host, func::CallOp call,
    function_ref<FailureOr<std::string>(ElementsAttr)> writeConstant) {
  json inputs = json::array(), outputs = json::array();
  for (unsigned i = 0; i < host.getNumArguments(); ++i) {
    inputs.push_back(tensorInfo(host, i));
    // A captured constant (JSON graphs): the runtime reads it from a file
    // beside the manifest instead of taking it from the caller.
    if (auto file = host.getArgAttrOfType<StringAttr>(i, "flashlight.constant"))
      inputs.back()["file"] = file.str();
  }
  for (unsigned i = 0; i < host.getNumResults(); ++i)
    outputs.push_back(tensorInfo(host, host.getNumArguments() + i));
  // Kernel argument k = host input `input`, read through a layout copy:
  // input dim p is indexed by kernel dim index[p].
  json sources = json::array();
  for (Value v : call.getOperands()) {
    int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
    json source;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      source = {{"input", arg.getArgNumber()}, {"index", identityIndex(rank)}};
    } else if (auto copy = v.getDefiningOp<linalg::GenericOp>();
               copy && isLayoutCopy(copy) &&
               isa<BlockArgument>(copy.getDpsInputs()[0])) {
      FailureOr<json> index = layoutIndex(copy.getIndexingMapsArray()[0]);
      if (failed(index))
        return call.emitError("a kernel input is a layout copy with a "
                              "non-trivial index map");
      source = {
          {"input", cast<BlockArgument>(copy.getDpsInputs()[0]).getArgNumber()},
          {"index", *index}};
    } else if (auto constant = v.getDefiningOp<arith::ConstantOp>()) {
      // A tensor constant of the program (torch-mlir inlines captured
      // tensors): its bytes go to a file beside the manifest.
      FailureOr<std::string> file =
          writeConstant(cast<ElementsAttr>(constant.getValue()));
      if (failed(file))
        return call.emitError("cannot store a constant kernel input");
      source = {{"constant", *file}};
    } else {
      return call.emitError("a kernel input is computed by the host program "
                            "(only layout copies of its inputs are "
                            "supported)");
    }
    sources.push_back(source);
  }
  // Host result r = kernel result `result` through a layout copy: kernel
  // dim k is read at host dim index[k] (or a constant).
  json results = json::array();
  auto ret = cast<func::ReturnOp>(host.getBody().front().getTerminator());
  for (Value v : ret.getOperands()) {
    json result;
    if (auto r = dyn_cast<OpResult>(v); r && r.getOwner() == call) {
      int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
      result = {{"result", r.getResultNumber()},
                {"index", identityIndex(rank)}};
    } else if (auto copy = v.getDefiningOp<linalg::GenericOp>();
               copy && isLayoutCopy(copy) &&
               copy.getDpsInputs()[0].getDefiningOp() == call) {
      FailureOr<json> index = layoutIndex(copy.getIndexingMapsArray()[0]);
      if (failed(index))
        return call.emitError("a result is a layout copy with a non-trivial "
                              "index map");
      result = {
          {"result", cast<OpResult>(copy.getDpsInputs()[0]).getResultNumber()},
          {"index", *index}};
    } else {
      return host.emitError("a result is computed after the attention by the "
                            "host program (only layout copies are "
                            "supported)");
    }
    results.push_back(result);
  }
  json entry = {{"inputs", inputs},
                {"outputs", outputs},
                {"sources", sources},
                {"results", results}};
  markEntry(host, entry);
  return entry;
}

FailureOr<std::vector<char>> flashlight::constantBytes(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  Type elt = type.getElementType();
  if (!elt.isIntOrFloat())
    return failure();
  // One byte per i1 element, little-endian row-major otherwise, as the
  // runtimes read tensors.
  size_t width = elt.isInteger(1) ? 1 : (elt.getIntOrFloatBitWidth() + 7) / 8;
  std::vector<char> bytes;
  bytes.reserve(size_t(type.getNumElements()) * width);
  auto push = [&](const APInt &bits) {
    for (size_t k = 0; k < width; ++k)
      bytes.push_back(char(bits.extractBitsAsZExtValue(
          std::min<unsigned>(8,
                             bits.getBitWidth() -
                                 std::min<unsigned>(bits.getBitWidth(), 8 * k)),
          std::min<unsigned>(bits.getBitWidth(), 8 * k))));
  };
  // A resource blob (torch-mlir's captured tensors) holds these bytes.
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob ||
        blob->getData().size() != size_t(type.getNumElements()) * width)
      return failure();
    ArrayRef<char> data = blob->getData();
    return std::vector<char>(data.begin(), data.end());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return failure();
  if (isa<FloatType>(elt)) {
    for (APFloat v : dense.getValues<APFloat>())
      push(v.bitcastToAPInt());
  } else {
    for (APInt v : dense.getValues<APInt>())
      push(elt.isInteger(1) ? APInt(8, v.getBoolValue()) : v);
  }
  return bytes;
}

FailureOr<json> flashlight::describeHostSteps(
    func::FuncOp host, ArrayRef<std::string> attentions,
    function_ref<FailureOr<std::string>(ElementsAttr)> writeConstant) {
  json inputs = json::array(), outputs = json::array(), values = json::array();
  llvm::DenseMap<Value, int64_t> ids;
  auto define = [&](Value v) {
    ids[v] = values.size();
    values.push_back(tensorInfo(v.getType()));
    return ids[v];
  };
  for (auto [i, arg] : llvm::enumerate(host.getArguments())) {
    inputs.push_back(tensorInfo(arg.getType()));
    if (auto file = host.getArgAttrOfType<StringAttr>(i, "flashlight.constant"))
      inputs.back()["file"] = file.str();
    define(arg);
  }
  for (unsigned i = 0; i < host.getNumResults(); ++i)
    outputs.push_back(tensorInfo(host, host.getNumArguments() + i));
  auto idsOf = [&](Operation *op, ValueRange range) -> FailureOr<json> {
    json list = json::array();
    for (Value v : range) {
      auto it = ids.find(v);
      if (it == ids.end())
        return op->emitError("the reference path cannot pass this value");
      list.push_back(it->second);
    }
    return list;
  };
  json steps = json::array(), results;
  for (Operation &op : host.getBody().front()) {
    json step;
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      auto kernel = generic->getAttrOfType<StringAttr>("flashlight.kernel");
      if (!kernel)
        return op.emitError("a generic without a kernel (run "
                            "flashlight-host-to-gpu first)");
      json created = json::array();
      for (Value r : generic.getResults())
        created.push_back(define(r));
      FailureOr<json> args = idsOf(&op, hostKernelParams(generic));
      if (failed(args))
        return failure();
      step = {
          {"op", "kernel"},
          {"kernel", kernel.str()},
          {"grid",
           generic->getAttrOfType<IntegerAttr>("flashlight.grid").getInt()},
          {"block",
           generic->getAttrOfType<IntegerAttr>("flashlight.block").getInt()},
          {"args", *args},
          {"results", created}};
      if (auto einsum = generic->getAttrOfType<StringAttr>("flashlight.einsum"))
        step["einsum"] = einsum.str();
      if (auto fill = generic->getAttrOfType<FloatAttr>("flashlight.fill"))
        step["fill"] = fill.getValueAsDouble();
      if (auto copy = generic->getAttrOfType<DictionaryAttr>("flashlight.copy"))
        step["copy"] = copyStep(copy, *args);
    } else if (auto call = dyn_cast<func::CallOp>(op)) {
      FailureOr<json> args = idsOf(&op, call.getOperands());
      if (failed(args))
        return failure();
      json created = json::array();
      for (Value r : call.getResults())
        created.push_back(define(r));
      const auto *callee = llvm::find(attentions, call.getCallee().str());
      if (callee == attentions.end())
        return op.emitError("a call of a function that is not an attention "
                            "kernel");
      step = {{"op", "attention"},
              {"attention", callee - attentions.begin()},
              {"args", *args},
              {"results", created}};
    } else if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op)) {
      FailureOr<json> source = idsOf(&op, op.getOperand(0));
      if (failed(source))
        return failure();
      step = {{"op", "reshape"},
              {"source", (*source)[0]},
              {"result", define(op.getResult(0))}};
    } else if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (!isa<RankedTensorType>(constant.getType()))
        continue; // scalars live in the kernels
      FailureOr<std::string> file =
          writeConstant(cast<ElementsAttr>(constant.getValue()));
      if (failed(file))
        return op.emitError("cannot store a tensor constant");
      step = {{"op", "constant"},
              {"file", *file},
              {"result", define(constant.getResult())}};
    } else if (isa<tensor::EmptyOp>(op)) {
      step = {{"op", "empty"}, {"result", define(op.getResult(0))}};
    } else if (isa<tensor::ExtractOp>(op)) {
      continue; // read again inside the kernels that use it
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      FailureOr<json> returned = idsOf(&op, ret.getOperands());
      if (failed(returned))
        return failure();
      results = *returned;
      continue;
    } else {
      return op.emitError("'")
             << op.getName() << "' is not supported on the reference path";
    }
    steps.push_back(step);
  }
  json entry = {{"inputs", inputs},
                {"outputs", outputs},
                {"values", values},
                {"steps", steps},
                {"results", results}};
  markEntry(host, entry);
  return entry;
}
