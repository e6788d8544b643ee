// Tests of gd::data::BoundedQueue and gd::data::Coordinator under threads.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gradus/data/queue.hpp"

namespace gd = gradus;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("BoundedQueue: first in, first out, with try_ forms at the capacity", "[data][queue]") {
  gd::data::BoundedQueue<int> q(2);
  CHECK(q.capacity() == 2);
  CHECK(q.try_pop() == std::nullopt);
  CHECK(q.push(1));
  CHECK(q.try_push(2));
  CHECK_FALSE(q.try_push(3));  // full
  CHECK(q.size() == 2);
  CHECK(q.pop() == 1);
  CHECK(q.try_pop() == 2);
  CHECK(q.try_pop() == std::nullopt);
  CHECK_FALSE(q.done());
  CHECK(q.pop_for(10ms) == std::nullopt);  // a timeout, not the end
  CHECK_FALSE(q.done());
  CHECK_THROWS_AS(gd::data::BoundedQueue<int>(0), gd::value_error);
}

TEST_CASE("BoundedQueue: close lets consumers drain, then ends; pushes fail", "[data][queue]") {
  gd::data::BoundedQueue<int> q(4);
  q.push(1);
  q.push(2);
  q.close();
  CHECK(q.closed());
  CHECK_FALSE(q.push(3));
  CHECK_FALSE(q.try_push(3));
  CHECK(q.pop() == 1);
  CHECK_FALSE(q.done());
  CHECK(q.pop() == 2);
  CHECK(q.done());
  CHECK(q.pop() == std::nullopt);
}

TEST_CASE("BoundedQueue: close wakes a blocked consumer and a blocked producer", "[data][queue]") {
  gd::data::BoundedQueue<int> q(1);
  std::optional<int> got = 42;
  std::thread consumer([&] { got = q.pop(); });
  std::this_thread::sleep_for(20ms);
  q.close();
  consumer.join();
  CHECK(got == std::nullopt);

  gd::data::BoundedQueue<int> full(1);
  full.push(7);
  std::atomic<int> pushed{-1};
  std::thread producer([&] { pushed = full.push(8) ? 1 : 0; });
  std::this_thread::sleep_for(20ms);
  CHECK(pushed == -1);  // still blocked: the queue is full
  full.close();
  producer.join();
  CHECK(pushed == 0);
  CHECK(full.pop() == 7);  // what was queued before close still drains
  CHECK(full.pop() == std::nullopt);
}

TEST_CASE("BoundedQueue: cancel ends now, dropping queued items and waking everyone", "[data][queue]") {
  gd::data::BoundedQueue<int> q(1);
  q.push(1);
  std::atomic<int> results{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i) ts.emplace_back([&] { results += q.push(2) ? 100 : 1; });  // blocked: full
  std::this_thread::sleep_for(20ms);
  q.cancel();
  for (auto& t : ts) t.join();
  CHECK(results == 3);
  CHECK(q.cancelled());
  CHECK(q.done());
  CHECK(q.pop() == std::nullopt);  // the queued 1 is dropped
  bool ended = false;  // Catch's assertions are for the main thread only
  std::thread consumer([&] { ended = q.pop() == std::nullopt; });
  consumer.join();
  CHECK(ended);
}

TEST_CASE("BoundedQueue: many producers and consumers see every item once", "[data][queue]") {
  gd::data::BoundedQueue<int> q(8);
  constexpr int kProducers = 4, kItems = 2000;
  std::vector<std::thread> producers, consumers;
  std::atomic<long> sum{0};
  std::atomic<int> count{0};
  std::atomic<bool> push_failed{false}, out_of_order{false};
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (int i = 0; i < kItems; ++i)
        if (!q.push(p * kItems + i)) push_failed = true;
    });
  for (int c = 0; c < 3; ++c)
    consumers.emplace_back([&] {
      int last[kProducers] = {-1, -1, -1, -1};
      while (auto v = q.pop()) {
        const int p = *v / kItems;
        if (*v <= last[p]) out_of_order = true;  // each producer's items arrive in its order
        last[p] = *v;
        sum += *v;
        ++count;
      }
    });
  for (auto& t : producers) t.join();
  q.close();
  for (auto& t : consumers) t.join();
  const long n = long(kProducers) * kItems;
  CHECK_FALSE(push_failed);
  CHECK_FALSE(out_of_order);
  CHECK(count == n);
  CHECK(sum == n * (n - 1) / 2);
}

TEST_CASE("Coordinator: request_stop ends the workers and join returns", "[data][queue]") {
  gd::data::Coordinator coord;
  std::atomic<int> loops{0};
  for (int i = 0; i < 3; ++i)
    coord.launch([&] {
      while (!coord.should_stop()) {
        ++loops;
        std::this_thread::sleep_for(1ms);
      }
    });
  CHECK_FALSE(coord.wait_for_stop(10ms));
  coord.request_stop();
  CHECK(coord.wait_for_stop(0ms));
  coord.join();
  CHECK(loops > 0);
  coord.clear_stop();
  CHECK_FALSE(coord.should_stop());
}

TEST_CASE("Coordinator: a thread's exception stops the others and is re-thrown by join", "[data][queue]") {
  gd::data::Coordinator coord;
  for (int i = 0; i < 2; ++i)
    coord.launch([](gd::data::Coordinator& c) {
      while (!c.should_stop()) std::this_thread::sleep_for(1ms);
    });
  coord.launch([] {
    std::this_thread::sleep_for(5ms);
    throw std::runtime_error("reader failed: bad record 12");
  });
  std::thread outside([&] { coord.wait_for_stop(10s); });
  coord.register_thread(std::move(outside));
  CHECK(coord.wait_for_stop(10s));
  CHECK_THROWS_WITH(coord.join(), Contains("bad record 12"));
}
