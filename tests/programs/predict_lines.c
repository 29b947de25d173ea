/* Reads a text file line by line with fgets, as LAMMPS reads its input script: writes FILE with LINES lines of 1 to
 * 47 characters (lengths from a fixed pseudo-random sequence), then opens it, reads it to its end with fgets into a
 * 255-byte buffer and closes it. Each fgets asks for 255 bytes and moves one line, so where a read ended is told by
 * the bytes it moved, not by those it asked (docs/predict.md, version 1.4). usage: predict_lines FILE LINES */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    static const char text[] = "units lj atom_style atomic lattice fcc 0.8442 region box";
    if (argc != 3) return 2;
    FILE *f = fopen(argv[1], "w");
    if (!f) return 1;
    unsigned seed = 7;
    for (int line = atoi(argv[2]); line > 0; line--) {
        seed = seed * 1103515245u + 12345u;
        fprintf(f, "%.*s\n", 1 + (int)((seed >> 16) % 47), text);
    }
    if (fclose(f) != 0 || !(f = fopen(argv[1], "r"))) return 1;
    char buffer[255];
    while (fgets(buffer, sizeof buffer, f)) continue;
    return fclose(f) != 0;
}
