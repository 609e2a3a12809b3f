//===- CheckpointCommand.cpp - `ppc checkpoint inspect|consolidate` -------===//
//
// A training executable's checkpoint without the executable: `inspect` says
// what a step directory holds (the mesh, every shard and its digest, every
// tensor's global shape and split) and with --verify checks each shard and
// puts every tensor together; `consolidate` writes the global values as one
// file: the model with its trained weights (.onnx, what the executable's
// --export writes) or safetensors. Both read the layouts a version 3 index
// records (runtime/CheckpointLayout.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/CheckpointDir.h"
#include "runtime/CheckpointLayout.h"
#include "runtime/Printable.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainedModel.h"
#include "runtime/ppcrt/Program.h"
#include "tools/ppc/Driver.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace cl = llvm::cl;

namespace ppc {

namespace {

/// A step directory: PATH itself when it has an index.json, else the
/// newest complete checkpoint in the checkpoint directory PATH.
llvm::Expected<std::pair<int64_t, std::string>> findStep(llvm::StringRef path) {
  llvm::SmallString<256> index(path);
  llvm::sys::path::append(index, "index.json");
  if (llvm::sys::fs::exists(index)) {
    llvm::StringRef name = llvm::sys::path::filename(
        llvm::sys::path::remove_leading_dotslash(llvm::StringRef(path).rtrim('/')));
    int64_t step = 0;
    if (!name.consume_front("step-") || name.getAsInteger(10, step))
      return llvm::createStringError("checkpoint '" + path +
                                     "': not a step-NNNNNNNN directory (the name says its step)");
    return std::pair(step, path.rtrim('/').str());
  }
  if (!llvm::sys::fs::is_directory(path))
    return llvm::createStringError("checkpoint '" + path + "': no such directory");
  auto latest = ppcrt::findLatestCheckpoint(path);
  if (!latest)
    return latest.takeError();
  if (!*latest)
    return llvm::createStringError("checkpoint '" + path +
                                   "': neither a step directory with an index.json nor a "
                                   "directory holding one");
  return **latest;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  return "[" +
         llvm::join(llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), ", ") +
         "]";
}

/// "dim 0 over dp", "dim 0 over tp in 3 blocks", "whole".
std::string splitText(const ppcrt::BlockLayout &layout) {
  std::vector<std::string> parts;
  for (size_t d = 0; d < layout.sharding.size(); ++d)
    if (!layout.sharding[d].empty())
      parts.push_back(llvm::formatv("dim {0} over {1}{2}", d, layout.sharding[d],
                                    layout.blocks[d] > 1
                                        ? llvm::formatv(" in {0} blocks", layout.blocks[d]).str()
                                        : std::string()));
  return parts.empty() ? "whole" : llvm::join(parts, ", ");
}

struct Opened {
  int64_t step = 0;
  std::string path;
  llvm::json::Object index;
};

llvm::Expected<Opened> openCheckpoint(llvm::StringRef path) {
  auto step = findStep(path);
  if (!step)
    return step.takeError();
  auto index = ppcrt::readCheckpointIndex(step->second);
  if (!index)
    return index.takeError();
  return Opened{step->first, step->second, std::move(*index)};
}

int inspect(int argc, char **argv) {
  cl::OptionCategory category("ppc checkpoint inspect options");
  cl::opt<std::string> path(cl::Positional, cl::desc("CHECKPOINT"), cl::Required,
                            cl::cat(category));
  cl::opt<bool> verify("verify",
                       cl::desc("check every shard against its digest and put every tensor "
                                "together"),
                       cl::cat(category));
  parseCommandLine(argc, argv, category,
                   "ppc checkpoint inspect: what a checkpoint holds\n\n"
                   "CHECKPOINT is a step directory (D/step-NNNNNNNN) or a checkpoint\n"
                   "directory (its newest complete step). Prints the mesh it was saved on,\n"
                   "every shard with its size and digest, and every tensor with its global\n"
                   "shape and how it is split.\n");
  auto opened = openCheckpoint(path);
  if (!opened)
    return reportError(llvm::toString(opened.takeError()));
  auto shards = ppcrt::checkpointShards(opened->path, opened->step, opened->index);
  if (!shards)
    return reportError(llvm::toString(shards.takeError()));
  int64_t version = *opened->index.getInteger("version");
  llvm::raw_ostream &os = llvm::outs();
  os << "checkpoint " << opened->path << ": step " << opened->step << ", index version " << version
     << "\n";
  os << "model " << printable(opened->index.getString("model").value_or("?")) << " (fingerprint "
     << printable(opened->index.getString("fingerprint").value_or("?")) << ")\n";

  std::optional<ppcrt::CheckpointLayout> layout;
  if (version >= 3) {
    auto read = ppcrt::readCheckpointLayout(opened->path, opened->step, opened->index);
    if (!read)
      return reportError(llvm::toString(read.takeError()));
    layout = std::move(*read);
    os << "mesh " << printable(layout->mesh.describe()) << ": " << layout->worldSize() << " rank"
       << (layout->worldSize() == 1 ? "" : "s") << "\n";
  } else {
    os << "mesh: not recorded (an index before version 3 has no layouts: the checkpoint "
          "resumes only on the program that saved it)\n";
  }
  os << "shards:\n";
  int64_t total = 0;
  for (const ppcrt::CheckpointShard &shard : *shards) {
    llvm::SmallString<256> file(opened->path);
    llvm::sys::path::append(file, shard.file);
    os << "  " << shard.file;
    if (shard.digest) {
      total += shard.digest->bytes;
      os << llvm::formatv("  {0} bytes  blake3 {1}", shard.digest->bytes, shard.digest->blake3);
      if (verify) {
        if (llvm::Error e = ppcrt::verifyShard(file, *shard.digest)) {
          os << "\n";
          os.flush();
          return reportError(llvm::toString(std::move(e)));
        }
        os << "  verified";
      }
    }
    os << "\n";
  }
  if (!layout) {
    if (verify && version < 2)
      return reportError("checkpoint '" + opened->path +
                         "': its index (version 1) has no digests to verify against");
    return 0;
  }
  os << "tensors (global shape, element type, split):\n";
  int64_t parameters = 0;
  for (const auto &[key, blocks] : layout->tensors) {
    const ppcrt::SavedBlock &first = blocks.front();
    int64_t elements = 1;
    for (int64_t d : first.layout.globalShape)
      elements *= d;
    if (llvm::StringRef(key).starts_with(ppcrt::kParamKey))
      parameters += elements;
    os << "  " << printable(key) << "  " << ppcrt::safetensorsName(first.dtype) << " "
       << shapeText(first.layout.globalShape) << "  " << printable(splitText(first.layout)) << "  ("
       << blocks.size() << " rank" << (blocks.size() == 1 ? "" : "s") << ")\n";
  }
  os << llvm::formatv("{0} tensors, {1} parameter elements, {2} bytes in {3} shards\n",
                      layout->tensors.size(), parameters, total, shards->size());
  if (verify) {
    ppcrt::CheckpointReader reader(*layout);
    for (const auto &entry : layout->tensors)
      if (auto global = reader.read(entry.first); !global)
        return reportError(llvm::toString(global.takeError()));
    os << "verified: every shard matches its digest and every tensor is whole\n";
  }
  return 0;
}

int consolidate(int argc, char **argv) {
  cl::OptionCategory category("ppc checkpoint consolidate options");
  cl::opt<std::string> path(cl::Positional, cl::desc("CHECKPOINT"), cl::Required,
                            cl::cat(category));
  cl::opt<std::string> output("o",
                              cl::desc("the file to write: OUT.onnx (the model with the "
                                       "trained weights) or OUT.safetensors"),
                              cl::value_desc("OUT"), cl::Required, cl::cat(category));
  cl::opt<std::string> modelPath(
      "model",
      cl::desc("the ONNX model the checkpoint's program was compiled from, for OUT.onnx "
               "[the path the index records]"),
      cl::value_desc("MODEL.onnx"), cl::cat(category));
  cl::opt<bool> optimizerState(
      "optimizer-state",
      cl::desc("also write the optimizer state (safetensors only), keyed state:KIND:NAME"),
      cl::cat(category));
  parseCommandLine(argc, argv, category,
                   "ppc checkpoint consolidate: a checkpoint as one file\n\n"
                   "Puts every parameter's global value together from the shards of\n"
                   "CHECKPOINT (a step directory, or a checkpoint directory's newest step),\n"
                   "whatever mesh saved it, and writes OUT.onnx (the model with its trained\n"
                   "weights, as the executable's --export writes) or OUT.safetensors\n"
                   "(parameters by their ONNX names).\n");
  llvm::StringRef extension = llvm::sys::path::extension(output);
  bool onnx = extension == ".onnx";
  if (!onnx && extension != ".safetensors")
    return reportError("-o '" + output + "': expected a name ending in .onnx or .safetensors");
  if (onnx && optimizerState)
    return reportError("--optimizer-state: an ONNX model has no place for it; write "
                       "OUT.safetensors");
  auto opened = openCheckpoint(path);
  if (!opened)
    return reportError(llvm::toString(opened.takeError()));
  auto layout = ppcrt::readCheckpointLayout(opened->path, opened->step, opened->index);
  if (!layout)
    return reportError(llvm::toString(layout.takeError()));
  std::string model = modelPath.empty() ? layout->model : modelPath.getValue();
  std::vector<std::string> inputs{model, opened->path + "/index.json"};
  for (const std::string &file : layout->files)
    inputs.push_back(opened->path + "/" + file);
  if (failed(checkOutputs({{"-o", output}}, inputs)))
    return 1;

  ppcrt::CheckpointReader reader(*layout);
  std::map<std::string, ppcrt::GlobalTensor> values;
  for (const auto &entry : layout->tensors) {
    llvm::StringRef key = entry.first;
    bool param = key.starts_with(ppcrt::kParamKey);
    if (!param && !(optimizerState && key.starts_with(ppcrt::kStateKey)))
      continue;
    auto global = reader.read(key);
    if (!global)
      return reportError(llvm::toString(global.takeError()));
    values[param ? key.drop_front(ppcrt::kParamKey.size()).str() : key.str()] = std::move(*global);
  }
  if (onnx) {
    if (llvm::Error e = ppcrt::writeTrainedModel(model, layout->untie, values, output,
                                                 "ppc checkpoint consolidate"))
      return reportError(llvm::toString(std::move(e)));
  } else {
    std::vector<ppcrt::TensorView> views;
    for (const auto &[name, value] : values)
      views.push_back({name, value.dtype, value.shape, value.data.data()});
    std::map<std::string, std::string> metadata{{"step", std::to_string(opened->step)},
                                                {"model", layout->model},
                                                {"fingerprint", layout->fingerprint}};
    // Written whole to a new file beside it, then renamed: an error leaves
    // `output` as it was, and no other file is touched.
    llvm::SmallString<256> partial;
    int fd = -1;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueFile(output + ".%%%%%%.partial", fd, partial))
      return reportError("-o '" + output + "': " + ec.message());
    ::close(fd);
    if (llvm::Error e = ppcrt::writeSafetensors(partial, views, metadata)) {
      llvm::sys::fs::remove(partial);
      return reportError(llvm::toString(std::move(e)));
    }
    if (std::error_code ec = llvm::sys::fs::rename(partial, output)) {
      llvm::sys::fs::remove(partial);
      return reportError("-o '" + output + "': " + ec.message());
    }
  }
  llvm::errs() << llvm::formatv("wrote {0}: {1} tensors of step {2}, saved on {3}\n", output,
                                values.size(), opened->step, printable(layout->mesh.describe()));
  return 0;
}

const Subcommand verbs[] = {
    {"inspect", inspect, "what a checkpoint holds (CHECKPOINT [--verify])"},
    {"consolidate", consolidate,
     "one file from a checkpoint (CHECKPOINT -o OUT.onnx|OUT.safetensors)"},
};

void printUsage(llvm::raw_ostream &os) {
  os << "usage: ppc checkpoint <inspect|consolidate> CHECKPOINT [options]\n\n";
  printSubcommands(verbs, os);
  os << "\n`ppc checkpoint <verb> --help` lists its options.\n";
}

} // namespace

int runCheckpointCommand(int argc, char **argv) {
  if (argc < 2) {
    printUsage(llvm::errs());
    return 1;
  }
  llvm::StringRef name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    printUsage(llvm::outs());
    return 0;
  }
  if (std::optional<int> status = runSubcommand(verbs, "ppc checkpoint", argc, argv))
    return *status;
  return reportError("ppc checkpoint: unknown verb '" + name +
                     "'; expected inspect or consolidate");
}

} // namespace ppc
