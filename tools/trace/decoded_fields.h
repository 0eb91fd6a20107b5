// The fields of one decoded request or response, built once and shown two ways: as JSON values
// (numbers stay numbers) and as "name=value" text in which addresses read in hex and flags and
// enumerations by name.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rvgl::trace {

// A named value of an enumeration or a flag bit, from the protocol header's constants.
struct Named {
  uint64_t value;
  const char *name;
};

class Decoded {
 public:
  void num(const char *name, uint64_t v);
  void hex(const char *name, uint64_t v);
  // An errno-style result: 0 or a negative errno, shown as -EINVAL.
  void result(const char *name, int64_t v);
  // A value that should be one of `names`; JSON adds "<name>_name".
  void enumeration(const char *name, uint64_t v, std::span<const Named> names);
  // A bit set; JSON adds "<name>_names" (unknown bits as "0x..").
  void flags(const char *name, uint64_t v, std::span<const Named> names);
  // Raw bytes, in hex.
  void bytes(const char *name, std::span<const uint8_t> b);
  // An array of nested records (SUBMIT's IBs and waits).
  void list(const char *name, const std::vector<Decoded> &items);

  // Something a host would refuse or a guest should not send.
  void problem(std::string what) { problems_.push_back(std::move(what)); }
  // Something worth knowing that a host accepts (a short request it zero-extends).
  void note(std::string what) { notes_.push_back(std::move(what)); }

  const nlohmann::ordered_json &json() const { return json_; }
  const std::vector<std::string> &problems() const { return problems_; }
  const std::vector<std::string> &notes() const { return notes_; }
  // "a=1 b=0x2 c=[{...} {...}]"
  std::string text() const;

 private:
  nlohmann::ordered_json json_ = nlohmann::ordered_json::object();
  std::vector<std::string> text_;
  std::vector<std::string> problems_;
  std::vector<std::string> notes_;
};

// "0", "-EINVAL", or the number when it is not a known errno.
std::string errno_name(int64_t result);

}  // namespace rvgl::trace
