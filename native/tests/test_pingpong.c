/*
 * test_pingpong.c — two processes (fork) ping-pong over the engine: checks every byte
 * and prints half-round-trip latency and bandwidth for TCP loopback and unix sockets.
 * COC_PINGPONG_ITERS=N runs longer for measuring (default: a quick check).
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines.h"

static int iters(void)
{
    const char *s = getenv("COC_PINGPONG_ITERS");
    return s ? atoi(s) : 300;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One exchange: a sends n bytes to peer, waits for n back. */
static int exchange(coc_engine *e, uint32_t peer, uint8_t *out, uint8_t *in, size_t n, int first)
{
    coc_request *s, *r;
    if (coc_irecv(e, (int32_t)peer, 0, 1, in, n, &r) < 0)
        return -1;
    if (first && coc_isend(e, peer, 0, 1, out, n, &s) < 0)
        return -1;
    coc_status st = t_wait(r);
    if (!first && coc_isend(e, peer, 0, 1, out, n, &s) < 0)
        return -1;
    coc_status ss = t_wait(s);
    coc_request_free(r);
    coc_request_free(s);
    return st.error || ss.error || st.count != n ? -1 : 0;
}

static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 4 << 20};

static void run(int tcp_only)
{
    int p2c[2], c2p[2];
    CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
    uint8_t *out = aligned_alloc(4096, 4 << 20), *in = aligned_alloc(4096, 4 << 20);
    for (size_t i = 0; i < (4u << 20); i++)
        out[i] = (uint8_t)(i * 13);
    pid_t pid = fork();
    int child = pid == 0;
    coc_engine *e = t_open(child ? 2 : 1, 0, 1, 0, 0, 0);
    char mine[256], theirs[256] = {0};
    coc_engine_address(e, mine, sizeof mine);
    if (tcp_only)
        *strchr(mine, ' ') = '\0';
    CHECK(write(child ? c2p[1] : p2c[1], mine, sizeof mine) == sizeof mine);
    CHECK(read(child ? p2c[0] : c2p[0], theirs, sizeof theirs) == sizeof theirs);
    uint32_t peer = child ? 1 : 2;
    CHECK_RC(coc_engine_add_peer(e, peer, theirs));
    t_route(e, peer, peer);
    int n = iters();
    double *lat = calloc((size_t)n, sizeof *lat);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t len = sizes[k];
        int reps = len >= (1 << 20) ? (n / 10 > 20 ? n / 10 : 20) : n;
        for (int i = -10; i < reps; i++) {
            double t0 = t_now();
            if (exchange(e, peer, out, in, len, !child) < 0) {
                check_failures++;
                break;
            }
            if (i >= 0)
                lat[i] = (t_now() - t0) / 2;
        }
        CHECK(memcmp(in, out, len) == 0);
        if (!child) {
            qsort(lat, (size_t)reps, sizeof *lat, cmp_double);
            double med = lat[reps / 2], p99 = lat[reps * 99 / 100];
            printf("  %-5s %8zu B: half round trip median %8.1f us  p99 %8.1f us  %7.3f GB/s\n",
                   tcp_only ? "tcp" : "unix", len, med * 1e6, p99 * 1e6, len / med / 1e9);
        }
    }
    free(lat);
    free(out);
    free(in);
    coc_engine_close(e);
    if (child)
        _exit(check_failures ? 1 : 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(p2c[0]); close(p2c[1]); close(c2p[0]); close(c2p[1]);
}

int main(void)
{
    run(1);
    run(0);
    CHECK_DONE();
}
