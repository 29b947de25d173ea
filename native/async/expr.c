/* Integer expressions of libioloom-async's configurations, as Damaris's layouts are written over parameters (seed
 * 002 Ch. 4, "WIDTH/size"): integers, the configuration's parameters, the names rank (a client's rank among the
 * clients: its block) and clients (how many there are) where the scope allows them, + - * / % with C's
 * precedence, unary minus and parentheses. Arithmetic is on 64-bit integers; overflow and division by zero are
 * errors; / and % round towards zero as C's do. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "async_internal.h"

struct parser {
    const char *text, *p;
    const struct async_scope *scope;
    char *why;
    int failed;
};

static long long oops(struct parser *s, const char *fmt, ...) {
    char what[ASYNC_MSG_MAX / 2];
    va_list ap;
    if (s->failed++) return 0; /* the first mistake is the one reported */
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(s->why, ASYNC_MSG_MAX, "%.200s in '%.120s'", what, s->text);
    return 0;
}

static void blanks(struct parser *s) {
    while (isspace((unsigned char)*s->p)) s->p++;
}

static long long expression(struct parser *s);

static long long name_value(struct parser *s, const char *name, size_t n) {
    const struct async_scope *sc = s->scope;
    if (n == 4 && strncmp(name, "rank", 4) == 0)
        return sc->rank_allowed ? sc->rank : oops(s, "rank (a block's own) cannot be used here");
    if (n == 7 && strncmp(name, "clients", 7) == 0)
        return sc->clients_allowed ? sc->clients : oops(s, "clients cannot be used here");
    for (int i = 0; i < sc->nparameters; i++)
        if (strlen(sc->parameters[i].name) == n && strncmp(sc->parameters[i].name, name, n) == 0)
            return sc->parameters[i].value;
    return oops(s, "unknown parameter '%.*s' (declare it under parameters, before its use)", (int)n, name);
}

static long long primary(struct parser *s) {
    blanks(s);
    const char *start = s->p;
    long long v = 0;
    if (*s->p == '(') {
        s->p++;
        v = expression(s);
        blanks(s);
        return *s->p == ')' ? (s->p++, v) : oops(s, "a ')' is missing");
    }
    if (isdigit((unsigned char)*s->p)) {
        for (; isdigit((unsigned char)*s->p); s->p++)
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s->p - '0', &v))
                return oops(s, "a number is too large");
        return v;
    }
    while (isalnum((unsigned char)*s->p) || *s->p == '_') s->p++;
    return s->p > start ? name_value(s, start, (size_t)(s->p - start))
                        : oops(s, *s->p ? "unexpected '%c'" : "an operand is missing at the end", *s->p);
}

static long long unary(struct parser *s) {
    blanks(s);
    if (*s->p != '-') return primary(s);
    s->p++;
    long long v = unary(s), r;
    return __builtin_sub_overflow(0LL, v, &r) ? oops(s, "overflow") : r;
}

static long long product(struct parser *s) {
    long long v = unary(s), w, r = 0;
    for (blanks(s); !s->failed && (*s->p == '*' || *s->p == '/' || *s->p == '%'); blanks(s)) {
        char op = *s->p++;
        w = unary(s);
        if (op == '*' && __builtin_mul_overflow(v, w, &r)) return oops(s, "overflow");
        if (op != '*' && w == 0 && !s->scope->checking) return oops(s, "division by zero");
        if (op != '*' && v == INT64_MIN && w == -1) return oops(s, "overflow");
        /* checking (no run yet): a zero divisor is this check's stand-in values; the rest is still parsed */
        v = op == '*' ? r : w == 0 ? 0 : op == '/' ? v / w : v % w;
    }
    return v;
}

static long long expression(struct parser *s) {
    long long v = product(s), w;
    for (blanks(s); !s->failed && (*s->p == '+' || *s->p == '-'); blanks(s)) {
        char op = *s->p++;
        w = product(s);
        if (op == '+' ? __builtin_add_overflow(v, w, &v) : __builtin_sub_overflow(v, w, &v)) return oops(s, "overflow");
    }
    return v;
}

int async_expr_eval(const char *text, const struct async_scope *scope, long *out, char why[ASYNC_MSG_MAX]) {
    struct parser s = {text, text, scope, why, 0};
    long long v = expression(&s);
    blanks(&s);
    if (!s.failed && *s.p) oops(&s, "unexpected '%c'", *s.p);
    *out = (long)v;
    return s.failed ? -1 : 0;
}
