/* test_failure.c — a peer killed mid-message: the requests that need it fail with
 * COC_EPEERLOST (directly, and through a gateway that reports it), nothing hangs. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engines.h"

#define HUGE_MSG (256u << 20)

/* Children are forked before the parent opens any engine (a fork while engine threads
 * run may copy a lock held by one of them, e.g. the sanitizer's allocator lock). */
typedef struct child {
    pid_t pid;
    int to_child, from_child;
    char address[256];
} child;

/* Fork endpoint `id`; it waits for `peer`'s address, routes everything there, then runs
 * `role`: 'r' receives HUGE_MSG from anyone, 's' sends HUGE_MSG to dest. Once the
 * transfer is under way (the receiver sent its CTS / the sender wrote 16 MiB) the child
 * stops itself, so the parent kills it mid-message whatever the machine's load. */
static child spawn(uint32_t id, uint32_t peer, char role, uint32_t dest)
{
    int down[2], up[2];
    child c = {0};
    CHECK(pipe(down) == 0 && pipe(up) == 0);
    c.pid = fork();
    if (c.pid == 0) {
        char peer_addr[256];
        if (read(down[0], peer_addr, sizeof peer_addr) != sizeof peer_addr)
            _exit(2);
        coc_engine *e = t_open(id, 0, 1, 0, 0, 0);
        char addr[256];
        coc_engine_address(e, addr, sizeof addr);
        coc_engine_add_peer(e, peer, peer_addr);
        t_route(e, peer, peer);
        if (dest != peer)
            t_route(e, dest, peer);
        uint8_t *buf = malloc(HUGE_MSG);
        memset(buf, 1, HUGE_MSG);
        coc_request *r;
        if (role == 'r')
            coc_irecv(e, COC_ANY_SOURCE, 0, 0, buf, HUGE_MSG, &r);
        if (write(up[1], addr, sizeof addr) != sizeof addr)
            _exit(2);
        if (role == 's')
            coc_isend(e, dest, 0, 0, buf, HUGE_MSG, &r);
        coc_stats st;
        for (;;) {
            coc_engine_stats(e, &st);
            if (role == 'r' ? st.frames_sent >= 1 : st.bytes_sent > (16u << 20))
                break;
            usleep(50); /* leave the engine's lock to its progress thread */
        }
        raise(SIGSTOP);
        coc_wait(r, 60 * T_SECOND, NULL);
        _exit(0);
    }
    close(down[0]);
    close(up[1]);
    c.to_child = down[1];
    c.from_child = up[0];
    return c;
}

/* Give the child its peer's address and take its own. */
static void start(child *c, const char *peer_addr)
{
    char buf[256] = {0};
    snprintf(buf, sizeof buf, "%s", peer_addr);
    CHECK(write(c->to_child, buf, sizeof buf) == sizeof buf);
    CHECK(read(c->from_child, c->address, sizeof c->address) == sizeof c->address);
    close(c->to_child);
    close(c->from_child);
}

/* Wait (10 s at most) for the child to stop itself, check the message is still in flight
 * at `e`, then kill the child. */
static void kill_stopped(coc_engine *e, pid_t pid, int sent)
{
    int status = 0;
    for (int i = 0; i < 10000 && waitpid(pid, &status, WUNTRACED | WNOHANG) == 0; i++)
        usleep(1000);
    CHECK(WIFSTOPPED(status));
    usleep(50000); /* let every buffer on the way fill */
    coc_stats st;
    coc_engine_stats(e, &st);
    CHECK((sent ? st.bytes_sent : st.bytes_received) < HUGE_MSG); /* really mid-message */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static char my_address[256];

static coc_engine *open_parent(uint32_t id, uint32_t flags)
{
    coc_engine *e = t_open(id, flags, 1, 0, 0, 0);
    coc_engine_address(e, my_address, sizeof my_address);
    return e;
}

int main(void)
{
    uint8_t *buf = malloc(HUGE_MSG);
    memset(buf, 7, HUGE_MSG);
    coc_request *s, *r, *any;
    coc_status st;

    /* 1. we send, the receiver dies mid-message */
    child b = spawn(2, 1, 'r', 1);
    coc_engine *a = open_parent(1, 0);
    start(&b, my_address);
    CHECK_RC(coc_engine_add_peer(a, 2, b.address));
    t_route(a, 2, 2);
    CHECK_RC(coc_irecv(a, 2, 5, 0, buf, 10, &r));
    CHECK_RC(coc_irecv(a, COC_ANY_SOURCE, 5, 0, buf, 10, &any));
    CHECK_RC(coc_isend(a, 2, 0, 0, buf, HUGE_MSG, &s));
    kill_stopped(a, b.pid, 1);
    CHECK(coc_wait(s, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST);
    CHECK(coc_wait(r, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST && st.source == 2);
    CHECK(coc_wait(any, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST && st.source == 2);
    coc_stats sa;
    coc_engine_stats(a, &sa);
    CHECK(sa.peers_lost == 1 && sa.connections_open == 0);
    coc_request_free(s);
    coc_request_free(r);
    coc_request_free(any);
    /* a later send finds no one: refused at once (unix) or failed request (tcp) */
    int rc = coc_isend(a, 2, 0, 0, buf, HUGE_MSG, &s);
    if (rc == 0) {
        CHECK(coc_wait(s, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST);
        coc_request_free(s);
    } else {
        CHECK(rc == -ECONNREFUSED);
    }
    coc_engine_close(a);

    /* 2. we receive, the sender dies mid-message */
    b = spawn(2, 1, 's', 1);
    a = open_parent(1, 0);
    start(&b, my_address);
    CHECK_RC(coc_engine_add_peer(a, 2, b.address));
    t_route(a, 2, 2);
    CHECK_RC(coc_irecv(a, 2, 0, 0, buf, HUGE_MSG, &r));
    kill_stopped(a, b.pid, 0);
    CHECK(coc_wait(r, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST && st.source == 2);
    coc_request_free(r);
    coc_engine_close(a);

    /* 3. through a gateway: 1 -> 10 -> 2, and 2 dies mid-message; 10 tells 1 */
    b = spawn(2, 10, 'r', 1);
    a = open_parent(1, 0);
    char a_addr[256];
    memcpy(a_addr, my_address, sizeof a_addr);
    coc_engine *g = open_parent(10, COC_ENGINE_FORWARD);
    start(&b, my_address);
    t_know(a, 10, g, 0);
    t_route(a, 2, 10);
    t_route(a, 10, 10);
    CHECK_RC(coc_engine_add_peer(g, 2, b.address));
    CHECK_RC(coc_engine_add_peer(g, 1, a_addr));
    t_route(g, 2, 2);
    t_route(g, 1, 1);
    CHECK_RC(coc_irecv(a, COC_ANY_SOURCE, 5, 0, buf, 10, &any));
    CHECK_RC(coc_isend(a, 2, 0, 0, buf, HUGE_MSG, &s));
    kill_stopped(a, b.pid, 1);
    CHECK(coc_wait(s, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST);
    CHECK(coc_wait(any, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST && st.source == 2);
    coc_request_free(s);
    coc_request_free(any);
    coc_stats sg;
    coc_engine_stats(g, &sg);
    CHECK(sg.peers_lost == 1);
    coc_engine_close(a);
    coc_engine_close(g);

    /* 4. an endpoint that never sent anything dies behind a gateway: having connected to
     * the gateway at start is enough for a receive naming it to fail */
    int fds[2], gfd[2];
    CHECK(pipe(fds) == 0 && pipe(gfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char g_addr[256];
        if (read(gfd[0], g_addr, sizeof g_addr) != sizeof g_addr)
            _exit(2);
        coc_engine *c = t_open(2, 0, 1, 0, 0, 0);
        CHECK_RC(coc_engine_add_peer(c, 10, g_addr));
        t_route(c, 1, 10);
        CHECK(coc_engine_connect(c, 1) == COC_ENOROUTE); /* not a next hop */
        CHECK_RC(coc_engine_connect(c, 10));
        coc_stats cs;
        do {
            usleep(1000);
            coc_engine_stats(c, &cs);
        } while (cs.connections_open == 0);
        CHECK(write(fds[1], "x", 1) == 1);
        _exit(check_failures);
    }
    a = open_parent(1, 0);
    memcpy(a_addr, my_address, sizeof a_addr);
    g = open_parent(10, COC_ENGINE_FORWARD);
    CHECK(write(gfd[1], my_address, sizeof my_address) == sizeof my_address);
    char x;
    CHECK(read(fds[0], &x, 1) == 1);
    t_know(a, 10, g, 0);
    t_route(a, 2, 10);
    CHECK_RC(coc_engine_add_peer(g, 1, a_addr));
    t_route(g, 2, 2);
    t_route(g, 1, 1);
    CHECK_RC(coc_irecv(a, 2, 0, 0, buf, 10, &r));
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(coc_wait(r, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST && st.source == 2);
    coc_request_free(r);
    coc_engine_close(a);
    coc_engine_close(g);
    close(fds[0]);
    close(fds[1]);
    close(gfd[0]);
    close(gfd[1]);
    free(buf);
    CHECK_DONE();
}
