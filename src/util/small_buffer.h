// A per-call array whose common size is small: up to N elements on the stack, more on the heap.
// Elements are not initialised (callers fill every one they use), as a plain array's are not.
#pragma once

#include <cstddef>
#include <vector>

namespace rvgl {

template <class T, size_t N>
class SmallBuffer {
 public:
  explicit SmallBuffer(size_t n) : data_(n <= N ? inline_ : (heap_.resize(n), heap_.data())) {}
  SmallBuffer(const SmallBuffer &) = delete;  // data_ may point into this object
  SmallBuffer &operator=(const SmallBuffer &) = delete;

  T *data() { return data_; }
  T &operator[](size_t i) { return data_[i]; }

 private:
  T inline_[N];
  std::vector<T> heap_;
  T *data_;  // after inline_ and heap_: initialised last
};

}  // namespace rvgl
