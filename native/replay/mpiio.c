/* The MPI-IO calls the MPI replayers (ioloom-replay-<mpi>) make again, each by its own name (docs/replay.md,
 * "MPI-IO replayed as MPI-IO"): MPI_File_open on the communicator of the processes that opened the file together
 * (MPI_COMM_WORLD, MPI_COMM_SELF, else one made of that group), every data call with the recorded byte offset and
 * byte count on MPI_BYTE, non-blocking and split calls completed by the completion the trace recorded, and the
 * calls on the file (sync, set_size, seeks, views, ...). What the trace does not hold is not made up: a view is
 * made again contiguous (the recorded displacement, etype extent and filetype extent), hints are none, data is 'x'
 * bytes. The POSIX requests inside these calls are the MPI library's own. */
#include "replay.h"

#include <assert.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* What the replay knows of a file it opened, by the recorded handle: its MPI_File, the view it set (displacement,
 * etype size in bytes) and where its individual pointer is (etypes; -1: not known). */
struct mfile {
    MPI_File fh;
    long long disp, etype, pointer;
};

/* A non-blocking or split call in flight: the recorded call id of its initiation, its request and its buffer
 * (its own: the shared buffers may move while the library uses it). */
struct pending {
    long long call_id;
    MPI_Request request;
    char *buf;
    long long handle; /* the file of a split call, whose end names the file, not a request */
};

struct mpiio_state {
    struct mfile *files;
    long long nfiles;
    struct pending *pending;
    int npending, room;
    MPI_Comm *comms; /* per group of the script; MPI_COMM_NULL until the group's first open */
    int warned;      /* the individual pointer was placed unseen with the tracer following it (said once) */
};

/* ---- state ---- */

static struct mpiio_state *state(struct replayer *r) {
    if (r->mpiio) return r->mpiio;
    struct mpiio_state *m = calloc(1, sizeof *m);
    int groups = r->script->ngroups;
    if (m && groups) m->comms = malloc((size_t)groups * sizeof *m->comms);
    for (int i = 0; m && m->comms && i < groups; i++) m->comms[i] = MPI_COMM_NULL;
    return r->mpiio = m;
}

static struct mfile *file_of(struct replayer *r, long long handle) {
    struct mpiio_state *m = state(r);
    if (!m || handle < 0) return NULL;
    if (handle >= m->nfiles) {
        long long n = handle + 16;
        struct mfile *files = realloc(m->files, (size_t)n * sizeof *files);
        if (!files) return NULL;
        for (long long i = m->nfiles; i < n; i++) files[i] = (struct mfile){MPI_FILE_NULL, 0, 1, -1};
        m->files = files, m->nfiles = n;
    }
    return &m->files[handle];
}

/* The open file of a recorded handle; NULL when the replay did not open it. */
static struct mfile *open_file(struct replayer *r, long long handle) {
    struct mfile *f = file_of(r, handle);
    return f && f->fh != MPI_FILE_NULL ? f : NULL;
}

/* The communicator of group g: world or self when it is all processes or this one, else made from the group
 * (MPI_Comm_create_group: collective over the group's members only, who all reach this open). */
static MPI_Comm comm_of(struct replayer *r, long long g) {
    const struct script *s = r->script;
    struct mpiio_state *m = state(r);
    if (!m || g < 0 || g >= s->ngroups || !m->comms) return MPI_COMM_NULL;
    const struct group *group = &s->groups[g];
    if (group->size == s->processes) return MPI_COMM_WORLD;
    if (group->size == 1 && group->members[0] == s->process) return MPI_COMM_SELF;
    if (m->comms[g] == MPI_COMM_NULL) {
        MPI_Group world, members;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_incl(world, group->size, group->members, &members);
        MPI_Comm_create_group(MPI_COMM_WORLD, members, (int)g, &m->comms[g]);
        MPI_Group_free(&members);
        MPI_Group_free(&world);
    }
    return m->comms[g];
}

static struct pending *add_pending(struct replayer *r, long long call_id, long long handle, long long n) {
    struct mpiio_state *m = state(r);
    if (!m) return NULL;
    if (m->npending == m->room) {
        int room = m->room ? 2 * m->room : 16;
        struct pending *p = realloc(m->pending, (size_t)room * sizeof *p);
        if (!p) return NULL;
        m->pending = p, m->room = room;
    }
    char *buf = malloc((size_t)n + 1);
    if (!buf) return NULL;
    memset(buf, 'x', (size_t)n + 1);
    m->pending[m->npending] = (struct pending){call_id, MPI_REQUEST_NULL, buf, handle};
    return &m->pending[m->npending++];
}

static struct pending *find_pending(struct replayer *r, long long call_id) {
    struct mpiio_state *m = state(r);
    for (int i = 0; m && i < m->npending; i++)
        if (m->pending[i].call_id == call_id) return &m->pending[i];
    return NULL;
}

static void drop_pending(struct replayer *r, struct pending *p) {
    struct mpiio_state *m = r->mpiio;
    assert(m && p >= m->pending && p < m->pending + m->npending); /* only a request of this replayer is dropped */
    free(p->buf);
    *p = m->pending[--m->npending];
}

/* ---- offsets: the recorded first byte, in etypes of the view the replay set ---- */

/* The etype offset that puts the first byte at the recorded byte offset; -1 when the view cannot reach it. */
static long long etypes_to(const struct mfile *f, long long byte) {
    assert(f->etype > 0); /* a view's etype is at least one byte (set_view refuses others) */
    long long from = byte - f->disp;
    return byte < 0 || from < 0 || from % f->etype ? -1 : from / f->etype;
}

typedef int (*seek_fn)(MPI_File, MPI_Offset, int);

/* The MPI library's own PMPI_File_seek, not a tracer's (the tracer wraps the PMPI names too): looked up in the
 * library that defines MPI_Comm_rank, which no tool of ioloom wraps; NULL if it cannot be found. */
static seek_fn library_seek(void) {
    static seek_fn seek;
    Dl_info info;
    void *library = NULL;
    if (!seek && dladdr((void *)MPI_Comm_rank, &info) && info.dli_fname)
        library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (library) seek = (seek_fn)dlsym(library, "PMPI_File_seek");
    return seek;
}

/* Places the individual pointer at the recorded first byte when it is elsewhere (after an access through a view
 * with holes, which the replay's contiguous view does not have). The seek is the replay's, not a call of the
 * original: it is made past the tracer, and the replayer runs under MPI_THREAD_MULTIPLE, where the tracer asks the
 * library for the pointer before each call instead of following it (docs/trace-format.md, "The individual
 * pointer"), so the replay's trace records where the call took place. */
static void place_pointer(struct replayer *r, struct mfile *f, long long byte) {
    long long target = etypes_to(f, byte);
    if (target < 0 || target == f->pointer) return;
    int level = MPI_THREAD_SINGLE;
    seek_fn seek = library_seek();
    MPI_Query_thread(&level);
    if ((level != MPI_THREAD_MULTIPLE || !seek) && !r->mpiio->warned++)
        fputs("ioloom-replay: the individual pointer cannot be placed past the tracer (no MPI_THREAD_MULTIPLE, or "
              "no PMPI_File_seek in the MPI library): the replay's trace may place individual-pointer calls "
              "elsewhere than the original's\n",
              stderr);
    if (seek && seek(f->fh, (MPI_Offset)target, MPI_SEEK_SET) == MPI_SUCCESS) f->pointer = target;
}

static long long moved(int rc, MPI_Status *status) {
    MPI_Count n = -1;
    if (rc != MPI_SUCCESS || MPI_Get_elements_x(status, MPI_BYTE, &n) != MPI_SUCCESS) return -1;
    return n;
}

/* After an individual-pointer access of n bytes (the request's size for a non-blocking one). */
static void advance(struct mfile *f, long long n) {
    f->pointer = f->pointer >= 0 && n >= 0 && n % f->etype == 0 ? f->pointer + n / f->etype : -1;
}

static char *data(struct replayer *r, const struct call *c, int writing) {
    replay_bytes(r, c);
    return writing ? r->out : r->in;
}

static int writes(const char *name) { return strstr(name, "write") != NULL; }

static int count_of(const struct call *c) { return c->req > 0 ? (int)c->req : 0; }

/* ---- the file: open, close, sync, sizes, seeks, views ---- */

typedef int (*open_fn)(MPI_Comm, const char *, int, MPI_Info, MPI_File *);

/* REQ: the index of the group that opened the file together (the script's `group` line); AUX: the access mode. */
static long long m_open(struct replayer *r, const struct call *c, void *fn) {
    MPI_Comm comm = comm_of(r, c->req);
    struct mfile *f = file_of(r, c->handle);
    if (comm == MPI_COMM_NULL || !f) return -1;
    int rc = ((open_fn)fn)(comm, replay_path(r, c), (int)c->aux, MPI_INFO_NULL, &f->fh);
    *f = rc == MPI_SUCCESS ? (struct mfile){f->fh, 0, 1, 0} : (struct mfile){MPI_FILE_NULL, 0, 1, -1};
    return rc == MPI_SUCCESS ? 0 : -1;
}

static long long m_close(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    if (!f) return -1;
    int rc = ((int (*)(MPI_File *))fn)(&f->fh);
    f->fh = MPI_FILE_NULL;
    return rc == MPI_SUCCESS ? 0 : -1;
}

static long long m_file(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    return f && ((int (*)(MPI_File))fn)(f->fh) == MPI_SUCCESS ? 0 : -1;
}

/* set_size, preallocate: OFFSET is the size. */
static long long m_size(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    return f && ((int (*)(MPI_File, MPI_Offset))fn)(f->fh, (MPI_Offset)c->offset) == MPI_SUCCESS ? 0 : -1;
}

static long long m_get_size(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    MPI_Offset size = -1;
    return f && ((int (*)(MPI_File, MPI_Offset *))fn)(f->fh, &size) == MPI_SUCCESS ? size : -1;
}

/* seek, seek_shared: OFFSET as recorded (etypes), AUX the whence. The individual pointer follows a seek from the
 * start or the current place; after one from the end it is not known (the next call places it). */
static long long m_seek(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    if (!f) return -1;
    int rc = ((int (*)(MPI_File, MPI_Offset, int))fn)(f->fh, (MPI_Offset)c->offset, (int)c->aux);
    if (fn == (void *)MPI_File_seek)
        f->pointer = rc != MPI_SUCCESS                           ? -1
                     : c->aux == MPI_SEEK_SET                    ? c->offset
                     : c->aux == MPI_SEEK_CUR && f->pointer >= 0 ? f->pointer + c->offset
                                                                 : -1;
    return rc == MPI_SUCCESS ? 0 : -1;
}

static long long m_atomicity(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    return f && ((int (*)(MPI_File, int))fn)(f->fh, (int)c->aux) == MPI_SUCCESS ? 0 : -1;
}

static long long m_set_info(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    return f && ((int (*)(MPI_File, MPI_Info))fn)(f->fh, MPI_INFO_NULL) == MPI_SUCCESS ? 0 : -1;
}

/* n contiguous bytes: MPI_BYTE itself for one (a library may take a slower path for a derived type). */
static MPI_Datatype bytes_type(long long n) {
    MPI_Datatype t = MPI_BYTE;
    if (n != 1) MPI_Type_contiguous((int)n, MPI_BYTE, &t), MPI_Type_commit(&t);
    return t;
}

static void free_type(MPI_Datatype *t) {
    if (*t != MPI_BYTE) MPI_Type_free(t);
}

/* The largest etype or filetype extent a view is made with (an int count of MPI_BYTE); a larger one recorded is made
 * this size, and the call counted as approximated. */
#define MAX_VIEW_EXTENT (1LL << 30)

/* A contiguous view with the recorded displacement (OFFSET), etype extent (AUX) and filetype extent (REQ); a
 * filetype extent that is not a whole number of etypes is made one etype. A view the original failed to set (its
 * extents -1) is not set. The call is collective: it is made whatever the extents (clamped), lest the other ranks
 * wait for this one. */
static long long m_view(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    if (!f || c->aux <= 0 || c->req <= 0) return -1;
    long long e = c->aux < MAX_VIEW_EXTENT ? c->aux : MAX_VIEW_EXTENT;
    long long ft = c->req % e || c->req > MAX_VIEW_EXTENT ? e : c->req;
    r->approximated += c->aux > MAX_VIEW_EXTENT || c->req > MAX_VIEW_EXTENT;
    MPI_Datatype etype = bytes_type(e), filetype = bytes_type(ft);
    int rc = ((int (*)(MPI_File, MPI_Offset, MPI_Datatype, MPI_Datatype, const char *, MPI_Info))fn)(
        f->fh, (MPI_Offset)c->offset, etype, filetype, "native", MPI_INFO_NULL);
    free_type(&etype);
    free_type(&filetype);
    if (rc == MPI_SUCCESS) f->disp = c->offset, f->etype = e, f->pointer = 0;
    return rc == MPI_SUCCESS ? 0 : -1;
}

/* ---- blocking data calls ---- */

typedef int (*at_fn)(MPI_File, MPI_Offset, void *, int, MPI_Datatype, MPI_Status *);
typedef int (*here_fn)(MPI_File, void *, int, MPI_Datatype, MPI_Status *);

/* The etype offset of a call's recorded first byte (etypes_to), -1 when the view cannot reach it; a collective call
 * that cannot reach it is made all the same, as no bytes at offset 0 (*count 0), lest the other ranks wait for this
 * one, and counted as approximated. */
static long long offset_of(struct replayer *r, const struct mfile *f, const struct call *c, int *count) {
    long long at = f ? etypes_to(f, c->offset) : -1;
    *count = count_of(c);
    if (at >= 0 || !f || !strstr(c->entry->name, "_all")) return at;
    r->approximated++;
    *count = 0;
    return 0;
}

/* read_at, write_at and their _all: the recorded first byte, in etypes of the view. */
static long long m_at(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    int count;
    long long at = offset_of(r, f, c, &count);
    if (at < 0) return -1;
    MPI_Status status;
    char *buf = data(r, c, writes(c->entry->name));
    return moved(((at_fn)fn)(f->fh, (MPI_Offset)at, buf, count, MPI_BYTE, &status), &status);
}

/* read, write and their _all: the individual pointer, placed at the recorded first byte. */
static long long m_here(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    if (!f) return -1;
    place_pointer(r, f, c->offset);
    MPI_Status status;
    char *buf = data(r, c, writes(c->entry->name));
    long long n = moved(((here_fn)fn)(f->fh, buf, count_of(c), MPI_BYTE, &status), &status);
    advance(f, n);
    return n;
}

/* _shared, _ordered: where the shared pointer is (the trace has no offset for them). */
static long long m_shared(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    if (!f) return -1;
    MPI_Status status;
    char *buf = data(r, c, writes(c->entry->name));
    return moved(((here_fn)fn)(f->fh, buf, count_of(c), MPI_BYTE, &status), &status);
}

/* ---- non-blocking and split calls (AUX: the initiation's recorded call id), completions ---- */

typedef int (*iat_fn)(MPI_File, MPI_Offset, void *, int, MPI_Datatype, MPI_Request *);
typedef int (*ihere_fn)(MPI_File, void *, int, MPI_Datatype, MPI_Request *);

/* The initiation's result: -1 (the trace's "not known yet") when it started, -2 when it failed. */
static long long started(int rc) { return rc == MPI_SUCCESS ? -1 : -2; }

static long long m_iat(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    int count;
    long long at = offset_of(r, f, c, &count);
    struct pending *p = at >= 0 ? add_pending(r, c->aux, c->handle, count) : NULL;
    if (!p) return -2;
    return started(((iat_fn)fn)(f->fh, (MPI_Offset)at, p->buf, count, MPI_BYTE, &p->request));
}

/* iread, iwrite, their _all and _shared: the individual pointer moves by the request at the initiation. */
static long long m_ihere(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    struct pending *p = f ? add_pending(r, c->aux, c->handle, count_of(c)) : NULL;
    if (!p) return -2;
    int individual = strstr(c->entry->name, "_shared") == NULL;
    if (individual) place_pointer(r, f, c->offset);
    int rc = ((ihere_fn)fn)(f->fh, p->buf, count_of(c), MPI_BYTE, &p->request);
    if (individual) advance(f, rc == MPI_SUCCESS ? count_of(c) : -1);
    return started(rc);
}

static long long m_at_begin(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    int count;
    long long at = offset_of(r, f, c, &count);
    struct pending *p = at >= 0 ? add_pending(r, c->aux, c->handle, count) : NULL;
    if (!p) return -2;
    return started(
        ((int (*)(MPI_File, MPI_Offset, void *, int, MPI_Datatype))fn)(f->fh, (MPI_Offset)at, p->buf, count, MPI_BYTE));
}

/* read_all_begin, write_all_begin (individual pointer) and the _ordered ones (shared pointer). */
static long long m_begin(struct replayer *r, const struct call *c, void *fn) {
    struct mfile *f = open_file(r, c->handle);
    struct pending *p = f ? add_pending(r, c->aux, c->handle, count_of(c)) : NULL;
    if (!p) return -2;
    int individual = strstr(c->entry->name, "_ordered") == NULL;
    if (individual) place_pointer(r, f, c->offset);
    int rc = ((int (*)(MPI_File, void *, int, MPI_Datatype))fn)(f->fh, p->buf, count_of(c), MPI_BYTE);
    if (individual) advance(f, rc == MPI_SUCCESS ? count_of(c) : -1);
    return started(rc);
}

/* The split call's end, on the file its begin used. */
static long long m_end(struct replayer *r, const struct call *c, void *fn) {
    struct pending *p = find_pending(r, c->aux);
    struct mfile *f = p ? open_file(r, p->handle) : NULL;
    if (!f) return -1;
    MPI_Status status;
    long long n = moved(((int (*)(MPI_File, void *, MPI_Status *))fn)(f->fh, p->buf, &status), &status);
    drop_pending(r, p);
    return n;
}

/* One completion event: the completion call the original made, on the one request it completed (a Waitall of
 * several made one event per request: each is made as a call of its own). Tests are repeated until the request
 * completes: a test that completes nothing records no event. */
static int complete(void *fn, MPI_Request *q, MPI_Status *status) {
    int flag = 0, index, done = 0;
    if (fn == (void *)MPI_Wait) return MPI_Wait(q, status);
    if (fn == (void *)MPI_Waitall) return MPI_Waitall(1, q, status);
    if (fn == (void *)MPI_Waitany) return MPI_Waitany(1, q, &index, status);
    if (fn == (void *)MPI_Waitsome) return MPI_Waitsome(1, q, &done, &index, status);
    int rc = MPI_SUCCESS;
    while (rc == MPI_SUCCESS && !flag && !done) {
        if (fn == (void *)MPI_Test) rc = MPI_Test(q, &flag, status);
        if (fn == (void *)MPI_Testall) rc = MPI_Testall(1, q, &flag, status);
        if (fn == (void *)MPI_Testany) rc = MPI_Testany(1, q, &index, &flag, status);
        if (fn == (void *)MPI_Testsome) rc = MPI_Testsome(1, q, &done, &index, status);
    }
    return rc;
}

static long long m_complete(struct replayer *r, const struct call *c, void *fn) {
    struct pending *p = find_pending(r, c->aux);
    if (!p) return -1;
    MPI_Status status;
    long long n = moved(complete(fn, &p->request, &status), &status);
    drop_pending(r, p);
    return n;
}

#define MCALL(name, run) {#name, run, (void *)name, 0}
#define MDATA(name, run) {#name, run, (void *)name, 1}

const struct entry replay_mpiio_table[] = {
    MCALL(MPI_File_open, m_open),
    MCALL(MPI_File_close, m_close),
    MCALL(MPI_File_sync, m_file),
    MCALL(MPI_File_set_size, m_size),
    MCALL(MPI_File_preallocate, m_size),
    MDATA(MPI_File_get_size, m_get_size),
    MCALL(MPI_File_seek, m_seek),
    MCALL(MPI_File_seek_shared, m_seek),
    MCALL(MPI_File_set_view, m_view),
    MCALL(MPI_File_set_atomicity, m_atomicity),
    MCALL(MPI_File_set_info, m_set_info),
    MDATA(MPI_File_read_at, m_at),
    MDATA(MPI_File_write_at, m_at),
    MDATA(MPI_File_read_at_all, m_at),
    MDATA(MPI_File_write_at_all, m_at),
    MDATA(MPI_File_read, m_here),
    MDATA(MPI_File_write, m_here),
    MDATA(MPI_File_read_all, m_here),
    MDATA(MPI_File_write_all, m_here),
    MDATA(MPI_File_read_shared, m_shared),
    MDATA(MPI_File_write_shared, m_shared),
    MDATA(MPI_File_read_ordered, m_shared),
    MDATA(MPI_File_write_ordered, m_shared),
    MDATA(MPI_File_iread_at, m_iat),
    MDATA(MPI_File_iwrite_at, m_iat),
    MDATA(MPI_File_iread_at_all, m_iat),
    MDATA(MPI_File_iwrite_at_all, m_iat),
    MDATA(MPI_File_iread, m_ihere),
    MDATA(MPI_File_iwrite, m_ihere),
    MDATA(MPI_File_iread_all, m_ihere),
    MDATA(MPI_File_iwrite_all, m_ihere),
    MDATA(MPI_File_iread_shared, m_ihere),
    MDATA(MPI_File_iwrite_shared, m_ihere),
    MDATA(MPI_File_read_at_all_begin, m_at_begin),
    MDATA(MPI_File_write_at_all_begin, m_at_begin),
    MDATA(MPI_File_read_all_begin, m_begin),
    MDATA(MPI_File_write_all_begin, m_begin),
    MDATA(MPI_File_read_ordered_begin, m_begin),
    MDATA(MPI_File_write_ordered_begin, m_begin),
    MDATA(MPI_File_read_at_all_end, m_end),
    MDATA(MPI_File_write_at_all_end, m_end),
    MDATA(MPI_File_read_all_end, m_end),
    MDATA(MPI_File_write_all_end, m_end),
    MDATA(MPI_File_read_ordered_end, m_end),
    MDATA(MPI_File_write_ordered_end, m_end),
    MDATA(MPI_Wait, m_complete),
    MDATA(MPI_Waitall, m_complete),
    MDATA(MPI_Waitany, m_complete),
    MDATA(MPI_Waitsome, m_complete),
    MDATA(MPI_Test, m_complete),
    MDATA(MPI_Testall, m_complete),
    MDATA(MPI_Testany, m_complete),
    MDATA(MPI_Testsome, m_complete),
};
const int replay_mpiio_entries = sizeof replay_mpiio_table / sizeof *replay_mpiio_table;
