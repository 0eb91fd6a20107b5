// The default console reporter, remembering whether any benchmark reported an error, so that a
// program whose figures are incomplete exits non-zero (Google Benchmark itself exits 0).
#pragma once

#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

namespace rvgl::bench {

class ErrorTrackingReporter : public benchmark::BenchmarkReporter {
 public:
  ErrorTrackingReporter() : inner_(benchmark::CreateDefaultDisplayReporter()) {}

  bool ReportContext(const Context &context) override { return inner_->ReportContext(context); }
  void ReportRuns(const std::vector<Run> &runs) override {
    for (const Run &r : runs)
      if (r.error_occurred) failed_ = true;
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }

  bool failed() const { return failed_; }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  bool failed_ = false;
};

}  // namespace rvgl::bench
