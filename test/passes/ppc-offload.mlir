// ppc-offload on the two-layer model of ppc-partition-zero.mlir, over dp=2.

// Tests --offload optimizer with ZeRO 1: the momentum lives in host memory,
// the SGD update runs on the host, each reduce-scattered gradient is copied
// to the host right after it is computed, the parameter's shard once before
// its update, and the updated shard back to the device right before its
// all-gather; the parameters stay on the device.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 data-parallel=2 micro-batches=2" "-ppc-partition=dp=2 zero=1" -ppc-offload \
// RUN:   | FileCheck %s --check-prefix=OPT
// OPT-LABEL: func.func @train_step
// OPT-SAME:    %[[W1:[a-z0-9]+]]: tensor<3x4xf32> {ppc.param = "w1", ppc.sharding
// OPT-SAME:    %[[M1:[a-z0-9]+]]: tensor<3x2xf32> {ppc.place = "host", {{[^}]*}}ppc.state = "momentum:w1"}
// OPT-SAME:    -> (tensor<3x4xf32> {ppc.param = "w1", ppc.sharding
// OPT-SAME:    tensor<3x2xf32> {ppc.place = "host", {{[^}]*}}ppc.state = "momentum:w1"}
// OPT:         %[[G1:.*]] = ppc.reduce_scatter {{.*}} -> tensor<3x2xf32>
// OPT-NEXT:    %[[G1H:.*]] = ppc.transfer %[[G1]] to "host" {{.*}}: tensor<3x2xf32>
// OPT:         %[[BUF:.*]] = ppc.mul %[[M1]], {{.*}}ppc.place = "host"
// OPT-NEXT:    %[[NEWBUF:.*]] = ppc.add %[[BUF]], %[[G1H]] {{.*}}ppc.place = "host"
// OPT:         %[[S1:.*]] = ppc.all_slice %[[W1]]
// OPT-NEXT:    %[[S1H:.*]] = ppc.transfer %[[S1]] to "host"
// OPT-NEXT:    %[[NEW1:.*]] = ppc.sub %[[S1H]], {{.*}}ppc.place = "host"
// OPT:         %[[NEW1D:.*]] = ppc.transfer %[[NEW1]] to "device"
// OPT-NEXT:    %[[P1:.*]] = ppc.all_gather %[[NEW1D]] on @mesh["dp"] dim = 1
// OPT:         return %[[P1]], %{{.*}}, %[[NEWBUF]],

// Tests --offload optimizer+params with ZeRO 3: the parameter shards live
// in host memory too, and each is copied to the device before each of its
// all-gathers (w1 once per micro-batch: its gradient does not read it), so
// that no copy stays on the device in between; the update writes the new
// shard in host memory, where the next step reads it.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 data-parallel=2 micro-batches=2" "-ppc-partition=dp=2 zero=3" "-ppc-offload=what=optimizer+params" \
// RUN:   | FileCheck %s --check-prefix=PARAMS
// PARAMS-LABEL: func.func @train_step
// PARAMS-SAME:    %[[W1:[a-z0-9]+]]: tensor<3x2xf32> {ppc.param = "w1", ppc.place = "host"
// PARAMS:         %[[C0:.*]] = ppc.transfer %[[W1]] to "device" : tensor<3x2xf32>
// PARAMS-NEXT:    ppc.all_gather %[[C0]] on @mesh["dp"] dim = 1
// PARAMS:         %[[C1:.*]] = ppc.transfer %[[W1]] to "device" : tensor<3x2xf32>
// PARAMS-NEXT:    ppc.all_gather %[[C1]] on @mesh["dp"] dim = 1
// PARAMS-NOT:     ppc.all_gather {{.*}} dim = 1
// PARAMS:         %[[NEW1:.*]] = ppc.sub %[[W1]], {{.*}}ppc.place = "host"
// PARAMS:         return %[[NEW1]],

// Tests --offload optimizer+params with ZeRO 1: the host slices its shard
// out of the whole parameter it holds (no copy of it goes to the device and
// back for the update), which is copied to the device for each forward read.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 data-parallel=2 micro-batches=2" "-ppc-partition=dp=2 zero=1" "-ppc-offload=what=optimizer+params" \
// RUN:   | FileCheck %s --check-prefix=PARAMS1
// PARAMS1-LABEL: func.func @train_step
// PARAMS1-SAME:    %[[W1:[a-z0-9]+]]: tensor<3x4xf32> {ppc.param = "w1", ppc.place = "host"
// PARAMS1:         %[[C:.*]] = ppc.transfer %[[W1]] to "device" : tensor<3x4xf32>
// PARAMS1-NEXT:    ppc.matmul %{{.*}}, %[[C]]
// PARAMS1:         %[[S:.*]] = ppc.all_slice %[[W1]] on @mesh["dp"] dim = 1 {ppc.place = "host"
// PARAMS1-NEXT:    ppc.sub %[[S]], {{.*}}ppc.place = "host"

// Tests `auto` without a plan (one rank: no ppc-plan-shardings): nothing
// where the program fits memory-per-rank with full recomputation; else the
// optimizer state, or (as under 100 bytes) the parameters too.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0" "-ppc-offload=what=auto memory-per-rank=1e9" \
// RUN:   | FileCheck %s --check-prefix=AUTOFITS --implicit-check-not=ppc.transfer --implicit-check-not=ppc.place
// AUTOFITS-LABEL: func.func @train_step
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0" "-ppc-offload=what=auto memory-per-rank=100" \
// RUN:   | FileCheck %s --check-prefix=AUTOTIGHT
// AUTOTIGHT-LABEL: func.func @train_step
// AUTOTIGHT-SAME:    {ppc.param = "w1", ppc.place = "host"}
// AUTOTIGHT-SAME:    {ppc.place = "host", ppc.state = "momentum:w1"}

// Tests that an unknown mode is an error.
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1" "-ppc-offload=what=gradients" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: offload 'gradients' is not one of optimizer, optimizer+params, auto

func.func @forward(%x: tensor<4x3xf32> {ppc.input = "x"}, %w1: tensor<3x4xf32> {ppc.param = "w1"},
                   %w2: tensor<4x2xf32> {ppc.param = "w2"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w1 : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  %a = ppc.tanh %h : tensor<4x4xf32>
  %y = ppc.matmul %a, %w2 : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %l = ppc.reduce_mean %y axes = [0, 1] keepdims = false : (tensor<4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
