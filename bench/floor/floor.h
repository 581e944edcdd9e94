/*
 * What the floor programs (echo_floor.c, paced_floor.c) share: dying with
 * a reason, the monotonic clock, a loopback address, a connected socket
 * without Nagle, and the CPU spent since a starting point.
 */
#ifndef SOAKD_FLOOR_H
#define SOAKD_FLOOR_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* HOST:PORT into *sa; exits unless HOST is in 127.0.0.0/8 (the floors
 * measure loopback only). */
static void loopback(const char *host, const char *port, struct sockaddr_in *sa) {
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 || (ntohl(sa->sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "HOST must be a 127.0.0.0/8 address\n");
        exit(2);
    }
}

/* A blocking connect to *sa, with TCP_NODELAY (as soakd's sockets). */
static int connect_nodelay(const struct sockaddr_in *sa) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0) die("connect");
    return fd;
}

/* User and system CPU seconds since *r0. */
static void cpu_since(const struct rusage *r0, double *user, double *sys) {
    struct rusage r1;
    getrusage(RUSAGE_SELF, &r1);
    *user = (r1.ru_utime.tv_sec - r0->ru_utime.tv_sec) + (r1.ru_utime.tv_usec - r0->ru_utime.tv_usec) / 1e6;
    *sys = (r1.ru_stime.tv_sec - r0->ru_stime.tv_sec) + (r1.ru_stime.tv_usec - r0->ru_stime.tv_usec) / 1e6;
}

#endif
