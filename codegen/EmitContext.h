//===- EmitContext.h - what the op emitters of a target share ----*- C++ -*-===//
//
// Code generation writes one C++ translation unit per executable: file-level
// kernels and constants, then one function per rank program whose body calls
// them in program order. An op emitter writes the statements of one op (or
// one fused group) through an EmitContext, which names values, knows where
// each lives in the rank's arena, and collects the file-level definitions.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_CODEGEN_EMITCONTEXT_H
#define PPC_CODEGEN_EMITCONTEXT_H

#include "codegen/Fusion.h"
#include "codegen/StridedViews.h"
#include "codegen/TargetSpelling.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>
#include <utility>

namespace ppc::codegen {

/// The C++ element type of an MLIR element type ("float", "int64_t",
/// "uint8_t" for i1), or failure for one generated code does not support.
mlir::FailureOr<std::string> cType(mlir::Type elementType);
/// ppcrt::DType spelling ("ppcrt::DType::F32").
mlir::FailureOr<std::string> runtimeDType(mlir::Type elementType);
/// The ONNX node an op was imported from ("" when none), printable
/// (runtime/Printable.h): it goes into comments of the generated source, where
/// a line break in it (GCC ends a line at '\r' too) would start code of the
/// model's choosing, and into the executables' error messages.
std::string nodeName(mlir::Operation *op);
/// `text` as a C++ string literal holding exactly its bytes: quotes and
/// backslashes escaped, every byte that is not printable ASCII in octal.
std::string quote(llvm::StringRef text);
/// "{1, 2, 3}"
std::string braces(llvm::ArrayRef<int64_t> values);
/// The static shape of a tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);
/// "outer, n, inner": `shape` viewed as the lines along `axis` that the
/// runtime's line kernels take (runtime/ppcrt/Lines.h).
std::string linesAlong(llvm::ArrayRef<int64_t> shape, int64_t axis);
/// A float or integer attribute as an exact C++ literal of an element of
/// type `type` (floats in hexadecimal, "NAN"/"INFINITY" spelled out).
std::string cppLiteral(mlir::Attribute value, mlir::Type type);

class EmitContext {
public:
  EmitContext(llvm::raw_ostream &kernels, std::vector<std::string> &groups,
              const TargetSpelling &spelling)
      : kernels(kernels), groups(groups), spelling(&spelling) {}

  /// What the target spells its own way.
  const TargetSpelling &target() const { return *spelling; }
  /// The namespace of the target's kernel library ("ppcrt::cpu").
  llvm::StringRef kernelLibrary() const { return spelling->kernels(); }
  /// Spells what follows for `target` instead, returning the spelling it
  /// replaces: the ops the host runs in a CUDA program (offload) are
  /// spelled as the CPU target spells them.
  const TargetSpelling &spellFor(const TargetSpelling &target) {
    return *std::exchange(spelling, &target);
  }

  /// Starts a program: `body` receives its statements; `fusion` is its
  /// fusion plan, `strided` its attention operands' views.
  void beginProgram(llvm::raw_ostream &body, llvm::DenseMap<mlir::Value, mlir::Value> storage,
                    llvm::DenseMap<mlir::Value, int64_t> offsets,
                    llvm::DenseMap<mlir::Operation *, int64_t> workspaceOffsets,
                    const FusionPlan &fusion, const StridedViews &strided);
  /// `op`'s workspace in the arena (MemoryPlan::workspaces) as a pointer to
  /// `type`, or "nullptr" where it has none.
  std::string workspace(mlir::Operation *op, llvm::StringRef type);
  /// The current program's fusion plan (what is folded into which kernel).
  const FusionPlan &fusion() const { return *fusionPlan; }
  /// The view an attention kernel reads or writes `value` through, or null
  /// where it has its own dense buffer (StridedViews.h).
  const StridedView *stridedView(mlir::Value value) const;

  /// The statement stream of the current program.
  llvm::raw_ostream &body() { return *bodyStream; }
  /// File-level definitions (kernels, constants), written before the programs.
  llvm::raw_ostream &file() { return kernels; }

  /// The C++ pointer expression of `value`'s elements in the arena (the
  /// host's, `hostArena`, for a value in host memory: ppc::onHost), typed
  /// (declares the variable the first time).
  std::string ptr(mlir::Value value);
  /// The element type in C++ of `value`.
  std::string elementType(mlir::Value value);
  /// The value whose buffer holds `value` (itself unless aliased).
  mlir::Value holder(mlir::Value value) const;

  /// A fresh name for a file-level definition: "<prefix><n>_<node>".
  std::string freshName(llvm::StringRef prefix, mlir::Operation *op);
  /// "static const int64_t dims<n>_<node>[] = {...};" at file level (host
  /// memory); returns its name, or "nullptr" for no values.
  std::string constArray(mlir::Operation *op, llvm::ArrayRef<int64_t> values);

  /// The index of the communicator group over `axes` (Program::groups).
  int group(llvm::ArrayRef<llvm::StringRef> axes);
  /// A string literal describing a communication op for the watchdog:
  /// "all_reduce on [dp] for node 'x'".
  std::string what(mlir::Operation *op, llvm::StringRef axes);

  /// "  // <op name> '<ONNX node>'" before an op's statements.
  void comment(mlir::Operation *op);

  /// Fails with an error at `op`.
  mlir::LogicalResult unsupported(mlir::Operation *op, const llvm::Twine &why);

  /// What a communication call's statement starts with: "" on CPUs, where
  /// it completes at once; on CUDA a ticket declaration, whose name
  /// takeTicket() then hands to the walk (which waits for it before the
  /// first kernel that touches the call's buffers).
  std::string ticket();
  std::string takeTicket() { return std::exchange(pendingTicket, std::string()); }

  /// The index of a kernel error message (Kernels.cuh's flag; 1-based).
  int kernelError(const std::string &message);
  const std::vector<std::string> &kernelErrors() const { return errors; }

private:
  llvm::raw_ostream &kernels;
  std::vector<std::string> &groups;
  llvm::raw_ostream *bodyStream = nullptr;
  const FusionPlan *fusionPlan = nullptr;
  const StridedViews *views = nullptr;
  llvm::DenseMap<mlir::Value, mlir::Value> storage;
  llvm::DenseMap<mlir::Value, int64_t> offsets;
  llvm::DenseMap<mlir::Operation *, int64_t> workspaces;
  llvm::DenseMap<mlir::Value, std::string> names;
  unsigned nextName = 0;
  unsigned nextDefinition = 0;
  const TargetSpelling *spelling;
  std::string pendingTicket;
  unsigned nextTicket = 0;
  std::vector<std::string> errors;
};

/// Emits one op (not an elementwise one: those are fused, Fusion.h), for
/// whichever target the context spells.
using OpEmitter = std::function<mlir::LogicalResult(mlir::Operation *, EmitContext &)>;

/// The emitter of `op`'s class, or null (codegen/Ops.cpp and
/// codegen/Communication.cpp register them).
const OpEmitter *lookupEmitter(mlir::Operation *op);

/// Emits `matmul`'s GEMM computing `epilogue`'s adds too (writing its last
/// add's result), or alone when `epilogue` is null (codegen/Ops.cpp); with
/// `sums` (FusionPlan::sumsGemm), also that reduce_sum's result, or the
/// reduce_sum's kernel after it where the GEMM could not.
mlir::LogicalResult emitGemm(mlir::Operation *matmul, EmitContext &ctx,
                             const GemmEpilogue *epilogue, mlir::Operation *sums = nullptr);

} // namespace ppc::codegen

#endif // PPC_CODEGEN_EMITCONTEXT_H
