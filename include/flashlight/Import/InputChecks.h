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

/// The line (from 1) of a string literal that is not closed before the end
/// of its line, or 0 if every string literal is closed. MLIR strings cannot
/// span lines; `//` comments are skipped.
inline int64_t openStringLine(llvm::StringRef text) {
  int64_t line = 1;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      if (inString)
        return line;
      ++line;
      continue;
    }
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/')
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
  }
  return inString ? line : 0;
}

} // namespace flashlight

#endif // FLASHLIGHT_IMPORT_INPUTCHECKS_H
