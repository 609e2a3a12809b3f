//===- Threads.cpp - the threads of an emulated kernel --------------------===//
//
// The blocks of a grid run one after the other. Within a block every thread
// is a fiber on a stack of its own: the block runs its live threads in turn,
// each until it returns or reaches a synchronization point (__syncthreads,
// a warp shuffle), and starts another round until every thread has
// returned. After a round every live thread must be at the same point; one
// that is not would hang or corrupt a GPU's block, and is reported.
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
constexpr size_t kStackBytes = 128 << 10;

#if defined(__x86_64__)
// Saves the callee-saved registers on the current stack, stores its
// pointer in *save and continues on the stack `to` (System V ABI).
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
  ret
  .size ppcrtEmuSwitch, .-ppcrtEmuSwitch
)");
#endif

struct Fiber {
#if defined(__x86_64__)
  void *stack = nullptr;
#else
  ucontext_t context;
#endif
  uint3 index{0, 0, 0};
  Sync at = Sync::Barrier;
  uint64_t syncs = 0;
  unsigned bank = 0;
  bool done = false;
};

struct Block {
  const char *kernel = nullptr;
  const std::function<void()> *thread = nullptr;
  std::vector<Fiber> fibers = std::vector<Fiber>(kMaxThreads);
  unsigned count = 0, current = 0;
#if defined(__x86_64__)
  void *scheduler = nullptr;
#else
  ucontext_t scheduler;
#endif
  char *stacks = nullptr;
  uint64_t slots[2][kMaxThreads];
};

Block block;

[[noreturn]] void fiberMain() {
  (*block.thread)();
  Fiber &self = block.fibers[block.current];
  self.done = true;
#if defined(__x86_64__)
  ppcrtEmuSwitch(&self.stack, block.scheduler);
#else
  setcontext(&block.scheduler);
#endif
  __builtin_unreachable();
}

#if !defined(__x86_64__)
void fiberEntry() { fiberMain(); }
#endif

void prepare(unsigned t) {
  Fiber &fiber = block.fibers[t];
  char *top = block.stacks + (size_t(t) + 1) * kStackBytes;
#if defined(__x86_64__)
  // What ppcrtEmuSwitch pops: six registers, then fiberMain as the return
  // address, entered with the stack aligned as after a call.
  void **sp = reinterpret_cast<void **>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void *>(&fiberMain);
  for (int r = 0; r < 6; ++r)
    *--sp = nullptr;
  fiber.stack = sp;
#else
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = top - kStackBytes;
  fiber.context.uc_stack.ss_size = kStackBytes;
  fiber.context.uc_link = nullptr;
  makecontext(&fiber.context, fiberEntry, 0);
#endif
  unsigned x = t % blockDim.x, y = t / blockDim.x % blockDim.y,
           z = t / (blockDim.x * blockDim.y);
  fiber.index = {x, y, z};
  fiber.at = Sync::Barrier;
  fiber.syncs = 0;
  fiber.bank = 0;
  fiber.done = false;
}

void resume(unsigned t) {
  block.current = t;
  threadIdx = block.fibers[t].index;
#if defined(__x86_64__)
  ppcrtEmuSwitch(&block.scheduler, block.fibers[t].stack);
#else
  swapcontext(&block.scheduler, &block.fibers[t].context);
#endif
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
  return kind == Sync::Barrier ? "__syncthreads()" : "a warp shuffle";
}

/// After a round: every live thread waits at the same synchronization point
/// (a shuffle's partners are checked where they are read, shuffledSlot).
/// Returns whether any thread is live.
bool checkRound() {
  int first = -1;
  for (unsigned t = 0; t < block.count; ++t) {
    const Fiber &fiber = block.fibers[t];
    if (fiber.done)
      continue;
    if (first < 0) {
      first = int(t);
      continue;
    }
    const Fiber &lead = block.fibers[first];
    if (fiber.syncs != lead.syncs || fiber.at != lead.at)
      emulatorError(blockName() + ": " + threadName(first) + " waits at " + syncName(lead.at) +
                    " #" + std::to_string(lead.syncs) + " while " + threadName(t) +
                    " waits at " + syncName(fiber.at) + " #" + std::to_string(fiber.syncs) +
                    " (divergent synchronization: a GPU would hang or corrupt the block)");
  }
  return first >= 0;
}

void runBlock() {
  for (unsigned t = 0; t < block.count; ++t)
    prepare(t);
  do {
    for (unsigned t = 0; t < block.count; ++t)
      if (!block.fibers[t].done)
        resume(t);
  } while (checkRound());
}

} // namespace

void emulatorError(const std::string &message) {
  std::fprintf(stderr, "error: CUDA emulator: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

void synchronize(Sync kind) {
  if (!block.thread)
    emulatorError(std::string(syncName(kind)) + " called outside a kernel");
  Fiber &self = block.fibers[block.current];
  self.at = kind;
  ++self.syncs;
#if defined(__x86_64__)
  ppcrtEmuSwitch(&self.stack, block.scheduler);
#else
  swapcontext(&self.context, &block.scheduler);
#endif
  threadIdx = self.index;
}

void *shuffleSlot() {
  Fiber &self = block.fibers[block.current];
  return &block.slots[self.bank][block.current];
}

const void *shuffledSlot(unsigned source) {
  Fiber &self = block.fibers[block.current];
  if (source >= block.count)
    emulatorError(blockName() + ": " + threadName(block.current) +
                  " shuffles with lane " + std::to_string(source % 32) +
                  ", past the block's last thread");
  const Fiber &peer = block.fibers[source];
  // The peer stopped at this shuffle too: it is live, or has returned since
  // (in this round, after reading its own partner's value).
  bool reached = peer.syncs >= self.syncs;
  if (!reached)
    emulatorError(blockName() + ": " + threadName(block.current) + " shuffles with " +
                  threadName(source) + ", which has returned");
  const void *slot = &block.slots[self.bank][source];
  self.bank ^= 1;
  return slot;
}

void runGrid(const char *kernel, dim3 grid, dim3 threads, const std::function<void()> &thread) {
  if (!block.stacks) {
    void *memory = mmap(nullptr, kMaxThreads * kStackBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED)
      emulatorError("cannot map the stacks of a block's threads");
    block.stacks = static_cast<char *>(memory);
  }
  block.kernel = kernel;
  block.thread = &thread;
  block.count = threads.x * threads.y * threads.z;
  gridDim = grid;
  blockDim = threads;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        runBlock();
      }
  block.thread = nullptr;
}

} // namespace ppcrt::emu
