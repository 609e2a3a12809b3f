//===- PrintableTest.cpp - names from files, safe to print in one line ----===//
//
// printable leaves printable names alone (ASCII and well-formed UTF-8) and
// escapes what could end the line, drive the terminal or reorder the text.
//
//===----------------------------------------------------------------------===//

#include "runtime/Printable.h"

#include <gtest/gtest.h>

using namespace ppc;

namespace {

TEST(Printable, LeavesPrintableNamesAlone) {
  for (const char *name :
       {"", "transformer.h.0.attn.c_attn.weight", "/h.0/attn/MatMul_1", "onnx::Add_7",
        "it's \"quoted\" {x} \\ back", "层.权重", "caf\xc3\xa9", "emoji \xf0\x9f\x98\x80"})
    EXPECT_EQ(printable(name), name);
}

TEST(Printable, EscapesControlCharacters) {
  EXPECT_EQ(printable("a\nerror: fake"), "a\\x0aerror: fake");
  EXPECT_EQ(printable("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(printable(llvm::StringRef("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(printable("tab\there\r\x7f"), "tab\\x09here\\x0d\\x7f");
}

TEST(Printable, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  // A truncated sequence, an overlong encoding of '/', a UTF-16 surrogate.
  EXPECT_EQ(printable("a\xc3"), "a\\xc3");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  // A lone continuation byte before a well-formed character.
  EXPECT_EQ(printable("\x80\xc3\xa9"), "\\x80\xc3\xa9");
}

TEST(Printable, EscapesCodePointsThatMoveOrReorderText) {
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\u{009b}31m"); // C1 CSI
  EXPECT_EQ(printable("a\xe2\x80\xa8"
                      "b"),
            "a\\u{2028}b"); // line separator
  EXPECT_EQ(printable("\xe2\x80\xae"
                      "gnp.exe"),
            "\\u{202e}gnp.exe"); // right-to-left override
  EXPECT_EQ(printable("\xe2\x81\xa6"
                      "x"),
            "\\u{2066}x"); // left-to-right isolate
}

TEST(Printable, IsIdempotent) {
  std::string once = printable("a\n\x1b[31m\xff\xe2\x80\xae");
  EXPECT_EQ(printable(once), once);
}

} // namespace
