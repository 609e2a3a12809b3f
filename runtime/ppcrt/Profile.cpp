//===- Profile.cpp - --profile: each kernel's measured time ---------------===//
//
// The executable's --profile: generated code marks the start of every
// kernel, library call and communication call of a step, and its end
// (Rank::mark); a Profiler times the spans between the marks (the host's
// clock here, CUDA events on GPUs), summed over the steps after the first.
// The report puts each kind of kernel's measured time beside what the
// compiler predicted for it (KernelInfo), and the Chrome trace holds the
// last step as measured next to the predicted one.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/Profile.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>

namespace ppcrt {

Profiler::~Profiler() = default;

void Profiler::reset() {
  std::fill(sum.begin(), sum.end(), 0.0);
  numSteps = 0;
}

void Profiler::add(std::vector<double> seconds) {
  if (sum.size() != seconds.size())
    sum.assign(seconds.size(), 0.0);
  for (size_t k = 0; k < seconds.size(); ++k)
    sum[k] += seconds[k];
  last = std::move(seconds);
  ++numSteps;
}

namespace {

/// The host's steady clock at each mark: on CPUs every kernel has returned
/// when the next mark is made.
class HostProfiler : public Profiler {
public:
  explicit HostProfiler(int numKernels) : stamps(numKernels + 1, -1.0) {}
  void mark(int k) override {
    stamps[k] =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void endStep() override {
    std::vector<double> seconds(stamps.size() - 1, 0.0);
    for (size_t k = 0; k + 1 < stamps.size(); ++k)
      if (stamps[k] >= 0 && stamps[k + 1] >= 0)
        seconds[k] = stamps[k + 1] - stamps[k];
    std::fill(stamps.begin(), stamps.end(), -1.0);
    add(std::move(seconds));
  }

private:
  std::vector<double> stamps;
};

struct Kind {
  std::string what;
  int64_t count = 0;
  double measured = 0, predicted = 0;
};

} // namespace

std::string tracePathOf(const std::string &path, int worldRank, int worldSize) {
  if (worldSize == 1)
    return path;
  std::string suffix = ".rank" + std::to_string(worldRank);
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

std::unique_ptr<Profiler> hostProfiler(int numKernels) {
  return std::make_unique<HostProfiler>(numKernels);
}

std::string reportProfile(const ProfileReport &r, llvm::raw_ostream &os) {
  const RankProgram &rp = r.program;
  const Profiler &p = r.profiler;
  int n = rp.numKernels;
  if (p.steps() == 0 || int(p.total().size()) != n)
    return "";
  double steps = double(p.steps());
  // Kinds of kernel as --profile-plan groups them, by measured time.
  llvm::StringMap<size_t> index;
  std::vector<Kind> kinds;
  double measuredSum = 0, predictedSum = 0;
  for (int k = 0; k < n; ++k) {
    const KernelInfo &info = rp.kernels[k];
    auto [it, added] = index.try_emplace(info.what, kinds.size());
    if (added)
      kinds.push_back({info.what});
    Kind &kind = kinds[it->second];
    ++kind.count;
    kind.measured += p.total()[k] / steps;
    kind.predicted += info.predictedSeconds;
    measuredSum += p.total()[k] / steps;
    predictedSum += info.predictedSeconds;
  }
  std::stable_sort(kinds.begin(), kinds.end(),
                   [](const Kind &a, const Kind &b) { return a.measured > b.measured; });
  bool predicted = r.programInfo.predictedOn && predictedSum > 0;
  if (r.print) {
    os << llvm::formatv("profile of rank {0} ({1}), {2} step{3} after the first: {4:F3} ms per "
                        "step measured between the marks, {5:F3} ms per step in all",
                        r.worldRank, r.device, p.steps(), p.steps() == 1 ? "" : "s",
                        measuredSum * 1e3, r.stepSeconds * 1e3);
    if (predicted)
      os << llvm::formatv("; predicted on one {0}: {1:F3} ms", r.programInfo.predictedOn,
                          predictedSum * 1e3);
    else
      os << "; no prediction (the compiler predicts kernels on GPUs only)";
    os << "\n";
    os << llvm::formatv("  {0,10} {1,6}", "ms", "% step");
    if (predicted)
      os << llvm::formatv(" {0,10} {1,9}", "predicted", "meas/pred");
    os << llvm::formatv(" {0,5}  kernel\n", "count");
    for (const Kind &kind : llvm::ArrayRef(kinds).take_front(r.top)) {
      os << llvm::formatv("  {0,10:F3} {1,5:F1}%", kind.measured * 1e3,
                          measuredSum > 0 ? 100 * kind.measured / measuredSum : 0.0);
      if (predicted) {
        os << llvm::formatv(" {0,10:F3}", kind.predicted * 1e3);
        if (kind.predicted > 0)
          os << llvm::formatv(" {0,8:F2}x", kind.measured / kind.predicted);
        else
          os << std::string(10, ' ');
      }
      os << llvm::formatv(" {0,5}  {1}\n", kind.count, kind.what);
    }
    if (int(kinds.size()) > r.top)
      os << llvm::formatv("  ... {0} more kinds in the trace\n", kinds.size() - r.top);
  }
  if (r.tracePath.empty())
    return "";
  // The Chrome trace (chrome://tracing, Perfetto): the last step as
  // measured (process 0) and as predicted (process 1), each kernel laid
  // after the one before.
  llvm::json::Array events;
  auto process = [&](int pid, const std::string &name) {
    events.push_back(llvm::json::Object{{"name", "process_name"},
                                        {"ph", "M"},
                                        {"pid", pid},
                                        {"args", llvm::json::Object{{"name", name}}}});
  };
  process(0, llvm::formatv("measured: rank {0}, {1}, last step", r.worldRank, r.device).str());
  if (predicted)
    process(1, std::string("predicted: one ") + r.programInfo.predictedOn);
  double measuredAt = 0, predictedAt = 0;
  for (int k = 0; k < n; ++k) {
    const KernelInfo &info = rp.kernels[k];
    double measured = k < int(p.lastStep().size()) ? p.lastStep()[k] : 0;
    llvm::json::Object args{{"node", info.node},
                            {"kernel", k},
                            {"flops", info.flops},
                            {"bytes", info.bytes},
                            {"predicted_us", info.predictedSeconds * 1e6},
                            {"mean_us", p.total()[k] / steps * 1e6}};
    events.push_back(llvm::json::Object{{"name", info.what},
                                        {"ph", "X"},
                                        {"pid", 0},
                                        {"tid", 0},
                                        {"ts", measuredAt * 1e6},
                                        {"dur", measured * 1e6},
                                        {"args", std::move(args)}});
    measuredAt += measured;
    if (predicted) {
      events.push_back(llvm::json::Object{{"name", info.what},
                                          {"ph", "X"},
                                          {"pid", 1},
                                          {"tid", 0},
                                          {"ts", predictedAt * 1e6},
                                          {"dur", info.predictedSeconds * 1e6},
                                          {"args", llvm::json::Object{{"node", info.node}}}});
      predictedAt += info.predictedSeconds;
    }
  }
  std::string path = tracePathOf(r.tracePath, r.worldRank, r.worldSize);
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  if (ec)
    return "--profile '" + path + "': " + ec.message();
  out << llvm::json::Value(
      llvm::json::Object{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}});
  out.close();
  if (out.has_error())
    return "--profile '" + path + "': " + out.error().message();
  if (r.print)
    os << "trace of the step, measured and predicted: " << path << "\n";
  return "";
}

} // namespace ppcrt
