// runtime_comm_test.cpp: the rendezvous stores and the Gloo group: a TCP store serves set/get/wait across
// clients; ranks (threads here) rendezvous through a FileStore or the TCP store, AllReduce sums and the
// barrier works; a peer that never comes turns into a domino::Error naming the rank, not a hang.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <thread>

#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/tcp_store.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& tag) {
  std::string pattern = (fs::temp_directory_path() / ("domino-comm-" + tag + ".XXXXXX")).string();
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
  return pattern;
}

TEST(TcpStore, SetGetAndWaitAcrossClients) {
  TcpStoreServer server(0);
  ASSERT_GT(server.port(), 0);
  TcpStore a("127.0.0.1", server.port(), std::chrono::seconds(5));
  TcpStore b("127.0.0.1", server.port(), std::chrono::seconds(5));
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a.set("late", {'x', 'y'});
  });
  EXPECT_EQ(b.get("late"), (std::vector<char>{'x', 'y'}));  // waits for the key
  late.join();
  std::vector<char> big(1 << 20);
  std::iota(big.begin(), big.end(), 0);
  b.set("big", big);
  EXPECT_EQ(a.get("big"), big);
  a.set("empty", {});
  EXPECT_TRUE(b.get("empty").empty());
}

TEST(TcpStore, MissingKeyTimesOutWithAMessage) {
  TcpStoreServer server(0);
  TcpStore a("127.0.0.1", server.port(), std::chrono::milliseconds(200));
  try {
    a.wait({"never"}, std::chrono::milliseconds(100));
    FAIL() << "wait returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  }
}

TEST(TcpStore, NoServerIsAClearError) {
  TcpStoreServer probe(0);
  const int port = probe.port();
  // Nothing listens on a port once its server is gone.
  std::unique_ptr<TcpStoreServer> gone(new TcpStoreServer(0));
  const int dead_port = gone->port();
  gone.reset();
  EXPECT_THROW(TcpStore("127.0.0.1", dead_port, std::chrono::milliseconds(100)), Error);
  EXPECT_NO_THROW(TcpStore("127.0.0.1", port, std::chrono::milliseconds(100)));
}

// Runs body(comm) on `world` threads that rendezvous with the given config template.
void run_group(int world, const CommConfig& base, const std::function<void(GlooComm&)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        CommConfig c = base;
        c.rank = r;
        c.world = world;
        GlooComm comm(c);
        body(comm);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

void expect_sums(GlooComm& comm) {
  const int n = 1000;
  std::vector<float> data(n);
  for (int i = 0; i < n; ++i) data[size_t(i)] = float(comm.rank() + 1) * float(i);
  comm.allreduce_sum(data.data(), data.size(), 7, "test allreduce");
  const float factor = float(comm.world() * (comm.world() + 1) / 2);
  for (int i = 0; i < n; ++i) ASSERT_EQ(data[size_t(i)], factor * float(i)) << "element " << i;
  comm.barrier("test barrier");
  comm.store_set("hello." + std::to_string(comm.rank()), "from " + std::to_string(comm.rank()));
  const int peer = (comm.rank() + 1) % comm.world();
  EXPECT_EQ(comm.store_get("hello." + std::to_string(peer)), "from " + std::to_string(peer));
}

TEST(GlooComm, FileStoreGroupsOfTwoAndThreeSum) {
  for (int world : {2, 3}) {
    CommConfig c;
    c.store_dir = fresh_dir("file");
    c.timeout = std::chrono::seconds(20);
    run_group(world, c, expect_sums);
    fs::remove_all(c.store_dir);
  }
}

TEST(GlooComm, TcpStoreRendezvous) {
  int port = 0;
  {
    TcpStoreServer probe(0);  // learn a free port, then give it back for rank 0 to serve
    port = probe.port();
  }
  CommConfig c;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.timeout = std::chrono::seconds(20);
  run_group(2, c, expect_sums);
}

TEST(GlooComm, MissingPeerFailsNamingTheRank) {
  CommConfig c;
  c.rank = 1;
  c.world = 2;
  c.store_dir = fresh_dir("alone");
  c.timeout = std::chrono::milliseconds(500);
  try {
    GlooComm comm(c);
    FAIL() << "connected to a peer that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    FAIL() << "not a domino::Error: " << e.what();
  }
  fs::remove_all(c.store_dir);
}

TEST(GlooComm, LocalAddressTowardsLoopbackIsLoopback) {
  EXPECT_EQ(local_address_towards("127.0.0.1", 29500), "127.0.0.1");
}

}  // namespace
}  // namespace domino
