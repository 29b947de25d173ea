/* A trajectory dump as molecular-dynamics codes write one: per frame a header and one line per atom through
 * fprintf, an end-of-frame mark through glibc's inline putc_unlocked, and fflush, strictly in order.
 *
 * usage: trajectory FILE FRAMES */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    FILE *out = fopen(argv[1], "w");
    if (!out) return 1;
    for (int frame = 0; frame < atoi(argv[2]); frame++) {
        fprintf(out, "ITEM: TIMESTEP %d\n", frame);
        for (int atom = 0; atom < 50; atom++) fprintf(out, "%d %.4f %.4f %.4f\n", atom, atom * 0.5, frame * 0.25, 1.0);
        putc_unlocked('\n', out);
        fflush(out);
    }
    return fclose(out) != 0;
}
