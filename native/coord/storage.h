/* An emulated storage of fixed bandwidth shared by processes: one reservation clock (CLOCK_MONOTONIC seconds at
 * which the storage is next free) in a file, updated under flock. A write of n bytes starts when the storage is
 * free and lasts n / bandwidth; writers that alternate share it in proportion to the bytes they reserve per
 * step, as proportional sharing (Dorier Sec. 6.1.2) assumes. */
#ifndef IOLOOM_COORD_STORAGE_H
#define IOLOOM_COORD_STORAGE_H

#include <stdint.h>

/* Open (creating if needed) the clock file; -1 with errno on failure. */
int storage_open(const char *path);
/* Reserve n bytes at `bandwidth` bytes/s; returns the time the transfer ends (the caller sleeps until then);
 * a negative value on failure. */
double storage_reserve(int fd, uint64_t n, double bandwidth);
/* CLOCK_MONOTONIC now, and sleeping until a time of that clock. */
double storage_now(void);
void storage_sleep_until(double when);

#endif
