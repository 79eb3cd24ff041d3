// probe_schedule.hpp: the small schedules domino-profile hands to a backend. A probe's one-op "mini"
// schedule (profile_workload.hpp) becomes a chain of copies of its op on one stream (back to back, as in a
// training step); AllReduces become ops on the communication stream; the interference and arrival-skew
// experiments put a GEMM chain and an AllReduce chain on the two streams of one schedule. The
// sequence-parallel AllGather and ReduceScatter are probed as the executor runs them: one rank's rows of a
// full buffer [1, tp, n], gathered from or scattered to a sharded one [1, 1, n].
#pragma once

#include <cstdint>

#include "sim/ir/schedule.hpp"

namespace domino::prof {

// `copies` copies of the mini schedule's op, in program order on its stream. separate_buffers: each copy
// has its own set of buffers (a memory-bound op then finds its data out of cache, as in a training step
// where other ops ran in between); otherwise every copy works on the same buffers.
Schedule chain_of(const Schedule& mini, int copies, bool separate_buffers);

// Activations, gradients and workspaces start as zeros in the executor; kernel speed must not depend on
// zeros (cuBLAS runs faster on them), so the probe's are relabelled as replicated parameters, which
// prepare() fills with small pseudo-random values (param_init.hpp; only buffers of one batch row can be
// parameters: batched activations keep their zeros); sharded weights become replicated too,
// so that any of `ranks` ranks can prepare the schedule whatever the TP degree of the model it came from.
void fill_with_values(Schedule& schedule, int ranks);

// `copies` AllReduce ops of one fp32 buffer of bytes / 4 elements (at least one) on the comm stream.
Schedule allreduce_chain(double bytes, int copies);

// `copies` AllGather (or ReduceScatter) ops on the comm stream over the `tp` ranks of the group, whose full
// (gathered) fp32 buffer holds `bytes` rounded to a whole number of floats per rank (at least one each).
Schedule sp_collective_chain(OpCode code, double bytes, int tp, int copies);

// The interference experiment: `gemms` copies of the GEMM on the compute stream and `allreduces`
// AllReduces of `bytes` on the comm stream; the first AllReduce waits for the first GEMM, so the GEMMs are
// running when the AllReduces start.
Schedule gemms_beside_allreduces(const Schedule& gemm_mini, int gemms, double bytes, int allreduces);

// Arrival skew: `gemms` copies of the GEMM, then a one-element AllReduce after the last of them.
Schedule gemms_then_allreduce(const Schedule& gemm_mini, int gemms);

// A collective as a training step runs it: `gemms` copies of the GEMM on the compute stream, then the one
// collective op of `collective` (allreduce_chain or sp_collective_chain of one copy) after the last of them;
// the TP degree is the collective's (an AllGather's rows are spread over it).
Schedule collective_after_gemms(const Schedule& collective, const Schedule& gemm_mini, int gemms);

// The fp32 bytes a collective op of these schedules is keyed by in the profile's tables: an AllReduce's
// buffer; the full (gathered) buffer of an AllGather or ReduceScatter (nccl-tests' "size").
double collective_bytes(const Op& op);

}  // namespace domino::prof
