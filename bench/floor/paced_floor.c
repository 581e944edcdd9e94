/*
 * paced_floor: the least a paced client can do, to tell soakd's cost of a
 * paced request (and of holding idle connections) from the kernel's.
 *
 * bench/paced.sh runs it beside soakd at the same pace: CONNECTIONS held,
 * each sending one request every INTERVAL seconds, spread evenly, so the
 * whole program sends CONNECTIONS / INTERVAL requests a second. It arms
 * one periodic timerfd once, with a period of INTERVAL / CONNECTIONS,
 * and waits on one epoll set (edge-triggered; the timer is never re-armed,
 * but its count is read at each expiry, or it would raise no new edge).
 * Modes:
 *
 *   timer  no sockets: only the paced wake-ups (the idle floor);
 *   http   on each expiry one GET on the next connection, and one recv per
 *          readable edge: a request's floor is its send, its receive, the
 *          timer's read, the wait the timer ends and the wait its response
 *          ends (the two waits fall together only when a response comes
 *          back within the same wake-up, which a loopback server does not
 *          do).
 *
 *   cc -O2 -o paced_floor bench/floor/paced_floor.c   (with floor.h beside it)
 *   paced_floor timer|http HOST PORT CONNECTIONS INTERVAL_S SECONDS
 *
 * Prints one line: "<mode> <requests> <user s> <sys s>". Loopback targets
 * only (HOST in 127.0.0.0/8); it runs for SECONDS and stops.
 */
#include "floor.h"

#include <sys/timerfd.h>

#define TIMER_TOKEN 0xffffffffu

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: paced_floor timer|http HOST PORT CONNECTIONS INTERVAL_S SECONDS\n");
        return 2;
    }
    int http = strcmp(argv[1], "http") == 0;
    if (!http && strcmp(argv[1], "timer") != 0) {
        fprintf(stderr, "mode must be timer or http\n");
        return 2;
    }
    struct sockaddr_in sa;
    loopback(argv[2], argv[3], &sa);
    int conns = atoi(argv[4]);
    double interval = atof(argv[5]), secs = atof(argv[6]);
    if (conns < 1 || conns > 100000 || interval <= 0 || secs <= 0 || secs > 3600) {
        fprintf(stderr, "CONNECTIONS 1..100000, INTERVAL_S > 0, SECONDS 0..3600\n");
        return 2;
    }

    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    int *fds = calloc((size_t)conns, sizeof *fds);
    if (!fds) die("calloc");
    static const char get[] = "GET / HTTP/1.1\r\nHost: floor\r\n\r\n";
    if (http) {
        for (int i = 0; i < conns; i++) {
            int fd = connect_nodelay(&sa);
            fds[i] = fd;
            struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u32 = (uint32_t)i};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
        }
    }

    /* One periodic timer, armed once. */
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0) die("timerfd_create");
    long long period_ns = (long long)(interval * 1e9 / conns);
    if (period_ns < 1000) period_ns = 1000;
    struct itimerspec its = {
        .it_interval = {.tv_sec = period_ns / 1000000000LL, .tv_nsec = period_ns % 1000000000LL},
        .it_value = {.tv_sec = period_ns / 1000000000LL, .tv_nsec = period_ns % 1000000000LL},
    };
    if (timerfd_settime(tfd, 0, &its, NULL) < 0) die("timerfd_settime");
    struct epoll_event tev = {.events = EPOLLIN | EPOLLET, .data.u32 = TIMER_TOKEN};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev) < 0) die("epoll_ctl timer");

    struct rusage r0;
    getrusage(RUSAGE_SELF, &r0);
    double start = now(), end = start + secs;
    unsigned long long sent = 0, next = 0;
    char buf[4096];
    struct epoll_event evs[256];
    while (now() < end) {
        int n = epoll_wait(ep, evs, 256, 1000);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int e = 0; e < n; e++) {
            uint32_t i = evs[e].data.u32;
            if (i == TIMER_TOKEN) {
                /* The count must be read: an unread timerfd raises no new
                 * edge. One request per expiry it reports. */
                unsigned long long expiries = 0;
                if (read(tfd, &expiries, sizeof expiries) != sizeof expiries) continue;
                for (; expiries > 0; expiries--) {
                    if (http) {
                        int fd = fds[next];
                        next = (next + 1) % (unsigned long long)conns;
                        if (send(fd, get, sizeof get - 1, 0) != (ssize_t)(sizeof get - 1)) die("send");
                    }
                    sent++;
                }
                continue;
            }
            /* The answer ("pong" and its head) fits one read. */
            ssize_t got = recv(fds[i], buf, sizeof buf, 0);
            if (got <= 0) {
                fprintf(stderr, "connection %u closed or failed\n", i);
                return 1;
            }
        }
    }
    double user, sys;
    cpu_since(&r0, &user, &sys);
    printf("%s %llu %.3f %.3f\n", argv[1], sent, user, sys);
    return 0;
}
