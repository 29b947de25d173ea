/* Parallel HDF5 over MPI-IO: every rank writes ROWS x COLS ints of one 2-D dataset, collectively, then reads
 * them back independently. HDF5 reaches the file through MPI_File_* calls, which the tracer must see.
 * Built with h5pcc (MPICH). Usage: mpiio_hdf5 FILE */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>

#define ROWS 50
#define COLS 100

static int rank, nranks;

static hid_t rank_slab(hid_t dataset) {
    hid_t space = H5Dget_space(dataset);
    hsize_t start[2] = {(hsize_t)rank * ROWS, 0}, count[2] = {ROWS, COLS};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    return space;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 2) MPI_Abort(MPI_COMM_WORLD, 2);
    static int out[ROWS][COLS], in[ROWS][COLS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) out[r][c] = rank * 1000003 + r * COLS + c;

    hid_t access = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(access, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, access);
    hsize_t dims[2] = {(hsize_t)nranks * ROWS, COLS}, count[2] = {ROWS, COLS};
    hid_t filespace = H5Screate_simple(2, dims, NULL);
    hid_t dataset = H5Dcreate2(file, "data", H5T_NATIVE_INT, filespace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t memspace = H5Screate_simple(2, count, NULL);
    hid_t slab = rank_slab(dataset);
    hid_t collective = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(collective, H5FD_MPIO_COLLECTIVE);
    herr_t written = H5Dwrite(dataset, H5T_NATIVE_INT, memspace, slab, collective, out);
    herr_t read = H5Dread(dataset, H5T_NATIVE_INT, memspace, slab, H5P_DEFAULT, in);
    H5Pclose(collective);
    H5Sclose(slab);
    H5Sclose(memspace);
    H5Dclose(dataset);
    H5Sclose(filespace);
    H5Fclose(file);
    H5Pclose(access);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
            if (written < 0 || read < 0 || in[r][c] != out[r][c]) {
                fprintf(stderr, "rank %d: wrong data at %d,%d\n", rank, r, c);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
    if (rank == 0) printf("mpiio_hdf5: %d ranks ok\n", nranks);
    MPI_Finalize();
    return 0;
}
