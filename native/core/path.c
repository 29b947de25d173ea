/* Path text shared by the preloaded libraries. Pure string work: no I/O, so it is safe inside any wrapper. */
#include <string.h>

#include "ioloom_core.h"

void ioloom_normalise_path(char *path) {
    char *out = path;
    for (const char *in = path; *in;) {
        while (*in == '/') in++;
        const char *end = strchrnul(in, '/');
        size_t len = (size_t)(end - in);
        if (len == 1 && in[0] == '.') {
        } else if (len == 2 && in[0] == '.' && in[1] == '.') {
            while (out > path && *--out != '/') {
            }
        } else if (len) {
            *out++ = '/';
            memmove(out, in, len);
            out += len;
        }
        in = end;
    }
    if (out == path) *out++ = '/';
    *out = 0;
}

const char *ioloom_romio_path(const char *name) {
    size_t word = strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_");
    return word >= 2 && name[word] == ':' && name[word + 1] ? name + word + 1 : name;
}
