//===- Printable.h - names from files, safe to print in one line -*- C++
//-*-===//
//
// A name read from a model or any other input file (node, tensor,
// initializer, input and output names, op types, attribute names, file
// locations) is printed through `printable` in every diagnostic: a newline
// in it would start a fake `error:` line, an escape sequence would recolour
// or rewrite the terminal, and bytes that are not UTF-8 garble it. Printable
// names come out unchanged, so the messages of ordinary models read as
// they always did. Header-only, LLVM Support only: the importer, the passes,
// the tools and the runtime use it without linking one another.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PRINTABLE_H
#define PPC_RUNTIME_PRINTABLE_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>

namespace ppc {

namespace detail {
/// Code points that move the cursor or reorder text however they are
/// encoded: C1 controls (U+0080-U+009F, 0x9B is a CSI), the line and
/// paragraph separators, and the bidirectional embeddings, overrides and
/// isolates that make text display in another order than it is read.
inline bool isFormatCodePoint(llvm::UTF32 c) {
  return (c >= 0x80 && c <= 0x9f) || c == 0x2028 || c == 0x2029 || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069);
}
} // namespace detail

/// `text` as it may be printed inside a one-line diagnostic: printable ASCII
/// and well-formed UTF-8 unchanged; C0 controls (newline, ESC, NUL, ...),
/// DEL and each byte that is not part of well-formed UTF-8 as `\xNN`; the
/// code points of detail::isFormatCodePoint as `\u{NNNN}`. A backslash is
/// left as it is, so an escaped name can be told from the raw one only by
/// the bytes it no longer contains.
inline std::string printable(llvm::StringRef text) {
  auto plain = [](char c) { return c >= 0x20 && c < 0x7f; };
  if (llvm::all_of(text, plain))
    return text.str();
  std::string shown;
  const auto *at = reinterpret_cast<const llvm::UTF8 *>(text.begin());
  const auto *end = reinterpret_cast<const llvm::UTF8 *>(text.end());
  while (at < end) {
    if (*at < 0x80) {
      if (plain(char(*at)))
        shown += char(*at);
      else
        shown += llvm::formatv("\\x{0:x-2}", unsigned(*at)).str();
      ++at;
      continue;
    }
    const llvm::UTF8 *start = at;
    llvm::UTF32 codePoint;
    if (llvm::convertUTF8Sequence(&at, end, &codePoint, llvm::strictConversion) !=
        llvm::conversionOK) {
      shown += llvm::formatv("\\x{0:x-2}", unsigned(*start)).str();
      at = start + 1;
      continue;
    }
    if (detail::isFormatCodePoint(codePoint))
      shown += llvm::formatv("\\u{{{0:x-4}}", unsigned(codePoint)).str();
    else
      shown.append(reinterpret_cast<const char *>(start), at - start);
  }
  return shown;
}

} // namespace ppc

#endif // PPC_RUNTIME_PRINTABLE_H
