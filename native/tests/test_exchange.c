/* test_exchange.c — two endpoints on "two sites" send each other large messages at the
 * same moment through a pair of gateways (endpoint 1 - gateway 10 - gateway 11 -
 * endpoint 2), with shared memory, unix sockets or TCP between endpoint and gateway.
 *
 * Issue 12: with shared memory a gateway that paused reading an endpoint (its forward
 * window towards the other gateway full) also stopped hearing that endpoint's "room in
 * the ring" doorbell; when both gateways were in that state they waited on each other for
 * ever. The endpoints run in child processes, stopped and continued (SIGSTOP/SIGCONT) many
 * times mid-exchange so the gateways pause and resume them often, with small rings and
 * windows. This did not reproduce the hang on the engine alone in our tries (the race
 * needs both gateways to pause at the moment a ring is full); the job-level
 * tests/comm/test_exchange.py did (3 of 4 runs of 64 MiB hung before the fix). It guards
 * the pause/resume paths of all three transports.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines.h"

#define WINDOW (256u << 10)
#define FRAG (64u << 10)
#define MSG (24u << 20)
#define ROUNDS 3
#define STOPS 40

enum transport { SHM, UNIX_, TCP };
static const char *const names[] = {"shared memory", "unix sockets", "tcp"};

typedef struct child {
    pid_t pid;
    int to[2], from[2]; /* address pipes: parent -> child, child -> parent */
} child;

static uint8_t pattern(uint32_t id, size_t i)
{
    return (uint8_t)(i * (id * 6 + 1) + id);
}

/* Endpoint `id` (1 or 2) behind gateway `gw`: exchange MSG bytes with the other one ROUNDS
 * times; exits 0 when every byte arrived intact, 3 when nothing moved for 20 s. */
static void endpoint_main(child *ch, uint32_t id, uint32_t gw, enum transport t)
{
    char gw_addr[256], addr[256];
    if (read(ch->to[0], gw_addr, sizeof gw_addr) != sizeof gw_addr)
        _exit(2);
    t_shm_flags = t == SHM ? COC_ENGINE_SHM : COC_ENGINE_NO_SHM;
    t_shm_ring = 65536;
    coc_engine *e = t_open(id, 0, t == TCP, 0, FRAG, 0);
    coc_engine_address(e, addr, sizeof addr);
    if (t == TCP)
        *strchr(gw_addr, ' ') = '\0';
    uint32_t other = 3 - id;
    if (coc_engine_add_peer(e, gw, gw_addr) < 0 || coc_engine_set_route(e, other, &gw, NULL, 1) < 0)
        _exit(2);
    /* connect first: the endpoint offers shared memory only on a connection it opens */
    if (write(ch->from[1], addr, sizeof addr) != sizeof addr || coc_engine_connect(e, gw) < 0 ||
        read(ch->to[0], addr, 1) != 1)
        _exit(2);
    uint8_t *out = malloc(MSG), *in = malloc(MSG);
    for (size_t i = 0; i < MSG; i++)
        out[i] = pattern(id, i);
    int bad = 0;
    for (int round = 0; round < ROUNDS && !bad; round++) {
        coc_request *s, *r;
        coc_status st = {0}, rs = {0};
        bad |= coc_irecv(e, (int32_t)other, 0, round, in, MSG, &r) < 0;
        bad |= coc_isend(e, other, 0, round, out, MSG, &s) < 0;
        if (coc_wait(r, 20 * T_SECOND, &rs) == COC_ETIMEDOUT || coc_wait(s, 20 * T_SECOND, &st) == COC_ETIMEDOUT)
            _exit(3); /* hung */
        bad |= rs.error || rs.count != MSG || st.error;
        for (size_t i = 0; !bad && i < MSG; i++)
            bad |= in[i] != pattern(other, i);
    }
    char log[4096];
    if (t == SHM && (coc_engine_take_log(e, log, sizeof log) < 0 || !strstr(log, "shared memory")))
        bad = 1; /* the path under test was not taken */
    _exit(bad);
}

static void spawn(child *ch, uint32_t id, uint32_t gw, enum transport t)
{
    CHECK(pipe(ch->to) == 0 && pipe(ch->from) == 0);
    ch->pid = fork();
    if (ch->pid == 0)
        endpoint_main(ch, id, gw, t);
}

/* Wait for a child up to `seconds`; its exit status, or -1 (killed) after that. */
static int reap(pid_t pid, int seconds)
{
    int status;
    for (int i = 0; i < seconds * 100; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static void exchange(enum transport t)
{
    child a, b;
    /* fork before any engine thread runs here (a fork may copy a lock a thread holds) */
    spawn(&a, 1, 10, t);
    spawn(&b, 2, 11, t);
    coc_engine *g = t_open(10, COC_ENGINE_FORWARD, 1, 0, FRAG, WINDOW);
    coc_engine *h = t_open(11, COC_ENGINE_FORWARD, 1, 0, FRAG, WINDOW);
    char addr[256];
    coc_engine_address(g, addr, sizeof addr);
    CHECK(write(a.to[1], addr, sizeof addr) == sizeof addr);
    coc_engine_address(h, addr, sizeof addr);
    CHECK(write(b.to[1], addr, sizeof addr) == sizeof addr);
    CHECK(read(a.from[0], addr, sizeof addr) == sizeof addr);
    CHECK_RC(coc_engine_add_peer(g, 1, addr));
    CHECK(read(b.from[0], addr, sizeof addr) == sizeof addr);
    CHECK_RC(coc_engine_add_peer(h, 2, addr));
    t_know(g, 11, h, t == TCP);
    t_know(h, 10, g, t == TCP);
    t_route(g, 2, 11);
    t_route(g, 1, 1);
    t_route(h, 1, 10);
    t_route(h, 2, 2);
    coc_stats sg, sh;
    for (int i = 0; i < 10000; i++) {
        coc_engine_stats(g, &sg);
        coc_engine_stats(h, &sh);
        if (sg.connections_open && sh.connections_open)
            break;
        usleep(1000);
    }
    CHECK(write(a.to[1], "", 1) == 1 && write(b.to[1], "", 1) == 1); /* go */
    /* both directions streaming: stop both endpoints until the gateways are full */
    for (int i = 0; i < 100000; i++) {
        coc_engine_stats(g, &sg);
        coc_engine_stats(h, &sh);
        if (sg.bytes_forwarded > (4u << 20) && sh.bytes_forwarded > (4u << 20))
            break;
        usleep(100);
    }
    for (int i = 0; i < STOPS; i++) {
        kill(a.pid, SIGSTOP);
        kill(b.pid, SIGSTOP);
        usleep(20000);
        kill(a.pid, SIGCONT);
        kill(b.pid, SIGCONT);
        usleep(i % 2 ? 20000 : 3000);
    }
    int ra = reap(a.pid, 60), rb = reap(b.pid, 60);
    CHECK(ra == 0 && rb == 0);
    printf("  %s: %d x %u MiB both ways, endpoints stopped %d times: endpoint exit %d, %d%s\n",
           names[t], ROUNDS, MSG >> 20, STOPS, ra, rb, ra == 3 || rb == 3 ? " (hung)" : "");
    coc_engine_close(g);
    coc_engine_close(h);
    for (int i = 0; i < 2; i++) {
        child *ch = i ? &b : &a;
        close(ch->to[0]);
        close(ch->to[1]);
        close(ch->from[0]);
        close(ch->from[1]);
    }
}

int main(void)
{
    for (enum transport t = SHM; t <= TCP; t++)
        exchange(t);
    CHECK_DONE();
}
