/* poller.h — the engine's readiness poller: epoll behind four calls (as redis ae_epoll.c). */
#ifndef COC_POLLER_H
#define COC_POLLER_H

#include <stdint.h>

#define COC__POLL_IN 0x1
#define COC__POLL_OUT 0x2
#define COC__POLL_ERR 0x4 /* error or hang-up: reported with IN so reads find it */

typedef struct coc__event {
    uint64_t key;     /* what the caller registered */
    unsigned events;  /* COC__POLL_* */
} coc__event;

int coc__poll_open(void);                                  /* an fd, or -errno */
int coc__poll_add(int pfd, int fd, unsigned events, uint64_t key);
int coc__poll_mod(int pfd, int fd, unsigned events, uint64_t key);
int coc__poll_del(int pfd, int fd);
/* Wait up to timeout_ms (-1: no limit; 0: just look); returns the number of events or -errno. */
int coc__poll_wait(int pfd, coc__event *ev, int max, int timeout_ms);

#endif
