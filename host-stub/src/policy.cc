#include "policy.h"

#include <sys/stat.h>

#include <cctype>
#include <set>

// Header-only: no run-time library for the packages to depend on.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

namespace vmcuda::host {

std::optional<uint64_t> parse_size(const std::string& text) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (v > (~0ull - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(text[i++] - '0');
  }
  if (i == 0) return std::nullopt;
  std::string unit = text.substr(i);
  if (unit.ends_with("iB")) unit.resize(unit.size() - 2);
  else if (unit.ends_with("B") && unit.size() > 1) unit.resize(unit.size() - 1);
  int shift = 0;
  if (unit.empty()) shift = 0;
  else if (unit == "K" || unit == "k") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else if (unit == "B") shift = 0;
  else return std::nullopt;
  if (shift && v > (~0ull >> shift)) return std::nullopt;
  return v << shift;
}

namespace {

struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string where(const toml::node& n, const std::string& key) {
  const auto& s = n.source().begin;
  return key + (s.line ? " (line " + std::to_string(s.line) + ")" : "");
}

// The keys of one table (defaults, a profile or a VM) into `p`.
void apply(const toml::table& t, const std::string& table_name, VmPolicy& p, bool allow_profile) {
  static const std::set<std::string> keys{"profile",   "devices",  "memory",           "memory_fraction",
                                          "weight",    "isolation", "kernel_time_limit", "max_clients",
                                          "host_memory", "gpu_sharing"};
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    const std::string name = table_name + "." + key;
    if (!keys.contains(key)) throw Bad("unknown key " + where(v, name) + "; known: devices, memory, memory_fraction, weight, isolation, kernel_time_limit, max_clients, host_memory, gpu_sharing, profile");
    if (key == "profile") {
      if (!allow_profile) throw Bad("a profile cannot name another profile: " + where(v, name));
      if (!v.is_string()) throw Bad(where(v, name) + " must be a profile's name");
      p.profile = *v.value<std::string>();
    } else if (key == "devices") {
      if (auto s = v.value<std::string>()) p.devices = *s;
      else if (auto a = v.as_array()) {
        std::string list;
        for (const auto& e : *a) {
          auto d = e.value<int64_t>();
          if (!d || *d < 0 || *d > 4096) throw Bad(where(v, name) + " must list GPU indexes");
          list += (list.empty() ? "" : ",") + std::to_string(*d);
        }
        if (list.empty()) throw Bad(where(v, name) + " is empty");
        p.devices = list;
      } else if (auto d = v.value<int64_t>(); d && *d >= 0) {
        p.devices = std::to_string(*d);
      } else {
        throw Bad(where(v, name) + " must be \"auto\", \"auto:N\", a GPU index or a list of them");
      }
    } else if (key == "memory") {
      std::optional<uint64_t> bytes;
      if (auto s = v.value<std::string>()) bytes = parse_size(*s);
      else if (auto n = v.value<int64_t>(); n && *n >= 0) bytes = static_cast<uint64_t>(*n);
      if (!bytes || *bytes == 0) throw Bad(where(v, name) + " must be a size such as \"20G\" or \"512M\"");
      p.memory_bytes = bytes;
      p.memory_fraction.reset();
    } else if (key == "host_memory") {
      std::optional<uint64_t> bytes;
      if (auto s = v.value<std::string>()) bytes = parse_size(*s);
      else if (auto n = v.value<int64_t>(); n && *n >= 0) bytes = static_cast<uint64_t>(*n);
      if (!bytes || *bytes == 0) throw Bad(where(v, name) + " must be a size such as \"16G\" or \"512M\"");
      p.host_memory_bytes = bytes;
    } else if (key == "memory_fraction") {
      auto f = v.value<double>();
      if (!f || !(*f > 0 && *f <= 1)) throw Bad(where(v, name) + " must be a fraction in (0, 1]");
      p.memory_fraction = f;
      p.memory_bytes.reset();
    } else if (key == "weight") {
      auto w = v.value<int64_t>();
      if (!w || *w < 1 || *w > 1000) throw Bad(where(v, name) + " must be a whole number from 1 to 1000");
      p.weight = static_cast<uint32_t>(*w);
    } else if (key == "kernel_time_limit") {
      auto t = v.value<double>();
      if (!t || !(*t >= 0 && *t <= 86400)) throw Bad(where(v, name) + " must be seconds from 0 (no limit) to 86400");
      p.kernel_time_limit_s = t;
    } else if (key == "max_clients") {
      auto n = v.value<int64_t>();
      if (!n || *n < 0 || *n > 65536) throw Bad(where(v, name) + " must be a whole number from 0 (no limit) to 65536");
      p.max_clients = static_cast<uint32_t>(*n);
    } else if (key == "isolation") {
      auto s = v.value<std::string>();
      if (!s || (*s != "process" && *s != "thread")) throw Bad(where(v, name) + " must be \"process\" or \"thread\"");
      p.isolation = *s;
    } else if (key == "gpu_sharing") {
      auto s = v.value<std::string>();
      if (!s || (*s != "time" && *s != "mps")) throw Bad(where(v, name) + " must be \"time\" or \"mps\"");
      p.gpu_sharing = *s;
    }
  }
}

const toml::table& table_at(const toml::table& root, const std::string& key) {
  static const toml::table empty;
  const toml::node* n = root.get(key);
  if (!n) return empty;
  if (!n->is_table()) throw Bad(where(*n, key) + " must be a table");
  return *n->as_table();
}

}  // namespace

std::optional<VmPolicy> load_policy(const std::string& file, const std::string& vm, bool required, std::string* why) {
  why->clear();
  struct stat st{};
  if (::stat(file.c_str(), &st) != 0) {
    if (required) *why = "policy file " + file + " does not exist";
    return std::nullopt;
  }
  try {
    const toml::table root = toml::parse_file(file);
    for (const auto& [k, v] : root) {
      const std::string key(k.str());
      if (key != "defaults" && key != "profiles" && key != "vm")
        throw Bad("unknown table " + where(v, key) + "; known: [defaults], [profiles.NAME], [vm.NAME]");
    }
    const toml::table& defaults = table_at(root, "defaults");
    const toml::table& profiles = table_at(root, "profiles");
    const toml::table& vms = table_at(root, "vm");
    for (const auto& [k, v] : profiles)
      if (!v.is_table()) throw Bad(where(v, "profiles." + std::string(k.str())) + " must be a table");
    for (const auto& [k, v] : vms)
      if (!v.is_table()) throw Bad(where(v, "vm." + std::string(k.str())) + " must be a table");
    VmPolicy p;
    p.source = file;
    apply(defaults, "defaults", p, true);
    const toml::table* mine = vms.get_as<toml::table>(vm);
    // Its profile: its own, else the default one.
    std::string profile = p.profile;
    if (mine)
      if (auto s = mine->get("profile")) {
        if (!s->is_string()) throw Bad(where(*s, "vm." + vm + ".profile") + " must be a profile's name");
        profile = *s->value<std::string>();
      }
    if (!profile.empty()) {
      const toml::table* prof = profiles.get_as<toml::table>(profile);
      if (!prof) throw Bad("profile \"" + profile + "\" is not defined (add [profiles." + profile + "])");
      apply(*prof, "profiles." + profile, p, false);
    }
    if (mine) apply(*mine, "vm." + vm, p, true);
    p.profile = profile;
    return p;
  } catch (const toml::parse_error& e) {
    *why = file + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description());
  } catch (const Bad& e) {
    *why = file + ": " + e.what();
  }
  return std::nullopt;
}

}  // namespace vmcuda::host
