// gloo_comm.hpp: one rank's tensor-parallel group over Gloo's TCP transport: rendezvous (a FileStore in a
// fresh folder for local launches, the TCP store for several hosts), barrier, in-place float AllReduce (sum or max),
// AllGather and ReduceScatter (sum) of contiguous float arrays (Gloo's ring allgather and halving-doubling
// reduce-scatter).
// Every Gloo call goes through DOMINO_GLOO_CHECK (check.hpp): a dead or stuck peer becomes a domino::Error
// naming the op and the rank after the timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
namespace transport {
class Device;
}
}  // namespace gloo

namespace domino {

class TcpStoreServer;
enum class ReduceOp : uint8_t;  // sim/ir/schedule.hpp

// One ReduceScatter set up by GlooComm::reduce_scatter_sum. run(): in place on its buffer, afterwards the
// first block holds the sum over the ranks of this rank's block (the rest of the buffer is scratch).
class GlooReduceScatter {
 public:
  virtual ~GlooReduceScatter() = default;
  virtual void run(const std::string& what) = 0;
};

struct CommConfig {
  int rank = 0;
  int world = 1;
  std::string bind_address = "127.0.0.1";  // the address Gloo's TCP device listens on
  // Rendezvous: store_dir (a FileStore; must be empty at the start of the run) or master_addr/port.
  std::string store_dir;
  std::string master_addr;
  int master_port = 0;
  std::chrono::milliseconds timeout{30000};  // connect, barrier and every collective
};

class GlooComm {
 public:
  explicit GlooComm(const CommConfig& config);  // rendezvous and full-mesh connect; throws domino::Error
  ~GlooComm();
  GlooComm(const GlooComm&) = delete;
  GlooComm& operator=(const GlooComm&) = delete;

  int rank() const { return config_.rank; }
  int world() const { return config_.world; }

  // In-place sum over the group. `what` names the op in errors; `tag` must differ between collectives that
  // can be in flight at once (the runtime passes the op index).
  void allreduce_sum(float* data, size_t elements, uint32_t tag, const std::string& what);
  // In-place element-wise sum or maximum over the group, as an AllReduce op's attrs.reduce asks (the max:
  // the vocab-parallel cross-entropy's per-token max).
  void allreduce(float* data, size_t elements, ReduceOp op, uint32_t tag, const std::string& what);
  // In place over `data`, world blocks of `elements` floats: this rank's block (block rank()) holds its
  // contribution; afterwards every block holds its rank's (Gloo's ring allgather).
  void allgather(float* data, size_t elements, uint32_t tag, const std::string& what);
  // A ReduceScatter (sum) bound to `data`, world blocks of `elements` floats (block r: the partial sums meant
  // for rank r): Gloo's halving-doubling algorithm, whose connections and buffers are set up here, once. Every
  // rank must make its ReduceScatters in the same order (it takes no tag: a schedule's op the first time it
  // runs), then run them as often as needed, in the same order everywhere.
  std::unique_ptr<GlooReduceScatter> reduce_scatter_sum(float* data, size_t elements, const std::string& what);
  void barrier(const std::string& what);
  // Byte blobs exchanged through the rendezvous store (results, other backends' ids). Keys get a per-run
  // prefix; get waits for the key up to the timeout.
  void store_set(const std::string& key, const std::string& value);
  std::string store_get(const std::string& key);

 private:
  using ReduceFn = void (*)(void*, const void*, const void*, size_t);
  void allreduce(float* data, size_t elements, ReduceFn reduce, uint32_t tag, const std::string& what);

  CommConfig config_;
  std::unique_ptr<TcpStoreServer> server_;  // rank 0 in TCP-store mode
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
};

// The local IPv4 address this host uses to reach `host` (env mode: what Gloo should bind to).
std::string local_address_towards(const std::string& host, int port);

}  // namespace domino
