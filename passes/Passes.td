//===- Passes.td - ppc passes ------------------------------*- tablegen -*-===//

#ifndef PPC_PASSES_TD
#define PPC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FoldConstants : Pass<"ppc-fold-constants", "mlir::func::FuncOp"> {
  let summary = "Evaluates ops whose operands are all constants";
  let description = [{
    Replaces every ppc op whose operands are all `ppc.constant` by constants
    computed with the reference executor's kernels, so that folding has
    exactly the semantics of execution. Results larger than
    `max-elements` stay ops (a broadcast mask is cheaper to compute than to
    store).

    Example: `ppc.add` of two constants becomes one `ppc.constant`.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"int64_t(1) << 22",
           "largest result (in elements) that is folded">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def FuseAttention : Pass<"ppc-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Replaces matmul-softmax-matmul attention by ppc.attention";
  let description = [{
    Finds scaled dot-product attention as exports write it: `q @ k^T`,
    scalar scalings, additive masks (a causal or padding mask, ALiBi) and
    masked_fills with a scalar fill, a softmax over the keys and `@ v`; and
    replaces it by one `ppc.attention`, whose kernels never hold the
    `T x S` scores (FlashAttention). A bias that folds to the causal mask
    becomes the op's `causal` flag. Attention where a parameter reaches the
    mask, or whose scores or probabilities have other readers, keeps its
    unfused form.

    Example: `matmul(softmax(where(tril, matmul(q, transpose(k)) / 8, -inf)), v)`
    becomes `ppc.attention %q, %k, %v scale = 0.125 causal`.
  }];
  let options = [
    Option<"maxFoldElements", "max-fold-elements", "int64_t", /*default=*/"int64_t(1) << 24",
           "largest mask (in elements) evaluated to recognise the causal mask">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def FuseRmsNorm : Pass<"ppc-fuse-rms-norm", "mlir::func::FuncOp"> {
  let summary = "Replaces RMSNorm's composition by ppc.rms_norm";
  let description = [{
    Finds RMS normalization as exports write it (LLaMA's, T5's): the mean
    of `x * x` or `pow(x, 2)` over trailing axes, plus a scalar epsilon,
    `x * (1 / sqrt(.))`, `x * reciprocal(sqrt(.))` or `x / sqrt(.)`, then
    (optionally) a multiplication by a scale that broadcasts to the
    normalized dimensions; and replaces it by one `ppc.rms_norm`, whose
    forward and backward (`ppc.rms_norm_grad`) are one kernel each.

    Example: `w * (x * (1 / sqrt(reduce_mean(pow(x, 2), [2]) + 1e-6)))`
    becomes `ppc.rms_norm %x, %w axis = 2 epsilon = 1.0e-06`.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def FuseRotary : Pass<"ppc-fuse-rotary", "mlir::func::FuncOp"> {
  let summary = "Replaces rotary embedding's composition by ppc.rotary";
  let description = [{
    Finds rotary position embedding in the rotate-half convention as
    exports write it (GPT-NeoX, LLaMA, Mistral, Phi, Falcon in Hugging
    Face's code): `x * cos + concat(-x[..., h:], x[..., :h]) * sin` along
    the last dimension (of size 2h), the products and the sum with their
    operands in either order, cos and sin broadcasting to x's shape with
    its last dimension; and replaces it by one `ppc.rotary`, whose forward
    and backward are one kernel each reading x (and the gradient) where it
    lies, where the composition is two slices, a negation, a concat and an
    elementwise kernel forward and more backward, each storing its result.

    Example: `%q * %cos + concat(-slice(%q, 32:64), slice(%q, 0:32)) * %sin`
    becomes `ppc.rotary %q, %cos, %sin`.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def ConcatSliceSums : Pass<"ppc-concat-slice-sums", "mlir::func::FuncOp"> {
  let summary = "Rewrites sums of slices inserted into zeros that tile a dimension as a concat";
  let description = [{
    The gradient of a value read through slices that tile a dimension (a
    fused QKV projection split into q, k and v) is, as autodiff writes it,
    each slice's gradient inserted into zeros and the results added. This
    pass rewrites such a tree of adds, each read by nothing else, whose
    leaves are insert_slices into a splat zero (unit steps, whole along
    every dimension but one, windows tiling that one) as one `ppc.concat`
    of the slices' gradients: one pass over the value instead of one per
    slice and per add. One other leaf may be in the tree (rotary
    embedding's gradient: the term through the cosine, plus the rotated
    halves inserted into zeros); the sum is then that leaf plus the
    concat, with the same values (each element adds its one piece to it).

    Example: `add(insert_slice(%a into zeros [0, 2)), insert_slice(%b into
    zeros [2, 6)))` along axis 1 becomes `ppc.concat %a, %b axis = 1`.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def HoistConcatNegations : Pass<"ppc-hoist-concat-negations", "mlir::func::FuncOp"> {
  let summary = "Moves negations of a concat's operands after it, as a product with signs";
  let description = [{
    Rotary embedding's rotate-half, `concat(-x2, x1)`, and its gradient's
    `concat(g2, -g1)` (once ppc-concat-slice-sums has made the gradient's
    inserted slices a concat) negate some of a concat's operands, each in a
    kernel of its own. Where every reader of the concat is elementwise, this
    pass concatenates the operands themselves and multiplies the result by a
    constant vector of +1 and -1 along the concat's axis, which fuses into
    the readers' kernel. The negations' kernels go, and the concat's
    operands, slices now read by the concat alone, are read in place by it
    (codegen/StridedViews.h). The result is the same, bit for bit.

    Example: `ppc.concat(ppc.neg(%a), %b) axis = 3` read by a `ppc.mul`
    becomes `ppc.mul(ppc.concat(%a, %b) axis = 3, dense<[-1, .., 1, ..]>)`.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def SplitLogSoftmax : Pass<"ppc-split-log-softmax", "mlir::func::FuncOp"> {
  let summary = "Gives a loss's log-softmax to its readers as x - log_sum_exp(x)";
  let description = [{
    A language model's loss, nll_loss(log_softmax(logits)), writes the
    log-softmax of every token over the whole vocabulary, picks one element
    of each row, and reads it all again in the gradient. Where every reader
    of a `ppc.log_softmax` is an nll_loss (through reshapes) or elementwise,
    this pass computes `ppc.log_sum_exp` of each row instead and gives each
    reader `x - log_sum_exp(x)`: the loss reads the elements it picks from
    the logits in place (codegen folds the difference, a widening cast and a
    window of wider rows into the nll_loss kernel), and the gradient's
    elementwise kernel recomputes the rest from the logits. Each reader gets
    its own copy of the widening cast and the window its logits come
    through. The values differ from the log-softmax's by the rounding of
    x - (max + log sum) against (x - max) - log sum.

    Example: `%y = ppc.log_softmax %x axis = 1` read by `ppc.nll_loss %y,
    %t` and `ppc.exp %y` becomes `%l = ppc.log_sum_exp %x axis = 1` and
    `ppc.nll_loss (ppc.sub %x, %l), %t`, `ppc.exp (ppc.sub %x, %l)`.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def HoistLogitsGradient : Pass<"ppc-hoist-logits-gradient", "mlir::func::FuncOp"> {
  let summary = "Moves the logits' gradient to just after their log_sum_exp";
  let description = [{
    After ppc-split-log-softmax the loss reads the logits for
    `ppc.log_sum_exp`, and the gradient's elementwise kernel reads them
    again after the loss. The gradient depends on the loss only through
    constants, so this pass moves the elementwise chain that reads the
    log_sum_exp and has the logits' rows, with what it reads that comes
    later, to just after the log_sum_exp; code generation then computes the
    log_sum_exp of each row in the gradient's kernel, reading the logits
    once (FusionPlan::rowLogSumExpOf). Only ops without side effects that
    do not communicate move, of the log_sum_exp's micro-batch, and outside
    the chain only elementwise ops, constants, reshapes and slices (not a
    recomputed clone or an offload's transfer); nothing moves when the
    chain depends on the loss or on such an op. The loss's own difference
    x - lse, read only by the nll_loss, stays with the loss. The values are
    the same, bit for bit. The parallelize pipeline runs it for the CUDA
    target only (`hoist-logits-gradient`): unfused, the move keeps the
    logits live across the gradient's intermediates.

    Example: `%l = ppc.log_sum_exp %x`, `%loss = ppc.nll_loss (ppc.sub %x,
    %l), %t`, then `%g = ppc.exp (ppc.sub %x, %l)` becomes `%l`, `%g`, then
    `%loss` (with its difference).
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def WidenPaddedElementwise : Pass<"ppc-widen-padded-elementwise", "mlir::func::FuncOp"> {
  let summary = "Computes an elementwise value that a concat pads with zeros on the padded shape";
  let description = [{
    ppc-align-gemms pads an unaligned GEMM operand with a concat of zeros,
    a copy of the whole tensor (GPT-2's logits' gradient, [8, 1024, 50257]
    to 50304). Where that operand is computed elementwise from windows
    [0, n) of values that already have the padded size (the padded
    product's logits, through ppc-align-gemms's slice), from values
    broadcast along the padded axis and from constants, this pass computes
    it on the padded shape and selects zero in the padding: concat(f(slice
    (P), b), 0) becomes where(mask, f(P, b), 0), one kernel. Constants that
    span the axis are extended (a splat with its value, others with zeros);
    what f computes in the padding is never read. Where an op of f is also
    read elsewhere, nothing changes (both would run). The result is the
    same, bit for bit.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def CloneWideningCasts : Pass<"ppc-clone-widening-casts", "mlir::func::FuncOp"> {
  let summary = "Gives each elementwise reader of a widening float cast its own cast";
  let description = [{
    Under bf16 a weight's gradient is cast to f32 once, and the gradient
    norm's square and the optimizer's update both read the f32 copy, which
    codegen then stores (4 bytes an element) where each reader could read
    the bf16 gradient (2 bytes) and widen it in its own kernel; a norm's
    output gradient, cast once for its scale's gradient and its bias's
    (two sums over the rows), likewise. Where every reader of a widening
    cast (bf16 or f16 to f32, f32 to f64) fuses with its operands in
    codegen (an elementwise op, or a sum, mean, max or min), each reader
    after the first gets its own cast, placed just before it with the
    reader's attributes (micro-batch, optimizer tag): the casts fuse into
    their readers' kernels and the wide copy is never stored. Widening is
    exact: the results are the same bit for bit. Run last (CSE would merge
    the casts again).

    ```mlir
    %g = ppc.cast %b : tensor<8xbf16> -> tensor<8xf32>
    %n = ppc.mul %g, %g : ...
    %m = ppc.mul %g, %s {ppc.optimizer = "w"} : ...
    ```
    becomes
    ```mlir
    %g = ppc.cast %b : tensor<8xbf16> -> tensor<8xf32>
    %n = ppc.mul %g, %g : ...
    %g2 = ppc.cast %b {ppc.optimizer = "w"} : tensor<8xbf16> -> tensor<8xf32>
    %m = ppc.mul %g2, %s {ppc.optimizer = "w"} : ...
    ```
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def SimplifyOneHots : Pass<"ppc-simplify-one-hots", "mlir::func::FuncOp"> {
  let summary = "Builds one-hot rows in the shape that reads them and sums them from their targets";
  let description = [{
    nll_loss's gradient is a scaled one-hot row per target,
    `where(equal(t, iota), s, 0)` over the rows [N, C], reshaped to the
    log-probabilities' [B, T, C], where log_softmax's gradient sums it over
    the classes. This pass builds the one-hot in the reshape's shape from
    the reshaped targets and scales, and rewrites
    `reduce_sum(where(equal(t, iota), s, 0), [a])` (iota the constant 0, 1,
    ..., C - 1 along axis a; t and s of size 1 along it) as
    `where(0 <= t < C, s, 0)`, which reads no one-hot row. The one-hot is
    then read by the elementwise gradient alone, in its shape, and fuses
    into it.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def AppendLoss : Pass<"ppc-append-loss", "mlir::ModuleOp"> {
  let summary = "Makes @forward return the training loss";
  let description = [{
    DESIGN.md §4: a @forward whose single result is a float scalar is
    trained on it. One whose result is logits `[B, T, V]` computed from one
    integer input `[B, T]` gets an argument `labels` (`{ppc.input =
    "labels"}`, after the graph inputs) and returns the mean token
    cross-entropy `nll_loss(log_softmax(logits))` instead. Anything else is
    an error naming the graph output.

    Example: `@forward(%ids, %w...) -> logits` becomes
    `@forward(%ids, %labels, %w...) -> tensor<f32> {ppc.output = "loss"}`.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def ScaleLoss : Pass<"ppc-scale-loss", "mlir::ModuleOp"> {
  let summary = "Multiplies @forward's loss by the loss scale (--precision fp16)";
  let description = [{
    Dynamic loss scaling, as torch.cuda.amp.GradScaler scales: @forward
    gets a rank-0 f64 argument `{ppc.hyper = "loss_scale"}` and returns
    `loss * (scale / micro-batches)` (in the loss's f32), so that the
    backward, built from it, carries gradients times the scale through the
    f16 activations, where small ones would otherwise flush to zero; each
    micro-batch's share of the mean is scaled, as torch accumulates
    `scaler.scale(loss / M).backward()`. ppc-build-train-step sums the
    micro-batches and divides the loss and the gradients by the scale,
    skips the update when a gradient is not finite and reports it
    (`overflow`); the driver keeps the scale (docs/architecture.md, "Mixed
    precision").
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "micro-batches per step (each scaled by scale / micro-batches)">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def Autodiff : Pass<"ppc-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of @forward";
  let description = [{
    Adds `@forward_grad`, with @forward's arguments, returning the loss and
    the gradient of the loss with respect to every parameter argument
    (`{ppc.param}`), in argument order (`{ppc.grad = "<name>"}`). Adjoints
    are built in reverse op order by each op's gradient rule
    (passes/autodiff/gradients/); a parameter used several times (tied
    embeddings) accumulates. Integer and boolean values get no gradient. An
    op on a path from a parameter to the loss without a rule is an error
    naming its ONNX node.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def BuildTrainStep : Pass<"ppc-build-train-step", "mlir::ModuleOp"> {
  let summary = "Builds @train_step: micro-batches, gradients, optimizer";
  let description = [{
    Builds `@train_step(step, params..., optimizer state..., batch...,
    hyper-parameters...) -> (new params..., new state..., loss, grad_norm,
    lr)` from
    `@forward_grad`: the batch is cut into `micro-batches` slices, each runs
    the loss and gradient computation, gradients and losses are averaged.
    @forward_grad's batch dimension is the global micro-batch; with
    `data-parallel` = dp, the batch `[dp * M * b, ...]` is viewed as
    `[dp, M, b, ...]` (DESIGN.md §4: rank r owns rows `[r*B/dp, (r+1)*B/dp)`,
    micro-batch j consecutive slices of those) and micro-batch j is
    `[:, j]` reshaped to `[dp * b, ...]`, so sharding the batch over dp never
    cuts a micro-batch slice; then global-norm clipping, the learning-rate
    schedule (a function of the step argument) and the optimizer update
    with torch.optim semantics (SGD with momentum and weight decay, AdamW
    with bias correction). @forward and @forward_grad are removed.

    The hyper-parameters are rank-0 f64 arguments marked `ppc.hyper` ("lr",
    "min_lr" with the cosine schedule, "beta1", "beta2", "eps" for AdamW,
    "momentum", "weight_decay", "grad_clip" where not 0), so that a compiled
    executable takes other values at run time; the options give the values
    `ppc simulate` and the executable feed by default. Momentum, weight
    decay and clipping compiled as 0 are left out of the update.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "sgd or adamw">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "peak learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "SGD momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "weight decay (decoupled for AdamW, L2 for SGD)">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0.0",
           "clip the global gradient norm to this (0: off)">,
    Option<"lrSchedule", "lr-schedule", "std::string", /*default=*/"\"constant\"",
           "constant or cosine (linear warm-up, then cosine decay)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "steps of linear warm-up">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"1",
           "steps the cosine schedule spans">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0",
           "learning rate at the end of the cosine schedule">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "micro-batches the batch is cut into">,
    Option<"dataParallel", "data-parallel", "int64_t", /*default=*/"1",
           "size of the data-parallel mesh axis (how the batch is laid out)">,
    Option<"lossScaling", "loss-scaling", "bool", /*default=*/"false",
           "sum the micro-batches' scaled losses and gradients (ppc-scale-loss "
           "scaled each one's share of the mean), divide them by the `loss_scale` "
           "hyper-parameter, skip the update when a gradient is not finite">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def PlanShardings : Pass<"ppc-plan-shardings", "mlir::ModuleOp"> {
  let summary = "Chooses how every argument of @train_step is split over the mesh, by cost";
  let description = [{
    Declares `ppc.mesh @mesh` and records a layout for every argument of
    @train_step as its `ppc.sharding`; ppc-partition then derives the
    layout of every other value op by op. Data inputs are split along their
    batch over dp. Parameters (and the optimizer state that follows each)
    get their tensor-parallel layout from a search priced by the cost model
    (passes/sharding/CostModel.h): the partitioner's own layout decisions
    run without building IR, and a plan costs its compute at the device's
    rates plus every collective at its bytes per rank over the axis
    bandwidth; its per-rank peak of live bytes must fit `memory-per-rank`.

    The search is greedy over classes of parameters (parameters whose shape
    and uses, a few ops deep, are alike: the same weight of every layer is
    decided together). A move gives one class a layout, a dimension split
    over tp (whole, or blockwise where the program slices that dimension in
    blocks, as q, k and v out of a fused projection), then lets every
    parameter that a use slices (a layout it could have had for free) take
    that layout, until none does. While the plan does not fit in memory the
    move saving most bytes per second added is taken; once it fits, the
    move that shortens the step most. It stops when no move helps. Pinned
    parameters (`tp-shard`) keep their layout.

    Memory counts the model states that the ZeRO stage shards over dp
    (ppc-partition) as sharded, and the activations that `recompute` leaves
    kept (ppc-recompute runs after partitioning: the plan is priced on a copy
    of the step with its blocks recomputed so, the clones' time included).
    Without a given `zero`, the search runs for stage 0, then 1, 2 and 3,
    until a plan fits without recomputation; with `recompute=auto` it prices
    each stage also with selective, then full, recomputation where the plan
    does not fit without, and of all that fit keeps the fastest (ties: the
    lower stage, the less recomputation); once one fits with recomputation,
    higher stages are priced only with less of it. With `offload=auto`,
    where no plan of a stage fits with any recomputation (and none of a
    lower stage fits at all), it prices the stage with the optimizer state
    in host memory, and then (ZeRO 3) with the parameter shards there too,
    each with the recomputation levels in turn: offload takes the state off
    the device and costs the copies over the host link and the host's
    optimizer step (none overlapped), and its host bytes must fit
    `host-memory-per-rank`. `ppc.plan` records the stage, the recomputation
    and the offload the plan was priced with. Where no plan fits, the pass
    fails naming the closest; with `keep-closest` it keeps that plan
    instead and `ppc.plan`'s `over_budget` carries the message, for a caller
    that checks the compiled program's exact memory plan (ppc compile).
  }];
  let options = [
    Option<"dataParallel", "dp", "int64_t", /*default=*/"1", "data-parallel ranks">,
    Option<"tensorParallel", "tp", "int64_t", /*default=*/"1", "tensor-parallel ranks">,
    Option<"pipelineParallel", "pp", "int64_t", /*default=*/"1",
           "pipeline-parallel ranks (the mesh's pp axis; ppc-pipeline splits the stages)">,
    ListOption<"tpShards", "tp-shard", "std::string",
               "pinned parameter layouts, NAME:DIM or NAME:DIM:BLOCKS: split dimension "
               "DIM of parameter NAME over tp (in BLOCKS blocks)">,
    Option<"memoryPerRank", "memory-per-rank", "double", /*default=*/"80e9",
           "device memory of one rank in bytes; plans must fit">,
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"false",
           "price plans as ppc-partition's sequence-parallel mode partitions them">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "the activation recomputation to price plans with: none, selective, full "
           "or auto (the fastest that fits)">,
    Option<"zero", "zero", "int64_t", /*default=*/"-1",
           "ZeRO stage 0-3 (-1: the lowest whose plan fits memory-per-rank); "
           "recorded as the step's ppc.zero">,
    Option<"offload", "offload", "std::string", /*default=*/"\"none\"",
           "what to price plans with in host memory: none, optimizer, "
           "optimizer+params, or auto (where nothing fits without)">,
    Option<"hostMemoryPerRank", "host-memory-per-rank", "double",
           /*default=*/"274877906944.0",
           "host memory of one rank in bytes (offload); plans must fit">,
    Option<"keepClosest", "keep-closest", "bool", /*default=*/"false",
           "where no plan fits memory-per-rank by estimate, keep the one that needs "
           "the least (ppc.plan's over_budget says why) for the caller to check "
           "against the compiled program's exact memory plan, instead of failing">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def Partition : Pass<"ppc-partition", "mlir::ModuleOp"> {
  let summary = "Rewrites @train_step into the per-rank SPMD program";
  let description = [{
    Declares `ppc.mesh @mesh` (axes pp, dp, tp, major to minor in rank
    order) unless ppc-plan-shardings did, and rewrites @train_step into the program every rank runs: local
    shapes, and the collectives that the chosen layouts need. Each op's
    sharding rule (passes/sharding/rules) turns its operands' layouts into
    factor shardings; operands are converted to the layout those factors
    need (all_reduce of partial sums, all_gather / all_slice of
    dimensions), and results get the implied layout, partial over sharded
    reduction factors. Partial sums flow through linear ops and are reduced
    at the first op that needs the full value. Arguments keep the layout
    the planner recorded as their `ppc.sharding`; without one, data inputs
    are split along their batch over dp and the rest is replicated. A split
    dimension viewed as blocks is gathered and sliced block by block
    (between reshapes). Every argument, result and op records its layout as
    `#ppc.sharding` (`ppc.sharding`, `ppc.shardings`).

    ZeRO (`zero`, DESIGN.md §6) shards the model states over dp, each along
    its first dimension that no other axis splits and dp divides (a tensor
    without one stays replicated):
     - stage 1: optimizer state. Gradients are accumulated whole over the
       micro-batches; the step's gradient (the micro-batch mean) is
       reduce-scattered, each rank updates its shard of the parameter
       and its state, and the new parameter is all-gathered;
     - stage 2: also gradients: each micro-batch's gradient is
       reduce-scattered as soon as it is computed and the shards are
       accumulated;
     - stage 3: also parameters: a parameter is stored sharded and
       all-gathered before its uses in each micro-batch's forward and again
       before those in its backward (ops marked `ppc.mb`, `ppc.bwd`), the
       gathered copy dying after its last use there; the update runs on
       the shard and the new parameter stays sharded.

    With `sequence-parallel`, a partial sum over tp that an op cannot keep
    (a row-parallel matmul's output meeting its bias and the residual) is
    reduce-scattered along its sequence dimension (the dimension carrying a
    data input's dimension 1) instead of all-reduced, so layer norms,
    residual adds and the other elementwise ops between the blocks run on
    sequence shards; the next column-parallel matmul all-gathers its input,
    the smaller operand of the conflict.
  }];
  let options = [
    Option<"dataParallel", "dp", "int64_t", /*default=*/"1", "data-parallel ranks">,
    Option<"tensorParallel", "tp", "int64_t", /*default=*/"1", "tensor-parallel ranks">,
    Option<"pipelineParallel", "pp", "int64_t", /*default=*/"1",
           "pipeline-parallel ranks (the mesh's pp axis; ppc-pipeline splits the stages)">,
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"false",
           "reduce-scatter partial sums over tp along the sequence dimension instead "
           "of all-reducing them">,
    Option<"zero", "zero", "int64_t", /*default=*/"-1",
           "ZeRO stage 0-3 on the dp axis (-1: the step's ppc.zero attribute, "
           "recorded by ppc-plan-shardings, else 0)">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def Pipeline : Pass<"ppc-pipeline", "mlir::ModuleOp"> {
  let summary = "Splits the per-rank @train_step into one program per pipeline rank";
  let description = [{
    On a mesh whose pp axis has p > 1 ranks, cuts the partitioned
    @train_step into p * v virtual stages and writes one function per
    pipeline rank, `@train_step_pp<r>`, running rank r's stages (r, r + p,
    ...) micro-batch by micro-batch in the order of `schedule`
    (passes/pipeline/Schedule.h, checked deadlock-free before use), with
    `ppc.send` / `ppc.recv` on the pp axis for every value one rank computes
    and another uses.

    Stages are contiguous ranges of @forward's ops (`ppc.fwd`) of balanced
    cost, forward plus backward (`ppc.bwd` goes with its forward op), priced
    per op on local shapes, each holding at least one op that runs on it
    (not one recomputed where used); more stages than that is an error
    naming the largest pipeline size. With `memory-per-rank`, each stage
    must also fit it by estimate (the model states of the parameters it
    uses first, and its activations times the micro-batches the schedule
    keeps in flight on it); when the balanced cut does not, the most
    balanced cut that fits is taken, and an error names the stage when
    none does. Every op records its slot as `ppc.slot`:
    `F<mb>@s<stage>`, `B<mb>@s<stage>` or `step` (gradient accumulation,
    clipping and the optimizer, run where their largest operand is). Values
    computed from parameters and constants alone are recomputed on each rank
    that uses them, right before the first use. A value replicated over tp
    is sent as one 1/tp slice per tp rank and all-gathered on arrival. A
    parameter used by several ranks is updated by the rank of its first use,
    which sends the new value to the others; the last pipeline rank returns
    the loss and the other outputs. Each function carries
    `ppc.pipeline_rank` and its virtual stages `ppc.stages`; the module the
    schedule as `ppc.schedule` (kind, ranks, virtual_stages, micro_batches).

    Example: with p = 2, `@train_step` becomes `@train_step_pp0` (embedding
    and the first layers) and `@train_step_pp1` (the rest, the loss).
  }];
  let options = [
    Option<"scheduleName", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b or interleaved">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"0",
           "virtual stages per rank (0: 2 for interleaved, else 1)">,
    Option<"memoryPerRank", "memory-per-rank", "double", /*default=*/"0",
           "bytes per rank the stages must fit (0: unlimited)">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def BucketAllReduces : Pass<"ppc-bucket-all-reduces", "mlir::func::FuncOp"> {
  let summary = "Groups sum all-reduces into buckets in the order their data is ready";
  let description = [{
    Data-parallel gradient reduction as DDP does it: the sum all_reduces over
    the same mesh axes and element type are ordered by when their operand is
    computed (gradients become ready in reverse layer order during the
    backward pass), packed into buckets of at most `bucket-bytes`, and each
    bucket becomes one all_reduce of the flattened, concatenated operands,
    placed right after its last operand is computed so that it can overlap
    the rest of the backward pass. Sums are elementwise, so results are
    bit-identical.

    Example: two all_reduces of a 3x5 and a 5-element gradient become one
    all_reduce of 20 elements, followed by slices and reshapes.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"25 << 20",
           "largest bucket (bytes); an all_reduce larger than this is its own bucket">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def Recompute : Pass<"ppc-recompute", "mlir::ModuleOp"> {
  let summary = "Recomputes activations in the backward instead of keeping them (--recompute)";
  let description = [{
    Activation recomputation as Megatron-LM offers it, on each training
    program (after partitioning and pipelining, so that it sees the ops and
    the order each rank runs): a value of the forward that the backward
    reads is either kept until then, or recomputed from kept values by
    clones of its forward ops, inserted right before the first backward op
    of the value's region that reads one (passes/memory/Recompute.h).
    `selective` recomputes each block's attention core (the scores and
    probabilities, which grow with the square of the sequence) and its
    elementwise chains whose inputs the backward keeps anyway; `full`
    keeps only what each block reads from outside it (its input) and
    recomputes the rest; `auto` recomputes nothing when the program's memory
    plan fits `memory-per-rank`, and otherwise the least, per block, that
    makes it fit (by memory saved per second recomputed). Clones run the
    same ops on the same values in the same order, so losses are
    bit-identical to no recomputation. Clones carry `ppc.recomputed =
    "<block>"`, the backward provenance of their forward op and its slot;
    the program records the levels chosen as `ppc.recompute`.

    With `pointwise` (the CUDA target's executables), a block recomputed at
    no level still has its elementwise values whose every backward reader
    is elementwise computed again from what the backward keeps anyway (an
    exported GELU's `x/√2` and `erf(x/√2) + 1`, from x): the clones fuse
    into the gradient's kernel, so those values are neither stored by the
    forward nor read back, and the step is faster as well as smaller on a
    GPU, where such kernels are bound by memory. (On CPUs the kernels are
    bound by the transcendental functions they compute; there it is off.)

    Example: with `full`, a GPT block keeps its input (the residual stream)
    and its backward begins by running its forward again.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"auto\"",
           "none, selective, full or auto">,
    Option<"memoryPerRank", "memory-per-rank", "double", /*default=*/"80e9",
           "device memory of one rank in bytes (auto)">,
    Option<"pointwise", "pointwise", "bool", /*default=*/"false",
           "in every block no level recomputes, recompute the elementwise values "
           "whose backward readers are all elementwise, in their fused kernels "
           "(ppc compile sets it for the CUDA target)">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def FoldIntoGemms : Pass<"ppc-fold-into-gemms", "mlir::func::FuncOp"> {
  let summary = "Folds batch sums and transposes of GEMM results into the GEMMs";
  let description = [{
    The weight gradient of a linear layer applied to a batch of sequences
    (`x : [B, T, d] @ w : [d, V]`) is, as autodiff writes it, a batched
    product summed over the batch: `reduce_sum(matmul(transpose(x), dy))`
    over B, which writes `B × d × V` for the sum to read back (618 MB for
    GPT-2's LM head in bf16), runs B GEMMs of depth T, and in bf16 rounds
    each of them before the sum. With both operands holding the whole batch
    and the left one transposed in the last two dimensions, this pass
    folds the batch into the contraction: `matmul(transpose(x'), dy')` with
    `x' : [B·T, d]` and `dy' : [B·T, V]`, reshapes that read the buffers in
    place, so one GEMM of depth B·T writes `d × V`, rounded once (in bf16
    too, as torch's linear backward rounds it).

    A weight stored `[out, in]` and used transposed (`x @ transpose(w)`,
    as torch exports `nn.Linear`) gets its gradient as the transpose of
    that product, a copy of the whole matrix. A matrix product read only
    by a transpose (through reshapes of unit dimensions) is computed
    transposed instead, `transpose(A B) = B^T A^T`, with the transposes of
    its operands read in place by the GEMM.

    The last pass but ppc-align-gemms of the parallelize pipeline, so
    `ppc simulate` runs the programs `ppc compile` emits (and plans their
    memory alike); after partitioning, on each rank's local batch (the
    data-parallel reduction is the all-reduce after it, unchanged).

    Example: `transpose(reshape(reduce_sum(matmul(transpose(x : 8x1024x768),
    dy : 8x1024x2304), axes = [0])))` becomes `matmul(transpose(reshape(dy)
    : 8192x2304), reshape(x) : 8192x768)`, 2304x768.
  }];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def AlignGemms : Pass<"ppc-align-gemms", "mlir::func::FuncOp"> {
  let summary = "Pads GEMM dimensions to 16-byte multiples where the copies pay (CUDA)";
  let description = [{
    cuBLASLt runs a product whose leading dimensions are not multiples of
    16 bytes on old unaligned kernels: GPT-2's LM head (vocabulary 50257)
    ran its three GEMMs at ~117 TFLOP/s on an H100 where the aligned
    ones reach ~600 (docs/performance.md, measured). This pass pads each
    such dimension of a float `ppc.matmul` (m, k or n, whichever is not a
    multiple of 16 bytes of the element type) with zeros to the next
    multiple of 64 elements, and slices the padded result back, where the
    product's FLOPs are at least `flops-per-byte` times the bytes the
    padding and slicing copy (48: the measured rates' break-even, 3 TB/s
    of copies against the time the aligned kernels save). Zeros add
    nothing, so the result is the same product. A padded operand that is a
    transpose is padded before it, so the GEMM still reads it transposed;
    a value two products pad alike (the logits' gradient, k of one and m of
    the other) is padded once. Products that need no padding are left
    exactly as they are.

    Example: `matmul(x : 8x1024x768, transpose(w : 50257x768))` becomes
    `slice(matmul(x, transpose(concat(w, zeros : 47x768))))` of 50304
    columns.
  }];
  let options = [
    Option<"flopsPerByte", "flops-per-byte", "double", /*default=*/"48.0",
           "pad where the product's FLOPs are at least this many times the bytes copied">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def Offload : Pass<"ppc-offload", "mlir::ModuleOp"> {
  let summary = "Keeps optimizer state (and parameters) in host memory (--offload)";
  let description = [{
    ZeRO-Offload and FSDP's CPU offload on each training program (after
    partitioning and pipelining, before recomputation): the optimizer state
    arguments and results live in host memory (`ppc.place = "host"`), and
    the ops of the optimizer step (`ppc.optimizer`, marked by
    ppc-build-train-step) run on the host. With `optimizer+params` the
    parameters (the f32 masters) live there too. A value crossing between
    the device's ops and the host's is copied by `ppc.transfer`: to the host
    right after it is computed (a gradient, once reduced), so the copy runs
    beside the rest of the backward; to the device right before its first
    reader there (an updated parameter before its all-gather). A parameter
    in host memory is copied to the device before each op that reads it
    there (ZeRO 3's gathers in the forward and in the backward), so that
    no copy of it stays on the device in between; every other value
    crosses once each way at most. The values are unchanged, so losses are
    the same as without offload.

    Example: AdamW's exp_avg and exp_avg_sq, and the update computing them,
    move to the host; each parameter's gradient is copied to the host and
    its updated value back.
  }];
  let options = [
    Option<"what", "what", "std::string", /*default=*/"\"optimizer\"",
           "optimizer, optimizer+params, or auto (what ppc-plan-shardings chose: "
           "the ppc.plan's offload; without a plan, one rank, the least that fits "
           "memory-per-rank with full recomputation)">,
    Option<"memoryPerRank", "memory-per-rank", "double", /*default=*/"80e9",
           "device memory of one rank in bytes (auto without a plan)">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

def MixedPrecision : Pass<"ppc-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Stores and computes @forward's activations in bf16 (--precision bf16)";
  let description = [{
    Megatron-LM's bf16 policy, applied to @forward before AppendLoss and
    Autodiff: every float value computed from an argument (an activation)
    becomes bf16; each op reads bf16 and rounds its result once (kernels
    compute in f32); a parameter (the f32 master) or an f32 constant is read
    through a bf16 copy made before its first reader; what only constants
    feed stays f32; the results are cast back to f32, so the loss (log-softmax
    and cross-entropy of the logits) is computed in f32. Autodiff then builds
    a bf16 backward; each parameter's gradient is cast to f32 by the cast's
    gradient rule, and micro-batch accumulation, the data-parallel reduction,
    clipping and the optimizer run in f32. Tensor-parallel collectives and
    pipeline transfers of activations carry bf16.

    `precision` is fp32 (nothing changes), bf16, or fp16 (the same policy
    with f16 elements; the driver offers it only with loss scaling).

    Example: `%y = ppc.matmul %x, %w : f32` with %w a parameter becomes
    `%y = ppc.matmul %x, (ppc.cast %w : bf16) : bf16`.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"bf16\"",
           "fp32, bf16 or fp16">
  ];
  let dependentDialects = ["::ppc::PpcDialect"];
}

#endif // PPC_PASSES_TD
