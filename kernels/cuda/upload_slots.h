// Where the CUDA backend puts each op's host-side metadata (token ids, positions, KV slots,
// attention block tables) on the device, so that the upload runs on the copy stream while the
// compute stream still reads the previous upload of the same kind.
//
// Each kind has two device buffers (and two pinned host staging buffers) used in turn. An upload
// equal to what the kind's current buffer holds is not copied again: the block tables of a step
// are the same for every layer, so only the first layer uploads them. A different upload goes to
// the other buffer, and this plan says which stream waits for what:
//   - `retire`: the buffer being given up. The backend records its "consumed" event on the
//     compute stream now: every op that can read it has been issued.
//   - `wait_consumed`: the copy into `buffer` first waits for `buffer`'s consumed event, recorded
//     when it was last given up. The copy so overlaps the ops that read the current buffer.
//   - `wait_landed`: the host waits for the last copy out of `buffer`'s staging before writing
//     it (that copy was issued two uploads of this kind ago, normally long done).
// The backend then records `buffer`'s "landed" event on the copy stream and makes the compute
// stream wait for it before the op that reads it.
//
// Plain C++ (no CUDA): tested on the CPU (tests/kernels/cuda_upload_slots_test.cc), including a
// check of the ordering that the plan implies on a model of the two streams.
//
// Thread-safety: none; the backend calls it from the thread that issues its ops.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace bmad::cuda {

class UploadSlots {
 public:
  explicit UploadSlots(int kinds);

  struct Plan {
    bool reuse = false;          // the current buffer already holds these bytes: no copy, no wait
    int buffer = -1;             // the buffer to read (reuse) or copy into: 2 · kind + side
    int retire = -1;             // the buffer given up (record its consumed event), or -1
    bool wait_consumed = false;  // the copy stream waits for `buffer`'s consumed event
    bool wait_landed = false;    // the host waits for `buffer`'s last copy before staging
  };

  // The plan for uploading `values` as `kind`. Unless it is a reuse, the caller issues the copy
  // and then calls Issued, or Failed when it could not.
  Plan Next(int kind, std::span<const int32_t> values) const;
  void Issued(int kind, const Plan& plan, std::span<const int32_t> values);
  // Nothing of `kind` is known to be on the device any more (a failed copy); the next upload
  // copies whatever it is.
  void Failed(int kind);

  static constexpr int buffers_per_kind() { return 2; }
  int buffer_count() const { return static_cast<int>(buffers_.size()); }

 private:
  struct Buffer {
    std::vector<int32_t> values;  // what the device buffer holds once its copy lands
    bool valid = false;           // `values` is what the buffer holds (or will)
    bool copied = false;          // a copy has been issued into it (so staging may be in use)
    bool retired = false;         // given up at least once (its consumed event is recorded)
  };
  std::vector<int> current_;  // per kind: 0 or 1, the side the last upload went to; -1 before any
  std::vector<Buffer> buffers_;
};

}  // namespace bmad::cuda
