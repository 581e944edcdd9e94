/*
 * echo_floor: the least a client can do per WebSocket echo or per HTTP/1.1
 * request, to tell soakd's cost from the kernel's.
 *
 * bench/ws.sh's echo part compares soakd's CPU per WebSocket message with
 * its CPU per HTTP/1.1 request, both in closed loop against the built-in
 * target. On loopback most of either is the kernel's: one send and one
 * receive per exchange, and the sender pays for delivering its segment to
 * the receiving socket. This program does the same exchanges with nothing
 * else: level-triggered epoll, one recv per readiness, one send per
 * exchange, no timers, no histograms, a fixed mask key. Its ratio of
 * WebSocket to HTTP/1.1 CPU is the floor no client on this kernel goes
 * below; soakd's own ratio is read against it in the same run.
 *
 *   cc -O2 -o echo_floor bench/floor/echo_floor.c   (with floor.h beside it)
 *   echo_floor ws|http HOST PORT CONNECTIONS SECONDS
 *
 * Prints one line: "<mode> <exchanges> <user s> <sys s> <us per exchange>".
 * Loopback targets only; it runs for SECONDS and stops.
 */
#include "floor.h"

/* Reads until the end of a response head; returns its length. */
static size_t read_head(int fd, char *buf, size_t cap) {
    size_t have = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + have, cap - 1 - have, 0);
        if (n <= 0) die("reading the upgrade answer");
        have += (size_t)n;
        buf[have] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (end) return (size_t)(end + 4 - buf);
        if (have + 1 >= cap) {
            fprintf(stderr, "answer head too long\n");
            exit(1);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: echo_floor ws|http HOST PORT CONNECTIONS SECONDS\n");
        return 2;
    }
    int ws = strcmp(argv[1], "ws") == 0;
    if (!ws && strcmp(argv[1], "http") != 0) {
        fprintf(stderr, "mode must be ws or http\n");
        return 2;
    }
    struct sockaddr_in sa;
    loopback(argv[2], argv[3], &sa);
    int conns = atoi(argv[4]);
    double secs = atof(argv[5]);
    if (conns < 1 || conns > 10000 || secs <= 0 || secs > 600) {
        fprintf(stderr, "CONNECTIONS 1..10000, SECONDS 0..600\n");
        return 2;
    }

    /* What each exchange sends: a masked text frame "hello" (the key is
     * fixed: a floor, not a client), or a GET. */
    static const char get[] = "GET / HTTP/1.1\r\nHost: floor\r\n\r\n";
    unsigned char frame[11] = {0x81, 0x80 | 5, 1, 2, 3, 4};
    for (int i = 0; i < 5; i++) frame[6 + i] = (unsigned char)("hello"[i] ^ frame[2 + (i & 3)]);
    const void *msg = ws ? (const void *)frame : (const void *)get;
    size_t msg_len = ws ? sizeof frame : sizeof get - 1;

    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    int *fds = calloc((size_t)conns, sizeof *fds);
    size_t *have = calloc((size_t)conns, sizeof *have);
    char (*bufs)[4096] = calloc((size_t)conns, 4096);
    if (!fds || !have || !bufs) die("calloc");

    for (int i = 0; i < conns; i++) {
        int fd = connect_nodelay(&sa);
        if (ws) {
            char up[256];
            int n = snprintf(up, sizeof up,
                             "GET /ws HTTP/1.1\r\nHost: floor\r\nUpgrade: websocket\r\n"
                             "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             "Sec-WebSocket-Version: 13\r\n\r\n");
            if (send(fd, up, (size_t)n, 0) != n) die("sending the upgrade");
            char head[2048];
            size_t len = read_head(fd, head, sizeof head);
            if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
                fprintf(stderr, "upgrade refused: %.40s\n", head);
                return 1;
            }
            if (len != strlen(head)) {
                fprintf(stderr, "bytes after the upgrade answer\n");
                return 1;
            }
        }
        fds[i] = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
    }

    struct rusage r0;
    getrusage(RUSAGE_SELF, &r0);
    double start = now(), end = start + secs;
    unsigned long long done = 0;
    for (int i = 0; i < conns; i++)
        if (send(fds[i], msg, msg_len, 0) != (ssize_t)msg_len) die("send");

    struct epoll_event evs[256];
    while (now() < end) {
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int e = 0; e < n; e++) {
            int i = (int)evs[e].data.u32;
            char *b = bufs[i];
            ssize_t got = recv(fds[i], b + have[i], 4096 - have[i], 0);
            if (got <= 0) {
                fprintf(stderr, "connection %d closed or failed\n", i);
                return 1;
            }
            have[i] += (size_t)got;
            size_t whole;
            if (ws) {
                /* An unmasked server frame with a payload under 126 bytes. */
                if (have[i] < 2) continue;
                whole = 2 + (size_t)(b[1] & 0x7f);
            } else {
                char *eoh = memmem(b, have[i], "\r\n\r\n", 4);
                if (!eoh) continue;
                char *cl = memmem(b, (size_t)(eoh - b), "Content-Length: ", 16);
                if (!cl) cl = memmem(b, (size_t)(eoh - b), "content-length: ", 16);
                whole = (size_t)(eoh + 4 - b) + (cl ? (size_t)atoi(cl + 16) : 0);
            }
            if (have[i] < whole) continue;
            if (have[i] > whole) {
                fprintf(stderr, "more than one answer at once\n");
                return 1;
            }
            have[i] = 0;
            done++;
            if (send(fds[i], msg, msg_len, 0) != (ssize_t)msg_len) die("send");
        }
    }
    double user, sys;
    cpu_since(&r0, &user, &sys);
    printf("%s %llu %.3f %.3f %.3f\n", argv[1], done, user, sys, done ? (user + sys) * 1e6 / (double)done : 0.0);
    return 0;
}
