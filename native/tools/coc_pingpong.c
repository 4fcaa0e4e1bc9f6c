/*
 * coc_pingpong — plain TCP ping-pong, the direct reference (a) of `coc bench engine`.
 *
 *   coc_pingpong [-b SOCKBUF] server HOST PORT     echo one connection's messages, then exit
 *   coc_pingpong [-b SOCKBUF] client HOST PORT SIZE:ITERS ...
 *   coc_pingpong [-b SOCKBUF] client HOST PORT rate:SIZE:COUNT:WINDOW ...
 *
 * A message is a 4-byte length and the payload, sent with one send() and read with as
 * few recv() calls as the kernel allows, into page-aligned buffers, with TCP_NODELAY (and
 * SO_SNDBUF/SO_RCVBUF of SOCKBUF bytes with -b; default: the kernel's autotuning). The
 * server prints "port N" once listening (PORT 0: any free port). For each SIZE:ITERS the
 * client runs ITERS/10+2 warm-up round trips, then ITERS timed ones, and prints
 *   SIZE ITERS MEDIAN_NS P99_NS
 * where the figures are half round trips: sorted[n/2] and sorted[min(n-1, 99n/100)].
 * For each rate:SIZE:COUNT:WINDOW the client measures a message rate the way OSU's
 * osu_mbw_mr does: COUNT messages of SIZE bytes in windows of WINDOW sent back to back,
 * the server answering only the last of each window with an empty message, and prints
 *   rate SIZE COUNT ELAPSED_NS
 * (a length word with NO_ECHO set is not answered; with ACK set it gets an empty reply;
 * an empty frame with both set first switches the server to reading one frame at a time,
 * and is answered before any window leaves, so no greedy read can swallow a window).
 * Self-contained: needs nothing of libcoc.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE (4u << 20)
#define PAGE 4096
#define NO_ECHO 0x80000000u /* flags in the length word of rate mode */
#define ACK 0x40000000u

/* The payload starts on a page; its 4-byte length sits just before it. */
static char *frame;
static char *payload;

static void die(const char *what) {
    fprintf(stderr, "coc_pingpong: %s: %s\n", what, strerror(errno));
    exit(1);
}

static struct sockaddr_in addr_of(const char *host, const char *port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "coc_pingpong: not an IPv4 address: %s\n", host);
        exit(2);
    }
    return a;
}

/* SO_SNDBUF/SO_RCVBUF to ask for (-b BYTES); 0 leaves the kernel's autotuning. */
static int sockbuf;

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (sockbuf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf);
    }
}

/* Send the frame holding len payload bytes; flags (NO_ECHO, ACK) ride in the length word. */
static void send_flagged(int fd, uint32_t len, uint32_t flags) {
    uint32_t word = len | flags;
    memcpy(frame, &word, 4);
    for (size_t done = 0, total = 4 + (size_t)len; done < total;) {
        ssize_t n = send(fd, frame + done, total - done, MSG_NOSIGNAL);
        if (n < 0 && errno != EINTR) die("send");
        if (n > 0) done += (size_t)n;
    }
}

static void send_msg(int fd, uint32_t len) { send_flagged(fd, len, 0); }

static uint32_t flags_in; /* the flags of the last frame recv_msg read */
static int streaming;     /* rate mode (set by the client): never read past one frame */

/* Receive one frame; return its payload length, or -1 at end of stream. In ping-pong the
 * peer sends nothing more before our reply, so reading greedily never takes a second
 * message (rate mode reads the length word alone, then the payload); once
 * the length is known, MSG_WAITALL spares a wake-up per arriving segment. */
static int64_t recv_msg(int fd) {
    size_t have = 0, want = 4;
    while (have < want) {
        ssize_t n = want == 4 ? recv(fd, frame + have, (streaming ? 4 : 4 + MAX_SIZE) - have, 0)
                              : recv(fd, frame + have, want - have, MSG_WAITALL);
        if (n == 0) return -1;
        if (n < 0) {
            if (errno == EINTR) continue;
            die("recv");
        }
        have += (size_t)n;
        if (want == 4 && have >= 4) {
            uint32_t len;
            memcpy(&len, frame, 4);
            flags_in = len & (NO_ECHO | ACK);
            len &= ~(NO_ECHO | ACK);
            if (len > MAX_SIZE) {
                fprintf(stderr, "coc_pingpong: message of %u bytes is over the maximum\n", len);
                exit(1);
            }
            want = 4 + (size_t)len;
        }
    }
    return (int64_t)want - 4;
}

static int serve(const char *host, const char *port) {
    struct sockaddr_in a = addr_of(host, port);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 4) < 0)
        die("listen");
    socklen_t alen = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &alen);
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) die("accept");
    close(lfd);
    tune(fd);
    for (int64_t len; (len = recv_msg(fd)) >= 0;) {
        if (flags_in == (NO_ECHO | ACK))
            streaming = 1;
        if (!(flags_in & NO_ECHO) || flags_in == (NO_ECHO | ACK))
            send_msg(fd, flags_in & ACK ? 0 : (uint32_t)len);
    }
    close(fd);
    return 0;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Parse "SIZE:ITERS" or "rate:SIZE:COUNT:WINDOW" (*window 0 for the former); 0 when
 * malformed or out of range. */
static int parse_spec(const char *spec, unsigned long *size, unsigned long *iters,
                      unsigned long *window) {
    char end;
    *window = 0;
    if (strncmp(spec, "rate:", 5) == 0)
        return sscanf(spec + 5, "%lu:%lu:%lu%c", size, iters, window, &end) == 3 &&
               *size <= MAX_SIZE && *iters > 0 && *window > 0;
    return sscanf(spec, "%lu:%lu%c", size, iters, &end) == 2 && *size <= MAX_SIZE && *iters > 0;
}

/* Send count messages of size bytes in windows, each window's last answered; return ns. */
static uint64_t stream(int fd, unsigned long size, unsigned long count, unsigned long window) {
    send_flagged(fd, 0, NO_ECHO | ACK); /* the server reads one frame at a time from now */
    if (recv_msg(fd) != 0) die("rate mode");
    uint64_t t0 = now_ns();
    for (unsigned long sent = 0; sent < count;) {
        unsigned long n = count - sent < window ? count - sent : window;
        for (unsigned long k = 0; k < n; k++)
            send_flagged(fd, (uint32_t)size, k + 1 < n ? NO_ECHO : ACK);
        if (recv_msg(fd) != 0) die("ack");
        sent += n;
    }
    return now_ns() - t0;
}

static int client(const char *host, const char *port, int nspecs, char **specs) {
    unsigned long size, iters, window;
    for (int i = 0; i < nspecs; i++) {
        if (!parse_spec(specs[i], &size, &iters, &window)) {
            fprintf(stderr, "coc_pingpong: bad SIZE:ITERS or rate:SIZE:COUNT:WINDOW '%s' "
                    "(size <= %u)\n", specs[i],
                    MAX_SIZE);
            return 2;
        }
    }
    struct sockaddr_in a = addr_of(host, port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    tune(fd);
    for (int i = 0; i < nspecs; i++) {
        parse_spec(specs[i], &size, &iters, &window);
        if (window) {
            stream(fd, size, iters / 10 + 1, window); /* warm up */
            printf("rate %lu %lu %llu\n", size, iters,
                   (unsigned long long)stream(fd, size, iters, window));
            fflush(stdout);
            continue;
        }
        uint64_t *half = malloc(iters * sizeof *half);
        if (!half) die("malloc");
        for (unsigned long k = 0; k < iters / 10 + 2; k++) {
            send_msg(fd, (uint32_t)size);
            if (recv_msg(fd) != (int64_t)size) die("echo");
        }
        for (unsigned long k = 0; k < iters; k++) {
            uint64_t t0 = now_ns();
            send_msg(fd, (uint32_t)size);
            if (recv_msg(fd) != (int64_t)size) die("echo");
            half[k] = (now_ns() - t0) / 2;
        }
        qsort(half, iters, sizeof *half, cmp_u64);
        unsigned long p99 = 99 * iters / 100 < iters - 1 ? 99 * iters / 100 : iters - 1;
        printf("%lu %lu %llu %llu\n", size, iters, (unsigned long long)half[iters / 2],
               (unsigned long long)half[p99]);
        fflush(stdout);
        free(half);
    }
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    char *mem;
    if (posix_memalign((void **)&mem, PAGE, PAGE + MAX_SIZE)) die("posix_memalign");
    payload = mem + PAGE;
    frame = payload - 4;
    memset(mem, 0x5a, PAGE + MAX_SIZE);
    if (argc > 2 && strcmp(argv[1], "-b") == 0) {
        sockbuf = atoi(argv[2]);
        argc -= 2;
        argv += 2;
    }
    if (argc == 4 && strcmp(argv[1], "server") == 0) return serve(argv[2], argv[3]);
    if (argc >= 5 && strcmp(argv[1], "client") == 0)
        return client(argv[2], argv[3], argc - 4, argv + 4);
    fprintf(stderr, "usage: coc_pingpong [-b SOCKBUF] server HOST PORT\n"
                    "       coc_pingpong [-b SOCKBUF] client HOST PORT SIZE:ITERS|"
                    "rate:SIZE:COUNT:WINDOW ...\n");
    return 2;
}
