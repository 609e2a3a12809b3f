//===- TrainableParameters.cpp - which initializers train -----------------===//

#include "frontend/TrainableParameters.h"
#include "frontend/OnnxTensor.h"
#include "runtime/Printable.h"
#include "runtime/TrainedModel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"

#include <map>

using namespace mlir;

namespace ppc {

namespace {

bool isFloatInitializer(const onnx::TensorProto &init) {
  auto dtype = dtypeFromOnnxOrNull(init.data_type());
  return dtype && isFloat(*dtype);
}

/// The export helper's record: which initializers train, which are frozen.
struct Metadata {
  std::vector<std::string> parameters, frozen;
};

FailureOr<std::optional<Metadata>>
readMetadata(const OnnxModel &model, llvm::function_ref<void(const llvm::Twine &)> emitError) {
  for (const auto &prop : model.proto().metadata_props()) {
    if (prop.key() != kTrainingMetadataKey)
      continue;
    auto fail = [&](const llvm::Twine &message) {
      emitError("file '" + printable(model.path()) + "': metadata '" + kTrainingMetadataKey +
                "': " + message);
      return failure();
    };
    auto json = llvm::json::parse(prop.value());
    if (!json)
      return fail(llvm::toString(json.takeError()));
    const llvm::json::Object *object = json->getAsObject();
    if (!object)
      return fail("expected a JSON object");
    if (object->getInteger("format") != 1)
      return fail("expected \"format\": 1 (written by a newer ppc_export?)");
    Metadata metadata;
    llvm::StringSet<> seen;
    for (auto [key, list] :
         {std::pair{"parameters", &metadata.parameters}, std::pair{"frozen", &metadata.frozen}}) {
      const llvm::json::Array *names = object->getArray(key);
      if (!names)
        return fail(llvm::Twine("expected a list \"") + key + "\"");
      for (const llvm::json::Value &name : *names) {
        auto text = name.getAsString();
        if (!text)
          return fail(llvm::Twine("\"") + key + "\" must hold initializer names");
        const onnx::TensorProto *init = model.initializer(*text);
        if (!init || !isFloatInitializer(*init))
          return fail(llvm::Twine("\"") + key + "\" names '" + printable(*text) +
                      "', which is not a float initializer of the graph");
        if (!seen.insert(*text).second)
          return fail("'" + printable(*text) + "' is listed twice");
        list->push_back(text->str());
      }
    }
    if (const llvm::json::Value *tied = object->get("tied")) {
      const llvm::json::Object *groups = tied->getAsObject();
      if (!groups)
        return fail("\"tied\" must map initializer names to lists of parameter names");
      for (const auto &group : *groups)
        if (!model.initializer(group.first.str()))
          return fail("\"tied\" names '" + printable(group.first.str()) +
                      "', which is not an initializer of the graph");
    }
    return std::optional<Metadata>(std::move(metadata));
  }
  return std::optional<Metadata>();
}

FailureOr<std::vector<llvm::GlobPattern>>
compilePatterns(llvm::ArrayRef<std::string> texts, llvm::StringRef flag,
                llvm::function_ref<void(const llvm::Twine &)> emitError) {
  std::vector<llvm::GlobPattern> patterns;
  for (const std::string &text : texts) {
    auto pattern = llvm::GlobPattern::create(text);
    if (!pattern) {
      emitError("--" + flag + " '" + text + "': " + llvm::toString(pattern.takeError()));
      return failure();
    }
    patterns.push_back(std::move(*pattern));
  }
  return patterns;
}

/// The module path of a node, from torch's scoped node names
/// ("/transformer/h.0/ln_1/LayerNormalization" -> "transformer.h.0.ln_1"),
/// with the call suffix of a module run several times dropped where it
/// makes the path a prefix of `owner` ("query_1" -> "query"); empty for
/// names without a scope.
std::string scopeOf(llvm::StringRef nodeName, llvm::StringRef owner) {
  if (!nodeName.starts_with("/"))
    return "";
  llvm::SmallVector<llvm::StringRef> parts, ownerParts;
  nodeName.drop_front().split(parts, '/');
  parts.pop_back(); // The op's own name.
  owner.split(ownerParts, '.');
  std::string path;
  size_t o = 0;
  for (llvm::StringRef part : parts) {
    // A ModuleList entry "h.0" is two components of the parameter's path.
    llvm::SmallVector<llvm::StringRef> pieces;
    part.split(pieces, '.');
    for (llvm::StringRef piece : pieces) {
      if (o < ownerParts.size() && piece != ownerParts[o] && piece.starts_with(ownerParts[o]) &&
          piece.drop_front(ownerParts[o].size()).starts_with("_")) {
        llvm::StringRef suffix = piece.drop_front(ownerParts[o].size() + 1);
        if (!suffix.empty() && llvm::all_of(suffix, [](char c) { return c >= '0' && c <= '9'; }))
          piece = ownerParts[o];
      }
      if (!path.empty())
        path += '.';
      path += piece.str();
      ++o;
    }
  }
  return path;
}

std::string quotedList(llvm::ArrayRef<std::string> names, size_t limit = 3) {
  std::string text;
  for (auto [i, name] : llvm::enumerate(names)) {
    if (i == limit) {
      text += llvm::formatv(" and {0} more", names.size() - limit).str();
      break;
    }
    text += (i ? ", '" : "'") + printable(name) + "'";
  }
  return text;
}

constexpr const char *kReexport =
    "re-export with python/ppc_export.py (or torch.onnx.export(..., "
    "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False))";

} // namespace

std::vector<std::string> inferenceExportSigns(const OnnxModel &model,
                                              const llvm::StringSet<> &parameters) {
  const auto &graph = model.proto().graph();
  std::vector<std::string> signs;

  // Eval-mode deduplication keeps one initializer of each value and writes
  // the others as Identity nodes of it, named after the parameters merged.
  llvm::StringMap<std::vector<std::string>> aliases;
  for (const auto &node : graph.node())
    if (node.op_type() == "Identity" && node.input_size() == 1 &&
        parameters.contains(node.input(0)) && node.output_size() == 1 &&
        ppcrt::isMergedParameterName(node.output(0)))
      aliases[node.input(0)].push_back(node.output(0));
  for (const auto &init : graph.initializer()) {
    auto it = aliases.find(init.name());
    if (it == aliases.end())
      continue;
    signs.push_back(llvm::formatv("initializer '{0}' is one parameter standing for {1} "
                                  "({2} in all): torch.onnx.export in eval mode merged "
                                  "parameters of equal value, and ppc would train them "
                                  "as one; {3}, or pass --untie",
                                  printable(init.name()), quotedList(it->second),
                                  it->second.size() + 1, kReexport)
                        .str());
  }

  // The same without the Identity nodes (an optimizer removed them): one
  // initializer in the same role (op type and operand) of nodes in several
  // modules, not all inside the module that owns it.
  struct Use {
    std::string node, scope;
  };
  llvm::StringMap<std::map<std::pair<std::string, int>, std::vector<Use>>> roles;
  for (const auto &node : graph.node())
    for (auto [slot, input] : llvm::enumerate(node.input()))
      if (parameters.contains(input) && !aliases.count(input))
        roles[input][{node.op_type(), int(slot)}].push_back(
            {node.name(), scopeOf(node.name(), llvm::StringRef(input).rsplit('.').first)});
  for (const auto &init : graph.initializer()) {
    auto it = roles.find(init.name());
    if (it == roles.end())
      continue;
    llvm::StringRef owner = llvm::StringRef(init.name()).rsplit('.').first;
    for (const auto &[role, uses] : it->second) {
      llvm::StringSet<> scopes;
      bool outside = false;
      for (const Use &use : uses) {
        scopes.insert(use.scope);
        if (!use.scope.empty() && use.scope != owner &&
            !llvm::StringRef(use.scope).starts_with((owner + ".").str()))
          outside = true;
      }
      // Tables read by lookups in several modules are shared embeddings
      // (T5's and BART's `shared`), not merged values.
      bool lookups = role.first == "Gather" && role.second == 0;
      if (uses.size() < 2 || scopes.size() < 2 || !outside || lookups)
        continue;
      std::vector<std::string> nodes;
      for (const Use &use : uses)
        nodes.push_back(use.node);
      signs.push_back(llvm::formatv("initializer '{0}' is operand {1} of {2} {3} nodes in "
                                    "different modules ({4}): torch.onnx.export in eval "
                                    "mode may have merged parameters of equal value, and "
                                    "ppc would train them as one; {5}",
                                    printable(init.name()), role.second, uses.size(),
                                    printable(role.first), quotedList(nodes), kReexport)
                          .str());
      break;
    }
  }

  // Constant folding computes a tied LM head's transposed table once and
  // stores it: an initializer equal to the transpose of a gathered table.
  llvm::StringSet<> gathered;
  for (const auto &node : graph.node())
    if (node.op_type() == "Gather" && node.input_size() == 2 && parameters.contains(node.input(0)))
      gathered.insert(node.input(0));
  for (const auto &tableName : gathered.keys()) {
    const onnx::TensorProto *table = model.initializer(tableName);
    if (!table || table->dims_size() != 2)
      continue;
    std::optional<Tensor> tableValue;
    for (const auto &init : graph.initializer()) {
      if (init.name() == tableName || !parameters.contains(init.name()) || init.dims_size() != 2 ||
          init.dims(0) != table->dims(1) || init.dims(1) != table->dims(0))
        continue;
      if (!tableValue) {
        auto value = model.loadInitializer(tableName);
        if (!value) {
          llvm::consumeError(value.takeError());
          break;
        }
        tableValue = std::move(*value);
      }
      // This initializer, whose dims were compared: another of the same
      // name (refused later, by the importer) may have other dims.
      auto copy = decodeTensorProto(init, model.directory());
      if (!copy) {
        llvm::consumeError(copy.takeError());
        continue;
      }
      int64_t rows = table->dims(0), cols = table->dims(1);
      bool transposed = true;
      for (int64_t r = 0; r < rows && transposed; ++r)
        for (int64_t c = 0; c < cols && transposed; ++c)
          transposed = tableValue->getDouble(r * cols + c) == copy->getDouble(c * rows + r);
      if (transposed)
        signs.push_back(llvm::formatv("initializer '{0}' is the transpose of the embedding "
                                      "table '{1}': constant folding split a tied "
                                      "embedding from its LM head, and ppc would train "
                                      "them apart; {2}",
                                      printable(init.name()), printable(tableName), kReexport)
                            .str());
    }
  }
  return signs;
}

FailureOr<llvm::StringSet<>>
chooseParameters(const OnnxModel &model, const ParameterChoice &choice,
                 llvm::function_ref<void(const llvm::Twine &)> emitError,
                 llvm::function_ref<void(const llvm::Twine &)> emitWarning) {
  auto metadata = readMetadata(model, emitError);
  auto train = compilePatterns(choice.train, "train", emitError);
  auto freeze = compilePatterns(choice.freeze, "freeze", emitError);
  if (failed(metadata) || failed(train) || failed(freeze))
    return failure();

  llvm::SmallVector<std::string> floats;
  for (const auto &init : model.proto().graph().initializer())
    if (isFloatInitializer(init))
      floats.push_back(init.name());

  llvm::StringSet<> parameters;
  if (*metadata) {
    for (const std::string &name : (*metadata)->parameters)
      parameters.insert(name);
    llvm::StringSet<> listed(parameters);
    for (const std::string &name : (*metadata)->frozen)
      listed.insert(name);
    for (const std::string &name : floats)
      if (!listed.contains(name))
        emitWarning("initializer '" + printable(name) + "' is not in the '" + kTrainingMetadataKey +
                    "' metadata of '" + printable(model.path()) + "'; it is frozen (--train '" +
                    printable(name) + "' trains it)");
  } else {
    for (const std::string &name : floats)
      parameters.insert(name);
  }

  // Patterns: --train chooses among all float initializers, then --freeze
  // removes. A pattern that matches nothing is most likely a typo.
  auto applyPatterns = [&](const std::vector<llvm::GlobPattern> &patterns,
                           llvm::ArrayRef<std::string> texts, llvm::StringRef flag,
                           auto &&onMatch) {
    bool ok = true;
    for (auto [pattern, text] : llvm::zip(patterns, texts)) {
      bool matched = false;
      for (const std::string &name : floats)
        if (pattern.match(name)) {
          matched = true;
          onMatch(name);
        }
      if (!matched) {
        emitError("--" + flag + " '" + text + "': matches no float initializer of '" +
                  printable(model.path()) + "'");
        ok = false;
      }
    }
    return ok;
  };
  if (!choice.train.empty()) {
    parameters.clear();
    if (!applyPatterns(*train, choice.train, "train",
                       [&](const std::string &name) { parameters.insert(name); }))
      return failure();
  }
  if (!applyPatterns(*freeze, choice.freeze, "freeze",
                     [&](const std::string &name) { parameters.erase(name); }))
    return failure();

  if (!*metadata)
    for (const std::string &sign : inferenceExportSigns(model, parameters))
      emitWarning(sign);
  return parameters;
}

} // namespace ppc
