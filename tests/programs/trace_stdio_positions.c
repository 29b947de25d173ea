/* A seeded random sequence of stdio calls on one stream: fprintf, fwrite, fputs, fputc, fread, fgets, getc,
 * fgetc, and between them the moves a tracer does not see as calls: glibc's inline putc_unlocked and
 * getc_unlocked, fflush of the stream and of all streams, ungetc, fscanf; the direction changes through fseek,
 * rewind or fflush as C requires. Before each call the tracer records, it logs where the stream stood, as libc's
 * own ftello says (called in libc itself, so that the tracer's ftello wrapper learns nothing from it).
 *
 * usage: trace_stdio_positions FILE SEED STEPS LOG    (LOG lines: "call offset") */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static off_t (*true_ftello)(FILE *);
static FILE *log_file;

/* The position before a recorded call, logged with the call's name. */
static void note(const char *call, FILE *fp) { fprintf(log_file, "%s %lld\n", call, (long long)true_ftello(fp)); }

static void write_step(FILE *fp, unsigned *seed) {
    static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\n";
    size_t n = 1 + rand_r(seed) % 60;
    switch (rand_r(seed) % 7) {
        case 0:
            note("fprintf", fp);
            fprintf(fp, "%0*d\n", (int)n, (int)n);
            break;
        case 1:
            note("fwrite", fp);
            fwrite(text, 1, n, fp);
            break;
        case 2:
            note("fputs", fp);
            fputs(text + 70 - n % 70, fp);
            break;
        case 3:
            note("fputc", fp);
            fputc('x', fp);
            break;
        case 4:
            for (size_t i = 0; i < n * 40; i++) putc_unlocked('y', fp);
            break; /* inline, crossing buffers */
        case 5:
            fflush(fp);
            break;
        default:
            fflush(NULL);
    }
}

static void read_step(FILE *fp, unsigned *seed) {
    char buf[512];
    size_t n = 1 + rand_r(seed) % 200;
    int value;
    switch (rand_r(seed) % 7) {
        case 0:
            note("fread", fp);
            if (fread(buf, 1, n, fp)) {
            }
            break;
        case 1:
            note("fgets", fp);
            if (fgets(buf, (int)n, fp)) {
            }
            break;
        case 2:
            note("getc", fp);
            getc(fp);
            break;
        case 3:
            note("fgetc", fp);
            fgetc(fp);
            break;
        case 4:
            for (size_t i = 0; i < n * 40; i++) getc_unlocked(fp);
            break; /* inline, crossing buffers */
        case 5:
            if (getc_unlocked(fp) != EOF) ungetc('u', fp);
            break;
        default:
            if (fscanf(fp, "%d", &value)) {
            }
    }
}

/* Changing direction, as C requires: a seek (to here, or somewhere else) or, from writing, a flush. */
static void turn(FILE *fp, unsigned *seed, int to_reading) {
    switch (rand_r(seed) % 4) {
        case 0:
            fseeko(fp, 0, SEEK_CUR);
            break;
        case 1:
            fseeko(fp, rand_r(seed) % 20000, SEEK_SET);
            break;
        case 2:
            rewind(fp);
            break;
        default:
            if (to_reading)
                fflush(fp);
            else
                fseeko(fp, -(off_t)(rand_r(seed) % 50), SEEK_END);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s FILE SEED STEPS LOG\n", argv[0]);
        return 2;
    }
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    true_ftello = libc ? (off_t (*)(FILE *))dlsym(libc, "ftello") : NULL;
    unsigned seed = (unsigned)atoi(argv[2]);
    int steps = atoi(argv[3]);
    FILE *fp = fopen(argv[1], "w+");
    log_file = fopen(argv[4], "w");
    if (!true_ftello || !fp || !log_file) return 1;
    int reading = 0;
    for (int i = 0; i < steps; i++) {
        if (rand_r(&seed) % 8 == 0) {
            turn(fp, &seed, !reading);
            reading = !reading;
        }
        if (reading)
            read_step(fp, &seed);
        else
            write_step(fp, &seed);
    }
    fclose(fp);
    return fclose(log_file) != 0;
}
