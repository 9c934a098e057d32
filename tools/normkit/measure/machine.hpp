// What a measurement records about the machine it ran on.
#pragma once

#include <fstream>
#include <string>

namespace normkit::bench {

// The CPU's model name from /proc/cpuinfo.
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// The first three fields of /proc/loadavg: how busy the machine was.
inline std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

}  // namespace normkit::bench
