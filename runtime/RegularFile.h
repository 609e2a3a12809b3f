//===- RegularFile.h - reading input files that cannot stall or trick -*- C++ -*-===//
//
// Every file ppc and its executables read as input (models, external data,
// weights, checkpoints, token data, .npy) is opened through readRegularFile:
// opened non-blocking, so a FIFO cannot stall the open, and checked with
// fstat on the open descriptor to be a regular file, so a FIFO, a device
// (/dev/zero would be read until memory runs out) or a directory is refused
// with a one-line error naming the file. Header-only: the frontend, the
// executor and the runtime each use it without linking one another.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_REGULARFILE_H
#define PPC_RUNTIME_REGULARFILE_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <linux/openat2.h>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ppc {

namespace detail {
constexpr int kReadFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

/// Opens `relative` under the directory descriptor `dir` without leaving
/// it and without following a symbolic link anywhere on the way: openat2's
/// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it (5.6 on),
/// else one component at a time with O_NOFOLLOW. Returns -1 with errno set.
inline int openBeneathByComponents(int dir, const std::string &relative);

inline int openBeneath(int dir, const std::string &relative) {
  struct open_how how = {};
  how.flags = kReadFlags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = int(::syscall(SYS_openat2, dir, relative.c_str(), &how, sizeof(how)));
  if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
    return fd;
  return openBeneathByComponents(dir, relative);
}

/// openBeneath's fallback for kernels without openat2 (or where seccomp
/// refuses it).
inline int openBeneathByComponents(int dir, const std::string &relative) {
  // One component at a time, none a symbolic link and none "..". An empty
  // or "." last component opens the directory reached, which the caller's
  // fstat then refuses as one.
  int at = ::dup(dir);
  size_t begin = 0;
  while (at >= 0) {
    size_t slash = relative.find('/', begin);
    bool last = slash == std::string::npos;
    std::string part = relative.substr(begin, last ? std::string::npos : slash - begin);
    if (!last)
      begin = slash + 1;
    if (part == "..") {
      ::close(at);
      errno = EXDEV;
      return -1;
    }
    if ((part.empty() || part == ".") && !last)
      continue;
    if (part.empty())
      part = ".";
    int next = ::openat(at, part.c_str(),
                        last ? kReadFlags | O_NOFOLLOW : O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int error = errno;
    ::close(at);
    errno = error;
    if (last || next < 0)
      return next;
    // O_PATH | O_NOFOLLOW opens a symbolic link itself: refuse it here.
    struct stat st = {};
    if (::fstat(next, &st) != 0 || !S_ISDIR(st.st_mode)) {
      ::close(next);
      errno = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
      return -1;
    }
    at = next;
  }
  return -1;
}
} // namespace detail

/// fstat of the open `fd`, which must be a regular file with at most
/// `maxLinks` hard links; closes `fd` on an error.
inline llvm::Expected<struct stat> checkRegularFile(int fd, std::optional<nlink_t> maxLinks) {
  auto fail = [&](const llvm::Twine &message) {
    ::close(fd);
    return llvm::createStringError(message);
  };
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(S_ISDIR(st.st_mode)
                    ? "is a directory"
                    : "not a regular file (a FIFO, device or socket cannot be read as one)");
  if (maxLinks && st.st_nlink > *maxLinks)
    return fail("has " + llvm::Twine(uint64_t(st.st_nlink)) +
                " hard links; one could be a file outside the model's directory");
  return st;
}

/// Maps the regular file open at `fd` (closing it), whole or `slice`
/// ({offset, length}); `maxLinks` refuses files with more hard links.
inline llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
mapRegularFile(int fd, const std::string &name, std::optional<std::pair<uint64_t, uint64_t>> slice,
               std::optional<nlink_t> maxLinks = std::nullopt) {
  auto fail = [](const llvm::Twine &message) { return llvm::createStringError(message); };
  auto checked = checkRegularFile(fd, maxLinks);
  if (!checked)
    return checked.takeError();
  struct stat st = *checked;
  if (slice && (slice->first > uint64_t(st.st_size) ||
                slice->second > uint64_t(st.st_size) - slice->first)) {
    ::close(fd);
    return fail("offset " + llvm::Twine(slice->first) + " and length " +
                llvm::Twine(slice->second) + " reach past its end (" +
                llvm::Twine(uint64_t(st.st_size)) + " bytes)");
  }
  // Back to blocking reads: a regular file never blocks, and mapping or
  // reading it must not see EAGAIN.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  auto buffer =
      slice ? llvm::MemoryBuffer::getOpenFileSlice(fd, name, slice->second, int64_t(slice->first))
            : llvm::MemoryBuffer::getOpenFile(fd, name, uint64_t(st.st_size),
                                              /*RequiresNullTerminator=*/false);
  ::close(fd);
  if (!buffer)
    return fail(buffer.getError().message());
  return std::move(*buffer);
}

/// Reads `path` (whole, or `slice`: {offset, length}) if it is a regular
/// file. The error is the reason alone, for the caller to prefix with its
/// own naming of the file.
inline llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readRegularFile(const llvm::Twine &path,
                std::optional<std::pair<uint64_t, uint64_t>> slice = std::nullopt) {
  std::string name = path.str();
  int fd = ::open(name.c_str(), detail::kReadFlags);
  if (fd < 0)
    return llvm::createStringError(std::strerror(errno));
  return mapRegularFile(fd, name, slice);
}

namespace detail {
/// Opens `relative` beneath `dir` (openBeneath), or an error saying why.
inline llvm::Expected<int> openFileBeneath(llvm::StringRef dir, const std::string &relative) {
  int dirFd = ::open(dir.empty() ? "." : dir.str().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    return llvm::createStringError("its directory: " + llvm::Twine(std::strerror(errno)));
  int fd = openBeneath(dirFd, relative);
  int error = errno;
  ::close(dirFd);
  if (fd < 0)
    return llvm::createStringError(
        error == ELOOP || error == EXDEV
            ? "it is, or its path goes through, a symbolic link or leaves the model's "
              "directory"
            : std::strerror(error));
  return fd;
}
} // namespace detail

/// The size of `relative` inside `dir`, opened and checked as
/// readFileBeneath does.
inline llvm::Expected<uint64_t> sizeOfFileBeneath(llvm::StringRef dir,
                                                  const std::string &relative) {
  auto fd = detail::openFileBeneath(dir, relative);
  if (!fd)
    return fd.takeError();
  auto st = checkRegularFile(*fd, nlink_t(1));
  if (!st)
    return st.takeError();
  ::close(*fd);
  return uint64_t(st->st_size);
}

/// Reads `relative` inside directory `dir` as readRegularFile does, opened
/// so that it cannot resolve outside `dir` (no `..` out of it, no symbolic
/// link anywhere on the way, checked by the kernel at the open itself, so a
/// link swapped in after any earlier check is refused too) and refused if
/// it has more than one hard link (which could be a file outside `dir`).
inline llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readFileBeneath(llvm::StringRef dir, const std::string &relative,
                std::optional<std::pair<uint64_t, uint64_t>> slice = std::nullopt) {
  auto fd = detail::openFileBeneath(dir, relative);
  if (!fd)
    return fd.takeError();
  return mapRegularFile(*fd, (dir + "/" + relative).str(), slice, nlink_t(1));
}

} // namespace ppc

#endif // PPC_RUNTIME_REGULARFILE_H
