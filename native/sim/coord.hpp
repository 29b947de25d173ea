/* Coordinated write phases (docs/sim.md, "Coordinated phases"): when the driver passes the two ends of a pipe
 * (parameters coord_requests and coord_replies), every job's writes between two of its barriers (or, with
 * coord_phases, those the driver numbered alike) are one I/O phase, announced to the driver's coordinator at its
 * first write, released write by write and done with its last byte; a rank writes only while its job is not told
 * to wait. The coordinator is ioloom coord's own state and
 * policies (python/ioloom/coord), run by the driver on simulated time. Without the parameters nothing changes. */
#ifndef IOLOOM_SIM_COORD_HPP
#define IOLOOM_SIM_COORD_HPP

#include <cstddef>

#include "sim.hpp"

namespace ioloom_sim {

/* Reads the pipe's ends and finds each job's write phases in the operations; nothing when coordination is off. */
void start_coordination(const Input &in);
/* Before operation `op` (a write): announce its phase if this is the phase's first write, then wait while the
 * job is told to. */
void coordinate_before_write(size_t op);
/* After operation `op` (a write): its bytes are written; the phase's last byte ends the phase. */
void coordinate_after_write(size_t op);

} // namespace ioloom_sim

#endif
