//===- BucketAllReduces.cpp - gradient reduction in buckets ---------------===//

#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Provenance.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <map>

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_BUCKETALLREDUCES
#include "passes/Passes.h.inc"

namespace {

struct BucketAllReducesPass : impl::BucketAllReducesBase<BucketAllReducesPass> {
  using BucketAllReducesBase::BucketAllReducesBase;

  void runOnOperation() override {
    Block &body = getOperation().getBody().front();
    // Program position of every op: when its result is ready.
    llvm::DenseMap<Operation *, int64_t> position;
    int64_t index = 0;
    for (Operation &op : body)
      position[&op] = index++;
    auto readyAt = [&](AllReduceOp op) -> int64_t {
      Operation *def = op.getInput().getDefiningOp();
      return def ? position[def] : -1;
    };
    auto firstUse = [&](AllReduceOp op) {
      int64_t first = INT64_MAX;
      for (Operation *user : op->getUsers())
        first = std::min(first, position[user]);
      return first;
    };

    // Sum all-reduces by (mesh, axes, element type), in ready order.
    std::map<std::string, std::vector<AllReduceOp>> groups;
    body.walk([&](AllReduceOp op) {
      if (op.getReduction() != ReductionKind::Sum)
        return;
      std::string key;
      llvm::raw_string_ostream os(key);
      os << op.getMesh() << op.getAxes() << op.getType().getElementType();
      groups[os.str()].push_back(op);
    });
    for (auto &[key, ops] : groups) {
      llvm::stable_sort(ops, [&](AllReduceOp a, AllReduceOp b) { return readyAt(a) < readyAt(b); });
      std::vector<AllReduceOp> bucket;
      int64_t bytes = 0;
      auto flush = [&] {
        emitBucket(bucket, readyAt, firstUse);
        bucket.clear();
        bytes = 0;
      };
      for (AllReduceOp op : ops) {
        int64_t size = boundedTensorBytes(op.getType());
        if (!bucket.empty() && bytes + size > bucketBytes)
          flush();
        bucket.push_back(op);
        bytes += size;
      }
      flush();
    }
  }

  /// Replaces `bucket` by one all_reduce of its flattened, concatenated
  /// operands right after the last of them is ready, when every use of the
  /// old results comes after that point.
  template <typename ReadyFn, typename UseFn>
  void emitBucket(llvm::ArrayRef<AllReduceOp> bucket, ReadyFn readyAt, UseFn firstUse) {
    if (bucket.size() < 2)
      return;
    AllReduceOp last = bucket.front();
    int64_t lastReady = -1, earliestUse = INT64_MAX;
    for (AllReduceOp op : bucket) {
      if (readyAt(op) >= lastReady) {
        lastReady = readyAt(op);
        last = op;
      }
      earliestUse = std::min(earliestUse, firstUse(op));
    }
    if (earliestUse <= lastReady)
      return; // A result is needed before the bucket could complete.
    OpBuilder b(&getContext());
    if (Operation *def = last.getInput().getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(last->getBlock());
    Location loc = NameLoc::get(b.getStringAttr("gradient_bucket"));
    llvm::SmallVector<Value> flat;
    int64_t total = 0;
    AllReduceOp first = bucket.front();
    Type element = first.getType().getElementType();
    for (AllReduceOp op : bucket) {
      int64_t n = op.getType().getNumElements();
      Value input = op.getInput();
      if (op.getType().getRank() != 1)
        input = b.create<ReshapeOp>(loc, RankedTensorType::get({n}, element), input);
      flat.push_back(input);
      total += n;
    }
    Value packed = b.create<ConcatOp>(loc, flat, 0);
    auto reduced = b.create<AllReduceOp>(loc, packed.getType(), packed, first.getMeshAttr(),
                                         first.getAxes(), ReductionKind::Sum);
    reduced->setAttr(PpcDialect::kValueAttrName,
                     b.getStringAttr("bucket of " + std::to_string(bucket.size()) + " values"));
    if (auto why = first->getAttrOfType<StringAttr>(kWhyAttrName))
      reduced->setAttr(kWhyAttrName,
                       b.getStringAttr("one bucket of " + std::to_string(bucket.size()) +
                                       " all-reduces, the first's: " + why.getValue()));
    int64_t offset = 0;
    for (AllReduceOp op : bucket) {
      int64_t n = op.getType().getNumElements();
      Value part =
          b.create<SliceOp>(loc, reduced, llvm::ArrayRef<int64_t>{offset},
                            llvm::ArrayRef<int64_t>{offset + n}, llvm::ArrayRef<int64_t>{1});
      if (op.getType().getRank() != 1)
        part = b.create<ReshapeOp>(loc, op.getType(), part);
      op.replaceAllUsesWith(part);
      offset += n;
    }
    // Only now: the insertion point may sit right before one of them.
    for (AllReduceOp op : bucket)
      op.erase();
  }
};

} // namespace
} // namespace ppc
