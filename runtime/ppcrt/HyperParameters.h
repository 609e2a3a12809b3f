//===- HyperParameters.h - the training step's run-time hyper-parameters -===//
//
// The hyper-parameters a training step takes as arguments (`ppc.hyper`,
// passes/BuildTrainStep.cpp), so that a compiled executable trains with
// other values than it was compiled with. The one list of them: their
// argument names, the flag `ppc compile` and the executables take each as,
// its help and its range. BuildTrainStep adds those its optimizer and
// schedule use; the passes' options (passes/Passes.td, passes/Pipelines.h)
// spell their compile-time values, and test/unit/HyperParametersTest.cpp
// checks that both agree with this list.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PPCRT_HYPERPARAMETERS_H
#define PPC_RUNTIME_PPCRT_HYPERPARAMETERS_H

namespace ppcrt {

struct HyperParameter {
  /// The step's argument ("beta1").
  const char *name;
  /// The command-line flag, without dashes ("betas"); parameters that share
  /// one ("betas": beta1,beta2) are given together, in this list's order.
  const char *flag;
  const char *help;
  /// The value BuildTrainStep compiles when its option is not given.
  double defaultValue;
  /// Whether a value must be below 1 (a fraction of the previous average:
  /// betas and momentum); every value is finite and at least 0.
  bool fraction;
};

inline constexpr HyperParameter kHyperParameters[] = {
    {"lr", "lr", "peak learning rate", 1e-3, false},
    {"min_lr", "min-lr", "learning rate at the end of the cosine schedule", 0.0, false},
    {"beta1", "betas", "AdamW's b1,b2", 0.9, true},
    {"beta2", "betas", "AdamW's b1,b2", 0.999, true},
    {"eps", "eps", "AdamW's epsilon", 1e-8, false},
    {"weight_decay", "weight-decay", "weight decay", 0.01, false},
    {"momentum", "momentum", "SGD momentum", 0.0, true},
    {"grad_clip", "grad-clip", "global gradient norm limit", 0.0, false},
};

} // namespace ppcrt

#endif // PPC_RUNTIME_PPCRT_HYPERPARAMETERS_H
