//===- Threads.cpp - the threads of an emulated kernel --------------------===//
//
// The blocks of a grid run one after the other. Within a block every thread
// is a fiber on a stack of its own. A round runs the live threads in order,
// each until it returns or reaches a synchronization point (__syncthreads,
// a warp shuffle), when it hands over to the next live thread; the last one
// hands back to the block, which checks that every live thread waits at the
// same point (one that does not would hang or corrupt a GPU's block, and is
// reported) and starts the next round, until every thread has returned.
//
// Warp shuffles exchange values through two banks of slots, used in turn:
// a thread that has read its partner's value in round r writes its next
// value into the other bank, which no thread reads until round r + 1 ends.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/cuda/emulator/Emulator.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace ppcrt::emu {
namespace {

constexpr unsigned kMaxThreads = 1024;
constexpr size_t kStackBytes = 64 << 10;

#if defined(__x86_64__)
/// A suspended fiber: its stack pointer, below the registers it saved.
struct Context {
  void *stack = nullptr;
};

// Saves the callee-saved registers (System V ABI) on the current stack,
// stores its pointer in *save and continues on the stack `to`. It returns
// with an indirect jump rather than `ret`: fibers resume at a few places,
// which the indirect predictor learns and the return stack cannot.
extern "C" void ppcrtEmuSwitch(void **save, void *to);
asm(R"(
  .text
  .p2align 4
  .globl ppcrtEmuSwitch
  .hidden ppcrtEmuSwitch
  .type ppcrtEmuSwitch, @function
ppcrtEmuSwitch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  popq %rcx
  jmpq *%rcx
  .size ppcrtEmuSwitch, .-ppcrtEmuSwitch
)");

void transfer(Context &save, Context &to) { ppcrtEmuSwitch(&save.stack, to.stack); }
#else
struct Context {
  ucontext_t context;
};

void transfer(Context &save, Context &to) { swapcontext(&save.context, &to.context); }
#endif

struct Fiber {
  Context context;
  uint3 index{0, 0, 0};
  Sync at = Sync::Barrier;
  uint64_t syncs = 0;
  unsigned bank = 0;
  bool done = false;
};

/// A thread's value in a shuffle: 8 bytes, or a tensor-core product's
/// operands (mma.h).
struct alignas(8) ShuffleSlot {
  unsigned char bytes[kShuffleSlotBytes];
};

struct Block {
  const char *kernel = nullptr;
  const Threads *threads = nullptr;
  std::vector<Fiber> fibers = std::vector<Fiber>(kMaxThreads);
  unsigned count = 0, current = 0;
  /// Threads of the block that have returned.
  unsigned returned = 0;
  /// Where the last thread of a round hands back to.
  Context block;
  char *stacks = nullptr;
  ShuffleSlot slots[2][kMaxThreads];
};

Block block;

/// Continues with the next live thread of the round after the current one,
/// or with the block when there is none; `save` keeps where the current
/// thread stopped.
void handOver(Context &save) {
  unsigned next = block.current + 1;
  while (next < block.count && block.fibers[next].done)
    ++next;
  if (next == block.count) {
    transfer(save, block.block);
    return;
  }
  block.current = next;
  threadIdx = block.fibers[next].index;
  transfer(save, block.fibers[next].context);
}

[[noreturn]] void fiberMain() {
  block.threads->run(block.threads->closure);
  Fiber &self = block.fibers[block.current];
  self.done = true;
  ++block.returned;
  // Its context is not resumed again: the next prepare() starts it afresh.
  handOver(self.context);
  __builtin_unreachable();
}

void prepare(unsigned t) {
  Fiber &fiber = block.fibers[t];
  char *top = block.stacks + (size_t(t) + 1) * kStackBytes;
#if defined(__x86_64__)
  // What ppcrtEmuSwitch pops: six registers, then fiberMain as the address
  // it jumps to, entered with the stack aligned as after a call.
  void **sp = reinterpret_cast<void **>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void *>(&fiberMain);
  for (int r = 0; r < 6; ++r)
    *--sp = nullptr;
  fiber.context.stack = sp;
#else
  getcontext(&fiber.context.context);
  fiber.context.context.uc_stack.ss_sp = top - kStackBytes;
  fiber.context.context.uc_stack.ss_size = kStackBytes;
  fiber.context.context.uc_link = nullptr;
  makecontext(&fiber.context.context, reinterpret_cast<void (*)()>(fiberMain), 0);
#endif
  fiber.index = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
  fiber.at = Sync::Barrier;
  fiber.syncs = 0;
  fiber.bank = 0;
  fiber.done = false;
}

std::string blockName() {
  char text[160];
  std::snprintf(text, sizeof(text), "kernel %s, block (%u, %u, %u)", block.kernel, blockIdx.x,
                blockIdx.y, blockIdx.z);
  return text;
}

std::string threadName(unsigned t) {
  const uint3 &i = block.fibers[t].index;
  char text[96];
  std::snprintf(text, sizeof(text), "thread (%u, %u, %u)", i.x, i.y, i.z);
  return text;
}

const char *syncName(Sync kind) {
  return kind == Sync::Barrier ? "__syncthreads()"
         : kind == Sync::Warp  ? "__syncwarp()"
         : kind == Sync::Mma   ? "mma.sync"
                               : "a warp shuffle";
}

/// After a round: every live thread waits at the same synchronization point
/// (a shuffle's partners are checked where they are read, shuffledSlot).
/// Returns the first live thread, or count when every thread has returned.
unsigned checkRound() {
  unsigned first = block.count;
  for (unsigned t = 0; t < block.count; ++t) {
    const Fiber &fiber = block.fibers[t];
    if (fiber.done)
      continue;
    if (first == block.count) {
      first = t;
      continue;
    }
    const Fiber &lead = block.fibers[first];
    if (fiber.syncs != lead.syncs || fiber.at != lead.at)
      emulatorError(blockName() + ": " + threadName(first) + " waits at " + syncName(lead.at) +
                    " #" + std::to_string(lead.syncs) + " while " + threadName(t) + " waits at " +
                    syncName(fiber.at) + " #" + std::to_string(fiber.syncs) +
                    " (divergent synchronization: a GPU would hang or corrupt the block)");
  }
  return first;
}

void runBlock() {
  for (unsigned t = 0; t < block.count; ++t)
    prepare(t);
  block.returned = 0;
  for (unsigned first = 0; first < block.count; first = checkRound()) {
    block.current = first;
    threadIdx = block.fibers[first].index;
    transfer(block.block, block.fibers[first].context);
  }
}

/// Thread `source`'s slot of the shuffle the running thread `self` has
/// reached, checked: a thread of the block that stopped there too.
const void *partnerSlot(const Fiber &self, unsigned source) {
  if (source >= block.count)
    emulatorError(blockName() + ": " + threadName(block.current) + " shuffles with lane " +
                  std::to_string(source % 32) + ", past the block's last thread");
  // The partner stopped at this shuffle too: it is live, or has returned
  // since (in this round, after reading its own partner's value).
  if (block.fibers[source].syncs < self.syncs)
    emulatorError(blockName() + ": " + threadName(block.current) + " shuffles with " +
                  threadName(source) + ", which has returned");
  return &block.slots[self.bank][source];
}

} // namespace

void emulatorError(const std::string &message) {
  std::fprintf(stderr, "error: CUDA emulator: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

void synchronize(Sync kind) {
  if (!block.threads)
    emulatorError(std::string(syncName(kind)) + " called outside a kernel");
  Fiber &self = block.fibers[block.current];
  self.at = kind;
  ++self.syncs;
  handOver(self.context);
}

void *shuffleSlot() {
  Fiber &self = block.fibers[block.current];
  return &block.slots[self.bank][block.current];
}

const void *shuffledSlot(unsigned source) {
  Fiber &self = block.fibers[block.current];
  const void *slot = partnerSlot(self, source);
  self.bank ^= 1;
  return slot;
}

const void *warpShuffledSlots() {
  Fiber &self = block.fibers[block.current];
  unsigned first = block.current - block.current % 32;
  // Every lane is checked where one could have returned or be missing (the
  // checks were a fifth of a bf16 GPT step's time).
  if (block.returned || first + 32 > block.count)
    for (unsigned lane = 0; lane < 32; ++lane)
      partnerSlot(self, first + lane);
  const void *slots = &block.slots[self.bank][first];
  self.bank ^= 1;
  return slots;
}

void runGrid(const char *kernel, dim3 grid, dim3 threads, const Threads &run) {
  if (!block.stacks) {
    void *memory = mmap(nullptr, kMaxThreads * kStackBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED)
      emulatorError("cannot map the stacks of a block's threads");
    block.stacks = static_cast<char *>(memory);
  }
  block.kernel = kernel;
  block.threads = &run;
  block.count = threads.x * threads.y * threads.z;
  gridDim = grid;
  blockDim = threads;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        runBlock();
      }
  block.threads = nullptr;
}

} // namespace ppcrt::emu
