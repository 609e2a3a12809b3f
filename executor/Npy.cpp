//===- Npy.cpp - .npy files in and out of tools ---------------------------===//

#include "executor/Npy.h"
#include "runtime/RegularFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;

namespace ppc {

static Error npyError(StringRef name, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "file '" + name + "': " + message);
}

namespace {
struct DescrEntry {
  const char *descr;
  DType dtype;
};
// Several spellings read as one dtype; the first one per dtype is written.
const DescrEntry kDescrs[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16}, {"|b1", DType::I1},
    {"|i1", DType::I8},  {"<i2", DType::I16}, {"<i4", DType::I32}, {"<i8", DType::I64},
    {"|u1", DType::U8},  {"<u2", DType::U16}, {"<u4", DType::U32}, {"<u8", DType::U64},
    {"<b1", DType::I1},  {"<i1", DType::I8},  {"<u1", DType::U8},
};
} // namespace

StringRef npyDescr(DType dtype) {
  for (const auto &e : kDescrs)
    if (e.dtype == dtype)
      return e.descr;
  return "";
}

/// The value of `key` in a numpy header dict: "{'descr': '<f4', ...}".
static std::optional<StringRef> headerValue(StringRef header, StringRef key) {
  std::string quoted = ("'" + key + "'").str();
  size_t at = header.find(quoted);
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef rest = header.drop_front(at + quoted.size()).ltrim();
  if (!rest.consume_front(":"))
    return std::nullopt;
  rest = rest.ltrim();
  size_t end;
  if (rest.starts_with("'"))
    end = rest.find('\'', 1) + 1;
  else if (rest.starts_with("("))
    end = rest.find(')') + 1;
  else
    end = rest.find_first_of(",}");
  if (end == StringRef::npos || end == 0)
    return std::nullopt;
  return rest.take_front(end).trim();
}

Expected<Tensor> parseNpy(StringRef bytes, StringRef name) {
  if (!bytes.starts_with("\x93NUMPY") || bytes.size() < 10)
    return npyError(name, "not a .npy file (bad magic)");
  uint8_t major = bytes[6];
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (uint8_t(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return npyError(name, "truncated .npy header");
    headerLen = uint32_t(uint8_t(bytes[8])) | (uint32_t(uint8_t(bytes[9])) << 8) |
                (uint32_t(uint8_t(bytes[10])) << 16) | (uint32_t(uint8_t(bytes[11])) << 24);
    offset = 12;
  } else {
    return npyError(name, "unsupported .npy version " + llvm::Twine(int(major)));
  }
  if (bytes.size() < offset + headerLen)
    return npyError(name, "truncated .npy header");
  StringRef header = bytes.substr(offset, headerLen);

  auto descr = headerValue(header, "descr");
  auto fortran = headerValue(header, "fortran_order");
  auto shapeText = headerValue(header, "shape");
  if (!descr || !fortran || !shapeText)
    return npyError(name, "malformed .npy header '" + header.trim() + "'");
  StringRef d = descr->trim("'");
  std::optional<DType> dtype;
  for (const auto &e : kDescrs)
    if (d == e.descr)
      dtype = e.dtype;
  if (!dtype)
    return npyError(name, "unsupported dtype '" + d +
                              "' (expected little-endian float, int, uint or bool)");
  if (*fortran != "False")
    return npyError(name, "Fortran-ordered arrays are not supported");
  Shape shape;
  llvm::SmallVector<StringRef> dims;
  shapeText->trim("()").split(dims, ',', -1, /*KeepEmpty=*/false);
  for (StringRef dim : dims) {
    int64_t n;
    if (dim.trim().getAsInteger(10, n) || n < 0)
      return npyError(name, "malformed shape " + *shapeText);
    shape.push_back(n);
  }

  StringRef data = bytes.drop_front(offset + headerLen);
  // Checked before the length: a shape whose size wraps could match any.
  if (Error e = Tensor::checkShape(*dtype, shape))
    return npyError(name, llvm::toString(std::move(e)));
  uint64_t need = numElements(shape) * byteWidth(*dtype);
  if (data.size() != need)
    return npyError(name, "holds " + llvm::Twine(data.size()) + " data bytes, but " +
                              llvm::Twine(shape.size() ? "shape " : "a scalar ") + *shapeText +
                              " of " + d + " needs " + llvm::Twine(need));
  return Tensor::fromBytes(*dtype, shape, data.data());
}

Expected<Tensor> readNpy(StringRef path) {
  auto buffer = ppc::readRegularFile(path);
  if (!buffer)
    return npyError(path, llvm::toString(buffer.takeError()));
  return parseNpy((*buffer)->getBuffer(), path);
}

std::string formatNpy(const Tensor &tensor) {
  DType dtype = tensor.dtype() == DType::BF16 ? DType::F32 : tensor.dtype();
  std::string shape = "(";
  for (int64_t d : tensor.shape())
    shape += std::to_string(d) + ", ";
  if (tensor.rank() > 1)
    shape.resize(shape.size() - 2);
  else if (tensor.rank() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header =
      ("{'descr': '" + npyDescr(dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }")
          .str();
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  // numpy has no bfloat16: it is written as f32.
  out += (tensor.dtype() == dtype ? tensor : tensor.castTo(dtype)).toBytes();
  return out;
}

Error writeNpy(const Tensor &tensor, StringRef path) {
  // Written to a temporary file and renamed: whole or not at all.
  if (Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        os << formatNpy(tensor);
        return Error::success();
      }))
    return npyError(path, llvm::toString(std::move(e)));
  return Error::success();
}

} // namespace ppc
