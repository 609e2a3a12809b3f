//===- CheckpointDir.cpp - atomic checkpoint directories ------------------===//

#include "runtime/CheckpointDir.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cinttypes>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

namespace ppcrt {

static llvm::Error pathError(llvm::StringRef what, llvm::StringRef path,
                             const llvm::Twine &message) {
  return llvm::createStringError(what + " '" + path + "': " + message);
}

static std::string join(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

static std::string stepName(int64_t step) {
  std::string name;
  llvm::raw_string_ostream(name) << llvm::format("step-%08" PRId64, step);
  return name;
}

std::string checkpointPath(llvm::StringRef dir, int64_t step) {
  return join(dir, stepName(step));
}

std::string stagingPath(llvm::StringRef dir, int64_t step) {
  return join(dir, ".staging-" + stepName(step));
}

std::string shardFileName(int64_t rank) {
  std::string name;
  llvm::raw_string_ostream(name)
      << llvm::format("rank-%05" PRId64 ".safetensors", rank);
  return name;
}

static std::error_code errnoCode() {
  return std::error_code(errno, std::generic_category());
}

/// Makes the entries of directory `path` (new files, renames) durable.
static std::error_code syncDirectory(llvm::StringRef path) {
  int fd = ::open(path.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errnoCode();
  std::error_code ec;
  if (::fsync(fd) != 0)
    ec = errnoCode();
  ::close(fd);
  return ec;
}

/// Writes `index` to `path` and fsyncs it.
static llvm::Error writeIndex(llvm::StringRef path,
                              const llvm::json::Object &index) {
  int fd;
  if (std::error_code ec = llvm::sys::fs::openFileForWrite(path, fd))
    return pathError("checkpoint index", path, ec.message());
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object(index)))
     << "\n";
  os.flush();
  std::error_code ec = os.error();
  if (!ec && ::fsync(fd) != 0)
    ec = errnoCode();
  os.close();
  if (!ec)
    ec = os.error();
  // An error left set would make the stream's destructor abort the process.
  os.clear_error();
  if (ec)
    return pathError("checkpoint index", path, ec.message());
  return llvm::Error::success();
}

llvm::Expected<std::string> prepareStaging(llvm::StringRef dir, int64_t step) {
  std::string staging = stagingPath(dir, step);
  if (llvm::sys::fs::exists(staging))
    if (std::error_code ec =
            llvm::sys::fs::remove_directories(staging, /*IgnoreErrors=*/false))
      return pathError("checkpoint staging directory", staging,
                       "cannot remove the stale one: " + ec.message());
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    return pathError("checkpoint staging directory", staging,
                     "cannot create: " + ec.message());
  return staging;
}

llvm::Error commitCheckpoint(llvm::StringRef dir, int64_t step,
                             const llvm::json::Object &index) {
  std::string staging = stagingPath(dir, step);
  std::string target = checkpointPath(dir, step);
  if (!llvm::sys::fs::is_directory(staging))
    return pathError("checkpoint staging directory", staging, "does not exist");
  // rename(2) would silently replace an empty directory.
  if (llvm::sys::fs::exists(target))
    return pathError("checkpoint", target, "already exists");
  if (llvm::Error error = writeIndex(join(staging, "index.json"), index))
    return error;
  if (std::error_code ec = syncDirectory(staging))
    return pathError("checkpoint staging directory", staging,
                     "cannot fsync: " + ec.message());
  if (std::error_code ec = llvm::sys::fs::rename(staging, target))
    return pathError("checkpoint", target,
                     "cannot rename '" + staging + "' to it: " + ec.message());
  if (std::error_code ec = syncDirectory(dir))
    return pathError("checkpoint directory", dir,
                     "cannot fsync: " + ec.message());
  return llvm::Error::success();
}

llvm::Expected<llvm::json::Object>
readCheckpointIndex(llvm::StringRef checkpoint) {
  std::string path = join(checkpoint, "index.json");
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return pathError("checkpoint index", path, buffer.getError().message());
  llvm::Expected<llvm::json::Value> value =
      llvm::json::parse((*buffer)->getBuffer());
  if (!value)
    return pathError("checkpoint index", path,
                     "not valid JSON: " + llvm::toString(value.takeError()));
  if (llvm::json::Object *object = value->getAsObject())
    return std::move(*object);
  return pathError("checkpoint index", path, "not a JSON object");
}

static bool isComplete(llvm::StringRef checkpoint) {
  llvm::Expected<llvm::json::Object> index = readCheckpointIndex(checkpoint);
  if (index)
    return true;
  llvm::consumeError(index.takeError());
  return false;
}

/// The complete checkpoints in `dir` as (step, path), oldest first. Only
/// names checkpointPath makes count, so staging directories and copies such
/// as "step-00000005.old" are never mistaken for checkpoints.
static llvm::Expected<std::vector<std::pair<int64_t, std::string>>>
listCheckpoints(llvm::StringRef dir) {
  std::vector<std::pair<int64_t, std::string>> checkpoints;
  if (!llvm::sys::fs::exists(dir))
    return checkpoints;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    llvm::StringRef digits = name;
    int64_t step;
    if (!digits.consume_front("step-") || digits.getAsInteger(10, step) ||
        step < 0 || name != stepName(step))
      continue;
    if (isComplete(it->path()))
      checkpoints.emplace_back(step, it->path());
  }
  if (ec)
    return pathError("checkpoint directory", dir, ec.message());
  llvm::sort(checkpoints);
  return checkpoints;
}

llvm::Expected<std::optional<std::pair<int64_t, std::string>>>
findLatestCheckpoint(llvm::StringRef dir) {
  auto checkpoints = listCheckpoints(dir);
  if (!checkpoints)
    return checkpoints.takeError();
  if (checkpoints->empty())
    return std::nullopt;
  return std::optional(checkpoints->back());
}

llvm::Error pruneCheckpoints(llvm::StringRef dir, int keep) {
  if (keep <= 0)
    return llvm::Error::success();
  auto checkpoints = listCheckpoints(dir);
  if (!checkpoints)
    return checkpoints.takeError();
  size_t stale =
      checkpoints->size() - std::min<size_t>(keep, checkpoints->size());
  for (const auto &[step, path] :
       llvm::ArrayRef(*checkpoints).take_front(stale)) {
    // Unlinking index.json durably first means that a crash midway leaves an
    // incomplete checkpoint, which readers skip, not one missing shards.
    std::error_code ec = llvm::sys::fs::remove(join(path, "index.json"));
    if (!ec)
      ec = syncDirectory(path);
    if (!ec)
      ec = llvm::sys::fs::remove_directories(path, /*IgnoreErrors=*/false);
    if (ec)
      return pathError("checkpoint", path, "cannot remove: " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace ppcrt
