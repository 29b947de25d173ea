/* The open MPI files: MPI_File -> file id, handle number, view, collective counter; and the sizes of the
 * datatypes data calls name. */
#include <stdlib.h>

#include "mpiio.h"

struct mpiio_file mpiio_files[MPIIO_MAX_FILES];
struct key_table mpiio_file_slots = KEY_TABLE(MPIIO_MAX_FILES);

__thread long mpiio_last_found = -1;
int mpiio_pointer_followed = 1;

struct mpiio_file *mpiio_file_find_slowly(MPI_File fh) {
    long slot = key_table_find(&mpiio_file_slots, mpiio_file_key(fh));
    if (slot >= 0) mpiio_last_found = slot;
    return slot < 0 ? NULL : &mpiio_files[slot];
}

struct mpiio_file *mpiio_file_add(MPI_File fh) {
    /* A handle still in the table was closed where we could not see it (the MPI library reuses handles):
     * that entry is stale, drop it. */
    struct mpiio_file *stale = mpiio_file_find(fh);
    if (stale) mpiio_file_remove(stale);
    long slot = key_table_reserve(&mpiio_file_slots, mpiio_file_key(fh));
    if (slot < 0) return NULL;
    mpiio_files[slot] = (struct mpiio_file){
        .fh = fh, .file_id = -1, .handle = -1, .etype_size = 1, .contiguous_view = 1, .pointer = -1};
    key_table_publish(&mpiio_file_slots, slot);
    return &mpiio_files[slot];
}

void mpiio_file_remove(struct mpiio_file *file) {
    free(file->path);
    file->path = NULL;
    key_table_remove(&mpiio_file_slots, file - mpiio_files);
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

/* ---- datatype sizes (mpiio.h) ---- */
volatile uint64_t mpiio_types_freed = 1;
__thread struct mpiio_last_type mpiio_last_type;

MPI_Count mpiio_type_size_asked(MPI_Datatype datatype) {
    uint64_t freed = __atomic_load_n(&mpiio_types_freed, __ATOMIC_ACQUIRE);
    MPI_Count size = 0;
    int known = PMPI_Type_size_x(datatype, &size) == MPI_SUCCESS;
    mpiio_last_type = (struct mpiio_last_type){datatype, known ? freed : 0, known ? size : 0};
    return known ? size : 0;
}

static int traced_MPI_Type_free(__typeof__(&PMPI_Type_free) next, MPI_Datatype *type) {
    __atomic_add_fetch(&mpiio_types_freed, 1, __ATOMIC_RELEASE);
    int rc = next(type);
    __atomic_add_fetch(&mpiio_types_freed, 1, __ATOMIC_RELEASE);
    return rc;
}
MPIIO_BOTH_NAMES(MPI_Type_free, (MPI_Datatype * type), (type))
