//===- InputChecks.h - Checks on program text before parsing ----*- C++ -*-===//
//
// Two kinds of text crash MLIR 22's parser before any diagnostic, so the
// tools check for them first:
// - the parser recurses once per nesting level of `[`, `(` and `{`; text
//   nested thousands deep overflows the stack;
// - after a string literal left open at the end of the text, the lexer's
//   error recovery can read past the end of the buffer (a fuzzer finding,
//   in a truncated `dialect_resources` blob).
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

/// What the tools check in program text before parsing it.
struct TextChecks {
  /// The deepest nesting of brackets, parentheses and braces outside string
  /// literals and `//` comments.
  int64_t nesting = 0;
  /// The line (from 1) of a string literal not closed before the end of its
  /// line (MLIR strings cannot span lines), or 0.
  int64_t openStringLine = 0;
};

/// One pass over `text`, skipping string literals and `//` comments.
inline TextChecks checkText(llvm::StringRef text) {
  TextChecks checks;
  int64_t depth = 0, line = 1;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      if (inString) {
        checks.openStringLine = line;
        return checks;
      }
      ++line;
    } else if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '[' || c == '(' || c == '{') {
      checks.nesting = std::max(checks.nesting, ++depth);
    } else if ((c == ']' || c == ')' || c == '}') && depth > 0) {
      --depth;
    }
  }
  if (inString)
    checks.openStringLine = line;
  return checks;
}

} // namespace flashlight

#endif // FLASHLIGHT_IMPORT_INPUTCHECKS_H
