// How TL011 (oversized-layer) writes sizes, shared by the Python and the C++
// check so that both print the same message. Three significant digits:
// parameters in decimal units (K, M, G, T), bytes in binary ones (KiB, MiB,
// GiB, TiB), the largest unit in which the value is at least 1; below 10 two
// decimals, below 100 one, else none ("1.50 G", "37.3 GiB", "149 GiB",
// "1010 MiB"). Header-only: the clang-tidy module carries no core library.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace torchleak::size_format {

inline std::string three_digits(double v) {
  if (std::round(v * 100) / 100 < 10) return fmt::format("{:.2f}", v);
  if (std::round(v * 10) / 10 < 100) return fmt::format("{:.1f}", v);
  return fmt::format("{:.0f}", v);
}

inline std::string scaled(double v, double base, const char* const* units, size_t n) {
  size_t u = 0;
  while (u + 1 < n && v >= base) {
    v /= base;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} {}", v, units[0]);
  return fmt::format("{} {}", three_digits(v), units[u]);
}

inline std::string parameter_count(uint64_t n) {
  static const char* const units[] = {"parameters", "K parameters", "M parameters", "G parameters", "T parameters"};
  return scaled(static_cast<double>(n), 1000.0, units, 5);
}

inline std::string bytes(uint64_t n) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return scaled(static_cast<double>(n), 1024.0, units, 6);
}

}  // namespace torchleak::size_format
