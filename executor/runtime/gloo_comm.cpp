// gloo_comm.cpp: Gloo TCP device, rendezvous, barrier, AllReduce, AllGather and ReduceScatter for one rank.
#include "executor/runtime/gloo_comm.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "executor/runtime/check.hpp"
#include "executor/runtime/tcp_store.hpp"
#include "sim/base/error.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {
namespace {
// Barrier tags stay clear of the AllReduce tags (op indices).
constexpr uint32_t kBarrierTag = 0x7ff00000u;

// Gloo's rendezvous calls wait()/get() without a timeout, which FileStore turns into its own 30 s default:
// this adapter makes every wait use the group's timeout.
class TimeoutStore final : public gloo::rendezvous::Store {
 public:
  TimeoutStore(std::unique_ptr<gloo::rendezvous::Store> inner, std::chrono::milliseconds timeout)
      : inner_(std::move(inner)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { inner_->set(key, data); }
  std::vector<char> get(const std::string& key) override {
    inner_->wait({key}, timeout_);
    return inner_->get(key);
  }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    inner_->wait(keys, timeout);
  }

 private:
  std::unique_ptr<gloo::rendezvous::Store> inner_;
  std::chrono::milliseconds timeout_;
};

// Gloo's reduce-scatter is an algorithm object: its pairs' buffers and slots are set up on construction and
// every run() reuses them.
class HalvingDoublingReduceScatter final : public GlooReduceScatter {
 public:
  HalvingDoublingReduceScatter(const std::shared_ptr<gloo::Context>& context, float* data, int elements, int rank)
      : algorithm_(std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
            context, std::vector<float*>{data}, elements * context->size,
            std::vector<int>(size_t(context->size), elements))),
        rank_(rank) {}
  void run(const std::string& what) override { DOMINO_GLOO_CHECK(algorithm_->run(), what, rank_); }

 private:
  // Held by pointer: Gloo declares its algorithms' destructors noexcept(false).
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> algorithm_;
  int rank_;
};

// A group of one: its block is already the sum.
class LoneReduceScatter final : public GlooReduceScatter {
 public:
  void run(const std::string&) override {}
};

}  // namespace

GlooComm::GlooComm(const CommConfig& config) : config_(config) {
  if (config.world < 1 || config.rank < 0 || config.rank >= config.world)
    throw_bad_input("rank " + std::to_string(config.rank) + " is outside a group of " + std::to_string(config.world));
  const std::string me = "rank " + std::to_string(config.rank);
  if (!config.store_dir.empty()) {
    store_ = std::make_unique<TimeoutStore>(std::make_unique<gloo::rendezvous::FileStore>(config.store_dir),
                                            config.timeout);
  } else if (!config.master_addr.empty()) {
    if (config.rank == 0) server_ = std::make_unique<TcpStoreServer>(config.master_port);
    store_ = std::make_unique<TcpStore>(config.master_addr, config.master_port, config.timeout);
  } else {
    throw_bad_input(me + ": no rendezvous given (a store folder, or MASTER_ADDR and MASTER_PORT)");
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = config.bind_address;
  DOMINO_GLOO_CHECK(device_ = gloo::transport::tcp::CreateDevice(attr),
                    "creating the TCP device on " + config.bind_address, config.rank);
  auto context = std::make_shared<gloo::rendezvous::Context>(config.rank, config.world);
  context->setTimeout(config.timeout);
  gloo::rendezvous::PrefixStore prefixed("gloo", *store_);
  DOMINO_GLOO_CHECK(context->connectFullMesh(prefixed, device_), "connecting to the other ranks", config.rank);
  context_ = context;
}

GlooComm::~GlooComm() = default;

void GlooComm::allreduce_sum(float* data, size_t elements, uint32_t tag, const std::string& what) {
  // gloo::sum<float> is overloaded: pick the (out, in1, in2, n) form explicitly.
  allreduce(data, elements, &gloo::sum<float>, tag, what);
}

void GlooComm::allreduce(float* data, size_t elements, ReduceOp op, uint32_t tag, const std::string& what) {
  if (op == ReduceOp::Max) return allreduce(data, elements, &gloo::max<float>, tag, what);
  allreduce_sum(data, elements, tag, what);
}

void GlooComm::allreduce(float* data, size_t elements, ReduceFn reduce, uint32_t tag, const std::string& what) {
  if (config_.world == 1) return;
  gloo::AllreduceOptions opts(context_);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(data, elements);
  opts.setReduceFunction(reduce);
  opts.setTag(tag);
  opts.setTimeout(config_.timeout);
  DOMINO_GLOO_CHECK(gloo::allreduce(opts), what, config_.rank);
}

void GlooComm::allgather(float* data, size_t elements, uint32_t tag, const std::string& what) {
  if (config_.world == 1) return;
  gloo::AllgatherOptions opts(context_);
  opts.setOutput(data, elements * size_t(config_.world));  // no input: in place, our block is already there
  opts.setTag(tag);
  opts.setTimeout(config_.timeout);
  DOMINO_GLOO_CHECK(gloo::allgather(opts), what, config_.rank);
}

std::unique_ptr<GlooReduceScatter> GlooComm::reduce_scatter_sum(float* data, size_t elements, const std::string& what) {
  if (config_.world == 1) return std::make_unique<LoneReduceScatter>();
  // The algorithm counts elements in int.
  if (elements * size_t(config_.world) > size_t(INT_MAX))
    throw_runtime("rank " + std::to_string(config_.rank) + ": " + what + ": a ReduceScatter of " +
                  std::to_string(elements * size_t(config_.world)) + " floats is more than Gloo's reduce-scatter takes");
  std::unique_ptr<GlooReduceScatter> made;
  DOMINO_GLOO_CHECK(made = std::make_unique<HalvingDoublingReduceScatter>(context_, data, int(elements), config_.rank),
                    what, config_.rank);
  return made;
}

void GlooComm::barrier(const std::string& what) {
  if (config_.world == 1) return;
  gloo::BarrierOptions opts(context_);
  opts.setTag(kBarrierTag);
  opts.setTimeout(config_.timeout);
  DOMINO_GLOO_CHECK(gloo::barrier(opts), what, config_.rank);
}

void GlooComm::store_set(const std::string& key, const std::string& value) {
  DOMINO_GLOO_CHECK(store_->set("domino." + key, std::vector<char>(value.begin(), value.end())),
                    "store set " + key, config_.rank);
}

std::string GlooComm::store_get(const std::string& key) {
  std::vector<char> value;
  DOMINO_GLOO_CHECK(value = store_->get("domino." + key), "store get " + key, config_.rank);
  return std::string(value.begin(), value.end());
}

std::string local_address_towards(const std::string& host, int port) {
  const AddrInfo found = resolve_ipv4(host, port, SOCK_DGRAM, "MASTER_ADDR");
  // A connected UDP socket sends nothing but tells which local address routes to the host.
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  const bool ok = fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw_runtime("cannot find a local address that reaches " + host);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return text;
}

}  // namespace domino
