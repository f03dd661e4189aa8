#include "worker/memory/fixed_block_pool.h"

#include <limits>
#include <utility>


namespace bmad::memory {
namespace {

constexpr size_t kBlockAlignment = 64;

}  // namespace

Result<FixedBlockPool> FixedBlockPool::Create(Region region, size_t block_bytes) {
  const std::string what = "block pool '" + region.name + "': ";
  if (block_bytes == 0 || block_bytes % kBlockAlignment != 0) {
    return InvalidArgument(what + "block size " + std::to_string(block_bytes) +
                           " is not a positive multiple of " + std::to_string(kBlockAlignment));
  }
  if (region.base == nullptr || RangeWrapsAround(region.base, region.bytes)) {
    return InvalidArgument(what + "the region is not a valid address range");
  }
  if (AddressOf(region.base) % kBlockAlignment != 0) {
    return InvalidArgument(what + "the region's base is not " + std::to_string(kBlockAlignment) +
                           "-byte aligned");
  }
  const size_t num_blocks = region.bytes / block_bytes;
  if (num_blocks == 0) {
    return InvalidArgument(what + "the region's " + std::to_string(region.bytes) +
                           " bytes do not hold one block of " + std::to_string(block_bytes));
  }
  if (num_blocks > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument(what + std::to_string(num_blocks) +
                           " blocks do not fit int32 block ids; use larger blocks");
  }
  return FixedBlockPool(std::move(region), block_bytes, static_cast<int32_t>(num_blocks));
}

}  // namespace bmad::memory
