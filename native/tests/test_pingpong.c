/*
 * test_pingpong.c — ping-pong between two processes over the engine, directly (TCP
 * loopback, unix socket) and through one and two gateway processes: checks every byte
 * and prints half-round-trip latency and bandwidth.
 * COC_PINGPONG_ITERS=N runs longer for measuring (default: a quick check).
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines.h"

static int iters(void)
{
    const char *s = getenv("COC_PINGPONG_ITERS");
    return s ? atoi(s) : 200;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Busy for us microseconds (the peer "computes" between messages). */
static void work(int us)
{
    double until = t_now() + us * 1e-6;
    while (us > 0 && t_now() < until)
        ;
}

/* One round: ping-pong (first sends, the other echoes after work_us), or with simul set
 * both send at once and then wait for the other's message (Sendrecv, 2-rank Allreduce). */
static int exchange(coc_engine *e, uint32_t peer, uint8_t *out, uint8_t *in, size_t n, int first,
                    int simul, int work_us)
{
    coc_request *s, *r;
    if (coc_irecv(e, (int32_t)peer, 0, 1, in, n, &r) < 0)
        return -1;
    if ((first || simul) && coc_isend(e, peer, 0, 1, out, n, &s) < 0)
        return -1;
    coc_status st = t_wait(r);
    if (!first && !simul)
        work(work_us);
    if (!first && !simul && coc_isend(e, peer, 0, 1, out, n, &s) < 0)
        return -1;
    coc_status ss = t_wait(s);
    coc_request_free(r);
    coc_request_free(s);
    if (st.error || ss.error || st.count != n) {
        fprintf(stderr, "with endpoint %u, %zu B: receive %s (%llu B), send %s\n", peer, n,
                coc_strerror(st.error), (unsigned long long)st.count, coc_strerror(ss.error));
        return -1;
    }
    return 0;
}

static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 4 << 20};

/* Endpoints are 1 and 2; gateways 10, 11, ... in a chain. Process k (0 = endpoint 1,
 * last = endpoint 2) publishes its address on pipe k and reads its neighbours'. */
static uint32_t id_of(int k, int n)
{
    return k == 0 ? 1 : k == n - 1 ? 2 : (uint32_t)(9 + k);
}

static void run(const char *label, int tcp_only, int gateways, int simul, int work_us)
{
    int n = gateways + 2;
    int pipes[8][2], ready[2];
    for (int k = 0; k < n; k++)
        CHECK(pipe(pipes[k]) == 0);
    CHECK(pipe(ready) == 0);
    pid_t pids[8] = {0};
    int me = 0;
    for (int k = 1; k < n; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            me = k;
            check_failures = 0; /* a child reports only its own */
            break;
        }
    }
    uint32_t self = id_of(me, n);
    int gw = me > 0 && me < n - 1;
    coc_engine *e = t_open(self, gw ? COC_ENGINE_FORWARD : 0, 1, 0, 0, 0);
    struct { uint32_t id; char addr[252]; } mine = {self, ""}, theirs;
    coc_engine_address(e, mine.addr, sizeof mine.addr);
    if (tcp_only)
        *strchr(mine.addr, ' ') = '\0';
    /* everyone tells both neighbours its id and address, on the pipe each one reads */
    for (int k = me - 1; k <= me + 1; k += 2)
        if (k >= 0 && k < n)
            CHECK(write(pipes[k][1], &mine, sizeof mine) == sizeof mine);
    for (int got = 0; got < (me > 0) + (me < n - 1); got++) {
        CHECK(read(pipes[me][0], &theirs, sizeof theirs) == sizeof theirs);
        CHECK_RC(coc_engine_add_peer(e, theirs.id, theirs.addr));
    }
    /* routes: left part of the chain via the left neighbour, right part via the right */
    for (int k = 0; k < n; k++) {
        if (k == me)
            continue;
        t_route(e, id_of(k, n), id_of(k < me ? me - 1 : me + 1, n));
    }
    /* nobody sends before every process knows its routes (a gateway asked to forward
     * before it knows the destination answers "no route", as it should); the parent
     * hears every child's ready byte, then lets the far endpoint go */
    if (me > 0)
        CHECK(write(ready[1], "r", 1) == 1);
    char byte;
    if (me == 0) {
        for (int k = 1; k < n; k++)
            CHECK(read(ready[0], &byte, 1) == 1);
        CHECK(write(pipes[n - 1][1], "g", 1) == 1);
    } else if (me == n - 1) {
        CHECK(read(pipes[me][0], &byte, 1) == 1);
    }
    int reps_small = iters();
    double *lat = calloc((size_t)reps_small, sizeof *lat);
    uint8_t *out = aligned_alloc(4096, 4 << 20), *in = aligned_alloc(4096, 4 << 20);
    for (size_t i = 0; i < (4u << 20); i++)
        out[i] = (uint8_t)(i * 13);
    if (me == 0 || me == n - 1) {
        uint32_t peer = me == 0 ? 2 : 1;
        size_t nsizes = simul || work_us ? 1 : sizeof sizes / sizeof sizes[0];
        for (size_t k = 0; k < nsizes; k++) {
            size_t len = sizes[k];
            int reps = len >= (1 << 20) ? (reps_small / 10 > 20 ? reps_small / 10 : 20) : reps_small;
            for (int i = -10; i < reps; i++) {
                double t0 = t_now();
                if (exchange(e, peer, out, in, len, me == 0, simul, work_us) < 0) {
                    check_failures++;
                    break;
                }
                if (i >= 0) /* half round trip; an exchange (one message each way) whole */
                    lat[i] = (t_now() - t0) / (simul ? 1 : 2);
            }
            CHECK(memcmp(in, out, len) == 0);
            if (me == 0) {
                qsort(lat, (size_t)reps, sizeof *lat, cmp_double);
                double med = lat[reps / 2], p99 = lat[reps * 99 / 100];
                printf("  %-10s %8zu B: half round trip median %8.1f us  p99 %8.1f us  %6.2f GB/s\n", label,
                       len, med * 1e6, p99 * 1e6, len / med / 1e9);
            }
        }
    }
    if (me > 0) {
        /* endpoint 2 and gateways wait for the parent's word to close */
        CHECK(read(pipes[me][0], &byte, 1) == 1);
        coc_engine_close(e);
        if (check_failures)
            fprintf(stderr, "%s: process %d (engine %u): %d check(s) failed\n", label, me, self,
                    check_failures);
        _exit(check_failures ? 1 : 0);
    }
    /* the far endpoint first: its last send may still be completing through the
     * gateways, which must not close under it */
    for (int k = n - 1; k >= 1; k--) {
        int status = 0;
        CHECK(write(pipes[k][1], "x", 1) == 1);
        CHECK(waitpid(pids[k], &status, 0) == pids[k] && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    coc_engine_close(e);
    free(lat);
    free(out);
    free(in);
    for (int k = 0; k < n; k++) {
        close(pipes[k][0]);
        close(pipes[k][1]);
    }
    close(ready[0]);
    close(ready[1]);
}

int main(void)
{
    run("tcp", 1, 0, 0, 0);
    t_shm_flags = COC_ENGINE_NO_SHM;
    run("unix", 0, 0, 0, 0);
    run("unix xchg", 0, 0, 1, 0);   /* time per exchange, not half round trip */
    run("unix w=10", 0, 0, 0, 10);  /* echo side busy 10 us before replying (incl.) */
    run("unix w=20", 0, 0, 0, 20);
    t_shm_flags = COC_ENGINE_SHM;
    run("shm", 0, 0, 0, 0);
    run("shm xchg", 0, 0, 1, 0);
    run("shm w=10", 0, 0, 0, 10);
    run("shm w=20", 0, 0, 0, 20);
    t_shm_flags = 0;
    run("shm 1 gw", 0, 1, 0, 0);    /* endpoints offer shm to the gateway, it does not */
    run("tcp 1 gw", 1, 1, 0, 0);
    run("tcp 2 gw", 1, 2, 0, 0);
    CHECK_DONE();
}
