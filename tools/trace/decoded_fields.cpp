#include "decoded_fields.h"

#include <fmt/format.h>

#include <cstring>

namespace rvgl::trace {

namespace {

std::string key(const char *name, const char *suffix) {
  return std::string(name) + suffix;
}

}  // namespace

std::string errno_name(int64_t result) {
  if (result == 0) return "0";
  if (result < 0 && result > -4096) {
    if (const char *n = strerrorname_np(static_cast<int>(-result))) return fmt::format("-{}", n);
  }
  return fmt::format("{}", result);
}

void Decoded::num(const char *name, uint64_t v) {
  json_[name] = v;
  text_.push_back(fmt::format("{}={}", name, v));
}

void Decoded::hex(const char *name, uint64_t v) {
  json_[name] = v;
  text_.push_back(fmt::format("{}={:#x}", name, v));
}

void Decoded::result(const char *name, int64_t v) {
  json_[name] = v;
  json_[key(name, "_name")] = errno_name(v);
  text_.push_back(fmt::format("{}={}", name, errno_name(v)));
}

void Decoded::enumeration(const char *name, uint64_t v, std::span<const Named> names) {
  const char *found = nullptr;
  for (const auto &n : names)
    if (n.value == v) found = n.name;
  json_[name] = v;
  json_[key(name, "_name")] = found ? found : "unknown";
  text_.push_back(found ? fmt::format("{}={}", name, found) : fmt::format("{}={}(?)", name, v));
}

void Decoded::flags(const char *name, uint64_t v, std::span<const Named> names) {
  std::vector<std::string> set;
  uint64_t left = v;
  for (const auto &n : names)
    if ((v & n.value) == n.value && n.value) {
      set.emplace_back(n.name);
      left &= ~n.value;
    }
  if (left) set.push_back(fmt::format("{:#x}", left));
  json_[name] = v;
  json_[key(name, "_names")] = set;
  std::string joined;
  for (const auto &s : set)
    joined += (joined.empty() ? "" : "|") + s;
  text_.push_back(set.empty() ? fmt::format("{}=0", name) : fmt::format("{}={}", name, joined));
}

void Decoded::bytes(const char *name, std::span<const uint8_t> b) {
  std::string h;
  for (uint8_t x : b)
    h += fmt::format("{:02x}", x);
  json_[name] = h;
  text_.push_back(fmt::format("{}={}", name, h.empty() ? "(none)" : h));
}

void Decoded::list(const char *name, const std::vector<Decoded> &items) {
  auto arr = nlohmann::ordered_json::array();
  std::string t;
  for (const auto &i : items) {
    arr.push_back(i.json());
    t += (t.empty() ? "{" : " {") + i.text() + "}";
  }
  json_[name] = std::move(arr);
  text_.push_back(fmt::format("{}=[{}]", name, t));
}

std::string Decoded::text() const {
  std::string s;
  for (const auto &t : text_)
    s += (s.empty() ? "" : " ") + t;
  return s;
}

}  // namespace rvgl::trace
