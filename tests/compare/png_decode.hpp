// png_decode.hpp: a minimal PNG decoder (8-bit RGB/RGBA, not interlaced: what Chromium's screenshots
// are) so the report test can look at the pixels of a headless-Chromium screenshot. Needs zlib.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace domino::test {

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
};

inline uint32_t be32(const uint8_t* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

inline Image decode_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const uint8_t signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
  if (file.size() < 8 || !std::equal(signature, signature + 8, file.begin())) throw std::runtime_error(path + ": not a PNG");
  Image img;
  int colour_type = -1, channels = 0;
  std::vector<uint8_t> idat;
  for (size_t pos = 8; pos + 12 <= file.size();) {
    uint32_t len = be32(&file[pos]);
    std::string type(file.begin() + pos + 4, file.begin() + pos + 8);
    const uint8_t* data = &file[pos + 8];
    if (pos + 12 + len > file.size()) throw std::runtime_error(path + ": truncated chunk " + type);
    if (type == "IHDR") {
      img.width = be32(data);
      img.height = be32(data + 4);
      colour_type = data[9];
      if (data[8] != 8 || (colour_type != 2 && colour_type != 6) || data[12] != 0)
        throw std::runtime_error(path + ": only 8-bit RGB/RGBA non-interlaced PNGs are supported");
      channels = colour_type == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat.insert(idat.end(), data, data + len);
    } else if (type == "IEND") {
      break;
    }
    pos += 12 + len;
  }
  if (channels == 0) throw std::runtime_error(path + ": no IHDR");
  const size_t stride = size_t(img.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, idat.data(), idat.size()) != Z_OK || raw_len != raw.size())
    throw std::runtime_error(path + ": bad image data");

  // Undo the per-row filters (PNG spec section 9) in place.
  std::vector<uint8_t> prev(stride, 0);
  img.rgb.resize(size_t(img.width) * img.height * 3);
  for (uint32_t y = 0; y < img.height; ++y) {
    uint8_t filter = raw[y * (stride + 1)];
    uint8_t* row = &raw[y * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      int a = i >= size_t(channels) ? row[i - channels] : 0, b = prev[i], c = i >= size_t(channels) ? prev[i - channels] : 0;
      int pred = 0;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: {
          int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default: throw std::runtime_error(path + ": bad filter type");
      }
      row[i] = uint8_t(row[i] + pred);
    }
    for (uint32_t x = 0; x < img.width; ++x)
      for (int ch = 0; ch < 3; ++ch) img.rgb[(size_t(y) * img.width + x) * 3 + ch] = row[x * channels + ch];
    prev.assign(row, row + stride);
  }
  return img;
}

}  // namespace domino::test
