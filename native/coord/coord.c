/* ioloom coord's C client: the line protocol of docs/coord.md (version 1) over a Unix socket (or TCP, for a
 * cluster's coordinator: tcp:HOST:PORT), under the handle's mutex. The client asks NOTIFY after HELLO, so the
 * coordinator notes every change of its authorisation (NOTE lines). Only a phase's announcement waits for its reply
 * (one round trip per phase: whether it may write at once). An inform with unchanged estimates reads the lines already
 * there instead of asking; new estimates of an announced phase, the released bytes and a done are sent without
 * waiting for their replies (read later, like notes: a phase placed again behind another learns it at its next
 * inform, as an interrupted one does). Released bytes are reported once they reach 1/IOLOOM_COORD_REPORT_PARTS of the
 * phase's, IOLOOM_COORD_REPORT_SECONDS after the last request, or with any request sent: each report wakes the
 * coordinator, which a report per write made the writer pay. Any failure to talk (connect, send, receive, a reply not
 * understood) marks the handle lost: the socket is closed and every later call authorises, counted once. */
#include "ioloom_coord.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define IOLOOM_COORD_PROTOCOL 1
#define IOLOOM_COORD_LEVELS 16          /* prepare levels kept; deeper ones count but add no estimate */
#define IOLOOM_COORD_REPLY_SECONDS 10.0 /* a non-blocking request unanswered this long: the coordinator is lost */
#define IOLOOM_COORD_LINE 512           /* bytes of received lines buffered */
#define IOLOOM_COORD_REPORT_PARTS 8     /* released bytes are reported at 1/this of the phase's bytes, */
#define IOLOOM_COORD_REPORT_SECONDS 1.0 /* or this long after the last request (well inside a coordinator's lease) */

struct ioloom_coord {
    pthread_mutex_t lock;
    int fd;       /* -1: lost (or never reached) */
    double bound; /* seconds one wait may last */
    int depth;    /* prepare levels pushed */
    uint64_t bytes[IOLOOM_COORD_LEVELS];
    double seconds[IOLOOM_COORD_LEVELS];
    int announced;       /* an INFORM was sent since the stack was last empty */
    uint64_t sent_bytes; /* the estimates of the last INFORM */
    double sent_seconds;
    int go;                     /* the latest authorisation read (reply or note): 1 GO, 0 WAIT */
    int unread;                 /* replies to requests not waited for, not read yet */
    uint64_t unsent;            /* bytes released and not reported yet */
    double sent_at;             /* when the last request was sent */
    char in[IOLOOM_COORD_LINE]; /* received bytes not yet taken as lines */
    size_t in_len;
    struct ioloom_coord_counters counters;
};

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void default_address(char *out, size_t size) {
    const char *env = getenv("IOLOOM_COORD"), *runtime = getenv("XDG_RUNTIME_DIR");
    if (env && *env)
        snprintf(out, size, "%s", env);
    else if (runtime && *runtime)
        snprintf(out, size, "%s/ioloom-coord.sock", runtime);
    else
        snprintf(out, size, "/tmp/ioloom-coord-%u.sock", (unsigned)getuid());
}

static void lose(ioloom_coord *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->counters.lost = 1;
}

static int connect_unix(const char *address) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *path = strncmp(address, "unix:", 5) == 0 ? address + 5 : address;
    if (strlen(path) >= sizeof sa.sun_path) return -1;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A TCP connection to host:port, each request sent at once (no Nagle delay on these short lines); a connection
 * not made within IOLOOM_COORD_REPLY_SECONDS fails (connect honours the send timeout). -1 on failure. */
static int connect_tcp(const char *host_port) {
    char host[256];
    const char *colon = strrchr(host_port, ':');
    if (!colon || colon == host_port || (size_t)(colon - host_port) >= sizeof host) return -1;
    int bracketed = host_port[0] == '[' && colon[-1] == ']';
    snprintf(host, sizeof host, "%.*s", (int)(colon - host_port) - 2 * bracketed, host_port + bracketed);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *found = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &found) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *a = found; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        struct timeval tv = {.tv_sec = (time_t)IOLOOM_COORD_REPLY_SECONDS};
        if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    return fd;
}

static void set_reply_timeout(int fd, double seconds) {
    struct timeval tv = {.tv_sec = (time_t)seconds, .tv_usec = (suseconds_t)((seconds - (time_t)seconds) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

static int send_all(int fd, const char *text, size_t n) {
    while (n > 0) {
        ssize_t sent = send(fd, text, n, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) return -1;
        text += sent;
        n -= (size_t)sent;
    }
    return 0;
}

/* Take one complete line from the buffer into `line` (without its newline): 1, or 0 if none is complete. */
static int take_line(ioloom_coord *c, char *line, size_t size) {
    char *nl = memchr(c->in, '\n', c->in_len);
    if (!nl) return 0;
    size_t n = (size_t)(nl - c->in), copy = n < size - 1 ? n : size - 1;
    memcpy(line, c->in, copy);
    line[copy] = '\0';
    c->in_len -= n + 1;
    memmove(c->in, nl + 1, c->in_len);
    return 1;
}

/* Receive more bytes into the buffer (`flags`: 0 blocks up to the reply timeout, MSG_DONTWAIT does not);
 * 1 if some came, 0 if none were there (non-blocking), -1 on error, timeout, a closed socket or a full buffer. */
static int receive_more(ioloom_coord *c, int flags) {
    for (;;) {
        if (c->in_len == sizeof c->in) return -1; /* a line longer than any the protocol has */
        ssize_t got = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, flags);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && flags && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (got <= 0) return -1;
        c->in_len += (size_t)got;
        return 1;
    }
}

/* A line that is not the awaited reply: a note, or the reply to a request sent without waiting (a GO or WAIT
 * sets the authorisation, as a note does; a done's OK nothing). 1 if it was one of them, 0 if it is the awaited
 * reply, -1 for an ERR to a request sent without waiting. */
static int absorb(ioloom_coord *c, const char *line) {
    int note = strncmp(line, "NOTE ", 5) == 0;
    if (!note && c->unread == 0) return 0;
    if (!note && strncmp(line, "ERR", 3) == 0) return -1;
    c->unread -= !note;
    const char *word = note ? line + 5 : line;
    if (strcmp(word, "OK") != 0) c->go = strcmp(word, "GO") == 0;
    return 1;
}

/* The next line that answers the request just sent, within the reply timeout; -1 on failure. */
static int receive_reply(ioloom_coord *c, char *reply, size_t size) {
    for (;;) {
        while (take_line(c, reply, size)) {
            int absorbed = absorb(c, reply);
            if (absorbed <= 0) return absorbed;
        }
        if (receive_more(c, 0) != 1) return -1;
    }
}

/* Read the notes and release replies already received, without blocking; -1 (lost) on failure. */
static int catch_up(ioloom_coord *c) {
    char line[64];
    for (int more = 1; more == 1;) {
        more = receive_more(c, MSG_DONTWAIT);
        if (more < 0) return -1;
        while (take_line(c, line, sizeof line))
            if (absorb(c, line) != 1) return -1; /* an ERR, or a reply nobody asked for */
    }
    return 0;
}

/* Send the report of the bytes released and not reported yet (its reply read later) and `request` ("": none) in
 * one send; -1 (and the handle lost) on failure. */
static int send_request(ioloom_coord *c, const char *request) {
    char text[IOLOOM_COORD_LINE];
    int n = 0;
    if (c->unsent > 0) {
        n = snprintf(text, sizeof text, "RELEASE %llu\n", (unsigned long long)c->unsent);
        c->unsent = 0;
        c->unread++;
    }
    snprintf(text + n, sizeof text - (size_t)n, "%s", request);
    c->sent_at = now_seconds();
    if (c->fd >= 0 && send_all(c->fd, text, strlen(text)) == 0) return 0;
    lose(c);
    return -1;
}

/* Send `request`, read its reply within `seconds`; -1 (and the handle lost) on any failure or an ERR. */
static int ask(ioloom_coord *c, const char *request, double seconds, char *reply, size_t size) {
    if (c->fd < 0) return -1;
    set_reply_timeout(c->fd, seconds);
    if (send_request(c, request) != 0 || receive_reply(c, reply, size) != 0 || strncmp(reply, "ERR", 3) == 0) {
        lose(c);
        return -1;
    }
    return 0;
}

/* GO: 1, WAIT: 0; lost: 1 (fail-open). The answer is the latest authorisation. */
static int ask_go(ioloom_coord *c, const char *request, double seconds) {
    char reply[64];
    if (ask(c, request, seconds, reply, sizeof reply) != 0) return 1;
    return c->go = strcmp(reply, "GO") == 0;
}

static void hello(ioloom_coord *c, const char *name, int cores) {
    char request[160], reply[64], word[64];
    snprintf(word, sizeof word, "%s", name && *name ? name : "app");
    for (char *p = word; *p; p++) /* a name is one word of the protocol */
        if (*p == ' ' || *p == '\n' || *p == '\t') *p = '_';
    snprintf(request, sizeof request, "HELLO %d %s %d\n", IOLOOM_COORD_PROTOCOL, word, cores > 0 ? cores : 1);
    if (ask(c, request, IOLOOM_COORD_REPLY_SECONDS, reply, sizeof reply) == 0)
        ask_go(c, "NOTIFY\n", IOLOOM_COORD_REPLY_SECONDS);
}

ioloom_coord *ioloom_coord_open(const char *address, const char *name, int cores) {
    ioloom_coord *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    char where[256];
    if (address && *address)
        snprintf(where, sizeof where, "%s", address);
    else
        default_address(where, sizeof where);
    pthread_mutex_init(&c->lock, NULL);
    const char *bound = getenv("IOLOOM_COORD_WAIT");
    c->bound = bound && atof(bound) > 0 ? atof(bound) : 60.0;
    c->fd = strncmp(where, "tcp:", 4) == 0 ? connect_tcp(where + 4) : connect_unix(where);
    if (c->fd < 0)
        c->counters.lost = 1;
    else
        hello(c, name, cores);
    return c;
}

void ioloom_coord_close(ioloom_coord *c) {
    if (!c) return;
    char reply[64];
    ask(c, "BYE\n", IOLOOM_COORD_REPLY_SECONDS, reply, sizeof reply); /* ends the phase too */
    if (c->fd >= 0) close(c->fd);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void ioloom_coord_abandon(ioloom_coord *c) {
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    free(c); /* its mutex is not destroyed: the parent's thread may have held it at the fork */
}

void ioloom_coord_set_bound(ioloom_coord *c, double seconds) {
    if (c && seconds > 0) c->bound = seconds;
}

void ioloom_coord_prepare(ioloom_coord *c, uint64_t bytes, double seconds) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    if (c->depth < IOLOOM_COORD_LEVELS) {
        c->bytes[c->depth] = bytes;
        c->seconds[c->depth] = seconds > 0 ? seconds : 0;
    }
    c->depth++;
    pthread_mutex_unlock(&c->lock);
}

void ioloom_coord_revise(ioloom_coord *c, uint64_t bytes, double seconds) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    int level = c->depth - 1;
    if (level >= 0 && level < IOLOOM_COORD_LEVELS) {
        c->bytes[level] = bytes;
        c->seconds[level] = seconds > 0 ? seconds : 0;
    }
    pthread_mutex_unlock(&c->lock);
}

/* Send a request whose reply is read later (with the next reply, or caught up with by the next inform). */
static void send_unread(ioloom_coord *c, const char *request) {
    if (c->fd >= 0 && send_request(c, request) == 0) c->unread++;
}

void ioloom_coord_complete(ioloom_coord *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    if (c->depth > 0 && --c->depth == 0 && c->announced) {
        c->announced = 0;
        send_unread(c, "DONE\n");
    }
    pthread_mutex_unlock(&c->lock);
}

/* The outermost level's estimates that are given (0 where no level gives one). */
static void estimates(const ioloom_coord *c, uint64_t *bytes, double *seconds) {
    int levels = c->depth < IOLOOM_COORD_LEVELS ? c->depth : IOLOOM_COORD_LEVELS;
    *bytes = 0;
    *seconds = 0;
    for (int i = levels - 1; i >= 0; i--) {
        *bytes = c->bytes[i] ? c->bytes[i] : *bytes;
        *seconds = c->seconds[i] > 0 ? c->seconds[i] : *seconds;
    }
}

/* Announce the phase or its new estimates (the handle's lock held); the authorisation. The reply is waited for only
 * when it is not known: a new phase while another application's is announced (or the client has not been told). */
static int announce(ioloom_coord *c, uint64_t bytes, double seconds) {
    char request[96];
    snprintf(request, sizeof request, "INFORM %llu %.6f\n", (unsigned long long)bytes, seconds);
    int first = !c->announced;
    c->counters.phases += first;
    c->announced = 1;
    c->sent_bytes = bytes;
    c->sent_seconds = seconds;
    if (first) return ask_go(c, request, IOLOOM_COORD_REPLY_SECONDS);
    send_unread(c, request);
    return c->fd < 0 || c->go;
}

int ioloom_coord_inform(ioloom_coord *c) {
    if (!c) return 1;
    uint64_t bytes;
    double seconds;
    pthread_mutex_lock(&c->lock);
    estimates(c, &bytes, &seconds);
    if (c->fd >= 0 && catch_up(c) != 0) lose(c);
    int go = c->fd < 0 || c->go;
    if (c->fd >= 0 && !(c->announced && bytes == c->sent_bytes && seconds == c->sent_seconds))
        go = announce(c, bytes, seconds);
    c->counters.waits += !go;
    pthread_mutex_unlock(&c->lock);
    return go;
}

int ioloom_coord_check(ioloom_coord *c, int *authorized) {
    int go = 1;
    if (c) {
        pthread_mutex_lock(&c->lock);
        go = ask_go(c, "CHECK\n", IOLOOM_COORD_REPLY_SECONDS);
        c->counters.waits += !go;
        pthread_mutex_unlock(&c->lock);
    }
    if (authorized) *authorized = go;
    return 0;
}

int ioloom_coord_wait(ioloom_coord *c) {
    if (!c) return 1;
    char request[64], reply[64];
    pthread_mutex_lock(&c->lock);
    double start = now_seconds();
    snprintf(request, sizeof request, "WAIT %llu\n", (unsigned long long)(c->bound * 1000));
    int answered = ask(c, request, c->bound + IOLOOM_COORD_REPLY_SECONDS, reply, sizeof reply) == 0;
    int go = answered && strcmp(reply, "GO") == 0;
    c->go = go || !answered;
    c->counters.timeouts += answered && !go;
    c->counters.waited_seconds += now_seconds() - start;
    pthread_mutex_unlock(&c->lock);
    return go;
}

/* Whether the bytes released and not reported yet are to be reported now (the handle's lock held): some are,
 * and they reach a part of the phase or the last report is old. */
static int report_due(const ioloom_coord *c) {
    return c->unsent > 0 && (c->unsent * IOLOOM_COORD_REPORT_PARTS >= c->sent_bytes ||
                             now_seconds() - c->sent_at >= IOLOOM_COORD_REPORT_SECONDS);
}

void ioloom_coord_release(ioloom_coord *c, uint64_t bytes) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->unsent += bytes;
    if (c->fd >= 0 && report_due(c)) send_request(c, "");
    pthread_mutex_unlock(&c->lock);
}

void ioloom_coord_counters(ioloom_coord *c, struct ioloom_coord_counters *out) {
    if (!c) {
        memset(out, 0, sizeof *out);
        return;
    }
    pthread_mutex_lock(&c->lock);
    *out = c->counters;
    pthread_mutex_unlock(&c->lock);
}
