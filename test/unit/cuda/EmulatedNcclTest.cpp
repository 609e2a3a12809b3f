//===- EmulatedNcclTest.cpp - NCCL over MPI in the CUDA emulator ----------===//
//
// Run by every rank of a 3-rank mpirun job: each collective of the emulated
// NCCL against what its definition says every rank receives, computed
// here from the ranks' known inputs; in-place forms; bf16 sums; messages in
// order per peer, all-to-all as a group of sends and receives; and split
// communicators, including ranks left out with NCCL_SPLIT_NOCOLOR.
//
//===----------------------------------------------------------------------===//

#include "test/unit/cuda/DeviceMemory.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <gtest/gtest.h>

#include <vector>

namespace {

using ppc::test::deviceCopy;
using ppc::test::result;

class EmulatedNccl : public ::testing::Test {
protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id;
    if (rank == 0) {
      ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    // Non-blocking creation returns in progress, as NCCL's does on a GPU
    // (ppc's runtime once read the handle before the call wrote it, which
    // only a GPU showed): polled, it settles.
    ASSERT_EQ(ncclCommInitRankConfig(&comm, size, id, rank, &config), ncclInProgress);
    ASSERT_NE(comm, nullptr);
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_EQ(state, ncclInProgress);
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    ASSERT_EQ(state, ncclSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    cudaStreamDestroy(stream);
  }

  /// Rank r's i-th input element.
  float input(int r, int i) const { return float(r * 100 + i); }

  int rank = 0, size = 1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

TEST_F(EmulatedNccl, AllReduceSumsAndMaxesOverEveryRankInPlaceOrNot) {
  std::vector<float> mine(5);
  for (int i = 0; i < 5; ++i)
    mine[i] = input(rank, i);
  float *in = deviceCopy(mine), *out = deviceCopy(std::vector<float>(5));
  ASSERT_EQ(ncclAllReduce(in, out, 5, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  std::vector<float> sum = result(out, 5, stream);
  ASSERT_EQ(ncclAllReduce(in, in, 5, ncclFloat32, ncclMax, comm, stream), ncclSuccess);
  std::vector<float> max = result(in, 5, stream);
  for (int i = 0; i < 5; ++i) {
    float want = 0;
    for (int r = 0; r < size; ++r)
      want += input(r, i);
    EXPECT_EQ(sum[i], want);
    EXPECT_EQ(max[i], input(size - 1, i));
  }
}

// MPI has no bf16: the emulator reduces it with an operation of its own.
TEST_F(EmulatedNccl, Bf16AllReduceSums) {
  __nv_bfloat16 *data = deviceCopy(std::vector<__nv_bfloat16>(4, __nv_bfloat16(0.5f + rank)));
  ASSERT_EQ(ncclAllReduce(data, data, 4, ncclBfloat16, ncclSum, comm, stream), ncclSuccess);
  float want = 0;
  for (int r = 0; r < size; ++r)
    want += 0.5f + r;
  EXPECT_EQ(float(result(data, 4, stream)[3]), want);
}

TEST_F(EmulatedNccl, AllGatherPutsEachRanksBlockInRankOrder) {
  std::vector<int64_t> mine = {rank * 10, rank * 10 + 1};
  int64_t *in = deviceCopy(mine), *out = deviceCopy(std::vector<int64_t>(2 * size));
  ASSERT_EQ(ncclAllGather(in, out, 2, ncclInt64, comm, stream), ncclSuccess);
  std::vector<int64_t> gathered = result(out, 2 * size, stream);
  // In place: this rank's block already sits in the output.
  std::vector<int64_t> seeded(2 * size, -1);
  seeded[2 * rank] = mine[0];
  seeded[2 * rank + 1] = mine[1];
  int64_t *place = deviceCopy(seeded);
  ASSERT_EQ(ncclAllGather(place + 2 * rank, place, 2, ncclInt64, comm, stream), ncclSuccess);
  std::vector<int64_t> inPlace = result(place, 2 * size, stream);
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(gathered[2 * r + i], r * 10 + i);
      EXPECT_EQ(inPlace[2 * r + i], r * 10 + i);
    }
}

TEST_F(EmulatedNccl, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  std::vector<double> mine(3 * size);
  for (int i = 0; i < 3 * size; ++i)
    mine[i] = input(rank, i);
  double *in = deviceCopy(mine), *out = deviceCopy(std::vector<double>(3));
  ASSERT_EQ(ncclReduceScatter(in, out, 3, ncclFloat64, ncclSum, comm, stream), ncclSuccess);
  std::vector<double> block = result(out, 3, stream);
  // In place: the output is this rank's block of the input.
  ASSERT_EQ(ncclReduceScatter(in, in + 3 * rank, 3, ncclFloat64, ncclSum, comm, stream),
            ncclSuccess);
  std::vector<double> inPlace = result(in + 3 * rank, 3, stream);
  for (int i = 0; i < 3; ++i) {
    double want = 0;
    for (int r = 0; r < size; ++r)
      want += input(r, 3 * rank + i);
    EXPECT_EQ(block[i], want);
    EXPECT_EQ(inPlace[i], want);
  }
}

// Two messages to the next rank of a ring arrive in the order sent; a send
// never waits for its receive, so every rank may send first.
TEST_F(EmulatedNccl, SendsArriveInOrderAroundARing) {
  int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  float *first = deviceCopy(std::vector<float>(4, float(rank))),
        *second = deviceCopy(std::vector<float>(4, float(rank) + 0.5f));
  float *got = deviceCopy(std::vector<float>(8));
  ASSERT_EQ(ncclSend(first, 4, ncclFloat32, next, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclSend(second, 4, ncclFloat32, next, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(got, 4, ncclFloat32, previous, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(got + 4, 4, ncclFloat32, previous, comm, stream), ncclSuccess);
  std::vector<float> values = result(got, 8, stream);
  EXPECT_EQ(values[0], float(previous));
  EXPECT_EQ(values[7], float(previous) + 0.5f);
}

TEST_F(EmulatedNccl, GroupedSendsAndReceivesExchangeBlocksAsAllToAll) {
  std::vector<int32_t> mine(size);
  for (int j = 0; j < size; ++j)
    mine[j] = rank * 10 + j; // block j goes to rank j
  int32_t *in = deviceCopy(mine), *out = deviceCopy(std::vector<int32_t>(size));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int j = 0; j < size; ++j) {
    ASSERT_EQ(ncclSend(in + j, 1, ncclInt32, j, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclRecv(out + j, 1, ncclInt32, j, comm, stream), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  std::vector<int32_t> got = result(out, size, stream);
  for (int j = 0; j < size; ++j)
    EXPECT_EQ(got[j], j * 10 + rank);
}

TEST_F(EmulatedNccl, SplitGroupsRanksByColorOrderedByKeyAndLeavesOutNoColor) {
  // Rank 0 stays out; the others form one communicator, in reverse order.
  ncclComm_t part = nullptr;
  int color = rank == 0 ? NCCL_SPLIT_NOCOLOR : 1;
  ASSERT_EQ(ncclCommSplit(comm, color, size - rank, &part, nullptr), ncclSuccess);
  if (rank == 0) {
    EXPECT_EQ(part, nullptr);
    return;
  }
  ASSERT_NE(part, nullptr);
  int count = 0, position = -1;
  ncclCommCount(part, &count);
  ncclCommUserRank(part, &position);
  EXPECT_EQ(count, size - 1);
  EXPECT_EQ(position, size - 1 - rank);
  float *value = deviceCopy(std::vector<float>{float(rank)});
  ASSERT_EQ(ncclAllReduce(value, value, 1, ncclFloat32, ncclSum, part, stream), ncclSuccess);
  EXPECT_EQ(result(value, 1, stream)[0], float(size * (size - 1) / 2));
  EXPECT_EQ(ncclCommDestroy(part), ncclSuccess);
}

TEST_F(EmulatedNccl, BadArgumentsAreRefusedWithAMessage) {
  std::vector<float> host(4);
  EXPECT_EQ(ncclAllReduce(host.data(), host.data(), 4, ncclFloat32, ncclSum, comm, stream),
            ncclInvalidArgument);
  EXPECT_STREQ(ncclGetLastError(comm), "a buffer is not device memory");
  float *device = deviceCopy(std::vector<float>(4));
  EXPECT_EQ(ncclSend(device, 4, ncclFloat32, size, comm, stream), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One rank reports; every rank runs every test (they are collective).
  if (rank != 0)
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  int failed = RUN_ALL_TESTS();
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed;
}
