// Marks, on this thread, the calls a test makes into the product. The allocation-failure sweep
// (tests/robustness/alloc_sweep.cpp) fails allocations made inside them only: what it tests is
// how the product meets an allocation that fails, not how the test's own bookkeeping does. In
// every other test binary these are a thread-local counter and nothing reads it.
#pragma once

#include <exception>

namespace rvgl::test {

inline thread_local int product_call_depth = 0;
// Inside a TestCallback on this thread: on the product's own threads (the completion engine's),
// which make no ProductCall, the one mark of the test's code.
inline thread_local int test_callback_depth = 0;
// The last product call an exception left (for the sweep's message), or null.
inline thread_local const char *product_call_escaped = nullptr;

class ProductCall {
 public:
  explicit ProductCall(const char *what) : what_(what), unwinding_(std::uncaught_exceptions()) {
    ++product_call_depth;
  }
  ~ProductCall() {
    --product_call_depth;
    if (std::uncaught_exceptions() > unwinding_) product_call_escaped = what_;
  }
  ProductCall(const ProductCall &) = delete;
  ProductCall &operator=(const ProductCall &) = delete;

 private:
  const char *what_;
  int unwinding_;
};

// The product calling back into the test (a fence delivered in poll mode on the caller's thread):
// the test's code again, whose allocations are not failed.
class TestCallback {
 public:
  TestCallback() : saved_(product_call_depth) {
    product_call_depth = 0;
    ++test_callback_depth;
  }
  ~TestCallback() {
    product_call_depth = saved_;
    --test_callback_depth;
  }
  TestCallback(const TestCallback &) = delete;
  TestCallback &operator=(const TestCallback &) = delete;

 private:
  int saved_;
};

}  // namespace rvgl::test
