/* The open MPI files: MPI_File -> file id, handle number, view, collective counter; and the sizes of the
 * datatypes data calls name. */
#include <stdlib.h>

#include "mpiio.h"
#include "key_table.h"

#define MPIIO_MAX_FILES 1024 /* open at once per process; beyond it, files are passed through untraced */

static struct mpiio_file files[MPIIO_MAX_FILES];
static struct key_table file_slots = KEY_TABLE(MPIIO_MAX_FILES);

static uint64_t file_key(MPI_File fh) { return (uint64_t)(uintptr_t)fh; }

/* The slot this thread found last: programs call on one file many times in a row. */
static __thread long last_found = -1;

struct mpiio_file *mpiio_file_find(MPI_File fh) {
    uint64_t key = file_key(fh);
    if (key_table_holds(&file_slots, last_found, key)) return &files[last_found];
    long slot = key_table_find(&file_slots, key);
    if (slot >= 0) last_found = slot;
    return slot < 0 ? NULL : &files[slot];
}

struct mpiio_file *mpiio_file_add(MPI_File fh) {
    /* A handle still in the table was closed where we could not see it (the MPI library reuses handles):
     * that entry is stale, drop it. */
    struct mpiio_file *stale = mpiio_file_find(fh);
    if (stale) mpiio_file_remove(stale);
    long slot = key_table_reserve(&file_slots, file_key(fh));
    if (slot < 0) return NULL;
    files[slot] = (struct mpiio_file){.fh = fh, .file_id = -1, .handle = -1, .etype_size = 1, .contiguous_view = 1};
    key_table_publish(&file_slots, slot);
    return &files[slot];
}

void mpiio_file_remove(struct mpiio_file *file) {
    free(file->path);
    file->path = NULL;
    key_table_remove(&file_slots, file - files);
}

void mpiio_file_set_view(struct mpiio_file *file, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype) {
    MPI_Count etype_size = 1, filetype_size = 0, lb = 0, extent = 0;
    PMPI_Type_size_x(etype, &etype_size);
    PMPI_Type_size_x(filetype, &filetype_size);
    PMPI_Type_get_extent_x(filetype, &lb, &extent);
    file->disp = disp;
    file->etype_size = etype_size > 0 ? etype_size : 1;
    /* A filetype whose data fill its whole extent from 0 tiles the file without holes. */
    file->contiguous_view = lb == 0 && filetype_size == extent;
}

int64_t mpiio_file_next_coll(struct mpiio_file *file) {
    return file->coll_base | __atomic_fetch_add(&file->coll_count, 1, __ATOMIC_RELAXED);
}

/* The open counter lives in an attribute cached on the communicator: MPI_File_open is collective, so every
 * rank of the communicator counts the same opens, and the counter dies with the communicator. */
static int open_counter_key = MPI_KEYVAL_INVALID;

static int free_open_counter(MPI_Comm comm, int key, void *value, void *extra) {
    (void)comm, (void)key, (void)extra;
    free(value);
    return MPI_SUCCESS;
}

int64_t mpiio_comm_next_open(MPI_Comm comm) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int64_t number = 0;
    if (comm == MPI_COMM_NULL) /* an erroneous open: let the MPI library report it, not our attribute calls */
        return 0;
    pthread_mutex_lock(&lock);
    if (open_counter_key == MPI_KEYVAL_INVALID)
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_open_counter, &open_counter_key, NULL);
    int64_t *counter = NULL;
    int found = 0;
    PMPI_Comm_get_attr(comm, open_counter_key, &counter, &found);
    if (!found) {
        counter = calloc(1, sizeof *counter);
        if (counter) PMPI_Comm_set_attr(comm, open_counter_key, counter);
    }
    if (counter) number = (*counter)++;
    pthread_mutex_unlock(&lock);
    return number;
}

/* ---- datatype sizes ----
 * Every data call needs its datatype's size (requested bytes), and PMPI_Type_size_x costs about 85
 * instructions in MPICH. Each thread remembers the last datatype it asked about: a handle names the same type
 * until MPI_Type_free, which moves types_freed (before and after the free, so that no thread keeps the old
 * size of a handle the library hands out again). */
static volatile uint64_t types_freed;
static __thread struct {
    MPI_Datatype type;
    uint64_t freed;
    MPI_Count size;
    int known;
} last_type;

MPI_Count mpiio_type_size(MPI_Datatype datatype) {
    uint64_t freed = __atomic_load_n(&types_freed, __ATOMIC_ACQUIRE);
    if (IOLOOM_LIKELY(last_type.known && last_type.type == datatype && last_type.freed == freed)) return last_type.size;
    MPI_Count size = 0;
    int known = PMPI_Type_size_x(datatype, &size) == MPI_SUCCESS;
    last_type.type = datatype;
    last_type.freed = freed;
    last_type.size = size;
    last_type.known = known;
    return size;
}

static int traced_MPI_Type_free(__typeof__(&PMPI_Type_free) next, MPI_Datatype *type) {
    __atomic_add_fetch(&types_freed, 1, __ATOMIC_RELEASE);
    int rc = next(type);
    __atomic_add_fetch(&types_freed, 1, __ATOMIC_RELEASE);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Type_free, (MPI_Datatype * type), (type))
