// SHA-256 (FIPS 180-4), for structural hashes and cache-entry checksums.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember {

std::array<uint8_t, 32> sha256(std::string_view data);
std::string sha256_hex(std::string_view data);

}  // namespace ember
