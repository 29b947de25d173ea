/* The I/O predictor inside the tracer (docs/predict.md, "In the tracer"). Each POSIX or stdio open, close, read
 * and write on a file gets a context symbol: its operation and its call stack, whose return addresses are made
 * (module, offset) pairs so that two runs of one binary give the same symbols whatever ASLR did. The first frame
 * is the wrapper's own return address (in the frame record ioloom_call_start keeps); IOLOOM_STACKS=N > 1 adds the
 * N - 1 callers above it, walked by unwind.h (on x86-64 by each frame's DWARF rule, with or without frame
 * pointers; elsewhere by the frame records code built with frame pointers keeps). Each stack the walk meets for
 * the first time is checked once against libc's backtrace() (DWARF unwinding, dearer); where the walk cannot
 * vouch for a stack, or the two differ, backtrace() is used (IOLOOM_STACKS_CHECK=1, for tests: every walked
 * stack is checked, and the differences counted).
 * With IOLOOM_PREDICT=1, the process model of native/predict (process.h, the Python model's twin) learns the
 * calls as they come, each as its stack symbol and file key, and predicts the next one: its symbol, size, offset
 * and gap; its I/O phases (phase.h) are followed too, and the coordination client of `ioloom run --coord` asks
 * for them (ioloom_predict_phase). Symbols, file keys, calls and predictions go to the process's side stream,
 * <stream>.predict (docs/predict.md, "The side stream"), written as the events are (whole chunks, raw system
 * calls, chained checksums) and read by python/ioloom/predict/side.py; the event stream is not changed. One lock
 * serialises the model: the calls of all threads make one stream of symbols. */
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "phase.h"
#include "predict.h"
#include "process.h"
#include "trace_internal.h"
#include "unwind.h"

enum {
    MAX_FRAMES = 8,               /* IOLOOM_STACKS at most */
    MAX_SYMBOLS = 1024,           /* the last one stands for every stack met once the others are taken; so for the
                                     model's symbols, (stack symbol, file key) pairs */
    MAX_KEYS = 1024,              /* file keys; the last one, "", stands for every key met once the others are taken */
    KEY_SLOTS = 2 * MAX_KEYS,     /* file key -> id (a power of two) */
    FILE_SLOTS = 1024,            /* file id -> file key, a cache (a power of two) */
    PAIR_SLOTS = 2 * MAX_SYMBOLS, /* (stack symbol, file key) -> model symbol (a power of two) */
    MAX_MODELS = 4096,            /* size, offset, return and time models of the process model */
    RATE_CALLS = 1024,            /* calls between two measures of the TSC's rate */
    MAX_MODULES = 1024,           /* executable segments remembered */
    RAW_SLOTS = 4096,             /* stacks as raw addresses -> symbol (a power of two) */
    RAW_PROBES = 16,              /* slots looked at before the stable table is searched instead */
    OWN_FRAMES = 2,               /* frames of the tracer's or the coordination client's code a walk steps over */
    KEPT = 8,                     /* predicted symbols written per call; their count is written whole */
    NAME_BYTES = 1024,            /* a module's name, cut beyond */
    PENDING_BYTES = 1 << 16,      /* chunks are written out once this much waits */
    OUT_BYTES = PENDING_BYTES + 4 * NAME_BYTES + 4096,
    DISTINCT_VALUES = 24, /* the Python model's defaults (model.Options), but: */
    LOCAL_CAP = 512,      /* symbols of each local grammar (Python's 4,096): MAX_MODELS of them bound the memory */
    RUN_POSITIONS = 64,
    RETURN_DEPTH = 64,
    DISTANT_NS = 1000000,
    DEFAULT_CAP = 65536,
    DEFAULT_MEMORY_MIB = 64, /* IOLOOM_PREDICT_MEMORY: the model's memory budget (native/predict/memory.h) */
    MAX_MEMORY_MIB = 1 << 20,
};
enum side_chunk { SIDE_INFO = 1, SIDE_MODULES = 2, SIDE_SYMBOLS = 3, SIDE_CALLS = 4, SIDE_KEYS = 5 };
enum via { VIA_FRAMES, VIA_BACKTRACE }; /* how a raw stack was read: the frame walk (or the site alone), backtrace() */
enum kind { NOT_PREDICTED, READS, WRITES, OPENS, CLOSES, BY_AUX /* a copy or an aio result: aux 0 read, 1 write */ };
#define SIDE_MAGIC "IOLOOMPR"
#define SIDE_MAJOR 2
#define SIDE_MINOR 1
#define HDR IOLOOM_CHUNK_HEADER_BYTES

struct module {
    char *name;
    uintptr_t bias, lo, hi; /* load bias; the executable segment [lo, hi) */
    int written;            /* named in this side stream */
};
struct symbol {
    uint16_t op;
    uint8_t n;
    int16_t module[MAX_FRAMES]; /* -1: an address in no module */
    uint64_t offset[MAX_FRAMES];
};
struct raw {
    uintptr_t pc[MAX_FRAMES];
    uint16_t op;
    uint8_t n, via;
    int32_t symbol_plus_1; /* 0: an empty slot */
};

static struct side {
    pthread_mutex_t lock;
    int frames, predict, check; /* check: IOLOOM_STACKS_CHECK */
    uint64_t cap, memory_mib;
    int fd;
    dev_t dev;
    ino_t ino;
    int failed; /* a write failed: nothing more is written */
    uint32_t crc;
    struct pg_process *model;
    struct pg_phases *phases; /* the model's I/O phases, on CLOCK_MONOTONIC ns */
    struct raw *raws;
    struct symbol *symbols;
    int32_t nsymbols;
    struct module modules[MAX_MODULES];
    int32_t nmodules;
    struct ioloom_code_range own_code;   /* the tracer's own code, skipped in stacks */
    struct ioloom_code_range coord_code; /* libioloom-coord-preload's (empty when not loaded), skipped too */
    struct ioloom_code_range libc;       /* a stack ends at its first frame in libc (process or thread start) */
    struct pg_candidate predicted[KEPT]; /* the model's candidates for the next call, and how many it has */
    int32_t npredicted;
    char **keys;               /* file keys, numbered in order of appearance */
    uint8_t *key_written;      /* named in this side stream */
    int32_t nkeys, *key_slots; /* key_slots: key hash -> id + 1 */
    struct file_key {
        int32_t file_plus_1, key;
    } *file_keys; /* a cache: file id -> file key */
    struct pair {
        int32_t symbol, key;
    } *pairs;                    /* per model symbol, its stack symbol and file key */
    int32_t npairs, *pair_slots; /* pair_slots: pair hash -> model symbol + 1 */
    uint64_t keys_past_cap, pairs_past_cap;
    uint64_t last_end;   /* the last call's end (ioloom_ticks); 0: none yet */
    int64_t clock_ns;    /* the model's clock: the sum of the gaps so far */
    uint64_t tick0, ns0; /* a (ticks, ns) pair at start, with the TSC: its rate measured from there */
    double ns_per_tick;
    uint64_t calls, past_symbol_cap;
    uint64_t by_frames, by_backtrace; /* calls whose stack the frame walk gave (a known one), backtrace() gave */
    uint64_t mismatched;              /* IOLOOM_STACKS_CHECK: walked stacks that backtrace() gave otherwise */
    uint8_t *out;                     /* sealed chunks, then the open CALLS chunk at calls_at (calls_open) */
    size_t out_len, calls_at;
    int calls_open;
    char exe[NAME_BYTES];
} side = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

int ioloom_predict_on;
int32_t ioloom_fast_floor = -2;
static IOLOOM_TLS uint32_t side_tid;

static const char *const op_names[] = {
#define OP_NAME(suffix, name, class) [IOLOOM_OP_##suffix] = name,
    IOLOOM_ALL_OPS(OP_NAME)
#undef OP_NAME
};
#define KIND_READ READS
#define KIND_WRITE WRITES
#define KIND_COPY BY_AUX
#define KIND_AIO BY_AUX
#define KIND_META NOT_PREDICTED
#define KIND_SYNC NOT_PREDICTED
#define KIND_LOCK NOT_PREDICTED
#define KIND_OTHER NOT_PREDICTED
static uint8_t kinds[IOLOOM_OP_COUNT] = {
#define OP_KIND(suffix, name, class) [IOLOOM_OP_##suffix] = KIND_##class,
    IOLOOM_ALL_OPS(OP_KIND)
#undef OP_KIND
};
/* The opens and closes the predictor learns (python/ioloom/predict/source.py, OPENS and CLOSES). */
static const enum ioloom_op opens[] = {
    IOLOOM_OP_OPEN,    IOLOOM_OP_OPEN64,   IOLOOM_OP_OPENAT,     IOLOOM_OP_OPENAT64,   IOLOOM_OP_CREAT,
    IOLOOM_OP_CREAT64, IOLOOM_OP_U_OPEN_2, IOLOOM_OP_U_OPEN64_2, IOLOOM_OP_U_OPENAT_2, IOLOOM_OP_U_OPENAT64_2,
    IOLOOM_OP_FOPEN,   IOLOOM_OP_FOPEN64,  IOLOOM_OP_FDOPEN,     IOLOOM_OP_FREOPEN,    IOLOOM_OP_FREOPEN64};
static const enum ioloom_op closes[] = {IOLOOM_OP_CLOSE, IOLOOM_OP_FCLOSE};

/* ---- modules: an address -> (module, offset) ---- */

static int known_module(const char *name, uintptr_t lo) {
    for (int32_t i = 0; i < side.nmodules; i++)
        if (side.modules[i].lo == lo && strcmp(side.modules[i].name, name) == 0) return 1;
    return 0;
}

static int add_segments(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size, (void)arg;
    const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : side.exe; /* "": the program */
    for (int i = 0; i < info->dlpi_phnum && side.nmodules < MAX_MODULES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || known_module(name, lo)) continue;
        char *copy = strndup(name, NAME_BYTES - 1);
        if (!copy) return 1;
        side.modules[side.nmodules++] = (struct module){copy, info->dlpi_addr, lo, lo + ph->p_memsz, 0};
    }
    return 0;
}

/* The module holding pc and its offset there; the loaded modules are looked at again on a miss. -1: none. */
static int module_at(uintptr_t pc, uint64_t *offset) {
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < side.nmodules; i++) {
            if (pc < side.modules[i].lo || pc >= side.modules[i].hi) continue;
            *offset = pc - side.modules[i].bias;
            return i;
        }
        if (pass == 0) dl_iterate_phdr(add_segments, NULL);
    }
    *offset = 0;
    return -1;
}

static int in_code(const struct ioloom_code_range *code, uintptr_t pc) { return pc >= code->lo && pc < code->hi; }
/* Frames skipped at the top of a stack: the tracer's own, and those of the coordination client that `ioloom run
 * --coord` preloads before the tracer (docs/coord.md): its write wrappers call ours, so without the skip every
 * write would have the client's call site. */
static int own(uintptr_t pc) { return in_code(&side.own_code, pc) || in_code(&side.coord_code, pc); }

/* ---- the call stack ---- */

/* The call's stack, innermost first (the wrapper's return address, then its callers), by the frame walk, the
 * frames of the tracer's own code and of the coordination client's (built with frame pointers, so the walk steps
 * over them) left out; *direct: the stack is the wrapper's caller's site alone, which is always right. 0 when it
 * cannot be walked (a frame in no stack of known bounds, or nothing but own frames). */
static int walked_stack(const struct ioloom_call *c, uintptr_t *pc, int *direct) {
    uintptr_t site = (uintptr_t)c->frame[1], walked[MAX_FRAMES + OWN_FRAMES]; /* the wrapper's return address */
    *direct = side.frames == 1 && !own(site);
    if (*direct) {
        pc[0] = site;
        return 1;
    }
    int skip = own(site) ? OWN_FRAMES : 0, k = 0, kept = 0;
    int n = ioloom_unwind_stack(c->frame, &side.libc, walked, side.frames + skip);
    while (k < n && k < skip && own(walked[k])) k++;
    while (k < n && kept < side.frames) pc[kept++] = walked[k++];
    return kept;
}

/* The same stack by backtrace(): the tracer's own frames skipped, ended at its first frame in libc as the walk is. */
static int backtraced_stack(uintptr_t *pc) {
    void *trace[MAX_FRAMES + 16];
    int n = backtrace(trace, MAX_FRAMES + 16), k = 0, kept = 0;
    while (k < n && own((uintptr_t)trace[k])) k++;
    while (k < n && kept < side.frames && (kept == 0 || !in_code(&side.libc, pc[kept - 1])))
        pc[kept++] = (uintptr_t)trace[k++];
    return kept;
}

/* ---- the side stream ---- */

/* The payload of a new chunk (closing the open CALLS chunk first). */
static uint8_t *chunk_payload(void);
static void chunk_done(enum side_chunk type, uint8_t *end) {
    ioloom_seal_chunk(side.out + side.out_len, type, (uint32_t)(end - side.out - side.out_len - HDR));
    side.out_len = (size_t)(end - side.out);
}

static void close_calls(void) {
    if (!side.calls_open) return;
    ioloom_seal_chunk(side.out + side.calls_at, SIDE_CALLS, (uint32_t)(side.out_len - side.calls_at - HDR));
    side.calls_open = 0;
}

static uint8_t *chunk_payload(void) {
    close_calls();
    return side.out + side.out_len + HDR;
}

/* <stream>.predict beside the event stream; its header is written when it is created. */
static int open_side(void) {
    char path[4096];
    const char *stream = ioloom_stream_path();
    size_t len = strlen(stream), suffix = strlen(".ioloom");
    if (len < suffix || len - suffix + sizeof ".predict" > sizeof path) return -1;
    memcpy(path, stream, len - suffix);
    memcpy(path + len - suffix, ".predict", sizeof ".predict");
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || syscall(SYS_fstat, fd, &st)) return -1;
    fd = ioloom_fd_move_high(fd);
    side.dev = st.st_dev, side.ino = st.st_ino;
    if (st.st_size) return fd;
    uint8_t header[16] = SIDE_MAGIC;
    header[8] = SIDE_MAJOR, header[10] = SIDE_MINOR, header[12] = sizeof header;
    side.crc = 0;
    return syscall(SYS_write, fd, header, sizeof header) == (long)sizeof header ? fd : -1;
}

/* The side stream's descriptor, opened again if the program closed or reused its number. */
static int side_fd(void) {
    struct stat st;
    if (side.fd >= 0 && !syscall(SYS_fstat, side.fd, &st) && st.st_dev == side.dev && st.st_ino == side.ino)
        return side.fd;
    return side.fd = open_side();
}

/* Writes every pending chunk, checksums chained. side.lock held. */
static void write_pending(void) {
    close_calls();
    if (!side.out_len || side.failed) {
        side.out_len = 0;
        return;
    }
    int fd = side_fd(); /* first: a new file (the first write, a child after fork) starts the chain again */
    for (size_t at = 0; at < side.out_len;) {
        uint8_t *chunk = side.out + at;
        side.crc = ioloom_chain_chunk(chunk, side.crc);
        at +=
            HDR + ((uint32_t)chunk[4] | (uint32_t)chunk[5] << 8 | (uint32_t)chunk[6] << 16 | (uint32_t)chunk[7] << 24);
    }
    const uint8_t *p = side.out;
    size_t left = side.out_len;
    while (fd >= 0 && left) {
        long n = syscall(SYS_write, fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n, left -= (size_t)n;
    }
    side.failed = fd < 0 || left != 0;
    side.out_len = 0;
}

static void name_modules(const struct symbol *s) {
    uint8_t *p = chunk_payload(), *start = p;
    for (int i = 0; i < s->n; i++) {
        struct module *m = s->module[i] >= 0 ? &side.modules[s->module[i]] : NULL;
        if (!m || m->written) continue;
        m->written = 1;
        p = ioloom_put_varint(p, (uint64_t)s->module[i] + 1);
        p = ioloom_put_cstr(p, m->name);
    }
    if (p != start) chunk_done(SIDE_MODULES, p);
}

static void name_symbol(int32_t id, const struct symbol *s) {
    name_modules(s);
    uint8_t *p = chunk_payload();
    p = ioloom_put_varint(p, (uint64_t)id);
    p = ioloom_put_cstr(p, s->op < IOLOOM_OP_COUNT ? op_names[s->op] : "");
    p = ioloom_put_varint(p, s->n);
    for (int i = 0; i < s->n; i++) {
        p = ioloom_put_varint(p, (uint64_t)(s->module[i] + 1));
        p = ioloom_put_varint(p, s->offset[i]);
    }
    chunk_done(SIDE_SYMBOLS, p);
}

static void put_info(uint8_t **p, const char *key, uint64_t value) {
    char text[24];
    int len = 0;
    do text[sizeof text - 1 - len++] = (char)('0' + value % 10);
    while ((value /= 10) && len < (int)sizeof text - 1);
    *p = ioloom_put_cstr(*p, key);
    memcpy(*p, text + sizeof text - len, (size_t)len);
    *p += len;
    *(*p)++ = 0;
}

static void write_counts(void) {
    const struct pg_grammar *g = side.model ? pg_sequence_grammar(pg_process_sequence(side.model)) : NULL;
    uint8_t *p = chunk_payload();
    put_info(&p, "frames", (uint64_t)side.frames);
    put_info(&p, "predict", (uint64_t)side.predict);
    put_info(&p, "grammar_cap", side.cap);
    put_info(&p, "local_cap", LOCAL_CAP);
    put_info(&p, "max_symbols", MAX_SYMBOLS);
    put_info(&p, "calls", side.calls);
    put_info(&p, "symbols", (uint64_t)side.nsymbols);
    put_info(&p, "symbols_past_cap", side.past_symbol_cap);
    put_info(&p, "grammar_size", g ? (uint64_t)pg_grammar_size(g) : 0);
    put_info(&p, "grammar_past_cap", g ? (uint64_t)pg_grammar_past_cap(g) : 0);
    put_info(&p, "keys", (uint64_t)side.nkeys);
    put_info(&p, "keys_past_cap", side.keys_past_cap);
    put_info(&p, "model_symbols", (uint64_t)side.npairs);
    put_info(&p, "model_symbols_past_cap", side.pairs_past_cap);
    put_info(&p, "models_past_cap", side.model ? (uint64_t)pg_process_models_past_cap(side.model) : 0);
    const struct pg_memory *m = side.model ? pg_process_memory(side.model) : NULL;
    const struct pg_memory *fixed = side.model ? pg_process_fixed_memory(side.model) : NULL;
    put_info(&p, "memory_cap", side.memory_mib << 20);
    put_info(&p, "memory_peak", m ? (uint64_t)m->peak : 0);
    put_info(&p, "memory_refused", m ? (uint64_t)(m->refused + fixed->refused) : 0);
    put_info(&p, "grammars_stopped", m ? (uint64_t)(m->stopped + fixed->stopped) : 0);
    put_info(&p, "stacks_walked", side.by_frames);
    put_info(&p, "stacks_backtraced", side.by_backtrace);
    struct ioloom_unwind_counts rules = ioloom_unwind_counts();
    put_info(&p, "unwind_rules", rules.rules);
    put_info(&p, "unwind_rules_slow", rules.rules_slow);
    put_info(&p, "unwind_rules_past_cap", rules.rules_past_cap);
    if (side.check) put_info(&p, "stacks_mismatched", side.mismatched);
    chunk_done(SIDE_INFO, p);
}

/* ---- symbols ---- */

static int same_symbol(const struct symbol *a, const struct symbol *b) {
    if (a->op != b->op || a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->module[i] != b->module[i] || a->offset[i] != b->offset[i]) return 0;
    return 1;
}

/* The symbol of a stable stack: found, or numbered and named now; past MAX_SYMBOLS - 1, the last one. */
static int32_t stable_symbol(uint16_t op, const uintptr_t *pc, int n) {
    struct symbol s = {.op = op, .n = (uint8_t)n};
    for (int i = 0; i < n; i++) s.module[i] = (int16_t)module_at(pc[i], &s.offset[i]);
    for (int32_t id = 0; id < side.nsymbols; id++)
        if (same_symbol(&side.symbols[id], &s)) return id;
    int32_t id = side.nsymbols < MAX_SYMBOLS - 1 ? side.nsymbols : MAX_SYMBOLS - 1;
    if (id == MAX_SYMBOLS - 1) s = (struct symbol){.op = IOLOOM_OP_COUNT}; /* named "", no frames */
    if (id < side.nsymbols) return id;
    side.symbols[side.nsymbols++] = s;
    name_symbol(id, &s);
    return id;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h = (h ^ v) * 0x9E3779B97F4A7C15ull;
    return h ^ h >> 29;
}

static int same_raw(const struct raw *r, enum via via, uint16_t op, const uintptr_t *pc, int n) {
    if (r->op != op || r->n != n || r->via != via) return 0;
    for (int i = 0; i < n; i++)
        if (r->pc[i] != pc[i]) return 0;
    return 1;
}

/* A stack's symbol, through the table of raw stacks (addresses do not move within a process); a stack not in
 * it is added when `add`, else -1. */
static int32_t raw_symbol(enum via via, uint16_t op, const uintptr_t *pc, int n, int add) {
    uint64_t h = mix(op, via);
    for (int i = 0; i < n; i++) h = mix(h, pc[i]);
    for (uint32_t probe = 0; probe < RAW_PROBES; probe++) {
        struct raw *r = &side.raws[(h + probe) & (RAW_SLOTS - 1)];
        if (r->symbol_plus_1 && same_raw(r, via, op, pc, n)) return r->symbol_plus_1 - 1;
        if (r->symbol_plus_1) continue;
        if (!add) return -1;
        int32_t symbol = stable_symbol(op, pc, n);
        *r = (struct raw){.op = op, .n = (uint8_t)n, .via = (uint8_t)via, .symbol_plus_1 = symbol + 1};
        memcpy(r->pc, pc, sizeof *pc * (size_t)n);
        return r->symbol_plus_1 - 1;
    }
    return add ? stable_symbol(op, pc, n) : -1;
}

/* backtrace()'s stack for this call in traced (*m frames), asked with side.lock released; 1 if it is the n frames
 * at pc. side.lock held. */
static int backtrace_agrees(const uintptr_t *pc, int n, uintptr_t *traced, int *m) {
    pthread_mutex_unlock(&side.lock);
    *m = backtraced_stack(traced);
    pthread_mutex_lock(&side.lock);
    return *m == n && memcmp(pc, traced, sizeof *pc * (size_t)n) == 0;
}

/* The symbol of a call whose walked stack (n frames at pc) is not known yet: backtrace() is asked. When the two
 * agree, the walked stack is remembered, and the next call from there costs the walk and a lookup; when they
 * differ (code built without frame pointers), the call takes backtrace()'s stack (IOLOOM_STACKS_CHECK=1: counted
 * when the walk gave frames). side.lock held, released while backtrace() runs. */
static int32_t checked_symbol(uint16_t op, const uintptr_t *pc, int n) {
    uintptr_t traced[MAX_FRAMES];
    int m;
    int agree = backtrace_agrees(pc, n, traced, &m);
    side.by_backtrace++;
    if (agree) return raw_symbol(VIA_FRAMES, op, pc, n, 1);
    if (side.check && n) side.mismatched++; /* the walk gave frames, and not backtrace()'s */
    return raw_symbol(VIA_BACKTRACE, op, traced, m, 1);
}

/* The call's symbol: its walked stack if known (or `direct`: the site alone, always right), else checked_symbol.
 * IOLOOM_STACKS_CHECK=1: a known walked stack is compared with backtrace()'s too; every walk that gave frames
 * other than backtrace()'s, a stack's first included, is counted. */
static int32_t call_symbol(uint16_t op, const uintptr_t *pc, int n, int direct) {
    int32_t symbol = n ? raw_symbol(VIA_FRAMES, op, pc, n, direct) : -1;
    if (symbol >= 0) {
        uintptr_t traced[MAX_FRAMES];
        int m;
        side.by_frames++;
        if (side.check && !direct && !backtrace_agrees(pc, n, traced, &m)) side.mismatched++;
        return symbol;
    }
    return checked_symbol(op, pc, n);
}

/* ---- file keys and model symbols ---- */

/* The file key of path (source.py's file_key): each run of decimal digits made '#', cut at NAME_BYTES - 1. */
static void file_key(const char *path, char *key) {
    size_t n = 0;
    for (const char *c = path; *c && n < NAME_BYTES - 1; c++) {
        int digit = *c >= '0' && *c <= '9';
        if (!digit)
            key[n++] = *c;
        else if (c == path || c[-1] < '0' || c[-1] > '9')
            key[n++] = '#';
    }
    key[n] = 0;
}

static uint64_t hash_text(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

/* The id of a file key: found, or numbered now; past MAX_KEYS - 1 (or out of memory), the last one. */
static int32_t key_id(const char *key) {
    uint32_t slot = (uint32_t)hash_text(key) & (KEY_SLOTS - 1);
    for (; side.key_slots[slot]; slot = (slot + 1) & (KEY_SLOTS - 1))
        if (strcmp(side.keys[side.key_slots[slot] - 1], key) == 0) return side.key_slots[slot] - 1;
    char *copy = side.nkeys < MAX_KEYS - 1 ? strdup(key) : NULL;
    if (!copy) {
        side.keys_past_cap++;
        if (!side.keys[MAX_KEYS - 1]) side.keys[MAX_KEYS - 1] = ""; /* named "": every key past the others */
        return MAX_KEYS - 1;
    }
    side.keys[side.nkeys] = copy;
    side.key_slots[slot] = side.nkeys + 1;
    return side.nkeys++;
}

/* The file key of a file id, through the cache. */
static int32_t key_of_file(int32_t file) {
    struct file_key *cached = &side.file_keys[(uint32_t)file & (FILE_SLOTS - 1)];
    if (cached->file_plus_1 == file + 1) return cached->key;
    const char *path = ioloom_file_path(file);
    char key[NAME_BYTES];
    file_key(path ? path : "", key);
    *cached = (struct file_key){file + 1, key_id(key)};
    return cached->key;
}

static void name_key(int32_t key) {
    if (side.key_written[key]) return;
    side.key_written[key] = 1;
    uint8_t *p = chunk_payload();
    p = ioloom_put_varint(p, (uint64_t)key);
    p = ioloom_put_cstr(p, side.keys[key]);
    chunk_done(SIDE_KEYS, p);
}

/* The model's symbol of a stack symbol on a file key, numbered in order of appearance; past MAX_SYMBOLS - 1, the
 * last one. */
static int32_t model_symbol(int32_t symbol, int32_t key) {
    uint32_t slot = (uint32_t)mix((uint64_t)symbol, (uint64_t)key) & (PAIR_SLOTS - 1);
    for (; side.pair_slots[slot]; slot = (slot + 1) & (PAIR_SLOTS - 1)) {
        const struct pair *pair = &side.pairs[side.pair_slots[slot] - 1];
        if (pair->symbol == symbol && pair->key == key) return side.pair_slots[slot] - 1;
    }
    if (side.npairs == MAX_SYMBOLS - 1) { /* the last one, named after the first pair that took it */
        if (!side.pairs_past_cap++) side.pairs[MAX_SYMBOLS - 1] = (struct pair){symbol, key};
        return MAX_SYMBOLS - 1;
    }
    side.pairs[side.npairs] = (struct pair){symbol, key};
    side.pair_slots[slot] = side.npairs + 1;
    return side.npairs++;
}

/* ---- time: the model's gaps in ns ---- */

static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* With the TSC, its rate from start to now, measured again every RATE_CALLS calls. */
static void measure_rate(void) {
    if (!ioloom_tsc || side.calls % RATE_CALLS) return;
    uint64_t ticks = ioloom_ticks(), ns = monotonic_ns();
    if (ticks > side.tick0 && ns > side.ns0) side.ns_per_tick = (double)(ns - side.ns0) / (double)(ticks - side.tick0);
}

/* The time from the last call's end to this one's start, ns (0 for the first call and for overlaps). */
static int64_t gap_ns(const struct ioloom_raw_event *row) {
    if (!side.last_end || row->t_start <= side.last_end) return 0;
    uint64_t ticks = row->t_start - side.last_end;
    return ioloom_tsc ? (int64_t)((double)ticks * side.ns_per_tick) : (int64_t)ticks;
}

/* ---- calls ---- */

static uint8_t *put_candidate(uint8_t *p, const struct pg_candidate *c) {
    const struct pair *pair = &side.pairs[c->symbol];
    p = ioloom_put_varint(p, (uint64_t)pair->symbol);
    p = ioloom_put_varint(p, (uint64_t)pair->key);
    p = ioloom_put_varint(p, (uint64_t)c->size);
    p = ioloom_put_varint(p, (uint64_t)c->offset << 1 ^ (uint64_t)(c->offset >> 63)); /* zigzag: -1 none, or < 0 */
    return ioloom_put_varint(p, (uint64_t)pg_round_half_even(c->gap_ns));
}

/* One CALLS record: thread, symbol, file key, the gap before the call, and the model's candidates for it
 * (predicted before learning it). */
static void record_call(int32_t symbol, int32_t key, int64_t gap) {
    name_key(key);
    if (!side.calls_open) {
        side.calls_at = side.out_len;
        side.out_len += HDR;
        side.calls_open = 1;
    }
    uint8_t *p = side.out + side.out_len;
    p = ioloom_put_varint(p, side_tid);
    p = ioloom_put_varint(p, (uint64_t)symbol);
    p = ioloom_put_varint(p, (uint64_t)key);
    p = ioloom_put_varint(p, (uint64_t)gap);
    p = ioloom_put_varint(p, (uint64_t)side.npredicted);
    for (int32_t i = 0; i < side.npredicted && i < KEPT; i++) p = put_candidate(p, &side.predicted[i]);
    side.out_len = (size_t)(p - side.out);
}

/* The call as the model's operation (source.py's: size the bytes asked of a read or write, else 0; moved the
 * bytes it moved, -1 when unknown). Only gaps count, so the model's clock is the sum of the gaps, and each call
 * takes no time on it. */
static struct pg_operation operation(const struct ioloom_raw_event *row, enum pg_kind kind, int32_t model_symbol,
                                     int32_t key, int64_t gap) {
    int data = kind == PG_READ || kind == PG_WRITE;
    side.clock_ns += gap;
    int64_t size = data && row->req_bytes > 0 ? row->req_bytes : 0,
            moved = data && row->ret_bytes >= 0 ? row->ret_bytes : -1;
    return (struct pg_operation){.symbol = model_symbol,
                                 .place = key,
                                 .kind = kind,
                                 .offset = data ? row->offset : -1,
                                 .size = size,
                                 .t_start = side.clock_ns,
                                 .t_end = side.clock_ns,
                                 .moved = moved};
}

/* The call to the phases, on CLOCK_MONOTONIC ns (the coordination client's clock): it ended now, and began its
 * duration before. */
static void observe_phase(const struct ioloom_raw_event *row, const struct pg_operation *op) {
    uint64_t ticks = row->t_end > row->t_start ? row->t_end - row->t_start : 0;
    int64_t end = (int64_t)monotonic_ns(),
            took = ioloom_tsc ? (int64_t)((double)ticks * side.ns_per_tick) : (int64_t)ticks;
    pg_phases_observe(side.phases, op->kind, op->size, end - took, end);
}

static void learn(const struct ioloom_raw_event *row, enum pg_kind kind, int32_t symbol, int32_t key, int64_t gap) {
    side.calls++;
    side.past_symbol_cap += symbol == MAX_SYMBOLS - 1;
    side.last_end = row->t_end;
    if (!side.model) return;
    struct pg_operation op = operation(row, kind, model_symbol(symbol, key), key, gap);
    observe_phase(row, &op);
    pg_process_observe(side.model, &op);
    side.npredicted = pg_process_predict(side.model, side.predicted, KEPT);
}

/* The model's kind of a call, -1 for a call it does not learn. */
static int call_kind(enum ioloom_op op, int64_t aux) {
    switch (op < IOLOOM_OP_COUNT ? kinds[op] : NOT_PREDICTED) {
        case READS:
            return PG_READ;
        case WRITES:
            return PG_WRITE;
        case OPENS:
            return PG_OPEN;
        case CLOSES:
            return PG_CLOSE;
        case BY_AUX:
            return aux == 0 ? PG_READ : aux == 1 ? PG_WRITE : -1;
        default:
            return -1;
    }
}

/* One call the model takes: its record, and what the model learns. Invariant: every event of such a call has its
 * record in the side stream, in order. After the final flush (calls in a destructor that runs after the tracer's,
 * as libgfortran's closing the units left open) no flush follows, so each record is written at once, as the
 * events are (writer.c). */
void ioloom_predict_row(const struct ioloom_call *c, const struct ioloom_raw_event *row) {
    int kind = row->file_id >= 0 && row->layer <= IOLOOM_STDIO ? call_kind(row->op, row->aux) : -1;
    if (kind < 0) return;
    uintptr_t pc[MAX_FRAMES];
    int direct, n = walked_stack(c, pc, &direct);
    if (IOLOOM_UNLIKELY(!side_tid)) side_tid = (uint32_t)syscall(SYS_gettid);
    pthread_mutex_lock(&side.lock);
    int32_t symbol = call_symbol(row->op, pc, n, direct), key = key_of_file(row->file_id);
    measure_rate();
    int64_t gap = gap_ns(row);
    record_call(symbol, key, gap);
    learn(row, (enum pg_kind)kind, symbol, key, gap);
    if (IOLOOM_UNLIKELY(ioloom_finished)) write_counts(); /* no flush follows: the counts with this call */
    if (side.out_len > PENDING_BYTES || ioloom_finished) write_pending();
    pthread_mutex_unlock(&side.lock);
}

/* ---- the phase interface, for the coordination client ---- */

IOLOOM_EXPORT int ioloom_predict_phase(int64_t now_ns, int64_t gap_ns, int64_t held_ns, struct pg_phase *out) {
    if (!ioloom_predict_on || ioloom_lock(&side.lock)) return 0;
    int on = side.phases != NULL; /* NULL without IOLOOM_PREDICT, or in a child whose model could not be made */
    if (on) {
        struct pg_candidate next[PG_LIMIT_MAX];
        pg_phases_set_gap(side.phases, gap_ns);
        pg_phases_hold(side.phases, held_ns);
        if (out) pg_phases_now(side.phases, next, pg_process_predict(side.model, next, PG_LIMIT_MAX), now_ns, out);
    }
    pthread_mutex_unlock(&side.lock);
    return on;
}

/* ---- start, flush, fork ---- */

/* A search over the loaded modules for a code segment: the one holding `fn` (prefix NULL), or the executable
 * segment of the module whose file name starts with `prefix`. */
struct segment_search {
    const char *prefix;
    uintptr_t fn;
    struct ioloom_code_range code; /* found; empty if none */
};

static int wanted_segment(const struct segment_search *search, const ElfW(Phdr) * ph, uintptr_t lo) {
    if (ph->p_type != PT_LOAD) return 0;
    return search->prefix ? (ph->p_flags & PF_X) != 0 : search->fn >= lo && search->fn < lo + ph->p_memsz;
}

static int find_segment(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct segment_search *search = arg;
    const char *name = info->dlpi_name ? info->dlpi_name : "", *slash = strrchr(name, '/');
    if (search->prefix && strncmp(slash ? slash + 1 : name, search->prefix, strlen(search->prefix))) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        uintptr_t lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
        if (!wanted_segment(search, &info->dlpi_phdr[i], lo)) continue;
        search->code = (struct ioloom_code_range){lo, lo + info->dlpi_phdr[i].p_memsz};
        return 1;
    }
    return 0;
}

/* The code of the loaded module whose file name starts with `prefix` (NULL: the segment holding `fn`); empty if
 * none. */
static struct ioloom_code_range segment_of(const char *prefix, uintptr_t fn) {
    struct segment_search search = {prefix, fn, {0, 0}};
    dl_iterate_phdr(find_segment, &search);
    return search.code;
}

/* The process model with the Python model's defaults (model.Options) and the tracer's bounds, and its phases
 * (split at distant_ns until the coordination client gives its own gap); none without IOLOOM_PREDICT or memory. */
static void new_model(void) {
    struct pg_options o = {(int32_t)side.cap, DISTINCT_VALUES, LOCAL_CAP, RUN_POSITIONS, RETURN_DEPTH,
                           DISTANT_NS,        MAX_SYMBOLS,     MAX_KEYS,  MAX_MODELS,    side.memory_mib << 20};
    side.model = side.predict ? pg_process_new(&o) : NULL;
    side.phases = side.model ? pg_phases_new(DISTINCT_VALUES, LOCAL_CAP, DISTANT_NS, NULL) : NULL;
    if (side.model && !side.phases) pg_process_free(side.model), side.model = NULL;
}

/* The model, the tables and the output buffer; 0 on success. */
static int allocate(void) {
    side.raws = calloc(RAW_SLOTS, sizeof *side.raws);
    side.symbols = calloc(MAX_SYMBOLS, sizeof *side.symbols);
    side.out = malloc(OUT_BYTES);
    side.keys = calloc(MAX_KEYS, sizeof *side.keys);
    side.key_written = calloc(MAX_KEYS, sizeof *side.key_written);
    side.key_slots = calloc(KEY_SLOTS, sizeof *side.key_slots);
    side.file_keys = calloc(FILE_SLOTS, sizeof *side.file_keys);
    side.pairs = calloc(MAX_SYMBOLS, sizeof *side.pairs);
    side.pair_slots = calloc(PAIR_SLOTS, sizeof *side.pair_slots);
    new_model();
    return !side.raws || !side.symbols || !side.out || !side.keys || !side.key_written || !side.key_slots ||
           !side.file_keys || !side.pairs || !side.pair_slots || (side.predict && !side.model);
}

void ioloom_predict_start(void) {
    side.predict = ioloom_env_bool("IOLOOM_PREDICT", 0);
    uint64_t frames = ioloom_env_uint("IOLOOM_STACKS", (uint64_t)side.predict);
    if (!frames) return;
    side.frames = frames > MAX_FRAMES ? MAX_FRAMES : (int)frames;
    uint64_t cap = ioloom_env_uint("IOLOOM_PREDICT_CAP", DEFAULT_CAP);
    side.cap = cap<16 ? 16 : cap>(1u << 24) ? (1u << 24) : cap; /* the Python model's --grammar-cap bounds */
    uint64_t mib = ioloom_env_uint("IOLOOM_PREDICT_MEMORY", DEFAULT_MEMORY_MIB);
    side.memory_mib = mib < 1 ? 1 : mib > MAX_MEMORY_MIB ? MAX_MEMORY_MIB : mib;
    for (size_t i = 0; i < sizeof opens / sizeof *opens; i++) kinds[opens[i]] = OPENS;
    for (size_t i = 0; i < sizeof closes / sizeof *closes; i++) kinds[closes[i]] = CLOSES;
    if (ioloom_tsc) side.tick0 = ioloom_ticks(), side.ns0 = monotonic_ns();
    long n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", side.exe, sizeof side.exe - 1);
    side.exe[n > 0 ? n : 0] = 0;
    side.own_code = segment_of(NULL, (uintptr_t)&ioloom_predict_row);
    side.coord_code = segment_of("libioloom-coord-preload", 0);
    side.libc = segment_of(NULL, (uintptr_t)&backtrace); /* libc's: the tracer does not wrap backtrace() */
    if (side.frames > 1 || side.coord_code.hi) {         /* the first backtrace() loads libgcc_s: now, not in a call */
        void *warm[2];
        backtrace(warm, 2);
        ioloom_unwind_start();
    }
    side.check = ioloom_env_bool("IOLOOM_STACKS_CHECK", 0);
    if (allocate()) return; /* out of memory: no symbols, the events as ever */
    ioloom_predict_on = 1;
    ioloom_fast_floor = INT32_MAX;
}

void ioloom_predict_flush(void) {
    if (!ioloom_predict_on || ioloom_lock(&side.lock)) return;
    write_counts();
    write_pending();
    pthread_mutex_unlock(&side.lock);
}

void ioloom_predict_after_fork(void) {
    if (!ioloom_predict_on) return;
    pthread_mutex_init(&side.lock, NULL);
    side_tid = 0;
    struct stat st; /* the parent's side stream: the child writes its own */
    if (side.fd >= 0 && !syscall(SYS_fstat, side.fd, &st) && st.st_dev == side.dev && st.st_ino == side.ino)
        syscall(SYS_close, side.fd);
    side.fd = -1;
    side.failed = side.calls_open = 0;
    side.out_len = 0;
    side.nsymbols = side.npredicted = 0;
    side.calls = side.past_symbol_cap = side.by_frames = side.by_backtrace = side.mismatched = 0;
    ioloom_unwind_after_fork(); /* its rules stay */
    memset(side.raws, 0, RAW_SLOTS * sizeof *side.raws);
    for (int32_t i = 0; i < side.nmodules; i++) side.modules[i].written = 0;
    memset(side.key_written, 0, MAX_KEYS * sizeof *side.key_written); /* the keys keep their ids */
    memset(side.pair_slots, 0, PAIR_SLOTS * sizeof *side.pair_slots);
    side.npairs = 0;
    side.keys_past_cap = side.pairs_past_cap = side.last_end = 0;
    side.clock_ns = 0;
    /* The parent's model and phases are left as they are, not freed: another thread may have been changing them
     * when the process forked. Their pages, never touched again, stay shared with the parent's. */
    new_model();
}
