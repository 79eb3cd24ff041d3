// cpu_arena.hpp: the memory a CPU rank's buffers live in. One block per prepared schedule, asked of the
// kernel on transparent huge pages; the blocks of an interleaved launch's plans come from one pool whose
// pages were first touched in a shuffled order. A memory-bound op's speed depends on which physical memory
// its block got: blocks allocated one after another ran the same optimizer step up to 21 % apart, slower the
// earlier a plan was prepared (docs/fidelity.md, "Where the buffers land").
#pragma once

#include <cstdint>
#include <string>

namespace domino {

inline constexpr int64_t kHugePageBytes = int64_t(2) << 20;  // x86-64 and arm64 (4 KiB base pages)

// A block of at least `bytes` bytes, 64-byte aligned; blocks of a huge page or more start on a huge-page
// boundary, span whole huge pages (their size in *block_bytes) and are advised onto huge pages before their
// first touch, and come from the pool while it has room. nullptr when out of memory. Give back with
// release_arena.
float* allocate_arena(int64_t bytes, int64_t* block_bytes);
void release_arena(float* block);

// Sets aside `bytes` (whole huge pages; 0: none) for the blocks of a huge page or more that follow, touched
// first a huge page at a time in a shuffled order, so that every block drawn from it gets an even mix of the
// machine's memory. Several plans prepared in one process call it once for all of their blocks; the pool goes
// back to the system when its last block is released. Runtime error when the memory cannot be had.
void reserve_arena_pool(int64_t bytes);

// Bytes a block for `bytes` takes (the rounding allocate_arena applies).
int64_t arena_block_bytes(int64_t bytes);

// Bytes of [p, p + bytes) the kernel holds on huge pages now (/proc/self/smaps: AnonHugePages of the
// mappings the range overlaps, at most `bytes`); -1 when that cannot be read.
int64_t resident_huge_page_bytes(const void* p, int64_t bytes);

// The kernel's transparent huge page mode, the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled:
// "always" or "madvise" (blocks advised onto huge pages get them), "never"; "unavailable" when unreadable.
std::string transparent_huge_page_mode();

// A profiler probe's block, kept for the next probe of this process (one slot): domino-profile prepares
// hundreds of probes one after another, each with up to a few hundred MiB of cold buffer sets, and a fresh
// block pays a page fault for every page when first written (in a VM, three quarters of the profiler's time).
// take: a kept block of at least `need` bytes (its size in *got), else a new one; keep: offer a block back.
float* take_spare_arena(int64_t need, int64_t* got);
void keep_spare_arena(float* block, int64_t bytes);

}  // namespace domino
