//===- StableHLODialect.cpp - Reading StableHLO text ----------------------===//
//
// Parse hooks for the pretty forms JAX prints, and the attributes of the
// generic form. Both produce the same generic operation: StableHLO's op name
// and attribute names, so the conversion sees one form.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Import/StableHLO/StableHLODialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace flashlight::shlo;
using UnresolvedOperand = OpAsmParser::UnresolvedOperand;

#include "flashlight/Import/StableHLO/CHLODialect.cpp.inc"
#include "flashlight/Import/StableHLO/StableHLODialect.cpp.inc"

void StableHLODialect::initialize() { allowUnknownOperations(); }
void CHLODialect::initialize() { allowUnknownOperations(); }

//===----------------------------------------------------------------------===//
// Attributes of the generic form
//===----------------------------------------------------------------------===//

/// `[1, 2]` as a dense i64 array.
static ParseResult parseI64List(AsmParser &parser,
                                SmallVectorImpl<int64_t> &v) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    int64_t x = 0;
    if (parser.parseInteger(x))
      return failure();
    v.push_back(x);
    return success();
  });
}

/// One value of a `key = value` attribute body: an integer list, an
/// integer, a boolean or other keyword, or a type.
static FailureOr<Attribute> parseBodyValue(AsmParser &parser) {
  Builder b(parser.getContext());
  SmallVector<int64_t> list;
  if (succeeded(parser.parseOptionalLSquare())) {
    if (failed(parser.parseOptionalRSquare())) {
      do {
        int64_t x = 0;
        if (parser.parseInteger(x))
          return failure();
        list.push_back(x);
      } while (succeeded(parser.parseOptionalComma()));
      if (parser.parseRSquare())
        return failure();
    }
    return Attribute(b.getDenseI64ArrayAttr(list));
  }
  int64_t x = 0;
  OptionalParseResult integer = parser.parseOptionalInteger(x);
  if (integer.has_value())
    return failed(*integer) ? FailureOr<Attribute>(failure())
                            : FailureOr<Attribute>(b.getI64IntegerAttr(x));
  StringRef keyword;
  if (succeeded(parser.parseOptionalKeyword(&keyword))) {
    if (keyword == "true" || keyword == "false")
      return Attribute(b.getBoolAttr(keyword == "true"));
    return Attribute(b.getStringAttr(keyword));
  }
  Type type;
  if (parser.parseType(type))
    return failure();
  return Attribute(TypeAttr::get(type));
}

/// `key = value, ...>` (after the `<`) as a dictionary.
static FailureOr<DictionaryAttr> parseAttrEntries(AsmParser &parser) {
  SmallVector<NamedAttribute> entries;
  if (succeeded(parser.parseOptionalGreater()))
    return DictionaryAttr::get(parser.getContext(), entries);
  do {
    StringRef key;
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    FailureOr<Attribute> value = parseBodyValue(parser);
    if (failed(value))
      return failure();
    entries.emplace_back(StringAttr::get(parser.getContext(), key), *value);
  } while (succeeded(parser.parseOptionalComma()));
  if (parser.parseGreater())
    return failure();
  return DictionaryAttr::get(parser.getContext(), entries);
}

Attribute StableHLODialect::parseAttribute(DialectAsmParser &parser,
                                           Type) const {
  StringRef mnemonic;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&mnemonic))
    return {};
  // Structured attributes (#stablehlo.dot<...>, #stablehlo.gather<...>,
  // #stablehlo.dot_algorithm<...>) become dictionaries.
  if (succeeded(parser.parseOptionalLess())) {
    FailureOr<DictionaryAttr> body = parseAttrEntries(parser);
    return failed(body) ? Attribute() : Attribute(*body);
  }
  // Enums (#stablehlo<comparison_direction GE>) become their value's name.
  static const char *const enums[] = {"comparison_direction", "comparison_type",
                                      "precision", "transpose",
                                      "rng_distribution"};
  if (!llvm::is_contained(enums, mnemonic)) {
    parser.emitError(loc, "unsupported stablehlo attribute '")
        << mnemonic << "'";
    return {};
  }
  StringRef value;
  if (parser.parseKeyword(&value))
    return {};
  return StringAttr::get(getContext(), value);
}

//===----------------------------------------------------------------------===//
// Pretty forms
//===----------------------------------------------------------------------===//

namespace {

/// Operands separated by commas; stops before a comma that is followed by
/// something else (a keyword item), and says whether it consumed that comma.
ParseResult parseOperandsUntilItems(OpAsmParser &parser,
                                    SmallVectorImpl<UnresolvedOperand> &ops,
                                    bool &moreItems) {
  moreItems = false;
  UnresolvedOperand op;
  OptionalParseResult first = parser.parseOptionalOperand(op);
  if (!first.has_value())
    return success();
  if (failed(*first))
    return failure();
  ops.push_back(op);
  while (succeeded(parser.parseOptionalComma())) {
    OptionalParseResult next = parser.parseOptionalOperand(op);
    if (!next.has_value()) {
      moreItems = true;
      return success();
    }
    if (failed(*next))
      return failure();
    ops.push_back(op);
  }
  return success();
}

/// Parses `: T` (every operand and the result are T), `: Tp, T` (select: the
/// predicate, then every other operand and the result), or `: (Ts) -> Rs`;
/// resolves the operands and adds the result types.
ParseResult parseTypes(OpAsmParser &parser, ArrayRef<UnresolvedOperand> ops,
                       OperationState &state, bool hasResults = true) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  SmallVector<Type> types;
  if (parser.parseColonTypeList(types))
    return failure();
  if (types.size() == 1)
    if (auto fn = dyn_cast<FunctionType>(types[0])) {
      state.addTypes(fn.getResults());
      return parser.resolveOperands(ops, fn.getInputs(), loc, state.operands);
    }
  if (!hasResults)
    return parser.resolveOperands(ops, types, loc, state.operands);
  if (types.size() == 1) {
    state.addTypes(types[0]);
    return parser.resolveOperands(ops, types[0], state.operands);
  }
  if (types.size() == 2 && ops.size() == 3) {
    state.addTypes(types[1]);
    if (parser.resolveOperand(ops[0], types[0], state.operands))
      return failure();
    return parser.resolveOperands(ops.drop_front(), types[1], state.operands);
  }
  return parser.emitError(loc, "expected ': type' or ': (types) -> types'");
}

/// `[a] x [b]`: two dimension lists.
ParseResult parseDimsPair(OpAsmParser &parser, SmallVectorImpl<int64_t> &lhs,
                          SmallVectorImpl<int64_t> &rhs) {
  if (parseI64List(parser, lhs) || parser.parseKeyword("x"))
    return failure();
  return parseI64List(parser, rhs);
}

/// The pretty form shared by elementwise ops, converts, reshapes and the
/// ones with keyword items: `operands (, key = value)* attr-dict : types`.
/// Items are `dims = [..]` (broadcast_in_dim, transpose), `dim = N`
/// (iota, concatenate), and dot_general's.
ParseResult parseGeneric(OpAsmParser &parser, OperationState &state) {
  Builder b(parser.getContext());
  StringRef name = state.name.getStringRef();
  SmallVector<UnresolvedOperand> ops;
  bool items = false;
  if (parseOperandsUntilItems(parser, ops, items))
    return failure();
  // iota has no operand: its items start right away.
  StringRef key;
  if (ops.empty() && succeeded(parser.parseOptionalKeyword(&key)))
    items = true;
  SmallVector<int64_t> lhsBatch, rhsBatch, lhsContract, rhsContract;
  bool isDot = name == "stablehlo.dot_general";
  while (items) {
    llvm::SMLoc loc = parser.getCurrentLocation();
    if ((key.empty() && parser.parseKeyword(&key)) || parser.parseEqual())
      return failure();
    if (key == "dims") {
      SmallVector<int64_t> dims;
      if (parseI64List(parser, dims))
        return failure();
      state.addAttribute(name == "stablehlo.transpose" ? "permutation"
                                                       : "broadcast_dimensions",
                         b.getDenseI64ArrayAttr(dims));
    } else if (key == "dim") {
      int64_t dim = 0;
      if (parser.parseInteger(dim))
        return failure();
      state.addAttribute(name == "stablehlo.iota" ? "iota_dimension"
                                                  : "dimension",
                         b.getI64IntegerAttr(dim));
    } else if (key == "sizes" && name == "stablehlo.dynamic_slice") {
      SmallVector<int64_t> sizes;
      if (parseI64List(parser, sizes))
        return failure();
      state.addAttribute("slice_sizes", b.getDenseI64ArrayAttr(sizes));
    } else if (name == "stablehlo.pad" &&
               (key == "low" || key == "high" || key == "interior")) {
      SmallVector<int64_t> amounts;
      if (parseI64List(parser, amounts))
        return failure();
      state.addAttribute((key == "interior" ? std::string("interior_padding")
                                            : ("edge_padding_" + key).str()),
                         b.getDenseI64ArrayAttr(amounts));
    } else if (isDot && key == "batching_dims") {
      if (parseDimsPair(parser, lhsBatch, rhsBatch))
        return failure();
    } else if (isDot && key == "contracting_dims") {
      if (parseDimsPair(parser, lhsContract, rhsContract))
        return failure();
    } else if (isDot && key == "precision") {
      SmallVector<Attribute> precision;
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
            StringRef p;
            if (parser.parseKeyword(&p))
              return failure();
            precision.push_back(b.getStringAttr(p));
            return success();
          }))
        return failure();
      state.addAttribute("precision_config", b.getArrayAttr(precision));
    } else if (isDot && key == "algorithm") {
      FailureOr<DictionaryAttr> algorithm;
      if (parser.parseLess() || failed(algorithm = parseAttrEntries(parser)))
        return failure();
      state.addAttribute("algorithm", *algorithm);
    } else {
      return parser.emitError(loc, "unexpected '") << key << "' in " << name;
    }
    items = succeeded(parser.parseOptionalComma());
    key = "";
  }
  if (isDot) {
    NamedAttribute dims[] = {
        b.getNamedAttr("lhs_batching_dimensions",
                       b.getDenseI64ArrayAttr(lhsBatch)),
        b.getNamedAttr("rhs_batching_dimensions",
                       b.getDenseI64ArrayAttr(rhsBatch)),
        b.getNamedAttr("lhs_contracting_dimensions",
                       b.getDenseI64ArrayAttr(lhsContract)),
        b.getNamedAttr("rhs_contracting_dimensions",
                       b.getDenseI64ArrayAttr(rhsContract))};
    state.addAttribute("dot_dimension_numbers", b.getDictionaryAttr(dims));
  }
  if (parser.parseOptionalAttrDict(state.attributes))
    return failure();
  return parseTypes(parser, ops, state);
}

/// `stablehlo.compare DIR, %a, %b (, TYPE)? : types`.
ParseResult parseCompare(OpAsmParser &parser, OperationState &state) {
  Builder b(parser.getContext());
  StringRef direction;
  SmallVector<UnresolvedOperand> ops;
  bool more = false;
  if (parser.parseKeyword(&direction) || parser.parseComma() ||
      parseOperandsUntilItems(parser, ops, more))
    return failure();
  state.addAttribute("comparison_direction", b.getStringAttr(direction));
  if (more) {
    StringRef type;
    if (parser.parseKeyword(&type))
      return failure();
    state.addAttribute("compare_type", b.getStringAttr(type));
  }
  if (parser.parseOptionalAttrDict(state.attributes))
    return failure();
  return parseTypes(parser, ops, state);
}

/// `stablehlo.constant attr-dict? dense<...> : type`.
ParseResult parseConstant(OpAsmParser &parser, OperationState &state) {
  if (parser.parseOptionalAttrDict(state.attributes))
    return failure();
  llvm::SMLoc loc = parser.getCurrentLocation();
  Attribute value;
  if (parser.parseAttribute(value))
    return failure();
  auto typed = dyn_cast<TypedAttr>(value);
  if (!typed)
    return parser.emitError(loc, "expected a typed constant");
  state.addAttribute("value", value);
  state.addTypes(typed.getType());
  return success();
}

/// `stablehlo.slice %x [start:limit(:stride)?, ...] : types`.
ParseResult parseSlice(OpAsmParser &parser, OperationState &state) {
  Builder b(parser.getContext());
  UnresolvedOperand op;
  SmallVector<int64_t> start, limit, stride;
  if (parser.parseOperand(op) ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        int64_t s = 0, l = 0, t = 1;
        if (parser.parseInteger(s) || parser.parseColon() ||
            parser.parseInteger(l))
          return failure();
        if (succeeded(parser.parseOptionalColon()) && parser.parseInteger(t))
          return failure();
        start.push_back(s);
        limit.push_back(l);
        stride.push_back(t);
        return success();
      }))
    return failure();
  state.addAttribute("start_indices", b.getDenseI64ArrayAttr(start));
  state.addAttribute("limit_indices", b.getDenseI64ArrayAttr(limit));
  state.addAttribute("strides", b.getDenseI64ArrayAttr(stride));
  if (parser.parseOptionalAttrDict(state.attributes))
    return failure();
  return parseTypes(parser, {op}, state);
}

/// `stablehlo.return %a, ... : types` (no results).
ParseResult parseReturn(OpAsmParser &parser, OperationState &state) {
  SmallVector<UnresolvedOperand> ops;
  if (parser.parseOperandList(ops) ||
      parser.parseOptionalAttrDict(state.attributes))
    return failure();
  if (ops.empty())
    return success();
  return parseTypes(parser, ops, state, /*hasResults=*/false);
}

/// `stablehlo.reduce(%x init: %i), ... applies stablehlo.OP across
/// dimensions = [..] : (inputs, inits) -> results`, or the same with
/// `reducer(%a: T, %b: T) (%c: T, %d: T) { region }` after the types instead
/// of `applies`. Block arguments are (accumulators..., elements...).
ParseResult parseReduce(OpAsmParser &parser, OperationState &state) {
  Builder b(parser.getContext());
  SmallVector<UnresolvedOperand> inputs, inits;
  do {
    UnresolvedOperand input, init;
    if (parser.parseLParen() || parser.parseOperand(input) ||
        parser.parseKeyword("init") || parser.parseColon() ||
        parser.parseOperand(init) || parser.parseRParen())
      return failure();
    inputs.push_back(input);
    inits.push_back(init);
  } while (succeeded(parser.parseOptionalComma()));
  Location loc = parser.getEncodedSourceLoc(parser.getCurrentLocation());
  StringRef applies;
  if (succeeded(parser.parseOptionalKeyword("applies")) &&
      parser.parseKeyword(&applies))
    return failure();
  SmallVector<int64_t> dims;
  if (parser.parseKeyword("across") || parser.parseKeyword("dimensions") ||
      parser.parseEqual() || parseI64List(parser, dims) ||
      parser.parseOptionalAttrDict(state.attributes))
    return failure();
  state.addAttribute("dimensions", b.getDenseI64ArrayAttr(dims));
  SmallVector<UnresolvedOperand> all(inputs);
  all.append(inits);
  if (parseTypes(parser, all, state))
    return failure();
  Region *body = state.addRegion();
  size_t n = inputs.size();
  if (!applies.empty()) {
    // Build the reducer: one `applies` op per input on scalar tensors.
    Block *block = new Block();
    body->push_back(block);
    SmallVector<Value> args;
    for (size_t i = 0; i < 2 * n; ++i) {
      auto t = cast<ShapedType>(state.operands[n + i % n].getType());
      args.push_back(block->addArgument(
          RankedTensorType::get({}, t.getElementType()), loc));
    }
    // The region has no parent op yet: the builder takes the context.
    OpBuilder builder(parser.getContext());
    builder.setInsertionPointToEnd(block);
    SmallVector<Value> results;
    for (size_t i = 0; i < n; ++i) {
      OperationState op(loc, applies);
      op.addOperands({args[i], args[n + i]});
      op.addTypes(args[i].getType());
      results.push_back(builder.create(op)->getResult(0));
    }
    OperationState ret(loc, "stablehlo.return");
    ret.addOperands(results);
    builder.create(ret);
    return success();
  }
  SmallVector<OpAsmParser::Argument> lhs, rhs;
  if (parser.parseKeyword("reducer"))
    return failure();
  for (size_t i = 0; i < n; ++i) {
    OpAsmParser::Argument a, c;
    if (parser.parseLParen() || parser.parseArgument(a, /*allowType=*/true) ||
        parser.parseComma() || parser.parseArgument(c, /*allowType=*/true) ||
        parser.parseRParen())
      return failure();
    lhs.push_back(a);
    rhs.push_back(c);
  }
  lhs.append(rhs);
  return parser.parseRegion(*body, lhs);
}

/// `stablehlo.while(%it = %init, ...) : types attr-dict? cond { region }
/// do { region }`: both regions take the iteration values.
ParseResult parseWhile(OpAsmParser &parser, OperationState &state) {
  SmallVector<OpAsmParser::Argument> args;
  SmallVector<UnresolvedOperand> inits;
  SmallVector<Type> types;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseAssignmentList(args, inits) || parser.parseColon() ||
      parser.parseTypeList(types))
    return failure();
  if (args.size() != types.size())
    return parser.emitError(loc, "expected one type per iteration value");
  for (auto [arg, type] : llvm::zip(args, types))
    arg.type = type;
  if (parser.resolveOperands(inits, types, loc, state.operands) ||
      parser.parseOptionalAttrDictWithKeyword(state.attributes) ||
      parser.parseKeyword("cond") ||
      parser.parseRegion(*state.addRegion(), args) ||
      parser.parseKeyword("do") || parser.parseRegion(*state.addRegion(), args))
    return failure();
  state.addTypes(types);
  return success();
}

/// `stablehlo.custom_call @target(%a, ...) attr-dict : (types) -> results`:
/// read so that the importer can name it (JAX's shape assertions, sharding
/// annotations), though it does not convert it.
ParseResult parseCustomCall(OpAsmParser &parser, OperationState &state) {
  Builder b(parser.getContext());
  StringAttr target;
  SmallVector<UnresolvedOperand> ops;
  if (parser.parseSymbolName(target) ||
      parser.parseOperandList(ops, AsmParser::Delimiter::Paren) ||
      parser.parseOptionalAttrDict(state.attributes))
    return failure();
  state.addAttribute("call_target_name", target);
  return parseTypes(parser, ops, state);
}

/// `chlo.OP operands attr-dict : T -> R` (or `: (Ts) -> R`, or `: T`).
ParseResult parseCHLO(OpAsmParser &parser, OperationState &state) {
  SmallVector<UnresolvedOperand> ops;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOperandList(ops) ||
      parser.parseOptionalAttrDict(state.attributes) || parser.parseColon())
    return failure();
  SmallVector<Type> inputs;
  if (succeeded(parser.parseOptionalLParen())) {
    if (failed(parser.parseOptionalRParen()) &&
        (parser.parseTypeList(inputs) || parser.parseRParen()))
      return failure();
  } else {
    Type t;
    if (parser.parseType(t))
      return failure();
    inputs.assign(ops.size(), t);
  }
  Type result = inputs.empty() ? Type() : inputs.front();
  if (succeeded(parser.parseOptionalArrow()) && parser.parseType(result))
    return failure();
  if (!result)
    return parser.emitError(loc, "expected a result type");
  state.addTypes(result);
  return parser.resolveOperands(ops, inputs, loc, state.operands);
}

} // namespace

std::optional<Dialect::ParseOpHook>
CHLODialect::getParseOperationHook(StringRef opName) const {
  if (!opName.starts_with("chlo."))
    return std::nullopt;
  return ParseOpHook(parseCHLO);
}

std::optional<Dialect::ParseOpHook>
StableHLODialect::getParseOperationHook(StringRef opName) const {
  StringRef name = opName;
  if (!name.consume_front("stablehlo."))
    return std::nullopt;
  return llvm::StringSwitch<ParseOpHook>(name)
      .Case("compare", parseCompare)
      .Case("constant", parseConstant)
      .Case("slice", parseSlice)
      .Case("return", parseReturn)
      .Case("reduce", parseReduce)
      .Case("while", parseWhile)
      .Case("custom_call", parseCustomCall)
      .Default(parseGeneric);
}
