//===- CheckpointDir.cpp - atomic checkpoint directories ------------------===//

#include "runtime/CheckpointDir.h"
#include "runtime/Failpoint.h"
#include "runtime/RegularFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BLAKE3.h"
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

std::string checkpointPath(llvm::StringRef dir, int64_t step) { return join(dir, stepName(step)); }

std::string stagingPath(llvm::StringRef dir, int64_t step) {
  return join(dir, ".staging-" + stepName(step));
}

std::string shardFileName(int64_t rank) {
  std::string name;
  llvm::raw_string_ostream(name) << llvm::format("rank-%05" PRId64 ".safetensors", rank);
  return name;
}

static std::error_code errnoCode() { return std::error_code(errno, std::generic_category()); }

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

/// Writes `index` to `path` on one line (`ppc checkpoint inspect` is the
/// readable view) and fsyncs it.
static llvm::Error writeIndex(llvm::StringRef path, const llvm::json::Object &index) {
  int fd;
  if (std::error_code ec = llvm::sys::fs::openFileForWrite(path, fd))
    return pathError("checkpoint index", path, ec.message());
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << llvm::formatv("{0}", llvm::json::Value(llvm::json::Object(index))) << "\n";
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

/// A committed checkpoint has an index.json (the commit renames a staging
/// directory that has one). Whether it is intact is for the reader to check:
/// one that does not parse is an error there, not a reason to skip it.
static bool isComplete(llvm::StringRef checkpoint) {
  return llvm::sys::fs::exists(join(checkpoint, "index.json"));
}

llvm::Expected<std::string> prepareStaging(llvm::StringRef dir, int64_t step) {
  std::string staging = stagingPath(dir, step);
  if (llvm::sys::fs::exists(staging))
    if (std::error_code ec = llvm::sys::fs::remove_directories(staging, /*IgnoreErrors=*/false))
      return pathError("checkpoint staging directory", staging,
                       "cannot remove the stale one: " + ec.message());
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    return pathError("checkpoint staging directory", staging, "cannot create: " + ec.message());
  return staging;
}

llvm::Error commitCheckpoint(llvm::StringRef dir, int64_t step, const llvm::json::Object &index) {
  std::string staging = stagingPath(dir, step);
  std::string target = checkpointPath(dir, step);
  if (!llvm::sys::fs::is_directory(staging))
    return pathError("checkpoint staging directory", staging, "does not exist");
  // rename(2) would silently replace an empty directory. A step directory
  // without an index is what a prune that stopped midway leaves (commits
  // only ever rename complete ones): a run resumed from an older step
  // reaches that step again and replaces it.
  if (llvm::sys::fs::exists(target)) {
    if (isComplete(target))
      return pathError("checkpoint", target, "already exists");
    if (std::error_code ec = llvm::sys::fs::remove_directories(target, /*IgnoreErrors=*/false))
      return pathError("checkpoint", target,
                       "cannot remove the incomplete one (no index.json): " + ec.message());
  }
  if (llvm::Error error = writeIndex(join(staging, "index.json"), index))
    return error;
  if (std::error_code ec = syncDirectory(staging))
    return pathError("checkpoint staging directory", staging, "cannot fsync: " + ec.message());
  failpoint("staging-complete");
  if (std::error_code ec = llvm::sys::fs::rename(staging, target))
    return pathError("checkpoint", target,
                     "cannot rename '" + staging + "' to it: " + ec.message());
  failpoint("committed");
  if (std::error_code ec = syncDirectory(dir))
    return pathError("checkpoint directory", dir, "cannot fsync: " + ec.message());
  return llvm::Error::success();
}

llvm::Expected<llvm::json::Object> readCheckpointIndex(llvm::StringRef checkpoint) {
  std::string path = join(checkpoint, "index.json");
  auto buffer = ppc::readRegularFile(path);
  if (!buffer)
    return pathError("checkpoint index", path, llvm::toString(buffer.takeError()));
  llvm::Expected<llvm::json::Value> value = llvm::json::parse((*buffer)->getBuffer());
  if (!value)
    return pathError("checkpoint index", path,
                     "not valid JSON: " + llvm::toString(value.takeError()));
  if (llvm::json::Object *object = value->getAsObject())
    return std::move(*object);
  return pathError("checkpoint index", path, "not a JSON object");
}

/// The complete checkpoints in `dir` as (step, path), oldest first, and
/// optionally the step directories without an index. Only names
/// checkpointPath makes count, so staging directories and copies such as
/// "step-00000005.old" are never mistaken for checkpoints.
static llvm::Expected<std::vector<std::pair<int64_t, std::string>>>
listCheckpoints(llvm::StringRef dir,
                std::vector<std::pair<int64_t, std::string>> *incomplete = nullptr) {
  std::vector<std::pair<int64_t, std::string>> checkpoints;
  if (!llvm::sys::fs::exists(dir))
    return checkpoints;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    llvm::StringRef digits = name;
    int64_t step;
    if (!digits.consume_front("step-") || digits.getAsInteger(10, step) || step < 0 ||
        name != stepName(step))
      continue;
    if (isComplete(it->path()))
      checkpoints.emplace_back(step, it->path());
    else if (incomplete)
      incomplete->emplace_back(step, it->path());
  }
  if (ec)
    return pathError("checkpoint directory", dir, ec.message());
  llvm::sort(checkpoints);
  return checkpoints;
}

llvm::Expected<std::optional<std::pair<int64_t, std::string>>>
findLatestCheckpoint(llvm::StringRef dir, std::vector<std::string> *skipped) {
  std::vector<std::pair<int64_t, std::string>> incomplete;
  auto checkpoints = listCheckpoints(dir, &incomplete);
  if (!checkpoints)
    return checkpoints.takeError();
  int64_t latest = checkpoints->empty() ? -1 : checkpoints->back().first;
  if (skipped) {
    llvm::sort(incomplete);
    for (const auto &[step, path] : incomplete)
      if (step > latest)
        skipped->push_back(path);
  }
  if (checkpoints->empty())
    return std::nullopt;
  return std::optional(checkpoints->back());
}

llvm::Expected<FileDigest> digestFile(llvm::StringRef path) {
  int fd = ::open(path.str().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return pathError("checkpoint shard", path, "cannot open: " + errnoCode().message());
  llvm::BLAKE3 hasher;
  FileDigest digest;
  std::vector<uint8_t> block(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      std::error_code ec = errnoCode();
      ::close(fd);
      return pathError("checkpoint shard", path, "cannot read: " + ec.message());
    }
    if (n == 0)
      break;
    hasher.update(llvm::ArrayRef<uint8_t>(block.data(), size_t(n)));
    digest.bytes += n;
  }
  ::close(fd);
  digest.blake3 = llvm::toHex(hasher.final(), /*LowerCase=*/true);
  return digest;
}

llvm::Expected<std::vector<CheckpointShard>>
checkpointShards(llvm::StringRef checkpoint, int64_t step, const llvm::json::Object &index) {
  std::string path = join(checkpoint, "index.json");
  auto bad = [&](const llvm::Twine &message) {
    return pathError("checkpoint index", path, message);
  };
  if (index.getString("format") != "ppc-checkpoint")
    return bad("\"format\" is not \"ppc-checkpoint\"");
  std::optional<int64_t> version = index.getInteger("version");
  if (!version || *version < 1 || *version > kCheckpointVersion)
    return bad("\"version\" is not 1, 2 or 3 (this ppc reads versions 1 to 3)");
  std::optional<int64_t> written = index.getInteger("step");
  if (!written || *written != step)
    return bad("\"step\" is not " + llvm::Twine(step) + ", the step its directory is named for");
  std::optional<int64_t> world = index.getInteger("world_size");
  if (!world || *world < 1)
    return bad("\"world_size\" is not a positive integer");
  const llvm::json::Array *files = index.getArray("files");
  if (!files || int64_t(files->size()) != *world)
    return bad("\"files\" does not list one shard per rank (" + llvm::Twine(*world) + ")");
  // Every entry is checked, not only one rank's: each rank must reach the
  // same verdict, or the ranks that found none would wait for the others.
  std::vector<CheckpointShard> shards;
  for (int64_t r = 0; r < *world; ++r) {
    const llvm::json::Value &entry = (*files)[size_t(r)];
    CheckpointShard shard;
    shard.step = step;
    shard.worldSize = *world;
    shard.file = shardFileName(r);
    if (*version == 1) {
      if (entry.getAsString() != llvm::StringRef(shard.file))
        return bad("\"files\"[" + llvm::Twine(r) + "] is not \"" + shard.file + "\"");
    } else {
      const llvm::json::Object *object = entry.getAsObject();
      std::optional<llvm::StringRef> named = object ? object->getString("name") : std::nullopt;
      std::optional<int64_t> bytes = object ? object->getInteger("bytes") : std::nullopt;
      std::optional<llvm::StringRef> blake3 = object ? object->getString("blake3") : std::nullopt;
      if (named != llvm::StringRef(shard.file) || !bytes || *bytes < 0 || !blake3 ||
          blake3->size() != 64 || !llvm::all_of(*blake3, llvm::isHexDigit))
        return bad("\"files\"[" + llvm::Twine(r) + "] is not {\"name\": \"" + shard.file +
                   "\", \"bytes\": N, \"blake3\": 64 hex digits}");
      shard.digest = FileDigest{*bytes, blake3->lower()};
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

llvm::Error verifyShard(llvm::StringRef path, const FileDigest &digest) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return pathError("checkpoint shard", path, ec.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return pathError("checkpoint shard", path, "not a regular file");
  if (int64_t(status.getSize()) != digest.bytes)
    return pathError("checkpoint shard", path,
                     llvm::formatv("{0} bytes where the index says {1}: truncated, extended "
                                   "or replaced",
                                   status.getSize(), digest.bytes));
  auto actual = digestFile(path);
  if (!actual)
    return actual.takeError();
  if (actual->bytes != digest.bytes || actual->blake3 != digest.blake3)
    return pathError("checkpoint shard", path,
                     "its BLAKE3 digest is not the index's: the file is corrupt or from "
                     "another checkpoint");
  return llvm::Error::success();
}

llvm::Error pruneCheckpoints(llvm::StringRef dir, int keep) {
  if (keep <= 0)
    return llvm::Error::success();
  std::vector<std::pair<int64_t, std::string>> incomplete;
  auto checkpoints = listCheckpoints(dir, &incomplete);
  if (!checkpoints)
    return checkpoints.takeError();
  // What earlier prunes that stopped midway left: step directories without
  // an index, older than the newest complete checkpoint.
  for (const auto &[step, path] : incomplete)
    if (!checkpoints->empty() && step < checkpoints->back().first)
      if (std::error_code ec = llvm::sys::fs::remove_directories(path, /*IgnoreErrors=*/false))
        return pathError("checkpoint", path,
                         "cannot remove the incomplete one (no index.json): " + ec.message());
  size_t stale = checkpoints->size() - std::min<size_t>(keep, checkpoints->size());
  for (const auto &[step, path] : llvm::ArrayRef(*checkpoints).take_front(stale)) {
    // Unlinking index.json durably first means that a crash midway leaves an
    // incomplete checkpoint, which readers skip, not one missing shards.
    // (A step whose index.json is corrupt counts as complete here as for
    // readers, so it holds one of the `keep` places until it is removed.)
    std::error_code ec = llvm::sys::fs::remove(join(path, "index.json"));
    if (!ec)
      ec = syncDirectory(path);
    failpoint("pruning");
    if (!ec)
      ec = llvm::sys::fs::remove_directories(path, /*IgnoreErrors=*/false);
    if (ec)
      return pathError("checkpoint", path, "cannot remove: " + ec.message());
  }
  return llvm::Error::success();
}

} // namespace ppcrt
