//===- MpiRank.cpp - ppcrt::Rank on MPI -----------------------------------===//

#include "runtime/ppcrt/MpiRank.h"
#include "runtime/Printable.h"
#include "runtime/ppcrt/Blocks.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace ppcrt {

Rank::~Rank() = default;

Ticket Rank::transfer(void *to, const void *from, int64_t bytes, bool toHost, const char *what) {
  (void)toHost;
  (void)what;
  std::memcpy(to, from, size_t(bytes));
  return 0;
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::I64:
    return MPI_INT64_T;
  case DType::I32:
    return MPI_INT32_T;
  case DType::BF16:
  case DType::F16:
    return MPI_UINT16_T;
  case DType::I8:
    return MPI_INT8_T;
  case DType::U8:
  case DType::I1:
    return MPI_UINT8_T;
  case DType::I16:
    return MPI_INT16_T;
  case DType::U16:
    return MPI_UINT16_T;
  case DType::U32:
    return MPI_UINT32_T;
  case DType::U64:
    return MPI_UINT64_T;
  }
  return MPI_BYTE;
}

/// MPI has no 16-bit float type: mpiType moves their bits as integers,
/// which a reduction would add as integers, so it is refused.
static void checkReducible(DType dtype, const char *what) {
  if (dtype == DType::BF16 || dtype == DType::F16)
    fatal((std::string(what) + ": a reduction of " + safetensorsName(dtype) +
           " values, which the MPI runtime cannot do")
              .c_str());
}

static MPI_Op mpiOp(Reduction reduction) { return reduction == Reduction::Sum ? MPI_SUM : MPI_MAX; }

/// What the signal handler reports: the rank and what it waits in.
static std::atomic<MpiRank *> activeRank{nullptr};

static std::atomic<bool> quiet{false};

void stopQuietly() { quiet = true; }

/// SIGTERM (mpirun stopping the job after another rank died) and SIGINT:
/// say which collective this rank was in, with async-signal-safe calls only.
static void onTerminate(int signal) {
  if (quiet.load())
    _exit(1);
  MpiRank *self = activeRank.load();
  char line[512];
  const char *what = self ? self->waitingFor() : nullptr;
  int n = std::snprintf(line, sizeof(line), "error: rank %d: stopped by signal %d %s%s%s%lld\n",
                        self ? self->worldRank() : -1, signal,
                        what ? "while waiting in " : "while computing", what ? what : "",
                        ", after call #", static_cast<long long>(self ? self->calls() : 0));
  if (n > 0)
    (void)!write(2, line, std::min<size_t>(n, sizeof(line) - 1));
  _exit(1);
}

MpiRank::MpiRank(const Program &program, double timeoutSeconds)
    : program(program), timeout(timeoutSeconds) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  coords = meshCoordinates(program, rank);
  for (int g = 0; g < program.numGroups; ++g) {
    Group group;
    group.position = blockIndex(program, coords, program.groups[g]);
    group.size = blockCount(program, program.groups[g]);
    // Ranks sharing the coordinates off the group's axes form the group.
    std::vector<int64_t> color = coords;
    for (int a : meshAxisIndices(program, program.groups[g]))
      color[a] = 0;
    MPI_Comm_split(MPI_COMM_WORLD, int(meshRankAt(program, color)), int(group.position),
                   &group.comm);
    groups.push_back(group);
  }
  if (timeout > 0)
    watchdog = std::thread([this] { watch(); });
  activeRank = this;
  std::signal(SIGTERM, onTerminate);
  std::signal(SIGINT, onTerminate);
}

MpiRank::~MpiRank() {
  endStep();
  activeRank = nullptr;
  stopping = true;
  if (watchdog.joinable())
    watchdog.join();
  for (Group &group : groups)
    MPI_Comm_free(&group.comm);
}

//===----------------------------------------------------------------------===//
// The watchdog
//===----------------------------------------------------------------------===//

void MpiRank::enter(const char *what) {
  ++sequence;
  waitingSince = now();
  waitingIn = what;
}

void MpiRank::leave() { waitingIn = nullptr; }

void MpiRank::watch() {
  while (!stopping) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const char *what = waitingIn;
    if (what && now() - waitingSince > timeout) {
      std::fprintf(stderr,
                   "error: rank %d: waited %.0f s (--timeout) in %s, call #%lld of this "
                   "rank; a peer rank has died or hangs\n",
                   rank, timeout, what, static_cast<long long>(sequence.load()));
      std::fflush(stderr);
      abortCommunicators();
      MPI_Abort(MPI_COMM_WORLD, 1);
      _exit(1);
    }
  }
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

Ticket MpiRank::allReduce(int g, DType dtype, const void *in, void *out, int64_t count,
                          Reduction reduction, const char *what) {
  checkReducible(dtype, what);
  enter(what);
  MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, int(count), mpiType(dtype), mpiOp(reduction),
                groups[g].comm);
  leave();
  return 0;
}

Ticket MpiRank::allGather(int g, DType dtype, const void *in, void *out, int64_t outer,
                          int64_t inner, const char *what) {
  int64_t size = groups[g].size, bytes = int64_t(dtypeBytes(dtype));
  enter(what);
  if (outer == 1) {
    MPI_Allgather(in, int(inner), mpiType(dtype), out, int(inner), mpiType(dtype), groups[g].comm);
    leave();
    return 0;
  }
  // Members' blocks arrive one after the other; interleave them per row.
  scratch.resize(size * outer * inner * bytes);
  MPI_Allgather(in, int(outer * inner), mpiType(dtype), scratch.data(), int(outer * inner),
                mpiType(dtype), groups[g].comm);
  leave();
  char *to = static_cast<char *>(out);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < size; ++j)
      std::memcpy(to + (o * size + j) * inner * bytes,
                  scratch.data() + (j * outer + o) * inner * bytes, inner * bytes);
  return 0;
}

Ticket MpiRank::reduceScatter(int g, DType dtype, const void *in, void *out, int64_t outer,
                              int64_t inner, Reduction reduction, const char *what) {
  checkReducible(dtype, what);
  int64_t size = groups[g].size, bytes = int64_t(dtypeBytes(dtype));
  const void *send = in;
  if (outer != 1) {
    // Member j's block (rows of every outer index) made contiguous.
    scratch.resize(size * outer * inner * bytes);
    const char *from = static_cast<const char *>(in);
    for (int64_t j = 0; j < size; ++j)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(scratch.data() + (j * outer + o) * inner * bytes,
                    from + (o * size + j) * inner * bytes, inner * bytes);
    send = scratch.data();
  }
  enter(what);
  MPI_Reduce_scatter_block(send, out, int(outer * inner), mpiType(dtype), mpiOp(reduction),
                           groups[g].comm);
  leave();
  return 0;
}

/// Copies the block [index * size/parts, (index+1) * size/parts) of
/// dimension `dim` of a row-major tensor of `shape` into or out of a dense
/// buffer; `pack` says which way.
static void copyBlock(const int64_t *shape, int rank, int dim, int64_t parts, int64_t index,
                      size_t bytes, char *tensor, char *dense, bool pack) {
  int64_t outer = 1, inner = bytes;
  for (int d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int d = dim + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t rows = shape[dim] / parts;
  for (int64_t o = 0; o < outer; ++o) {
    char *t = tensor + (o * shape[dim] + index * rows) * inner;
    char *b = dense + o * rows * inner;
    if (pack)
      std::memcpy(b, t, rows * inner);
    else
      std::memcpy(t, b, rows * inner);
  }
}

Ticket MpiRank::allToAll(int g, DType dtype, const void *in, void *out, const int64_t *shape,
                         int rank, int split, int concat, const char *what) {
  int64_t size = groups[g].size, bytes = int64_t(dtypeBytes(dtype));
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= shape[d];
  int64_t block = total / size;
  scratch.resize(total * bytes);
  scratch2.resize(total * bytes);
  for (int64_t j = 0; j < size; ++j)
    copyBlock(shape, rank, split, size, j, bytes, const_cast<char *>(static_cast<const char *>(in)),
              scratch.data() + j * block * bytes, true);
  enter(what);
  MPI_Alltoall(scratch.data(), int(block), mpiType(dtype), scratch2.data(), int(block),
               mpiType(dtype), groups[g].comm);
  leave();
  // Received blocks have the input's shape with `split` divided; the result
  // concatenates them along `concat`.
  std::vector<int64_t> outShape(shape, shape + rank);
  outShape[split] /= size;
  outShape[concat] *= size;
  for (int64_t j = 0; j < size; ++j)
    copyBlock(outShape.data(), rank, concat, size, j, bytes, static_cast<char *>(out),
              scratch2.data() + j * block * bytes, false);
  return 0;
}

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

int MpiRank::peerRank(const char *axis, int64_t peer) const {
  std::vector<int64_t> at = coords;
  for (int a : meshAxisIndices(program, axis))
    at[a] = peer;
  return int(meshRankAt(program, at));
}

Ticket MpiRank::send(const char *axis, int64_t peer, DType dtype, const void *data, int64_t count,
                     const char *) {
  PendingSend message;
  size_t bytes = count * dtypeBytes(dtype);
  message.data.assign(static_cast<const char *>(data), static_cast<const char *>(data) + bytes);
  pending.push_back(std::move(message));
  PendingSend &sent = pending.back();
  MPI_Isend(sent.data.data(), int(count), mpiType(dtype), peerRank(axis, peer), 0, MPI_COMM_WORLD,
            &sent.request);
  return 0;
}

Ticket MpiRank::recv(const char *axis, int64_t peer, DType dtype, void *data, int64_t count,
                     const char *what) {
  enter(what);
  MPI_Recv(data, int(count), mpiType(dtype), peerRank(axis, peer), 0, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  leave();
  return 0;
}

void MpiRank::endStep() {
  static const char *what = "waiting for this step's sends to be received";
  enter(what);
  for (PendingSend &message : pending)
    MPI_Wait(&message.request, MPI_STATUS_IGNORE);
  leave();
  pending.clear();
}

namespace {
std::atomic<const char *> firstKernelError{nullptr};
} // namespace

void kernelFailed(const char *message) {
  const char *none = nullptr;
  firstKernelError.compare_exchange_strong(none, message);
}

const char *takeKernelError() { return firstKernelError.exchange(nullptr); }

[[noreturn]] void fatal(const char *message) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "error: rank %d: %s\n", rank, ppc::printable(message).c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

} // namespace ppcrt
