//===- InputChecks.h - Checks on program text before parsing ----*- C++ -*-===//
//
// MLIR's parser recurses once per nesting level of `[`, `(` and `{`; text
// nested thousands deep overflows the stack before any diagnostic. The
// tools check the depth first.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_IMPORT_INPUTCHECKS_H
#define FLASHLIGHT_IMPORT_INPUTCHECKS_H

#include "llvm/ADT/StringRef.h"

#include <algorithm>

#include <cstdint>

namespace flashlight {

/// Deepest nesting the tools accept (real programs stay far below it).
constexpr int64_t kMaxNesting = 256;

/// The deepest nesting of brackets, parentheses and braces in `text`,
/// outside string literals.
inline int64_t nestingDepth(llvm::StringRef text) {
  int64_t depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '(' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == ')' || c == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

} // namespace flashlight

#endif // FLASHLIGHT_IMPORT_INPUTCHECKS_H
