/*
 * udp_probe - UDP echo probe for measuring a link's round-trip delay.
 *
 * Written in C rather than Python so that the probe adds only microseconds of
 * its own: both ends take the receive time from the kernel (SO_TIMESTAMPNS),
 * the echo server writes its own turnaround (kernel receive -> just before
 * sendto) into the reply, and the client takes the send time just before
 * sendto.  So   rtt_ns - turn_ns   is the time the packets spent on the link
 * plus the two kernel stacks, free of the probe processes' scheduling delays.
 *
 *   udp_probe server PORT LIFETIME_S
 *       echo every datagram on PORT; exit after LIFETIME_S seconds (or SIGTERM).
 *   udp_probe client ADDR PORT COUNT INTERVAL_US
 *       send COUNT probes, one every INTERVAL_US (not waiting for replies),
 *       wait 2 s for the last replies, then print one line per reply:
 *       "seq rtt_ns turn_ns sent_unix_ns"   (lost probes are simply absent).
 *
 *   udp_probe jitter COUNT
 *       host baseline: sleep until 1 ms deadlines COUNT times (clock_nanosleep,
 *       absolute) and print the overshoot in us: "p50 p99 p999 max".  What a
 *       timer-driven process at the caller's priority gets from this host.
 *
 * Build: cc -O2 -o udp_probe udp_probe.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROBE_LEN 64 /* bytes of UDP payload: seq, send time, turnaround, padding */

struct probe {
    uint64_t seq;
    uint64_t sent_ns; /* client CLOCK_REALTIME just before sendto */
    uint64_t turn_ns; /* filled in by the server */
};

static uint64_t ts_ns(const struct timespec *t) { return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec; }

static uint64_t now_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return ts_ns(&t);
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static int udp_socket(void) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0), on = 1, buf = 4 << 20;
    if (fd < 0) die("socket");
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) < 0) die("SO_TIMESTAMPNS");
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    return fd;
}

/* recvmsg with the kernel receive timestamp (CLOCK_REALTIME) in *rx_ns. */
static ssize_t recv_ts(int fd, void *buf, size_t len, struct sockaddr_in *from, uint64_t *rx_ns) {
    char ctrl[256];
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_name = from, .msg_namelen = from ? sizeof *from : 0,
                       .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl, .msg_controllen = sizeof ctrl};
    ssize_t n = recvmsg(fd, &m, 0);
    *rx_ns = 0;
    if (n < 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec t;
            memcpy(&t, CMSG_DATA(c), sizeof t);
            *rx_ns = ts_ns(&t);
        }
    if (!*rx_ns) *rx_ns = now_ns(CLOCK_REALTIME);
    return n;
}

static _Noreturn void server(int port, int lifetime_s) {
    int fd = udp_socket();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    alarm(lifetime_s); /* never outlive the benchmark */
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        char buf[2048];
        struct sockaddr_in from;
        uint64_t rx;
        ssize_t n = recv_ts(fd, buf, sizeof buf, &from, &rx);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("recvmsg");
        }
        if (n >= (ssize_t)sizeof(struct probe)) {
            struct probe p;
            memcpy(&p, buf, sizeof p);
            p.turn_ns = now_ns(CLOCK_REALTIME) - rx;
            memcpy(buf, &p, sizeof p);
        }
        sendto(fd, buf, n, 0, (struct sockaddr *)&from, sizeof from);
    }
}

static int client(const char *addr, int port, long count, long interval_us) {
    int fd = udp_socket();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) die("inet_pton");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    uint64_t *rtt = calloc(count, sizeof *rtt), *turn = calloc(count, sizeof *turn);
    uint64_t *sent_at = calloc(count, sizeof *sent_at);
    if (!rtt || !turn || !sent_at) die("calloc");
    long sent = 0;
    uint64_t next = now_ns(CLOCK_MONOTONIC), drain_until = 0;
    for (;;) {
        uint64_t mono = now_ns(CLOCK_MONOTONIC);
        if (sent < count && mono >= next) {
            char buf[PROBE_LEN] = {0};
            struct probe p = {.seq = (uint64_t)sent, .turn_ns = 0};
            p.sent_ns = now_ns(CLOCK_REALTIME);
            memcpy(buf, &p, sizeof p);
            if (send(fd, buf, sizeof buf, 0) < 0 && errno != ECONNREFUSED) die("send");
            sent++;
            next += (uint64_t)interval_us * 1000;
            if (sent == count) drain_until = mono + 2000000000ull;
            continue;
        }
        if (sent == count && mono >= drain_until) break;
        uint64_t until = sent < count ? next : drain_until;
        struct timespec to = {(time_t)((until - mono) / 1000000000ull), (long)((until - mono) % 1000000000ull)};
        struct pollfd pf = {fd, POLLIN, 0};
        if (ppoll(&pf, 1, &to, NULL) <= 0 || !(pf.revents & POLLIN)) continue;
        char buf[2048];
        uint64_t rx;
        ssize_t n = recv_ts(fd, buf, sizeof buf, NULL, &rx);
        if (n < (ssize_t)sizeof(struct probe)) continue;
        struct probe p;
        memcpy(&p, buf, sizeof p);
        if (p.seq < (uint64_t)count && rx > p.sent_ns) {
            rtt[p.seq] = rx - p.sent_ns;
            turn[p.seq] = p.turn_ns;
            sent_at[p.seq] = p.sent_ns;
        }
    }
    for (long i = 0; i < count; i++)
        if (rtt[i])
            printf("%ld %llu %llu %llu\n", i, (unsigned long long)rtt[i], (unsigned long long)turn[i],
                   (unsigned long long)sent_at[i]);
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int jitter(long count) {
    uint64_t *over = calloc(count, sizeof *over);
    if (!over || count < 1) die("jitter");
    uint64_t due = now_ns(CLOCK_MONOTONIC);
    for (long i = 0; i < count; i++) {
        due += 1000000;
        struct timespec t = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
        over[i] = now_ns(CLOCK_MONOTONIC) - due;
    }
    qsort(over, count, sizeof *over, cmp_u64);
    printf("%.1f %.1f %.1f %.1f\n", over[count / 2] / 1e3, over[count * 99 / 100] / 1e3,
           over[count * 999 / 1000] / 1e3, over[count - 1] / 1e3);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "server")) server(atoi(argv[2]), atoi(argv[3]));
    if (argc == 6 && !strcmp(argv[1], "client"))
        return client(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]));
    if (argc == 3 && !strcmp(argv[1], "jitter")) return jitter(atol(argv[2]));
    fprintf(stderr, "usage: udp_probe server PORT LIFETIME_S | client ADDR PORT COUNT INTERVAL_US | jitter COUNT\n");
    return 2;
}
