/*
 * conn.h — what the three files of a connection share: conn.c (set-up, failure, the
 * end), conn_rx.c (the receive path, the poller's events) and conn_tx.c (the send path).
 * Small helpers, inline so the hot paths stay as they were.
 */
#ifndef COC_CONN_H
#define COC_CONN_H

#include <sys/socket.h>

#include "engine.h"
#include "poller.h"

static inline void set_events(coc__conn *c, unsigned events)
{
    if (c->state == COC__CS_DEAD)
        return;
    if (c->parked) { /* out of the poller until reading resumes (coc__conn_event) */
        c->events = events;
        if (events & COC__POLL_IN) {
            c->parked = 0;
            coc__poll_add(c->e->pfd, c->fd, events, c->key);
        }
        return;
    }
    if (events == c->events)
        return;
    c->events = events;
    coc__poll_mod(c->e->pfd, c->fd, events, c->key);
}

/* Frames of this connection go through its shared-memory ring (after the handshake). */
static inline int on_ring(const coc__conn *c)
{
    return c->authed && c->tx.ctl;
}

static inline void set_out(coc__conn *c, int on)
{
    if (on_ring(c))
        on = 0; /* the socket is always writable; a full ring's reader rings the bell */
    set_events(c, on ? c->events | COC__POLL_OUT : c->events & ~COC__POLL_OUT);
}

/* Ring the peer's doorbell. A full socket means a bell is pending already; a broken one
 * shows up on the reading side. */
static inline void doorbell(coc__conn *c)
{
    if (send(c->fd, "", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    }
}

/* An item leaves the queue: written (error 0) or dropped with its connection (conn_tx.c). */
void coc__item_release(coc__conn *c, coc__item *it, int error);

#endif
