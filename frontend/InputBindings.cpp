//===- InputBindings.cpp - graph inputs other than the tokens -------------===//

#include "frontend/InputBindings.h"
#include "executor/Npy.h"
#include "frontend/OnnxTensor.h"
#include "runtime/Printable.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace ppc {

llvm::StringRef naturalBinding(llvm::StringRef inputName) {
  return llvm::StringSwitch<llvm::StringRef>(inputName)
      .Case("attention_mask", "ones")
      .Case("token_type_ids", "zeros")
      .Case("position_ids", "arange")
      .Default("");
}

static const onnx::ValueInfoProto *graphInput(const OnnxModel &model, llvm::StringRef name) {
  for (const auto &info : model.proto().graph().input())
    if (info.name() == name && !model.initializer(name))
      return &info;
  return nullptr;
}

FailureOr<llvm::StringMap<std::string>>
inputsToBind(const OnnxModel &model, llvm::ArrayRef<std::string> flags,
             llvm::function_ref<void(const llvm::Twine &)> emitError) {
  llvm::StringMap<std::string> bindings;
  for (const auto &info : model.proto().graph().input()) {
    llvm::StringRef natural = naturalBinding(info.name());
    if (!natural.empty() && !model.initializer(info.name()))
      bindings[info.name()] = natural.str();
  }
  for (const std::string &flag : flags) {
    auto [name, value] = llvm::StringRef(flag).split('=');
    if (name.empty() || value.empty()) {
      emitError("--bind '" + flag + "': expected NAME=ones|zeros|arange|FILE.npy");
      return failure();
    }
    if (!graphInput(model, name)) {
      emitError("--bind '" + flag + "': the model has no graph input '" + printable(name) + "'");
      return failure();
    }
    bindings[name] = value.str();
  }
  return bindings;
}

LogicalResult bindInputs(const OnnxModel &model, const llvm::StringMap<std::string> &bindings,
                         ImportOptions &options,
                         llvm::function_ref<void(const llvm::Twine &)> emitError) {
  for (const auto &entry : bindings) {
    llvm::StringRef name = entry.getKey(), value = entry.getValue();
    auto fail = [&](const llvm::Twine &message) {
      emitError("input '" + printable(name) + "' (bound to " + printable(value) + "): " + message);
      return failure();
    };
    const onnx::ValueInfoProto *info = graphInput(model, name);
    if (!info || !info->type().has_tensor_type() || !info->type().tensor_type().has_shape())
      return fail("is not a tensor input of static rank");
    const auto &type = info->type().tensor_type();
    auto dtype = dtypeFromOnnxOrNull(type.elem_type());
    if (!dtype)
      return fail("has an element type ppc does not support");
    Shape shape;
    for (const auto &dim : type.shape().dim()) {
      if (dim.has_dim_value()) {
        shape.push_back(dim.dim_value());
        continue;
      }
      auto it = options.dimSizes.find(dim.dim_param());
      if (it == options.dimSizes.end())
        return fail("dimension '" + printable(dim.dim_param()) +
                    "' has no size; set it with --dim " + printable(dim.dim_param()) + "=N");
      shape.push_back(it->second);
    }
    // The constant is built here, in host memory: its size is checked first.
    auto allocated = Tensor::allocate(*dtype, shape);
    if (!allocated)
      return fail("its declared " + llvm::toString(allocated.takeError()));
    if (allocated->numElements() > options.maxFoldElements)
      return fail("it would be a constant of " + llvm::Twine(allocated->numElements()) +
                  " elements, more than --max-fold-elements (" +
                  llvm::Twine(options.maxFoldElements) + ") allows");
    Tensor tensor = std::move(*allocated);
    if (value == "ones" || value == "zeros") {
      double v = value == "ones" ? 1 : 0;
      for (int64_t i = 0; i < tensor.numElements(); ++i)
        tensor.setDouble(i, v);
    } else if (value == "arange") {
      if (shape.empty())
        return fail("arange needs a dimension to count along");
      for (int64_t i = 0; i < tensor.numElements(); ++i)
        tensor.setDouble(i, double(i % shape.back()));
    } else if (value.ends_with(".npy")) {
      auto read = readNpy(value);
      if (!read)
        return fail(llvm::toString(read.takeError()));
      if (read->dtype() != *dtype || read->shape() != llvm::ArrayRef<int64_t>(shape))
        return fail("the file's dtype or shape differs from the input's");
      tensor = std::move(*read);
    } else {
      return fail("expected ones, zeros, arange or a .npy file");
    }
    options.constantInputs[name] = std::move(tensor);
  }
  return success();
}

} // namespace ppc
