/*
 * test_shm.c — the shared-memory ring (src/shm.c): wrap-around, a full ring, the
 * asleep/doorbell handshake, bad sizes; then ping-pong between two processes through a
 * pair of rings with a socketpair doorbell (spin, then sleep), checking every byte and
 * printing half-round-trip latency and bandwidth, copied through the ring and, for large
 * messages, read once with process_vm_readv. COC_PINGPONG_ITERS=N runs longer.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines.h"
#include "shm.h"

#define SPIN_NS 50000

static void test_ring_basics(void)
{
    CHECK(coc__shm_create(3000) == COC_EINVAL);
    CHECK(coc__shm_create(4096 + 1) == COC_EINVAL);
    int fd = coc__shm_create(4096);
    CHECK(fd >= 0);
    CHECK(coc__shm_ring_size(fd) == 4096);
    CHECK(ftruncate(fd, 4096) < 0); /* sealed */
    int plain = memfd_create("not-sealed", MFD_CLOEXEC);
    CHECK(plain >= 0 && ftruncate(plain, (off_t)coc__shm_seg_len(4096)) == 0);
    CHECK(coc__shm_ring_size(plain) == COC_EINVAL);
    close(plain);
    coc__ring w, r;
    CHECK_RC(coc__ring_map(&w, fd, 4096, 1));
    CHECK_RC(coc__ring_map(&r, fd, 4096, 1));
    uint8_t src[10000], dst[10000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    int bell = -1;
    /* fill in two pieces (gather), then the ring is full */
    struct iovec iov[2] = {{src, 1000}, {src + 1000, 5000}};
    CHECK(coc__ring_write(&w, iov, 2, &bell) == 4096 && bell == 0);
    CHECK(coc__ring_write(&w, iov, 1, &bell) == 0);
    CHECK(coc__ring_avail(&r) == 4096);
    CHECK(coc__ring_want_room(&w) == 0); /* the reader will ring once it reads */
    /* many odd-sized writes and reads cross the end of the ring again and again */
    size_t in = 4096, out = 0;
    while (out < sizeof dst) {
        size_t n = coc__ring_read(&r, dst + out, 777, &bell);
        CHECK(n > 0 && bell == (out == 0));
        out += n;
        if (in < sizeof src) {
            struct iovec more = {src + in, sizeof src - in < 1234 ? sizeof src - in : 1234};
            in += coc__ring_write(&w, &more, 1, &bell);
        }
    }
    CHECK(memcmp(src, dst, sizeof src) == 0);
    CHECK(coc__ring_read(&r, dst, 1, &bell) == 0 && bell == 0);
    /* an asleep reader gets exactly one bell; data already there means "do not sleep" */
    CHECK(coc__ring_sleep(&r) == 0);
    struct iovec one = {src, 1};
    CHECK(coc__ring_write(&w, &one, 1, &bell) == 1 && bell == 1);
    CHECK(coc__ring_write(&w, &one, 1, &bell) == 1 && bell == 0);
    CHECK(coc__ring_sleep(&r) == 1);
    coc__ring_wake(&r);
    coc__ring_unmap(&w);
    coc__ring_unmap(&r);
    close(fd);
}

/* ---- two processes ------------------------------------------------------------------- */

typedef struct side {
    coc__ring tx, rx;
    int bell;       /* our end of the doorbell socketpair */
    pid_t peer;
} side;

/* Ring the peer's doorbell; a full socket means a bell is pending already. */
static void ring_bell(side *s)
{
    if (write(s->bell, "b", 1) < 0)
        CHECK(errno == EAGAIN);
}

/* Take every pending bell (the socket is non-blocking). */
static void drain_bells(side *s)
{
    char b[256];
    while (read(s->bell, b, sizeof b) > 0)
        ;
}

/* Wait until rx holds a byte: spin for SPIN_NS (yielding), then sleep on the doorbell. */
static void wait_data(side *s)
{
    double until = t_now() + SPIN_NS * 1e-9;
    while (!coc__ring_avail(&s->rx)) {
        if (t_now() < until) {
            sched_yield();
            continue;
        }
        if (coc__ring_sleep(&s->rx) == 0) {
            struct pollfd p = {s->bell, POLLIN, 0};
            CHECK(poll(&p, 1, 10000) == 1);
            drain_bells(s);
        }
        coc__ring_wake(&s->rx);
    }
}

static void put_all(side *s, const void *buf, size_t n)
{
    size_t off = 0;
    double give_up = t_now() + 10;
    while (off < n) {
        struct iovec iov = {(uint8_t *)buf + off, n - off};
        int bell;
        size_t k = coc__ring_write(&s->tx, &iov, 1, &bell);
        off += k;
        if (bell)
            ring_bell(s);
        if (!k && !coc__ring_want_room(&s->tx)) {
            struct pollfd p = {s->bell, POLLIN, 0}; /* the reader rings when it makes room */
            poll(&p, 1, 1);
            drain_bells(s);
            if (t_now() > give_up) {
                check_failures++;
                return;
            }
        }
    }
}

static void get_all(side *s, void *buf, size_t n)
{
    for (size_t off = 0; off < n;) {
        wait_data(s);
        int bell;
        off += coc__ring_read(&s->rx, (uint8_t *)buf + off, n - off, &bell);
        if (bell)
            ring_bell(s);
    }
}

/* One message: its length, then (copy) the bytes or (single) the sender's address,
 * which the receiver reads with process_vm_readv and acknowledges. */
static void send_msg(side *s, const uint8_t *buf, uint64_t n, int single)
{
    uint64_t hdr[2] = {n, (uint64_t)(uintptr_t)buf};
    put_all(s, hdr, sizeof hdr);
    if (!single) {
        put_all(s, buf, n);
    } else {
        uint8_t ack;
        get_all(s, &ack, 1);
    }
}

static void recv_msg(side *s, uint8_t *buf, uint64_t cap, int single)
{
    uint64_t hdr[2];
    get_all(s, hdr, sizeof hdr);
    CHECK(hdr[0] <= cap);
    if (!single) {
        get_all(s, buf, hdr[0]);
        return;
    }
    struct iovec local = {buf, hdr[0]}, remote = {(void *)(uintptr_t)hdr[1], hdr[0]};
    CHECK(process_vm_readv(s->peer, &local, 1, &remote, 1, 0) == (ssize_t)hdr[0]);
    put_all(s, "a", 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void pingpong(size_t ring_size)
{
    int fd = coc__shm_create(ring_size);
    CHECK(fd >= 0);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
    pid_t parent = getpid();
    pid_t child = fork();
    CHECK(child >= 0);
    int me = child == 0;
    side s = {.bell = sv[me], .peer = me ? parent : child};
    close(sv[!me]);
    CHECK_RC(coc__ring_map(&s.tx, fd, ring_size, me));
    CHECK_RC(coc__ring_map(&s.rx, fd, ring_size, !me));
    close(fd);
    const char *env = getenv("COC_PINGPONG_ITERS");
    int reps_small = env ? atoi(env) : 200;
    size_t max = 4u << 20;
    uint8_t *out = aligned_alloc(4096, max), *in = aligned_alloc(4096, max);
    double *lat = calloc((size_t)reps_small, sizeof *lat);
    for (size_t i = 0; i < max; i++)
        out[i] = (uint8_t)(i * 13 + me);
    static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 4 << 20};
    for (int single = 0; single < 2; single++) {
        for (size_t k = single ? 3 : 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t len = sizes[k];
            int reps = len >= (1 << 20) ? (reps_small / 10 > 20 ? reps_small / 10 : 20) : reps_small;
            memset(in, 0, len);
            for (int i = -10; i < reps; i++) {
                double t0 = t_now();
                if (!me) {
                    send_msg(&s, out, len, single);
                    recv_msg(&s, in, max, single);
                } else {
                    recv_msg(&s, in, max, single);
                    send_msg(&s, out, len, single);
                }
                if (i >= 0)
                    lat[i] = (t_now() - t0) / 2;
            }
            for (size_t i = 0; i < len; i++)
                if (in[i] != (uint8_t)(i * 13 + !me)) {
                    check_failures++;
                    break;
                }
            if (!me) {
                qsort(lat, (size_t)reps, sizeof *lat, cmp_double);
                double med = lat[reps / 2];
                printf("  shm %-6s ring %4zu KiB %8zu B: half round trip median %8.1f us  %6.2f GB/s\n",
                       single ? "vm_rd" : "copy", ring_size >> 10, len, med * 1e6, len / med / 1e9);
            }
        }
    }
    free(out);
    free(in);
    free(lat);
    coc__ring_unmap(&s.tx);
    coc__ring_unmap(&s.rx);
    close(s.bell);
    if (me)
        _exit(check_failures ? 1 : 0);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Two engines over a 64 KiB ring: a stream of unexpected eager messages that overfills
 * it, large rendezvous messages both ways at once, the shm log line, and a peer's close. */
static void test_engines(void)
{
    t_shm_flags = COC_ENGINE_SHM;
    t_shm_ring = 65536;
    coc_engine *a = t_open(1, 0, 0, 0, 0, 0), *b = t_open(2, 0, 0, 0, 0, 0);
    t_shm_flags = 0;
    t_shm_ring = 0;
    t_know(a, 2, b, 0);
    t_know(b, 1, a, 0);
    t_route(a, 2, 2);
    t_route(b, 1, 1);
    size_t big = 8u << 20, n = 60000;
    uint8_t *src = malloc(big), *dst = calloc(1, big), *back = calloc(1, big);
    for (size_t i = 0; i < big; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    enum { MSGS = 100 };
    coc_request *s[MSGS], *r, *r2, *s2;
    for (int i = 0; i < MSGS; i++)
        CHECK_RC(coc_isend(a, 2, 0, 9, src + i, n, &s[i]));
    for (int i = 0; i < MSGS; i++) {
        CHECK_RC(coc_irecv(b, 1, 0, 9, dst, big, &r));
        coc_status st = t_wait(r);
        CHECK(st.error == 0 && st.count == n && memcmp(dst, src + i, n) == 0);
        coc_request_free(r);
    }
    for (int i = 0; i < MSGS; i++) {
        CHECK(t_wait(s[i]).error == 0);
        coc_request_free(s[i]);
    }
    CHECK_RC(coc_irecv(b, 1, 0, 3, dst, big, &r));
    CHECK_RC(coc_irecv(a, 2, 0, 4, back, big, &r2));
    CHECK_RC(coc_isend(a, 2, 0, 3, src, big, &s[0]));
    CHECK_RC(coc_isend(b, 1, 0, 4, src + 1, big - 1, &s2));
    CHECK(t_wait(r).error == 0 && memcmp(dst, src, big) == 0);
    CHECK(t_wait(r2).error == 0 && memcmp(back, src + 1, big - 1) == 0);
    CHECK(t_wait(s[0]).error == 0 && t_wait(s2).error == 0);
    coc_request_free(r);
    coc_request_free(r2);
    coc_request_free(s[0]);
    coc_request_free(s2);
    char log[4096];
    CHECK(coc_engine_take_log(a, log, sizeof log) >= 0 && strstr(log, "shared memory, 64 KiB rings"));
    /* b leaves: a's receive from it ends with an error instead of waiting forever */
    CHECK_RC(coc_irecv(a, 2, 0, 5, dst, big, &r));
    coc_engine_close(b);
    coc_status st = {0};
    CHECK(coc_wait(r, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST);
    coc_request_free(r);
    coc_engine_close(a);
    free(src);
    free(dst);
    free(back);
}

int main(void)
{
    test_ring_basics();
    test_engines();
    pingpong(64u << 10);
    pingpong(1u << 20);
    pingpong(4u << 20);
    CHECK_DONE();
}
