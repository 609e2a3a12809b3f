//===- Safetensors.cpp - the safetensors file format ----------------------===//

#include "runtime/Safetensors.h"
#include "runtime/CheckedSize.h"
#include "runtime/Printable.h"
#include "runtime/RegularFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <tuple>
#include <unistd.h>

namespace ppcrt {

static llvm::Error fileError(llvm::StringRef path, const llvm::Twine &message) {
  return llvm::createStringError("safetensors file '" + ppc::printable(path) + "': " + message);
}

/// The bytes of a tensor (ppc::checkedTensorBytes): an error when a
/// dimension is negative, the size overflows (a corrupt header could
/// otherwise wrap it around to a size that passes the bounds checks) or it
/// passes ppc's limit on one tensor.
static llvm::Expected<int64_t> tensorBytes(DType dtype, llvm::ArrayRef<int64_t> shape) {
  return ppc::checkedTensorBytes(shape, dtypeBytes(dtype), safetensorsName(dtype));
}

/// Flushes `os`, then fsyncs and closes its file `fd`; the first failure wins.
static std::error_code syncAndClose(llvm::raw_fd_ostream &os, int fd) {
  os.flush();
  std::error_code ec = os.error();
  if (!ec && ::fsync(fd) != 0)
    ec = std::error_code(errno, std::generic_category());
  os.close();
  if (!ec)
    ec = os.error();
  // An error left set would make the stream's destructor abort the process.
  os.clear_error();
  return ec;
}

llvm::Error writeSafetensors(llvm::StringRef path, llvm::ArrayRef<TensorView> tensors,
                             const std::map<std::string, std::string> &metadata) {
  // Tensor i's data is [offsets[i], offsets[i + 1]).
  std::vector<int64_t> offsets = {0};
  llvm::StringSet<> names;
  for (const TensorView &tensor : tensors) {
    if (tensor.name == "__metadata__" || !names.insert(tensor.name).second)
      return fileError(path,
                       "tensor name '" + ppc::printable(tensor.name) + "' is reserved or repeated");
    llvm::Expected<int64_t> bytes = tensorBytes(tensor.dtype, tensor.shape);
    if (!bytes)
      return fileError(path, "tensor '" + ppc::printable(tensor.name) +
                                 "': " + llvm::toString(bytes.takeError()));
    std::optional<int64_t> end = llvm::checkedAdd(offsets.back(), *bytes);
    if (!end)
      return fileError(path, "the tensors add up to more bytes than an int64 holds");
    offsets.push_back(*end);
  }

  std::string header;
  llvm::raw_string_ostream headerStream(header);
  llvm::json::OStream json(headerStream);
  json.object([&] {
    if (!metadata.empty())
      json.attributeObject("__metadata__", [&] {
        for (const auto &[key, value] : metadata)
          json.attribute(key, value);
      });
    for (size_t i = 0; i < tensors.size(); ++i)
      json.attributeObject(tensors[i].name, [&] {
        json.attribute("dtype", safetensorsName(tensors[i].dtype));
        json.attributeArray("shape", [&] {
          for (int64_t dim : tensors[i].shape)
            json.value(dim);
        });
        json.attributeArray("data_offsets", [&] {
          json.value(offsets[i]);
          json.value(offsets[i + 1]);
        });
      });
  });
  header.append((8 - header.size() % 8) % 8, ' ');

  int fd;
  if (std::error_code ec = llvm::sys::fs::openFileForWrite(path, fd))
    return fileError(path, ec.message());
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  char length[8];
  llvm::support::endian::write64le(length, header.size());
  os.write(length, sizeof(length));
  os << header;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (int64_t bytes = offsets[i + 1] - offsets[i])
      os.write(static_cast<const char *>(tensors[i].data), bytes);
  if (std::error_code ec = syncAndClose(os, fd))
    return fileError(path, ec.message());
  return llvm::Error::success();
}

/// The header entry `name` of a file whose data section is `data`.
static llvm::Expected<TensorView> parseTensor(llvm::StringRef path, llvm::StringRef name,
                                              const llvm::json::Value &entry,
                                              llvm::StringRef data) {
  auto tensorError = [&](const llvm::Twine &message) {
    return fileError(path, "tensor '" + ppc::printable(name) + "' " + message);
  };
  const llvm::json::Object *fields = entry.getAsObject();
  if (!fields)
    return tensorError("is not a JSON object");
  std::optional<llvm::StringRef> dtypeField = fields->getString("dtype");
  if (!dtypeField)
    return tensorError("has no dtype");
  std::optional<DType> dtype = dtypeFromSafetensorsName(*dtypeField);
  if (!dtype)
    return tensorError("has unknown dtype '" + ppc::printable(*dtypeField) + "'");

  std::vector<int64_t> shape;
  const llvm::json::Array *shapeField = fields->getArray("shape");
  if (!shapeField)
    return tensorError("has no shape");
  for (const llvm::json::Value &dim : *shapeField) {
    std::optional<int64_t> size = dim.getAsInteger();
    if (!size || *size < 0)
      return tensorError("has a shape that is not non-negative integers");
    shape.push_back(*size);
  }
  llvm::Expected<int64_t> expected = tensorBytes(*dtype, shape);
  if (!expected)
    return fileError(path, "tensor '" + ppc::printable(name) +
                               "': " + llvm::toString(expected.takeError()));

  const llvm::json::Array *offsets = fields->getArray("data_offsets");
  std::optional<int64_t> begin, end;
  if (offsets && offsets->size() == 2) {
    begin = (*offsets)[0].getAsInteger();
    end = (*offsets)[1].getAsInteger();
  }
  if (!begin || !end || *begin < 0 || *end < *begin)
    return tensorError("has no data_offsets [begin, end] with begin <= end");
  if (*end - *begin != *expected)
    return tensorError("has " + llvm::Twine(*end - *begin) + " bytes, expected " +
                       llvm::Twine(*expected));
  if (static_cast<uint64_t>(*end) > data.size())
    return tensorError("ends at byte " + llvm::Twine(*end) + " of only " +
                       llvm::Twine(data.size()) + " bytes of data");
  return TensorView{name.str(), *dtype, std::move(shape), data.data() + *begin};
}

static llvm::Error parseMetadata(llvm::StringRef path, const llvm::json::Value &value,
                                 std::map<std::string, std::string> &metadata) {
  const llvm::json::Object *entries = value.getAsObject();
  if (!entries)
    return fileError(path, "__metadata__ is not a JSON object");
  for (const auto &[key, entry] : *entries) {
    std::optional<llvm::StringRef> text = entry.getAsString();
    if (!text)
      return fileError(path, "__metadata__ '" + ppc::printable(key.str()) + "' is not a string");
    metadata[key.str()] = text->str();
  }
  return llvm::Error::success();
}

llvm::Expected<SafetensorsFile> SafetensorsFile::open(llvm::StringRef path) {
  auto buffer = ppc::readRegularFile(path);
  if (!buffer)
    return fileError(path, llvm::toString(buffer.takeError()));
  return parse(std::move(*buffer), path);
}

llvm::Expected<SafetensorsFile> SafetensorsFile::parse(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                       llvm::StringRef path) {
  SafetensorsFile file;
  file.buffer = std::move(buffer);
  file.path = path.str();

  llvm::StringRef bytes = file.buffer->getBuffer();
  if (bytes.size() < 8)
    return fileError(path, llvm::Twine(bytes.size()) + " bytes is too short for a header length");
  uint64_t headerBytes = llvm::support::endian::read64le(bytes.data());
  if (headerBytes > bytes.size() - 8)
    return fileError(path, "header length " + llvm::Twine(headerBytes) +
                               " runs past the end of the file (" + llvm::Twine(bytes.size()) +
                               " bytes)");
  llvm::Expected<llvm::json::Value> header = llvm::json::parse(bytes.substr(8, headerBytes));
  if (!header)
    return fileError(path, "header is not valid JSON: " + llvm::toString(header.takeError()));
  const llvm::json::Object *entries = header->getAsObject();
  if (!entries)
    return fileError(path, "header is not a JSON object");

  llvm::StringRef data = bytes.drop_front(8 + headerBytes);
  for (const auto &[key, entry] : *entries) {
    if (key == "__metadata__") {
      if (llvm::Error error = parseMetadata(path, entry, file.meta))
        return std::move(error);
      continue;
    }
    llvm::Expected<TensorView> view = parseTensor(path, key, entry, data);
    if (!view)
      return view.takeError();
    file.views.push_back(std::move(*view));
  }
  // JSON objects are unordered; the data is not. Ties are empty tensors.
  llvm::sort(file.views, [](const TensorView &a, const TensorView &b) {
    auto order = [](const TensorView &view) {
      return std::make_tuple(static_cast<const char *>(view.data),
                             llvm::cantFail(tensorBytes(view.dtype, view.shape)),
                             llvm::StringRef(view.name));
    };
    return order(a) < order(b);
  });
  for (size_t i = 0; i < file.views.size(); ++i)
    file.byName[file.views[i].name] = i;
  return file;
}

llvm::Expected<TensorView> SafetensorsFile::lookup(llvm::StringRef name) const {
  auto it = byName.find(name);
  if (it == byName.end())
    return fileError(path, "no tensor '" + ppc::printable(name) + "'");
  return views[it->second];
}

} // namespace ppcrt
