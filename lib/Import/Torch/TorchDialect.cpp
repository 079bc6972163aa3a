//===- TorchDialect.cpp - Reading torch-mlir text -------------------------===//
//
// Types and parse hooks for the `torch` dialect text torch-mlir prints. The
// value tensors become builtin tensors right away, so the conversion (and
// the verifier of func.func) sees ordinary tensor types; the scalar and
// list types are opaque, and disappear with the constants that make them.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Import/Torch/TorchDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"

using namespace mlir;
using namespace flashlight::torchimport;
using UnresolvedOperand = OpAsmParser::UnresolvedOperand;

#include "flashlight/Import/Torch/TorchDialect.cpp.inc"

void TorchDialect::initialize() { allowUnknownOperations(); }

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

namespace {

/// The builtin element type of a torch dtype: floats as they are, integers
/// signless (torch's signedness is the op's business, not the storage's).
Type elementTypeOf(Type dtype) {
  if (isa<FloatType>(dtype))
    return dtype;
  if (auto i = dyn_cast<IntegerType>(dtype))
    return IntegerType::get(dtype.getContext(), i.getWidth());
  return {};
}

/// `<[2,4,?],bf16>` after `vtensor`: a static shape and a dtype.
Type parseValueTensor(DialectAsmParser &parser, llvm::SMLoc loc) {
  if (failed(parser.parseOptionalLess())) {
    parser.emitError(loc, "unranked !torch.vtensor is not supported (the "
                          "importer needs static shapes)");
    return {};
  }
  if (succeeded(parser.parseOptionalStar())) {
    parser.emitError(loc, "unranked !torch.vtensor is not supported (the "
                          "importer needs static shapes)");
    return {};
  }
  SmallVector<int64_t> shape;
  bool dynamic = false;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        if (succeeded(parser.parseOptionalQuestion())) {
          dynamic = true;
          return success();
        }
        int64_t d = 0;
        if (parser.parseInteger(d))
          return failure();
        shape.push_back(d);
        return success();
      }))
    return {};
  if (parser.parseComma())
    return {};
  llvm::SMLoc dtypeLoc = parser.getCurrentLocation();
  Type dtype;
  // `unk` is torch-mlir's unknown dtype.
  if (succeeded(parser.parseOptionalKeyword("unk"))) {
    parser.emitError(dtypeLoc, "!torch.vtensor with an unknown dtype is not "
                               "supported");
    return {};
  }
  if (parser.parseType(dtype) || parser.parseGreater())
    return {};
  if (dynamic) {
    parser.emitError(loc, "dynamic dimensions are not supported (export at "
                          "static shapes)");
    return {};
  }
  for (int64_t d : shape)
    if (d < 0) {
      parser.emitError(loc, "negative dimension ") << d;
      return {};
    }
  Type element = elementTypeOf(dtype);
  if (!element) {
    parser.emitError(dtypeLoc, "unsupported dtype ") << dtype;
    return {};
  }
  return RankedTensorType::get(shape, element);
}

/// Skips `<...>` parameters of a scalar or container type (`list<int>`,
/// `optional<vtensor<[2],f32>>`); their spelling is kept whole.
ParseResult skipParameters(DialectAsmParser &parser) {
  if (failed(parser.parseOptionalLess()))
    return success();
  if (succeeded(parser.parseOptionalGreater()))
    return success();
  do {
    StringRef keyword;
    if (succeeded(parser.parseOptionalKeyword(&keyword))) {
      if (skipParameters(parser))
        return failure();
      continue;
    }
    if (succeeded(parser.parseOptionalLSquare())) {
      if (succeeded(parser.parseOptionalRSquare()))
        continue;
      do {
        int64_t d = 0;
        if (failed(parser.parseOptionalQuestion()) && parser.parseInteger(d))
          return failure();
      } while (succeeded(parser.parseOptionalComma()));
      if (parser.parseRSquare())
        return failure();
      continue;
    }
    Type t;
    if (parser.parseType(t))
      return failure();
  } while (succeeded(parser.parseOptionalComma()));
  return parser.parseGreater();
}

} // namespace

Type TorchDialect::parseType(DialectAsmParser &parser) const {
  llvm::SMLoc loc = parser.getCurrentLocation();
  auto opaque = [&](StringRef spelling) {
    return OpaqueType::get(StringAttr::get(getContext(), "torch"), spelling);
  };
  // The printed form of an opaque type: !torch<"list<int>">.
  if (succeeded(parser.parseOptionalLess())) {
    std::string spelling;
    if (parser.parseString(&spelling) || parser.parseGreater())
      return {};
    return opaque(spelling);
  }
  StringRef spec = parser.getFullSymbolSpec();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return {};
  if (keyword == "vtensor")
    return parseValueTensor(parser, loc);
  if (keyword == "tensor") {
    parser.emitError(loc, "!torch.tensor (a tensor with mutable storage) is "
                          "not supported; export value semantics "
                          "(!torch.vtensor)");
    return {};
  }
  if (skipParameters(parser))
    return {};
  return opaque(spec);
}

//===----------------------------------------------------------------------===//
// Pretty forms
//===----------------------------------------------------------------------===//

namespace {

/// The result type of a constant: `!torch.int` for `torch.constant.int`.
Type constantType(MLIRContext *ctx, StringRef kind) {
  std::string spelling = kind == "device" ? "Device" : kind.str();
  return OpaqueType::get(StringAttr::get(ctx, "torch"), spelling);
}

/// `torch.constant.<kind> value`: the value in a `value` attribute.
ParseResult parseConstant(OpAsmParser &parser, OperationState &state) {
  Builder b(parser.getContext());
  StringRef kind = state.name.getStringRef();
  kind.consume_front("torch.constant.");
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (kind == "int") {
    int64_t v = 0;
    if (parser.parseInteger(v))
      return failure();
    state.addAttribute("value", b.getI64IntegerAttr(v));
  } else if (kind == "float") {
    // Non-finite values are printed in hex (0xFFF0000000000000).
    APFloat v(0.0);
    if (parser.parseFloat(APFloat::IEEEdouble(), v))
      return failure();
    state.addAttribute("value", b.getF64FloatAttr(v.convertToDouble()));
  } else if (kind == "bool") {
    StringRef v;
    if (parser.parseKeyword(&v))
      return failure();
    if (v != "true" && v != "false")
      return parser.emitError(loc, "expected true or false");
    state.addAttribute("value", b.getBoolAttr(v == "true"));
  } else if (kind == "str" || kind == "device") {
    std::string v;
    if (parser.parseString(&v))
      return failure();
    state.addAttribute("value", b.getStringAttr(v));
  } else if (kind != "none") {
    return parser.emitError(loc, "unsupported constant kind '") << kind << "'";
  }
  if (parser.parseOptionalAttrDict(state.attributes))
    return failure();
  state.addTypes(constantType(parser.getContext(), kind));
  return success();
}

/// `torch.vtensor.literal(attr) : type`.
ParseResult parseLiteral(OpAsmParser &parser, OperationState &state) {
  Attribute value;
  Type type;
  if (parser.parseLParen() || parser.parseAttribute(value) ||
      parser.parseRParen() || parser.parseOptionalAttrDict(state.attributes) ||
      parser.parseColonType(type))
    return failure();
  state.addAttribute("value", value);
  state.addTypes(type);
  return success();
}

/// Types after the colon: `T1, T2 -> R` or `(T1, T2) -> R` or `-> R` (no
/// operands); results may be several, parenthesized or not.
ParseResult parseSignature(OpAsmParser &parser,
                           ArrayRef<UnresolvedOperand> operands,
                           OperationState &state) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  SmallVector<Type> inputs, results;
  auto parseOne = [&]() -> ParseResult {
    Type t;
    if (parser.parseType(t))
      return failure();
    inputs.push_back(t);
    return success();
  };
  if (succeeded(parser.parseOptionalLParen())) {
    if (failed(parser.parseOptionalRParen()) &&
        (parser.parseCommaSeparatedList(parseOne) || parser.parseRParen()))
      return failure();
  } else if (!operands.empty() && parser.parseCommaSeparatedList(parseOne)) {
    return failure();
  }
  if (parser.parseArrow())
    return failure();
  if (succeeded(parser.parseOptionalLParen())) {
    if (failed(parser.parseOptionalRParen()) &&
        (parser.parseTypeList(results) || parser.parseRParen()))
      return failure();
  } else if (parser.parseTypeList(results)) {
    return failure();
  }
  state.addTypes(results);
  return parser.resolveOperands(operands, inputs, loc, state.operands);
}

/// Every other operation: `operands attr-dict : types -> types`.
ParseResult parseCall(OpAsmParser &parser, OperationState &state) {
  SmallVector<UnresolvedOperand> operands;
  if (parser.parseOperandList(operands) ||
      parser.parseOptionalAttrDict(state.attributes) || parser.parseColon())
    return failure();
  return parseSignature(parser, operands, state);
}

/// `torch.operator "aten.foo.bar"(operands) attr-dict : (types) -> types`.
ParseResult parseOperator(OpAsmParser &parser, OperationState &state) {
  std::string name;
  SmallVector<UnresolvedOperand> operands;
  if (parser.parseString(&name) ||
      parser.parseOperandList(operands, AsmParser::Delimiter::Paren) ||
      parser.parseOptionalAttrDict(state.attributes) || parser.parseColon())
    return failure();
  state.addAttribute("name", parser.getBuilder().getStringAttr(name));
  return parseSignature(parser, operands, state);
}

} // namespace

std::optional<Dialect::ParseOpHook>
TorchDialect::getParseOperationHook(StringRef opName) const {
  if (opName.starts_with("torch.constant."))
    return ParseOpHook(parseConstant);
  if (opName == "torch.vtensor.literal")
    return ParseOpHook(parseLiteral);
  if (opName == "torch.operator")
    return ParseOpHook(parseOperator);
  return ParseOpHook(parseCall);
}
