/* poller.c — epoll implementation of poller.h. Level-triggered, so a reader may stop early. */
#include "poller.h"

#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>

static uint32_t to_epoll(unsigned events)
{
    return (events & COC__POLL_IN ? EPOLLIN | EPOLLRDHUP : 0) | (events & COC__POLL_OUT ? EPOLLOUT : 0);
}

int coc__poll_open(void)
{
    int fd = epoll_create1(EPOLL_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int ctl(int pfd, int op, int fd, unsigned events, uint64_t key)
{
    struct epoll_event ev = {.events = to_epoll(events), .data.u64 = key};
    return epoll_ctl(pfd, op, fd, &ev) < 0 ? -errno : 0;
}

int coc__poll_add(int pfd, int fd, unsigned events, uint64_t key)
{
    return ctl(pfd, EPOLL_CTL_ADD, fd, events, key);
}

int coc__poll_mod(int pfd, int fd, unsigned events, uint64_t key)
{
    return ctl(pfd, EPOLL_CTL_MOD, fd, events, key);
}

int coc__poll_del(int pfd, int fd)
{
    return epoll_ctl(pfd, EPOLL_CTL_DEL, fd, NULL) < 0 ? -errno : 0;
}

int coc__poll_wait(int pfd, coc__event *ev, int max, int timeout_ms)
{
    struct epoll_event eev[64];
    if (max > 64)
        max = 64;
    int n = epoll_wait(pfd, eev, max, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    for (int i = 0; i < n; i++) {
        uint32_t e = eev[i].events;
        ev[i].key = eev[i].data.u64;
        ev[i].events = (e & (EPOLLIN | EPOLLRDHUP) ? COC__POLL_IN : 0) | (e & EPOLLOUT ? COC__POLL_OUT : 0) |
                       (e & (EPOLLERR | EPOLLHUP) ? COC__POLL_ERR | COC__POLL_IN : 0);
    }
    return n;
}
