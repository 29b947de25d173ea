/* The frame-pointer unwinder of the tracer's call-stack symbols (unwind.c; docs/predict.md, "Stack symbols"):
 * the return addresses above a wrapper's frame, read from the chain of frame records the program's code keeps
 * when it is built with frame pointers. Never faults: every record read lies in the calling thread's stack. */
#ifndef IOLOOM_TRACE_UNWIND_H
#define IOLOOM_TRACE_UNWIND_H

#include <stdint.h>

/* Code addresses [lo, hi): a walk stops after its first return address in them. */
struct ioloom_code_range {
    uintptr_t lo, hi;
};

/* Up to max return addresses, innermost first, from the frame record at `frame` (a wrapper's
 * __builtin_frame_address(0): its first address is the wrapper's own return address). The walk stops at the
 * first implausible record (outside the thread's stack, not above the one before, misaligned, a null return
 * address) and after an address in `last`. Returns how many were written; 0 when `frame` is not in a stack
 * this thread's bounds are known for. What comes out of code built without frame pointers may be wrong: the
 * caller checks it (predict.c). */
int ioloom_unwind_frames(const void *frame, const struct ioloom_code_range *last, uintptr_t *pc, int max);

#endif
