/*
 * test_sock.c — the socket helpers (src/sock.c) where a unix listener's backlog is full:
 * a non-blocking AF_UNIX connect then fails with EAGAIN and leaves the socket unconnected
 * (it is not "in progress" as on TCP). The helper tries again while the listener drains
 * its backlog, and gives up with -EAGAIN when it never does; the connection it returns is
 * connected (a byte crosses it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "coc/coc.h"
#include "check.h"
#include "sock.h"

/* A unix listener on the abstract `name` whose backlog is full: listen(0) admits one
 * connection that nobody accepts; *pending gets it. */
static int full_listener(const char *name, int *pending)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "%s", name);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sl) == 0 && listen(lfd, 0) == 0);
    *pending = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(*pending >= 0 && connect(*pending, (struct sockaddr *)&sa, sl) == 0);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(connect(probe, (struct sockaddr *)&sa, sl) < 0 && errno == EAGAIN); /* full */
    close(probe);
    return lfd;
}

static void *drain_soon(void *arg)
{
    int lfd = *(int *)arg;
    nanosleep(&(struct timespec){0, 5000000}, NULL); /* 5 ms: the first try finds it full */
    int a = accept(lfd, NULL, NULL);                  /* the pending one: room again */
    int b = accept(lfd, NULL, NULL);                  /* the helper's */
    if (a >= 0)
        close(a);
    return (void *)(intptr_t)b;
}

static void test_full_backlog_drains(void)
{
    char name[64];
    snprintf(name, sizeof name, "coc-test-sock/%d/drains", (int)getpid());
    int pending, lfd = full_listener(name, &pending);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, drain_soon, &lfd) == 0);
    int fd = coc__sock_connect_unix(name);
    void *accepted;
    pthread_join(t, &accepted);
    int peer = (int)(intptr_t)accepted;
    CHECK_RC(fd);
    CHECK(peer >= 0);
    char byte = 'x', got = 0;
    CHECK(fd >= 0 && write(fd, &byte, 1) == 1); /* connected, not merely created */
    CHECK(peer >= 0 && read(peer, &got, 1) == 1 && got == 'x');
    if (fd >= 0)
        close(fd);
    if (peer >= 0)
        close(peer);
    close(pending);
    close(lfd);
}

static void test_full_backlog_gives_up(void)
{
    char name[64];
    snprintf(name, sizeof name, "coc-test-sock/%d/stays-full", (int)getpid());
    int pending, lfd = full_listener(name, &pending);
    CHECK(coc__sock_connect_unix(name) == -EAGAIN);
    close(pending);
    close(lfd);
}

static void test_no_listener(void)
{
    CHECK(coc__sock_connect_unix("coc-test-sock/nobody-listens-here") == -ECONNREFUSED);
}

int main(void)
{
    test_full_backlog_drains();
    test_full_backlog_gives_up();
    test_no_listener();
    CHECK_DONE();
}
