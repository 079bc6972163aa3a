//===- JSONGraph.cpp - Import flashlight-graph JSON (torch.export) --------===//
//
// The file level of the JSON graph: inputs, captured constants, nodes in
// order, outputs. Each node is an ATen call, lowered by ATenLowering.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Import/JSON/JSONGraph.h"

#include "flashlight/Import/ATen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringSwitch.h"

#include <nlohmann/json.hpp>

using namespace mlir;
using json = nlohmann::json;

namespace {

/// Element type of a flashlight-graph dtype name.
Type elementType(MLIRContext *ctx, StringRef name) {
  Builder b(ctx);
  return llvm::StringSwitch<Type>(name)
      .Case("f16", b.getF16Type())
      .Case("bf16", b.getBF16Type())
      .Case("f32", b.getF32Type())
      .Case("f64", b.getF64Type())
      .Case("i1", b.getI1Type())
      .Case("i8", b.getI8Type())
      .Case("u8", b.getI8Type())
      .Case("i16", b.getI16Type())
      .Case("i32", b.getI32Type())
      .Case("i64", b.getI64Type())
      .Default(Type());
}

/// `obj[key]` if it is a string, else `otherwise` (no exceptions: the
/// build has none, and nlohmann's type errors would abort).
std::string stringField(const json &obj, const char *key,
                        const char *otherwise = "") {
  if (obj.is_object() && obj.contains(key) && obj[key].is_string())
    return obj[key].get<std::string>();
  return otherwise;
}
class GraphImporter {
public:
  GraphImporter(MLIRContext *ctx, StringRef path)
      : ctx(ctx), aten(ctx), b(aten.builder()), path(path.str()),
        loc(FileLineColLoc::get(ctx, path, 0, 0)) {}

  OwningOpRef<ModuleOp> run(const json &graph);

private:
  InFlightDiagnostic error() {
    return flashlight::emitNodeError(loc, nodeName);
  }
  LogicalResult fail(const Twine &message) { return error() << message; }
  FailureOr<RankedTensorType> declared(const json &info);
  LogicalResult lowerNode(const json &node);

  MLIRContext *ctx;
  flashlight::ATenLowering aten;
  OpBuilder &b;
  std::string path;
  Location loc;
  std::string nodeName;
};

FailureOr<RankedTensorType> GraphImporter::declared(const json &info) {
  if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
      !info["dtype"].is_string() || !info["shape"].is_array())
    return fail("expected {\"dtype\", \"shape\"}");
  Type elt = elementType(ctx, info["dtype"].get<std::string>());
  if (!elt)
    return fail("unsupported dtype '" + info["dtype"].get<std::string>() + "'");
  SmallVector<int64_t> shape;
  for (const json &d : info["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return fail("shapes must be static and non-negative");
    shape.push_back(d.get<int64_t>());
  }
  return RankedTensorType::get(shape, elt);
}

LogicalResult GraphImporter::lowerNode(const json &n) {
  if (!n.is_object() || !n.contains("name") || !n["name"].is_string() ||
      !n.contains("target") || !n["target"].is_string() ||
      !n.contains("args") || !n["args"].is_array() || !n.contains("outputs") ||
      !n["outputs"].is_array())
    return fail("a node needs name, target, args and outputs");
  std::string name = n["name"], target = n["target"];
  nodeName = name;
  loc =
      NameLoc::get(b.getStringAttr(name), FileLineColLoc::get(ctx, path, 0, 0));
  SmallVector<RankedTensorType> outs;
  for (const json &o : n["outputs"]) {
    FailureOr<RankedTensorType> t = declared(o);
    if (failed(t))
      return failure();
    outs.push_back(*t);
  }
  FailureOr<SmallVector<Value, 1>> results =
      aten.lower(target, n, outs, loc, name);
  if (failed(results))
    return failure();
  if (results->empty())
    return success();
  return aten.define(name, *results, loc);
}

OwningOpRef<ModuleOp> GraphImporter::run(const json &graph) {
  auto bad = [&](const Twine &message) {
    emitError(loc) << message;
    return OwningOpRef<ModuleOp>();
  };
  if (!graph.is_object() || stringField(graph, "format") != "flashlight-graph")
    return bad("not a flashlight-graph JSON file (\"format\" is missing)");
  if (!graph.contains("version") || !graph["version"].is_number_integer() ||
      graph["version"].get<int64_t>() != flashlight::kJSONGraphVersion)
    return bad("unsupported flashlight-graph version (this importer reads "
               "version " +
               Twine(flashlight::kJSONGraphVersion) + ")");
  for (const char *key : {"inputs", "nodes", "outputs"})
    if (!graph.contains(key) || !graph[key].is_array())
      return bad(Twine("missing array '") + key + "'");
  const json &constants =
      graph.contains("constants") ? graph["constants"] : json::array();
  if (!constants.is_array())
    return bad("'constants' must be an array");

  // Arguments: inputs, then the captured constants.
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const json *list : {&graph["inputs"], &constants})
    for (const json &in : *list) {
      FailureOr<RankedTensorType> t = declared(in);
      if (failed(t))
        return {};
      if (!in.contains("name") || !in["name"].is_string())
        return bad("inputs and constants need a name");
      argTypes.push_back(*t);
      argNames.push_back(in["name"]);
    }
  // Results are known after the nodes: build the body first.
  auto module = ModuleOp::create(loc);
  OwningOpRef<ModuleOp> owner(module);
  std::string fname = stringField(graph, "function", "forward");
  auto func = func::FuncOp::create(loc, fname, b.getFunctionType(argTypes, {}));
  module.push_back(func);
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  for (auto [i, name] : llvm::enumerate(argNames)) {
    if (failed(aten.define(name, body->getArgument(i), loc)))
      return {};
  }
  unsigned numInputs = graph["inputs"].size();
  for (auto [i, c] : llvm::enumerate(constants)) {
    std::string file = stringField(c, "file");
    func.setArgAttr(numInputs + i, "flashlight.constant",
                    b.getStringAttr(file));
  }
  for (const json &n : graph["nodes"])
    if (failed(lowerNode(n)))
      return {};
  nodeName.clear();
  loc = FileLineColLoc::get(ctx, path, 0, 0);
  SmallVector<Value> results;
  for (const json &o : graph["outputs"]) {
    FailureOr<Value> v = aten.resolve(o, loc);
    if (failed(v))
      return {};
    results.push_back(*v);
  }
  func::ReturnOp::create(b, loc, results);
  func.setType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  return owner;
}

/// A SAX handler that accepts every value and records where parsing
/// failed: nlohmann's DOM parser without exceptions only says that it did.
struct ErrorPosition : nlohmann::json_sax<json> {
  size_t offset = 0;
  std::string message = "unexpected end of input";

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t &) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string &,
                   const nlohmann::detail::exception &e) override {
    // The byte after the offending token: point at the token itself.
    offset = position > 0 ? position - 1 : 0;
    message = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 9:
    // syntax error ...": the location is ours, the reason theirs.
    size_t colon = message.find(": ");
    if (colon != std::string::npos)
      message = message.substr(colon + 2);
    return false;
  }
};

} // namespace

OwningOpRef<ModuleOp>
flashlight::importJSONGraph(StringRef text, StringRef path, MLIRContext *ctx) {
  ctx->loadDialect<arith::ArithDialect, func::FuncDialect,
                   linalg::LinalgDialect, math::MathDialect,
                   tensor::TensorDialect>();
  json graph = json::parse(text.begin(), text.end(), nullptr,
                           /*allow_exceptions=*/false);
  if (graph.is_discarded()) {
    ErrorPosition where;
    json::sax_parse(text.begin(), text.end(), &where);
    // The byte offset as a line and column of the file.
    StringRef before = text.take_front(std::min(where.offset, text.size()));
    unsigned line = 1 + before.count('\n');
    size_t lineStart = before.rfind('\n');
    unsigned column =
        1 + (lineStart == StringRef::npos ? before.size()
                                          : before.size() - lineStart - 1);
    emitError(FileLineColLoc::get(ctx, path, line, column))
        << "malformed JSON: " << where.message;
    return {};
  }
  return GraphImporter(ctx, path).run(graph);
}
