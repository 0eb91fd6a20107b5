// The context core without a VMM around it: one ComputeContext with its shared page, fed
// hand-framed batches of small requests, for the dispatch-cost figures (ns per request with
// Google Benchmark, instructions per request under callgrind).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "context/compute_context.h"
#include "context/config.h"
#include "util/mapping.h"

namespace rvgl::bench {

enum class SmallRequest { kNop, kQueryUsage, kQueryMemory };

const char *small_request_name(SmallRequest r);

class CoreContext {
 public:
  CoreContext();  // throws when the context or its shared page cannot be made
  ComputeContext &ctx() { return *ctx_; }

  // A batch of n requests of one kind, each answered in its own response slot (slots reused
  // round-robin). renumber() gives the batch fresh seqnos, as the next guest submit would have.
  void build(SmallRequest kind, uint32_t n);
  void renumber();
  int submit() { return ctx_->submit_cmd(stream_); }
  // Every request of the last batch answered with result 0.
  bool all_answered_ok() const;

 private:
  Config cfg_;
  std::unique_ptr<ComputeContext> ctx_;
  Mapping shmem_;
  std::vector<uint8_t> stream_;
  std::vector<size_t> offsets_;  // of each request header in stream_
  uint32_t seqno_ = 0;
};

}  // namespace rvgl::bench
