/* The phase part of the prediction interface (phase.h): interface.py's Phases, the same decisions in the same
 * order (docs/predict.md, "Prediction interface"). */
#include "phase.h"

struct pg_phases {
    int64_t gap_ns;
    struct pg_memory *memory;
    struct pg_local *lengths, *volumes; /* of the phases that ended: operations, bytes written */
    int64_t ended;                      /* phases learnt */
    int64_t done, written;              /* the current phase so far */
    int64_t expected, to_write;         /* predicted when it began; -1: unknown */
    double op_ns;                       /* halving average of the end-to-end time between operations of one phase */
    int64_t last_end;                   /* -1: no operation yet */
    int64_t held;                       /* ns the process was held since the last operation (pg_phases_hold) */
};

struct pg_phases *pg_phases_new(int32_t limit, int32_t local_cap, int64_t gap_ns, struct pg_memory *memory) {
    struct pg_phases *ph = pg_alloc(memory, sizeof *ph);
    if (!ph) return NULL;
    *ph = (struct pg_phases){.gap_ns = gap_ns, .memory = memory, .expected = -1, .to_write = -1, .last_end = -1};
    ph->lengths = pg_local_new(limit, PG_MAX, 1, local_cap, memory);
    ph->volumes = pg_local_new(limit, PG_MAX, 1, local_cap, memory);
    if (!ph->lengths || !ph->volumes) {
        pg_phases_free(ph);
        return NULL;
    }
    return ph;
}

void pg_phases_free(struct pg_phases *ph) {
    if (!ph) return;
    pg_local_free(ph->lengths);
    pg_local_free(ph->volumes);
    pg_free(ph->memory, ph);
}

/* The current phase ended: its length and bytes are learnt (nothing happens with no phase under way). */
static void close_phase(struct pg_phases *ph) {
    if (!ph->done) return;
    pg_local_observe(ph->lengths, ph->done);
    pg_local_observe(ph->volumes, ph->written);
    ph->ended++;
    ph->done = ph->written = 0;
}

static void begin_phase(struct pg_phases *ph) {
    ph->expected = ph->ended ? pg_local_predict(ph->lengths) : -1;
    ph->to_write = ph->ended ? pg_local_predict(ph->volumes) : -1;
}

void pg_phases_observe(struct pg_phases *ph, enum pg_kind kind, int64_t size, int64_t t_start, int64_t t_end) {
    if (ph->last_end >= 0 && t_start - ph->held - ph->last_end >= ph->gap_ns) close_phase(ph);
    if (ph->done == 0) {
        begin_phase(ph);
    } else if (ph->last_end >= 0) {
        int64_t step = t_end - ph->held - ph->last_end;
        ph->op_ns = ph->op_ns == 0 ? (double)step : (ph->op_ns + (double)step) / 2;
    }
    ph->held = 0;
    ph->done++;
    ph->written += kind == PG_WRITE && size > 0 ? size : 0;
    ph->last_end = t_end;
}

/* Operations left: to the predicted length, then 0 if every candidate's gap reaches the phase gap; -1: unknown. */
static int64_t remaining(const struct pg_phases *ph, const struct pg_candidate *c, int32_t n) {
    if (ph->expected >= 0 && ph->done < ph->expected) return ph->expected - ph->done;
    int32_t distant = 0;
    while (distant < n && c[distant].gap_ns >= (double)ph->gap_ns) distant++;
    return n > 0 && distant == n ? 0 : -1;
}

static int64_t end_after(const struct pg_phases *ph, int64_t from, int64_t operations) {
    return operations < 0 ? -1 : from + pg_round_half_even((double)operations * ph->op_ns);
}

void pg_phases_now(struct pg_phases *ph, const struct pg_candidate *c, int32_t n, int64_t now_ns,
                   struct pg_phase *out) {
    if (ph->last_end < 0) {
        *out = (struct pg_phase){0, -1, -1, -1, 0, -1};
    } else if (now_ns >= 0 && now_ns - ph->held - ph->last_end >= ph->gap_ns) { /* ahead: the phase a call now begins */
        close_phase(ph);
        begin_phase(ph);
        *out = (struct pg_phase){0, ph->expected, end_after(ph, now_ns, ph->expected), ph->expected, 0, ph->to_write};
    } else {
        int64_t left = remaining(ph, c, n);
        *out = (struct pg_phase){ph->done,     left,        end_after(ph, ph->last_end, left),
                                 ph->expected, ph->written, ph->to_write};
    }
}

void pg_phases_hold(struct pg_phases *ph, int64_t ns) { ph->held += ns; }

void pg_phases_set_gap(struct pg_phases *ph, int64_t gap_ns) { ph->gap_ns = gap_ns; }

int64_t pg_round_half_even(double x) {
    double floor = (double)(int64_t)x;
    if (floor > x) floor -= 1; /* a negative x: truncation went up */
    double part = x - floor;
    int64_t whole = (int64_t)floor;
    return whole + (part > 0.5 || (part == 0.5 && (whole & 1)));
}
