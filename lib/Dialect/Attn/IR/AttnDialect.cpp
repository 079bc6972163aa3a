//===- AttnDialect.cpp - The attn dialect ---------------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace flashlight::attn;

#include "flashlight/Dialect/Attn/IR/AttnDialect.cpp.inc"
#include "flashlight/Dialect/Attn/IR/AttnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "flashlight/Dialect/Attn/IR/AttnAttrs.cpp.inc"

void AttnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "flashlight/Dialect/Attn/IR/AttnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "flashlight/Dialect/Attn/IR/AttnOps.cpp.inc"
      >();
}
