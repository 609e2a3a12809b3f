//===- Executable.cpp - ppcrt::run: the compiled executable's CLI and loop -===//
//
// DESIGN.md §4's executable: every rank runs the program of its pipeline
// coordinate on its own arena, with its blocks of the parameters, optimizer
// state and token windows; the rank that computes the loss logs it. State
// lives in its arguments' buffers in the arena between steps (the memory
// plan gives them to no other value), each updated value copied there at a
// step's end, and checkpoints are each rank's state as one safetensors
// file, committed atomically by rank 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/CheckpointDir.h"
#include "runtime/CheckpointLayout.h"
#include "runtime/Failpoint.h"
#include "runtime/Printable.h"
#include "runtime/Safetensors.h"
#include "runtime/TokenData.h"
#include "runtime/ppcrt/Blocks.h"
#include "runtime/ppcrt/CommandLine.h"
#include "runtime/ppcrt/Device.h"
#include "runtime/ppcrt/Export.h"
#include "runtime/ppcrt/HyperParameters.h"
#include "runtime/ppcrt/MpiRank.h"
#include "runtime/ppcrt/Profile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace cl = llvm::cl;

namespace ppcrt {
namespace {

int64_t elementsOf(const TensorInfo &t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d)
    n *= t.shape[d];
  return n;
}

size_t bytesOf(const TensorInfo &t) { return elementsOf(t) * dtypeBytes(t.dtype); }

/// A parameter or optimizer state: what a checkpoint holds.
bool isStateKey(llvm::StringRef key) {
  return key.starts_with(kParamKey) || key.starts_with(kStateKey);
}

std::string formatError(llvm::Error error) { return llvm::toString(std::move(error)); }

/// Ends every rank on an error each found alike (flags, data, checkpoint
/// index): rank 0 reports it, and every rank leaves MPI cleanly.
[[noreturn]] void dieAll(const std::string &message, bool lead) {
  stopQuietly();
  if (lead) {
    // One write: mpirun forwards each rank's output in the chunks it is
    // written in, so a line written in pieces can be cut by another rank's.
    llvm::errs() << "error: " + ppc::printable(message) + "\n";
    llvm::errs().flush();
  }
  MPI_Finalize();
  std::exit(1);
}

/// The data file, mapped for the whole run: a file that shrinks while it is
/// mapped makes a read past its new end raise SIGBUS, which becomes one
/// error line naming the file (async-signal-safe: the line is made before).
struct GuardedMapping {
  const char *begin = nullptr, *end = nullptr;
  char message[1024] = {};
  size_t length = 0;
};
GuardedMapping guardedData;

void onBusError(int signal, siginfo_t *info, void *) {
  const char *address = static_cast<const char *>(info->si_addr);
  if (address >= guardedData.begin && address < guardedData.end) {
    (void)!write(2, guardedData.message, guardedData.length);
    _exit(1);
  }
  // Not the data file: the default action (a core dump), as without us.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void guardDataFile(const ppc::TokenData &tokens, int worldRank) {
  llvm::StringRef bytes = tokens.bytes();
  guardedData.begin = bytes.begin();
  guardedData.end = bytes.end();
  int n = std::snprintf(guardedData.message, sizeof(guardedData.message),
                        "error: rank %d: data file '%s' became shorter while training "
                        "(SIGBUS reading it): it must not change during a run\n",
                        worldRank, tokens.file().c_str());
  guardedData.length = std::min<size_t>(n > 0 ? size_t(n) : 0, sizeof(guardedData.message) - 1);
  struct sigaction action = {};
  action.sa_sigaction = onBusError;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, nullptr);
}

/// Ends every rank when any found an error of its own (a shard that fails
/// its check, say): the lowest such rank reports it and every rank leaves
/// MPI cleanly, so the error is one line, not interleaved with others or
/// followed by MPI_Abort's banner. Collective: every rank must call it.
/// The rank whose watchdog guards the runtime's own collectives, once it
/// exists (before, a rank that hangs cannot have started a step).
Rank *watchdogRank = nullptr;

/// Runs one of the runtime's own collectives on the world, watched.
void watched(const char *what, const std::function<void()> &call) {
  if (watchdogRank)
    watchdogRank->watched(what, call);
  else
    call();
}

void stopIfAny(const std::string &error, int worldRank) {
  int first = error.empty() ? INT_MAX : worldRank;
  watched("the ranks' error check",
          [&] { MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); });
  if (first != INT_MAX)
    dieAll(error, first == worldRank);
}

struct Trainer {
  const Program &program;
  Device &device;
  Rank &rank;
  std::vector<int64_t> coordinates;
  const RankProgram &rp;
  /// The state carried between steps, by key: parameters, optimizer state
  /// (device memory).
  std::map<std::string, void *> held;
  std::map<std::string, double> outputs;
  /// The hyper-parameters fed to the step, by name ("lr").
  std::map<std::string, double> hypers;
  /// CUDA: steps from the second on run as one CUDA graph (--cuda-graphs).
  bool graphs = true;
  /// --profile: the wall time of the steps the profiler kept.
  double profiledSeconds = 0;

  Trainer(const Program &program, Device &device, Rank &rank, const RankProgram &rp)
      : program(program), device(device), rank(rank),
        coordinates(meshCoordinates(program, rank.worldRank())), rp(rp) {}
  ~Trainer() {
    if (arena)
      device.release(arena);
    if (hostArena)
      device.releaseHost(hostArena);
  }

  /// The program's arenas (device memory, and host memory with --offload).
  /// The state lives in its arguments' buffers there between steps (the
  /// memory plan keeps them for it): held[key] points into them.
  char *arena = nullptr, *hostArena = nullptr;

  /// Allocates the arenas; a one-line error, or "".
  std::string allocateArenas(int worldRank) {
    arena = static_cast<char *>(device.allocate(std::max<int64_t>(64, rp.arenaBytes)));
    if (!arena)
      return llvm::formatv("rank {0}: cannot allocate the arena of {1:f1} MiB on {2}", worldRank,
                           rp.arenaBytes / 1048576.0, device.describe());
    if (rp.hostArenaBytes > 0 &&
        !(hostArena = static_cast<char *>(device.allocateHost(size_t(rp.hostArenaBytes)))))
      return llvm::formatv("rank {0}: cannot allocate the host arena of {1:f1} MiB", worldRank,
                           rp.hostArenaBytes / 1048576.0);
    for (int i = 0; i < rp.numArgs; ++i)
      if (isState(rp.args[i]))
        held[rp.args[i].key] = slotOf(rp.args[i], arena, hostArena);
    return "";
  }

  /// Where `t` is in this step's arenas.
  static char *slotOf(const TensorInfo &t, char *arena, char *hostArena) {
    return (t.host ? hostArena : arena) + t.offset;
  }
  /// Copies of `bytes` into and out of memory of `t`'s side (the device's,
  /// or the host's with --offload) from and to host memory, and within it.
  void toSide(const TensorInfo &t, void *to, const void *from, size_t bytes) {
    if (t.host)
      std::memcpy(to, from, bytes);
    else
      device.upload(to, from, bytes);
  }
  void fromSide(const TensorInfo &t, void *to, const void *from, size_t bytes) {
    if (t.host)
      std::memcpy(to, from, bytes);
    else
      device.download(to, from, bytes);
  }
  void withinSide(const TensorInfo &t, void *to, const void *from, size_t bytes) {
    if (t.host)
      std::memcpy(to, from, bytes);
    else
      device.copy(to, from, bytes);
  }

  /// A host copy of held tensor `t`.
  std::vector<char> fetch(const TensorInfo &t) {
    std::vector<char> host(bytesOf(t));
    fromSide(t, host.data(), held[t.key], host.size());
    return host;
  }

  bool isState(const TensorInfo &t) const { return isStateKey(t.key); }

  /// Parameters from the initial weights file, optimizer state zero.
  llvm::Error initialize(const std::string &weightsPath) {
    auto weights = SafetensorsFile::open(weightsPath);
    if (!weights)
      return weights.takeError();
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      if (!isState(t))
        continue;
      void *memory = held[t.key];
      llvm::StringRef key = t.key;
      if (!key.starts_with(kParamKey))
        continue;
      std::vector<char> local(bytesOf(t));
      auto global = weights->lookup(key.drop_front(kParamKey.size()));
      if (!global)
        return global.takeError();
      int64_t expected = dtypeBytes(t.dtype);
      for (int d = 0; d < t.rank; ++d)
        expected *= t.globalShape[d];
      int64_t have = dtypeBytes(global->dtype);
      for (int64_t s : global->shape)
        have *= s;
      if (global->dtype != t.dtype || have != expected)
        return llvm::createStringError("initial weights '" + weightsPath + "': tensor '" +
                                       key.drop_front(kParamKey.size()).str() +
                                       "' does not match the compiled program");
      // This rank's block of the global value.
      size_t bytes = dtypeBytes(t.dtype);
      const char *from = static_cast<const char *>(global->data);
      forEachBlockElement(program, t, coordinates, [&](int64_t l, int64_t g) {
        std::memcpy(local.data() + l * bytes, from + g * bytes, bytes);
      });
      toSide(t, memory, local.data(), local.size());
    }
    return llvm::Error::success();
  }

  /// Which token input `key` is (0: inputs, 1: labels), -1 for none.
  int tokenInput(llvm::StringRef key) const {
    for (int k = 0; k < program.numTokenInputs; ++k)
      if (key == program.tokenInputs[k])
        return k;
    return -1;
  }

  /// An error naming the first argument of this rank's program that the
  /// runtime cannot feed (an executable built by another ppc), else empty.
  std::string unfedInput() const {
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      llvm::StringRef key = t.key;
      bool fed =
          key == "step" || isState(t) ||
          (key.starts_with(kHyperKey) && hypers.count(key.drop_front(kHyperKey.size()).str())) ||
          tokenInput(key) >= 0;
      if (!fed)
        return llvm::formatv("rank {0}: the program takes '{1}', which the runtime cannot "
                             "feed (an executable of another ppc version?)",
                             rank.worldRank(), t.key)
            .str();
    }
    return {};
  }

  /// Runs step `step` on the arenas; returns the error a kernel of this rank
  /// found (an index out of range), empty when none did.
  std::string step(int64_t step, const ppc::TokenData &tokens) {
    std::vector<int64_t> scratch, window;
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      char *slot = slotOf(t, arena, hostArena);
      llvm::StringRef key = t.key;
      if (key == "step") {
        int64_t s = step;
        toSide(t, slot, &s, sizeof(s));
        continue;
      }
      if (isState(t))
        continue; // It is there since the last step's end.
      if (key.starts_with(kHyperKey)) {
        double value = hypers.at(key.drop_front(kHyperKey.size()).str());
        toSide(t, slot, &value, sizeof(value));
        continue;
      }
      // Token windows: inputs for the first token input, labels for the
      // second; this rank's rows are its block of the global batch.
      int which = tokenInput(key);
      assert(which >= 0 && "unfedInput checked every argument");
      int64_t rows = t.shape[0], seq = t.shape[1];
      int64_t first = blockIndex(program, coordinates, t.sharding[0]) * rows;
      scratch.resize(2 * seq);
      window.resize(rows * seq);
      for (int64_t r = 0; r < rows; ++r) {
        tokens.window(step, program.globalBatch, seq, first + r, scratch.data(),
                      scratch.data() + seq);
        std::memcpy(window.data() + r * seq, scratch.data() + (which ? seq : 0),
                    seq * sizeof(int64_t));
      }
      toSide(t, slot, window.data(), window.size() * sizeof(int64_t));
    }
    rank.runStep(rp, arena, hostArena, graphs);
    rank.endStep();
    if (rank.profiler)
      rank.profiler->endStep();
    // CUDA kernels flag their errors on the device, CPU kernels in the
    // runtime (kernelFailed); both are taken once the step has ended.
    const char *error = program.kernelError ? program.kernelError() : takeKernelError();
    if (error)
      return error;
    for (int i = 0; i < rp.numResults; ++i) {
      const TensorInfo &t = rp.results[i];
      const char *slot = slotOf(t, arena, hostArena);
      llvm::StringRef key = t.key;
      if (key.starts_with(kOutputKey)) {
        double value = 0;
        if (t.dtype == DType::F32) {
          float f;
          fromSide(t, &f, slot, sizeof(f));
          value = f;
        } else if (t.dtype == DType::F64) {
          fromSide(t, &value, slot, sizeof(value));
        }
        outputs[key.drop_front(kOutputKey.size()).str()] = value;
        continue;
      }
      // The updated state goes to its argument's buffer, which no value of
      // the step shares (the memory plan keeps it), for the next step.
      if (held[t.key] != slot)
        withinSide(t, held[t.key], slot, bytesOf(t));
    }
    return {};
  }

  /// Writes this rank's state into the staging directory of `steps`.
  llvm::Error save(const std::string &staging, int64_t steps, const std::string &file) {
    std::vector<TensorView> tensors;
    std::vector<std::vector<char>> copies;
    copies.reserve(rp.numArgs);
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      if (!isState(t))
        continue;
      TensorView view;
      view.name = t.key;
      view.dtype = t.dtype;
      view.shape.assign(t.shape, t.shape + t.rank);
      copies.push_back(fetch(t));
      view.data = copies.back().data();
      tensors.push_back(view);
    }
    std::map<std::string, std::string> metadata{{"fingerprint", program.fingerprint},
                                                {"step", std::to_string(steps)},
                                                {"rank", std::to_string(rank.worldRank())}};
    llvm::SmallString<256> path(staging);
    llvm::sys::path::append(path, file);
    return writeSafetensors(path, tensors, metadata);
  }

  llvm::Error load(const std::string &checkpoint, const std::string &file, int64_t step) {
    llvm::SmallString<256> path(checkpoint);
    llvm::sys::path::append(path, file);
    auto shard = SafetensorsFile::open(path);
    if (!shard)
      return shard.takeError();
    auto fingerprint = shard->metadata().find("fingerprint");
    if (fingerprint == shard->metadata().end() || fingerprint->second != program.fingerprint)
      return llvm::createStringError("checkpoint shard '" + std::string(path) +
                                     "': its metadata fingerprint is not the index's (a shard "
                                     "of another program put in this checkpoint)");
    // What the shard says of itself must be what the index says of it.
    for (auto [key, want] :
         {std::pair<const char *, int64_t>{"step", step}, {"rank", int64_t(rank.worldRank())}}) {
      auto found = shard->metadata().find(key);
      if (found == shard->metadata().end() || found->second != std::to_string(want))
        return llvm::createStringError(
            "checkpoint shard '" + std::string(path) + "': its metadata " + key + " is not " +
            std::to_string(want) + " (a shard of another " + key + " put in this checkpoint)");
    }
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      if (!isState(t))
        continue;
      auto tensor = shard->lookup(t.key);
      if (!tensor)
        return tensor.takeError();
      if (tensor->dtype != t.dtype ||
          tensor->shape != std::vector<int64_t>(t.shape, t.shape + t.rank))
        return llvm::createStringError("checkpoint '" + std::string(path) + "': tensor '" + t.key +
                                       "' does not match the compiled program");
      toSide(t, held[t.key], tensor->data, bytesOf(t));
    }
    return llvm::Error::success();
  }

  /// Takes this rank's block of every state tensor from the global values
  /// `reader` puts together (a checkpoint saved on another mesh, layout,
  /// ZeRO stage or pipeline cut).
  llvm::Error loadResharded(CheckpointReader &reader, const std::string &checkpoint) {
    MeshLayout mesh = meshLayout(program);
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      if (!isState(t))
        continue;
      auto global = reader.read(t.key);
      if (!global)
        return global.takeError();
      BlockLayout layout = blockLayout(t);
      if (global->dtype != t.dtype || global->shape != layout.globalShape)
        return llvm::createStringError(
            llvm::formatv("checkpoint '{0}': tensor '{1}' is {2} {3:$[x]}, where this program "
                          "has {4} {5:$[x]}",
                          checkpoint, t.key, safetensorsName(global->dtype),
                          llvm::make_range(global->shape.begin(), global->shape.end()),
                          safetensorsName(t.dtype),
                          llvm::make_range(layout.globalShape.begin(), layout.globalShape.end()))
                .str());
      std::vector<char> local = takeBlock(*global, mesh, layout, coordinates);
      toSide(t, held[t.key], local.data(), local.size());
    }
    return llvm::Error::success();
  }
};

/// Whether each of `count` elements of type T at `data` is finite.
template <typename T> bool allFiniteAs(const char *data, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    if (!std::isfinite(v))
      return false;
  }
  return true;
}

/// Whether each of `count` 16-bit floats at `data` is finite: its exponent
/// bits (`exponent`) are not all ones.
bool allFinite16(const char *data, int64_t count, uint16_t exponent) {
  for (int64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, data + i * 2, 2);
    if ((bits & exponent) == exponent)
      return false;
  }
  return true;
}

/// Whether every element of `count` of type `dtype` at `data` is finite
/// (integer types always are).
bool allFinite(DType dtype, const char *data, int64_t count) {
  switch (dtype) {
  case DType::F32:
    return allFiniteAs<float>(data, count);
  case DType::F64:
    return allFiniteAs<double>(data, count);
  case DType::BF16:
    return allFinite16(data, count, 0x7f80);
  case DType::F16:
    return allFinite16(data, count, 0x7c00);
  default:
    return true;
  }
}

/// The state tensors (parameters, optimizer state) of every rank program.
std::set<std::string> stateKeys(const Program &program) {
  std::set<std::string> keys;
  for (int p = 0; p < program.numPrograms; ++p)
    for (int i = 0; i < program.programs[p].numArgs; ++i) {
      llvm::StringRef key = program.programs[p].args[i].key;
      if (isStateKey(key))
        keys.insert(key.str());
    }
  return keys;
}

/// After a step whose loss was finite and gradient norm was not: the first
/// state tensor (in key order, over every rank) holding a non-finite
/// element, "" when none does. Without gradient clipping, a parameter's
/// state turns non-finite only when its own gradient (or its square, in
/// Adam's second moment) overflowed, so this names where the divergence
/// entered; clipping by a non-finite norm spreads it to every parameter.
/// Collective: every rank must call it.
std::string firstNonFinite(const Program &program, Trainer &trainer) {
  std::set<std::string> keys = stateKeys(program);
  std::vector<std::string> ordered(keys.begin(), keys.end());
  int first = INT_MAX;
  for (int i = 0; i < trainer.rp.numArgs; ++i) {
    const TensorInfo &t = trainer.rp.args[i];
    if (!trainer.isState(t))
      continue;
    std::vector<char> host = trainer.fetch(t);
    if (!allFinite(t.dtype, host.data(), elementsOf(t)))
      first =
          std::min(first, int(std::lower_bound(ordered.begin(), ordered.end(), std::string(t.key)) -
                              ordered.begin()));
  }
  watched("finding the first non-finite tensor",
          [&] { MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); });
  return first == INT_MAX ? "" : ordered[size_t(first)];
}

/// What index.json says of rank `rank`'s shard besides its digest: the
/// layout of every tensor it holds (runtime/CheckpointLayout.h).
llvm::json::Object shardTensors(const Program &program, int64_t rank) {
  int64_t pp = coordinateOn(program, meshCoordinates(program, rank), "pp");
  const RankProgram &rp = program.programs[program.numPrograms == 1 ? 0 : pp];
  llvm::json::Object tensors;
  for (int i = 0; i < rp.numArgs; ++i) {
    const TensorInfo &t = rp.args[i];
    if (isStateKey(t.key))
      tensors[t.key] = blockToJson(t.dtype, blockLayout(t));
  }
  return tensors;
}

/// Why a checkpoint cannot resume this program: a state tensor one has and
/// the other lacks (another model, optimizer or set of trained
/// parameters), or "" when both have the same.
std::string compareStateKeys(const Program &program, const CheckpointLayout &saved) {
  std::set<std::string> mine = stateKeys(program);
  for (const std::string &key : mine)
    if (!saved.tensors.count(key))
      return "checkpoint '" + saved.path + "' has no tensor '" + key +
             "', which this program trains (another model, optimizer or --train/--freeze?)";
  for (const auto &[key, blocks] : saved.tensors)
    if (!mine.count(key))
      return "checkpoint '" + saved.path + "' has tensor '" + key +
             "', which this program does not train (another model, optimizer or "
             "--train/--freeze?)";
  return "";
}

/// Who this rank is: what the phases of `run` share.
struct RunContext {
  const Program &program;
  int worldRank = 0, worldSize = 1;
  /// Rank 0, which reports the errors every rank finds alike.
  bool lead = false;
  /// The rank that computes the loss, and logs.
  int logRank = 0;
  bool logs = false;
};

/// The rank that logs: the first to compute the loss.
int logRankOf(const Program &program) {
  for (int p = 0; p < program.numPrograms; ++p) {
    bool hasLoss = false;
    for (int i = 0; i < program.programs[p].numResults; ++i)
      hasLoss |= std::string_view(program.programs[p].results[i].key) == kLossKey;
    if (hasLoss) {
      std::vector<int64_t> coords(program.meshRank, 0);
      for (int a : meshAxisIndices(program, "pp"))
        coords[a] = p;
      return int(meshRankAt(program, coords));
    }
  }
  return 0;
}

/// Why a run stops after a step, as the logging rank finds it.
enum class StopReason : int { None = 0, Loss, GradientNorm, Log };

struct Stop {
  StopReason reason = StopReason::None;
  std::string message;
};

/// Where a step stands, for its report.
struct StepReport {
  int64_t step, steps;
  double seconds;
  int64_t tokensPerStep, largestArena;
};

/// The logging rank's report of a step: its line in --log (`log`, when
/// given) and on the progress line. Returns why the run must stop: a loss or
/// gradient norm that is not finite, or a log that cannot be written.
Stop reportStep(const RunContext &ctx, Trainer &trainer, Device &device, llvm::raw_fd_ostream *log,
                const std::string &logPath, const StepReport &at) {
  Stop stop;
  double loss = trainer.outputs["loss"];
  // MFU counts this rank's GEMMs against the device's dense peak.
  double peak = device.peakFlops();
  double mfu = peak > 0 ? trainer.rp.gemmFlops / at.seconds / peak : 0;
  int64_t memory = device.memoryInUse();
  double gradNorm = trainer.outputs["grad_norm"];
  // JSON has no inf or NaN: a non-finite value is logged as null.
  auto number = [](double v) { return std::isfinite(v) ? llvm::json::Value(v) : nullptr; };
  if (log) {
    llvm::json::OStream json(*log);
    json.object([&] {
      json.attribute("step", at.step);
      json.attribute("loss", number(loss));
      json.attribute("lr", number(trainer.outputs["lr"]));
      json.attribute("grad_norm", number(gradNorm));
      json.attribute("step_time", at.seconds);
      json.attribute("tokens_per_s", at.tokensPerStep / at.seconds);
      json.attribute("arena_bytes", trainer.rp.arenaBytes);
      json.attribute("max_arena_bytes", at.largestArena);
      json.attribute("device", device.describe());
      if (peak > 0)
        json.attribute("mfu", mfu);
      if (memory > 0)
        json.attribute("memory_bytes", memory);
      // CUDA: the operations of the graph the step ran as (one launch).
      if (trainer.rank.graphNodes() > 0)
        json.attribute("graph_nodes", trainer.rank.graphNodes());
      // --offload: the host's arena, and the host memory this rank holds
      // (arena and state).
      if (trainer.rp.hostArenaBytes > 0) {
        json.attribute("host_arena_bytes", trainer.rp.hostArenaBytes);
        json.attribute("host_memory_bytes", device.hostBytesInUse());
      }
    });
    *log << "\n";
    log->flush();
    if (std::error_code ec = log->error()) {
      // Cleared, or the stream's destructor would abort the process.
      log->clear_error();
      return {StopReason::Log, "--log '" + logPath + "': " + ec.message()};
    }
  }
  std::string extra;
  if (peak > 0)
    extra += llvm::formatv("  MFU {0:f1}%", 100 * mfu).str();
  if (memory > 0)
    extra += llvm::formatv("  memory {0:f2} GiB", memory / 1073741824.0).str();
  // Formatted first and written at once (llvm::errs() is unbuffered and
  // formatv writes piece by piece): mpirun forwards the pieces as they
  // come, and another rank's error line could land inside this one.
  llvm::errs() << llvm::formatv(
                      "step {0}/{1}  loss {2:f6}  lr {3:e2}  grad norm {4:f4}  {5:f3} s  {6:f0} "
                      "tok/s  arena {7:f1} MiB (largest rank){8}\n",
                      at.step + 1, at.steps, loss, trainer.outputs["lr"], gradNorm, at.seconds,
                      at.tokensPerStep / at.seconds, at.largestArena / 1048576.0, extra)
                      .str();
  // Steps are counted from 1 here, as on the progress line.
  for (auto [reason, what, value] :
       {std::tuple<StopReason, const char *, double>{StopReason::Loss, "loss", loss},
        {StopReason::GradientNorm, "gradient norm", gradNorm}})
    if (!std::isfinite(value) && stop.reason == StopReason::None)
      stop = {reason, llvm::formatv("step {0} (rank {1}): the {2} is {3}", at.step + 1,
                                    ctx.worldRank, what, std::isnan(value) ? "NaN" : "infinite")};
  return stop;
}

/// Loads the newest complete checkpoint in `dir` into `trainer` and returns
/// the steps it holds (0 when there is none). One this program saved is
/// each rank's own shard; any other is resharded.
int64_t resumeFrom(const RunContext &ctx, Trainer &trainer, const std::string &dir) {
  const Program &program = ctx.program;
  int worldRank = ctx.worldRank;
  bool lead = ctx.lead;
  std::vector<std::string> skipped;
  auto latest = findLatestCheckpoint(dir, &skipped);
  if (!latest)
    dieAll(formatError(latest.takeError()), lead);
  if (lead)
    for (const std::string &path : skipped)
      llvm::errs() << "skipping " << path
                   << ": no index.json (never committed, or removed by a prune that "
                      "stopped midway)\n";
  if (!*latest) {
    if (ctx.logs)
      llvm::errs() << "no checkpoint in " << dir << "; starting from step 0\n";
    return 0;
  }
  auto [done, path] = **latest;
  auto index = readCheckpointIndex(path);
  if (!index)
    dieAll(formatError(index.takeError()), lead);
  // Every rank validates every entry, so all reach one verdict.
  auto shards = checkpointShards(path, done, *index);
  if (!shards)
    dieAll(formatError(shards.takeError()), lead);
  std::string failed;
  if (index->getString("fingerprint") == llvm::StringRef(program.fingerprint) &&
      int64_t(shards->size()) == ctx.worldSize) {
    // Saved by this program: each rank reads its own shard.
    const CheckpointShard &mine = (*shards)[size_t(worldRank)];
    if (mine.digest) {
      llvm::SmallString<256> file(path);
      llvm::sys::path::append(file, mine.file);
      if (llvm::Error e = verifyShard(file, *mine.digest))
        failed = formatError(std::move(e));
    } else if (lead) {
      llvm::errs() << "warning: checkpoint '" << path
                   << "' has a version 1 index, with no digests: its shards are not "
                      "verified\n";
    }
    stopIfAny(failed, worldRank);
    if (llvm::Error e = trainer.load(path, shardFileName(worldRank), done))
      failed = formatError(std::move(e));
    stopIfAny(failed, worldRank);
  } else {
    // Saved on another mesh or by another compilation: every tensor's
    // global value is put together from the shards that hold it, and each
    // rank takes its blocks.
    auto saved = readCheckpointLayout(path, done, *index);
    if (!saved)
      dieAll(formatError(saved.takeError()), lead);
    if (std::string why = compareStateKeys(program, *saved); !why.empty())
      dieAll(why, lead);
    if (lead)
      llvm::errs() << "resharding " << path << ": saved on "
                   << ppc::printable(saved->mesh.describe()) << " (" << saved->worldSize()
                   << " rank" << (saved->worldSize() == 1 ? "" : "s") << "), resuming on "
                   << meshLayout(program).describe() << " (" << ctx.worldSize << " rank"
                   << (ctx.worldSize == 1 ? "" : "s") << ")\n";
    CheckpointReader reader(*saved);
    if (llvm::Error e = trainer.loadResharded(reader, path))
      failed = formatError(std::move(e));
    stopIfAny(failed, worldRank);
  }
  if (ctx.logs)
    llvm::errs() << "resuming from " << path << " (" << done << " steps done)\n";
  return done;
}

/// The logging rank's --log, continued from step `start`: the lines of
/// steps done after it (by the run that was stopped) are dropped, and any
/// line that is not JSON is kept as it is. Sets `failed` when the file
/// cannot be written (an error every rank then stops on together).
std::unique_ptr<llvm::raw_fd_ostream> openLog(const RunContext &ctx, const std::string &path,
                                              int64_t start, std::string &failed) {
  if (!ctx.logs || path.empty())
    return nullptr;
  if (start > 0)
    if (auto old = llvm::MemoryBuffer::getFile(path)) {
      std::string kept;
      llvm::SmallVector<llvm::StringRef> lines;
      (*old)->getBuffer().split(lines, '\n', -1, false);
      int64_t unparsed = 0;
      for (llvm::StringRef line : lines) {
        auto parsed = llvm::json::parse(line);
        if (!parsed) {
          // Not ours to judge: a line that does not parse is kept as it is.
          llvm::consumeError(parsed.takeError());
          kept += line.str() + "\n";
          ++unparsed;
          continue;
        }
        auto *object = parsed->getAsObject();
        auto step = object ? object->getInteger("step") : std::nullopt;
        if (step && *step < start)
          kept += line.str() + "\n";
      }
      if (unparsed)
        llvm::errs() << "warning: --log '" << path << "': kept " << unparsed
                     << " line(s) that are not JSON as they were\n";
      // Written whole, then renamed over the log: a full disk leaves the
      // log as it was.
      if (llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
            os << kept;
            return llvm::Error::success();
          })) {
        failed = "--log '" + path + "': " + formatError(std::move(e));
        return nullptr;
      }
    }
  std::error_code ec;
  auto log = std::make_unique<llvm::raw_fd_ostream>(
      path, ec, start > 0 ? llvm::sys::fs::OF_Append : llvm::sys::fs::OF_None);
  if (ec) {
    failed = "--log '" + path + "': " + ec.message();
    return nullptr;
  }
  return log;
}

/// Saves step `step` in `dir` (CheckpointDir.h's protocol: staging, every
/// rank's shard and digest, rank 0's index and commit, the prune to `keep`).
/// A failure on any rank (a full disk, say) ends every rank through one
/// collective at the next point all reach: one error line, no MPI_Abort.
void saveCheckpoint(const RunContext &ctx, Trainer &trainer, const std::string &dir, int64_t step,
                    int keep) {
  const Program &program = ctx.program;
  int worldRank = ctx.worldRank;
  std::string staging = stagingPath(dir, step);
  std::string failed;
  if (ctx.lead)
    if (auto prepared = prepareStaging(dir, step); !prepared)
      failed = formatError(prepared.takeError());
  stopIfAny(failed, worldRank);
  if (llvm::Error e = trainer.save(staging, step, shardFileName(worldRank)))
    failed = formatError(std::move(e));
  if (failed.empty())
    failpoint("shard-written", worldRank);
  // Each rank digests its shard; rank 0 writes the digests into the index.
  llvm::SmallString<256> shardPath(staging);
  llvm::sys::path::append(shardPath, shardFileName(worldRank));
  FileDigest digest;
  if (failed.empty()) {
    if (auto digested = digestFile(shardPath))
      digest = *digested;
    else
      failed = formatError(digested.takeError());
  }
  stopIfAny(failed, worldRank);
  struct Packed {
    int64_t bytes;
    char blake3[64];
  } mine{digest.bytes, {}};
  std::memcpy(mine.blake3, digest.blake3.data(), sizeof(mine.blake3));
  std::vector<Packed> digests(ctx.lead ? ctx.worldSize : 0);
  watched("gathering the checkpoint's digests", [&] {
    MPI_Gather(&mine, sizeof(Packed), MPI_BYTE, digests.data(), sizeof(Packed), MPI_BYTE, 0,
               MPI_COMM_WORLD);
  });
  if (ctx.lead) {
    llvm::json::Object index{{"format", "ppc-checkpoint"},
                             {"version", kCheckpointVersion},
                             {"step", step},
                             {"fingerprint", program.fingerprint},
                             {"model", program.model},
                             {"untie", program.untie},
                             {"world_size", ctx.worldSize},
                             {"mesh", meshToJson(meshLayout(program))}};
    llvm::json::Array files;
    for (int r = 0; r < ctx.worldSize; ++r)
      files.push_back(
          llvm::json::Object{{"name", shardFileName(r)},
                             {"bytes", digests[r].bytes},
                             {"blake3", std::string(digests[r].blake3, sizeof(digests[r].blake3))},
                             {"tensors", shardTensors(program, r)}});
    index["files"] = std::move(files);
    if (llvm::Error e = commitCheckpoint(dir, step, index))
      failed = formatError(std::move(e));
    else if (keep > 0)
      if (llvm::Error e = pruneCheckpoints(dir, keep))
        failed = formatError(std::move(e));
  }
  stopIfAny(failed, worldRank);
}

/// --export: every rank's blocks go through files beside the output (as a
/// checkpoint's do); rank 0 puts the parameters together.
void exportTrained(const RunContext &ctx, Trainer &trainer, const std::string &path,
                   int64_t steps) {
  std::string parts = path + ".parts";
  std::string failed;
  if (ctx.lead)
    if (std::error_code ec = llvm::sys::fs::create_directories(parts))
      failed = "--export: cannot create '" + parts + "': " + ec.message();
  stopIfAny(failed, ctx.worldRank);
  if (llvm::Error e = trainer.save(parts, steps, shardFileName(ctx.worldRank)))
    failed = formatError(std::move(e));
  stopIfAny(failed, ctx.worldRank);
  if (ctx.lead) {
    llvm::Error e = exportOnnx(ctx.program, parts, ctx.worldSize, path);
    llvm::sys::fs::remove_directories(parts);
    if (e)
      failed = formatError(std::move(e));
    else
      llvm::errs() << "wrote " << path << "\n";
  }
  stopIfAny(failed, ctx.worldRank);
}

} // namespace

namespace {

/// The executable's command line (DESIGN.md §4): the run's options, and one
/// flag per hyper-parameter the step takes (HyperParameters.h), whose
/// default is the compiled value.
struct RunFlags {
  explicit RunFlags(const Program &program);

  cl::OptionCategory category{"training options"};
  cl::opt<std::string> data{"data", cl::desc("token file (DESIGN.md §4)"), cl::value_desc("FILE"),
                            cl::Required, cl::cat(category)};
  cl::opt<int64_t> steps{"steps", cl::desc("train until this many steps are done"), cl::Required,
                         cl::cat(category)};
  cl::opt<std::string> logPath{"log", cl::desc("one JSON line per step"), cl::value_desc("F.jsonl"),
                               cl::cat(category)};
  cl::opt<std::string> checkpointDir{
      "checkpoint-dir", cl::desc("directory of checkpoints (one subdirectory per save)"),
      cl::value_desc("D"), cl::cat(category)};
  cl::opt<int64_t> saveEvery{"save-every", cl::desc("save a checkpoint every K steps"),
                             cl::value_desc("K"), cl::init(0), cl::cat(category)};
  cl::opt<int> keep{"keep", cl::desc("checkpoints to keep (0: all)"), cl::init(0),
                    cl::cat(category)};
  cl::opt<bool> resume{"resume",
                       cl::desc("continue from the newest complete checkpoint in "
                                "--checkpoint-dir"),
                       cl::cat(category)};
  cl::opt<std::string> exportPath{
      "export", cl::desc("write the model with the trained weights as ONNX at the end"),
      cl::value_desc("OUT.onnx"), cl::cat(category)};
  cl::opt<double> timeout{"timeout",
                          cl::desc("seconds a rank may wait in one collective or message "
                                   "before every rank is stopped (0: forever)"),
                          cl::init(600), cl::cat(category)};
  cl::opt<bool> cudaGraphs{"cuda-graphs",
                           cl::desc("CUDA: run every step from the second on as one CUDA graph "
                                    "captured from it (=false: launch each kernel from the host)"),
                           cl::init(true), cl::cat(category)};
  cl::opt<std::string> profile{
      "profile",
      cl::desc("time each kernel, library call and communication call of every step after "
               "the first (CUDA: with events, kernels launched from the host, no CUDA graph), "
               "print the kinds that took the most beside the compiler's predictions, and "
               "write a Chrome trace of the last step, measured and predicted, to FILE"),
      cl::value_desc("TRACE.json"), cl::cat(category)};
  cl::opt<int> profileTop{"profile-top", cl::desc("kinds of kernel --profile prints [20]"),
                          cl::init(20), cl::cat(category)};
  cl::opt<int> threads{"threads-per-rank",
                       cl::desc("threads per rank (default: the cores of the node / its ranks)"),
                       cl::init(0), cl::cat(category)};
  cl::opt<std::string> weightsPath{"weights",
                                   cl::desc("initial parameters (safetensors; default: the "
                                            "file written beside the executable)"),
                                   cl::value_desc("FILE"), cl::cat(category)};

  /// A hyper-parameter flag and the step arguments it sets.
  struct HyperFlag {
    const char *flag, *help;
    std::vector<const char *> names;
    std::string description;
    std::unique_ptr<cl::opt<std::string>> option;
  };
  cl::OptionCategory hyperCategory{"hyper-parameters (the compiled value unless given)"};
  std::vector<HyperFlag> hyperFlags;
  /// The values the step was compiled with, by argument name.
  std::map<std::string, double> compiled;
};

RunFlags::RunFlags(const Program &program) {
  for (int h = 0; h < program.numHypers; ++h)
    compiled[program.hypers[h].name] = program.hypers[h].value;
  for (const HyperParameter &h : kHyperParameters) {
    if (hyperFlags.empty() || llvm::StringRef(hyperFlags.back().flag) != h.flag)
      hyperFlags.push_back({h.flag, h.help, {}, "", nullptr});
    hyperFlags.back().names.push_back(h.name);
  }
  for (HyperFlag &f : hyperFlags) {
    std::vector<std::string> values;
    for (const char *name : f.names)
      if (compiled.count(name)) {
        char text[32];
        std::snprintf(text, sizeof(text), "%g", compiled[name]);
        values.push_back(text);
      }
    f.description = f.help;
    f.description += values.size() == f.names.size()
                         ? " [" + llvm::join(values, ",") + "]"
                         : " (not in this executable: compiled without it)";
    f.option =
        std::make_unique<cl::opt<std::string>>(llvm::StringRef(f.flag), cl::desc(f.description),
                                               cl::value_desc("X"), cl::cat(hyperCategory));
  }
  cl::HideUnrelatedOptions({&category, &hyperCategory});
}

/// Refuses flags no run can use, on every rank alike.
void checkFlags(const RunFlags &flags, const Program &program, int worldSize, bool lead) {
  int64_t meshSize = 1;
  for (int a = 0; a < program.meshRank; ++a)
    meshSize *= program.meshShape[a];
  if (worldSize != meshSize)
    dieAll(llvm::formatv("this executable was compiled for {0} ranks; start it with mpirun -np "
                         "{0} (it has {1})",
                         meshSize, worldSize),
           lead);
  if (flags.steps < 1)
    dieAll("--steps must be at least 1", lead);
  if (!std::isfinite(flags.timeout) || flags.timeout < 0) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", flags.timeout.getValue());
    dieAll(std::string("--timeout ") + text +
               ": expected a finite number of seconds, 0 or more (0: wait forever)",
           lead);
  }
  if (flags.saveEvery < 0)
    dieAll(llvm::formatv("--save-every {0}: expected 0 or more steps", flags.saveEvery.getValue()),
           lead);
  if (flags.keep < 0)
    dieAll(llvm::formatv("--keep {0}: expected 0 (keep all) or more", flags.keep.getValue()), lead);
  constexpr int kMaxThreads = 1024;
  if (flags.threads < 0 || flags.threads > kMaxThreads)
    dieAll(llvm::formatv("--threads-per-rank {0}: expected 0 (the node's cores shared) to {1}",
                         flags.threads.getValue(), kMaxThreads),
           lead);
  if (flags.profileTop < 1)
    dieAll(llvm::formatv("--profile-top {0}: expected 1 or more", flags.profileTop.getValue()),
           lead);
  if (flags.resume && flags.checkpointDir.empty())
    dieAll("--resume needs --checkpoint-dir", lead);
  if (flags.saveEvery > 0 && flags.checkpointDir.empty())
    dieAll("--save-every needs --checkpoint-dir", lead);
}

/// The hyper-parameters the step is fed: the compiled values, with those
/// the flags give instead. `overridden` receives the flags given.
std::map<std::string, double> hyperValues(const RunFlags &flags, bool lead,
                                          std::string &overridden) {
  std::map<std::string, double> hypers = flags.compiled;
  for (const RunFlags::HyperFlag &f : flags.hyperFlags) {
    const cl::opt<std::string> &option = *f.option;
    if (!option.getNumOccurrences())
      continue;
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(option.getValue()).split(parts, ',');
    std::vector<double> values;
    for (llvm::StringRef part : parts) {
      double v = 0;
      if (part.trim().getAsDouble(v) || !std::isfinite(v) || v < 0)
        values.clear(), values.push_back(-1);
      else
        values.push_back(v);
    }
    bool fraction = false;
    for (const HyperParameter &h : kHyperParameters)
      fraction |= llvm::StringRef(h.flag) == f.flag && h.fraction;
    bool bad = values.size() != f.names.size() || values[0] < 0;
    for (double v : values)
      bad |= fraction && v >= 1;
    if (bad)
      dieAll(std::string("--") + f.flag + " '" + option.getValue() + "': expected " +
                 (f.names.size() == 2 ? "two non-negative numbers a,b" : "a non-negative number") +
                 (fraction ? " below 1" : ""),
             lead);
    for (size_t n = 0; n < f.names.size(); ++n) {
      if (!flags.compiled.count(f.names[n]))
        dieAll(std::string("--") + f.flag + ": this executable was compiled without it (" + f.help +
                   " 0, or another optimizer or schedule); compile with ppc compile "
                   "--" +
                   f.flag + " to train with it",
               lead);
      hypers[f.names[n]] = values[n];
    }
    overridden +=
        std::string(overridden.empty() ? "" : ", ") + "--" + f.flag + " " + option.getValue();
  }
  return hypers;
}

/// Starts the device with the cores of this node shared among its ranks.
void startDevice(Device &device, int threads, int worldRank) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank, MPI_INFO_NULL, &node);
  int localRanks = 1, localRank = 0;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_size(node, &localRanks);
  MPI_Comm_free(&node);
  int cores = int(std::thread::hardware_concurrency());
  int perRank = threads > 0 ? threads : std::max(1, cores / localRanks);
  stopIfAny(device.start(localRank, localRanks, perRank), worldRank);
}

/// The token file, checked against the program and mapped for the run.
ppc::TokenData openData(const RunFlags &flags, const Program &program, int worldRank, bool lead) {
  auto tokens = ppc::TokenData::open(flags.data, program.dataDtype);
  if (!tokens)
    dieAll(formatError(tokens.takeError()), lead);
  if (llvm::Error e = tokens->checkSequence(program.seqLen))
    dieAll(formatError(std::move(e)), lead);
  guardDataFile(*tokens, worldRank);
  return std::move(*tokens);
}

/// Loads the initial state: the compiled model's weights (or --weights),
/// then with --resume the newest checkpoint. Returns the steps done.
int64_t loadInitialState(const RunContext &ctx, const RunFlags &flags, Trainer &trainer,
                         const char *argv0) {
  std::string weights = flags.weightsPath;
  if (weights.empty()) {
    weights = ctx.program.initialWeights;
    if (!llvm::sys::path::is_absolute(weights)) {
      llvm::SmallString<256> exe(
          llvm::sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&run)));
      llvm::sys::path::remove_filename(exe);
      llvm::sys::path::append(exe, ctx.program.initialWeights);
      weights = std::string(exe);
    }
  }
  // One pipeline stage may lack a tensor the others have, or one device
  // memory: the ranks stop together.
  std::string initialized = trainer.allocateArenas(ctx.worldRank);
  if (initialized.empty())
    if (llvm::Error e = trainer.initialize(weights))
      initialized = formatError(std::move(e));
  stopIfAny(initialized, ctx.worldRank);
  return flags.resume ? resumeFrom(ctx, trainer, flags.checkpointDir) : 0;
}

/// Runs steps `start` to --steps: each reported by the logging rank, every
/// rank stopping together on an error or a loss that is not finite, and
/// checkpoints saved every --save-every steps.
void train(const RunContext &ctx, const RunFlags &flags, Trainer &trainer, Device &device,
           const ppc::TokenData &tokens, int64_t start) {
  const RankProgram &rp = trainer.rp;
  std::string opened;
  std::unique_ptr<llvm::raw_fd_ostream> log = openLog(ctx, flags.logPath, start, opened);
  stopIfAny(opened, ctx.worldRank);
  // The ranks' arenas differ with pipelining; the log reports the largest.
  int64_t largestArena = rp.arenaBytes;
  watched("comparing the ranks' arenas", [&] {
    MPI_Allreduce(MPI_IN_PLACE, &largestArena, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  });
  int64_t tokensPerStep = ctx.program.globalBatch * ctx.program.seqLen;
  int64_t steps = flags.steps;
  for (int64_t s = start; s < steps; ++s) {
    auto begin = std::chrono::steady_clock::now();
    std::string kernelError = trainer.step(s, tokens);
    failpoint("step-done", ctx.worldRank);
    // An error a kernel found on some ranks (a token id outside the
    // vocabulary, say) ends every rank cleanly, before anything of the step
    // is reported or saved.
    if (!kernelError.empty())
      kernelError =
          llvm::formatv("step {0} (rank {1}): {2}", s + 1, ctx.worldRank, kernelError).str();
    stopIfAny(kernelError, ctx.worldRank);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    // --profile keeps the steps after the first, which warms up (all of
    // one step when that is the whole run).
    if (Profiler *profiler = trainer.rank.profiler) {
      if (s == start && s + 1 < steps)
        profiler->reset();
      else
        trainer.profiledSeconds += seconds;
    }
    Stop stop;
    if (ctx.logs)
      stop = reportStep(ctx, trainer, device, log.get(), flags.logPath,
                        {s, steps, seconds, tokensPerStep, largestArena});
    // Every rank learns whether the step diverged (one integer from the
    // logging rank) and leaves MPI cleanly, so the error is the only line.
    int reason = int(stop.reason);
    watched("the step's verdict",
            [&] { MPI_Bcast(&reason, 1, MPI_INT, ctx.logRank, MPI_COMM_WORLD); });
    if (StopReason(reason) == StopReason::Log)
      dieAll(stop.message, ctx.logs);
    if (StopReason(reason) != StopReason::None) {
      // A finite loss with a gradient norm that is not: some gradients
      // overflowed, and the optimizer state shows where. (After a loss that
      // is not finite every gradient is, so naming one would say nothing.)
      if (StopReason(reason) == StopReason::GradientNorm)
        if (std::string first = firstNonFinite(ctx.program, trainer); !first.empty())
          stop.message += "; the first tensor it left non-finite is '" + first + "'";
      dieAll(stop.message + "; stopping every rank", ctx.logs);
    }
    if (flags.saveEvery > 0 && (s + 1) % flags.saveEvery == 0)
      saveCheckpoint(ctx, trainer, flags.checkpointDir, s + 1, flags.keep);
  }
}

} // namespace

int run(int argc, char **argv, const Program &program, Device &device) {
  // The command line, parsed once MPI has started (it may add arguments).
  RunFlags flags(program);
  std::string overview = std::string("a ppc training executable\n\n") + program.description +
                         "\n\nRun with mpirun -np N (N = the mesh's ranks).\n";
  MPI_Init(&argc, &argv);
  int worldRank = 0, worldSize = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  // Before LLVM's parser, which would report the flag's value as an
  // unexpected positional argument, or accept it.
  if (std::string error = flagTakenAsValue(argc, argv); !error.empty())
    dieAll(error, worldRank == 0);
  cl::ParseCommandLineOptions(argc, argv, overview);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  bool lead = worldRank == 0;
  checkFlags(flags, program, worldSize, lead);
  std::string overridden;
  std::map<std::string, double> hypers = hyperValues(flags, lead, overridden);

  // The device, the data and the rank's program.
  startDevice(device, flags.threads, worldRank);
  ppc::TokenData tokens = openData(flags, program, worldRank, lead);
  std::unique_ptr<Rank> rankOwner = device.connect(program, flags.timeout);
  Rank &rank = *rankOwner;
  watchdogRank = &rank;
  int64_t ppCoord = coordinateOn(program, meshCoordinates(program, worldRank), "pp");
  const RankProgram &rp = program.programs[program.numPrograms == 1 ? 0 : ppCoord];
  auto trainerOwner = std::make_unique<Trainer>(program, device, rank, rp);
  Trainer &trainer = *trainerOwner;
  trainer.hypers = hypers;
  trainer.graphs = flags.cudaGraphs;
  std::unique_ptr<Profiler> profiler;
  if (!flags.profile.empty()) {
    // Fails now rather than after the run; an existing trace is kept until
    // the new one replaces it.
    std::string trace = tracePathOf(flags.profile, worldRank, worldSize);
    int fd = -1;
    std::error_code ec = llvm::sys::fs::openFileForWrite(trace, fd, llvm::sys::fs::CD_OpenAlways,
                                                         llvm::sys::fs::OF_Append);
    if (!ec)
      llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    stopIfAny(ec ? "--profile '" + trace + "': " + ec.message() : "", worldRank);
    profiler = device.profiler(rp.numKernels);
    rank.profiler = profiler.get();
    trainer.graphs = false;
  }
  stopIfAny(trainer.unfedInput(), worldRank);
  int logRank = logRankOf(program);
  bool logs = worldRank == logRank;
  RunContext ctx{program, worldRank, worldSize, lead, logRank, logs};
  if (logs && !overridden.empty())
    llvm::errs() << "hyper-parameters: " << overridden << " (overriding the compiled values)\n";

  // The state, the steps, and what is written at the end.
  int64_t start = loadInitialState(ctx, flags, trainer, argv[0]);
  train(ctx, flags, trainer, device, tokens, start);
  if (profiler) {
    ProfileReport report{program, rp, *profiler, device.describe()};
    report.stepSeconds =
        profiler->steps() ? trainer.profiledSeconds / double(profiler->steps()) : 0;
    report.worldRank = worldRank;
    report.worldSize = worldSize;
    report.print = logs;
    report.top = flags.profileTop;
    report.tracePath = flags.profile;
    stopIfAny(reportProfile(report, llvm::outs()), worldRank);
    llvm::outs().flush();
    rank.profiler = nullptr;
  }
  if (!flags.exportPath.empty())
    exportTrained(ctx, trainer, flags.exportPath, flags.steps);
  trainerOwner.reset();
  watched("the last barrier", [] { MPI_Barrier(MPI_COMM_WORLD); });
  watchdogRank = nullptr;
  rankOwner.reset();
  MPI_Finalize();
  return 0;
}

Device::~Device() = default;

std::unique_ptr<Profiler> Device::profiler(int numKernels) { return hostProfiler(numKernels); }

void *Device::hostMemory(size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }

void Device::freeHostMemory(void *memory) { std::free(memory); }

void *Device::allocateHost(size_t bytes) {
  void *memory = hostMemory(bytes);
  if (!memory)
    return nullptr;
  std::memset(memory, 0, bytes);
  hostAllocations[memory] = bytes;
  hostBytes += int64_t(bytes);
  return memory;
}

void Device::releaseHost(void *memory) {
  auto it = hostAllocations.find(memory);
  if (it == hostAllocations.end())
    return;
  hostBytes -= int64_t(it->second);
  hostAllocations.erase(it);
  freeHostMemory(memory);
}

} // namespace ppcrt
