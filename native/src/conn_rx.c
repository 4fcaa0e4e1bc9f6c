/*
 * conn_rx.c — a connection's receive path (under e->plock): reading the socket, the
 * shared-memory ring or the record layer (rx_bytes), parsing frames from the buffer and
 * handing their headers and payload bytes to the protocol or the forwarder, and the
 * poller's events for a connection.
 *
 * Reading fills a page-aligned buffer and parses frames from it; a large payload whose
 * destination is known is read straight into place (the user's buffer, or the forwarding
 * buffer). On a connection with a record layer (record.h) rx_bytes goes through it.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "sock.h"

static void payload_end(coc__conn *c)
{
    c->rstate = COC__RX_HDR;
    if (c->rfwding) {
        c->rfwding = 0;
        c->rfwd = NULL;
        c->rfwd_out = NULL;
    } else {
        c->on->on_frame_end(c);
    }
    c->sink = NULL;
    c->sink_cap = 0;
}

static void payload_start(coc__conn *c)
{
    c->rstate = COC__RX_HDR;
    c->rleft = c->rh.len - c->rpre; /* forward_begin may have taken some already */
    c->rdone = c->rpre;
    c->rpre = 0;
    if (c->rleft)
        c->rstate = COC__RX_PAYLOAD;
    else
        payload_end(c);
}

/* n payload bytes at src (which may already be their final place) */
static void payload_bytes(coc__conn *c, const uint8_t *src, size_t n)
{
    if (c->rfwding) {
        c->on->on_forward_bytes(c, src, n);
    } else if (c->rdone < c->sink_cap) {
        uint64_t keep = c->sink_cap - c->rdone < n ? c->sink_cap - c->rdone : n;
        if (c->sink + c->rdone != src)
            memcpy(c->sink + c->rdone, src, keep);
    }
    c->rdone += n;
    c->rleft -= n;
    if (!c->rleft)
        payload_end(c);
}

/* Where the rest of the payload may be read straight into, or NULL. */
static uint8_t *direct_target(coc__conn *c, size_t *max)
{
    if (c->rfwding) {
        if (!c->rfwd)
            return NULL;
        *max = c->rleft;
        return c->rfwd->owned + c->rfwd->filled;
    }
    if (c->rdone >= c->sink_cap)
        return NULL;
    *max = c->sink_cap - c->rdone < c->rleft ? c->sink_cap - c->rdone : c->rleft;
    return c->sink + c->rdone;
}

static int frame_header(coc__conn *c)
{
    const char *why = NULL;
    if (coc__hdr_decode(c->rbuf + c->rpos, &c->rh, &why) < 0) {
        c->why = why;
        return COC_EPROTO;
    }
    c->rpos += COC__HDR_LEN;
    if (coc__hs_source_ok(c, &c->rh) < 0)
        return COC_EPROTO;
    if (c->rh.dest != c->e->self) {
        if (!c->e->forward) {
            c->why = "frame for another endpoint, and this one does not forward";
            return COC_EPROTO;
        }
        c->rfwding = 1;
        int rc = c->on->on_forward(c);
        if (rc != 0)
            return rc; /* 1: paused on a full window */
    } else {
        int rc = c->on->on_frame(c);
        if (rc < 0)
            return rc;
    }
    payload_start(c);
    return 0;
}

static int conn_read(coc__conn *c);

int coc__conn_unpause(coc__conn *c)
{
    int rc = c->on->on_forward(c);
    if (rc == 1)
        return 0; /* paused again */
    pthread_mutex_lock(&c->e->lock);
    coc__conn_set_in(c, 1);
    pthread_mutex_unlock(&c->e->lock);
    if (rc < 0)
        return rc;
    payload_start(c);
    rc = coc__conn_parse(c);
    if (rc >= 0 && c->rec && coc__rec_rx_ready(c->rec))
        rc = conn_read(c); /* records already read from the socket: no event will come */
    return rc;
}

int coc__conn_parse(coc__conn *c)
{
    c->rx_count++; /* liveness: bytes came (reliable.c) */
    for (;;) {
        size_t avail = c->rlen - c->rpos;
        int rc;
        switch (c->rstate) {
        case COC__RX_HELLO:
            if (avail < COC__HELLO_LEN)
                return 0;
            c->rpos += COC__HELLO_LEN;
            if ((rc = coc__hs_hello(c, c->rbuf + c->rpos - COC__HELLO_LEN)) < 0)
                return rc;
            c->rstate = COC__RX_PROOF;
            break;
        case COC__RX_PROOF:
            if (avail < COC__PROOF_LEN)
                return 0;
            c->rpos += COC__PROOF_LEN;
            if ((rc = coc__hs_proof(c, c->rbuf + c->rpos - COC__PROOF_LEN)) < 0)
                return rc;
            c->rstate = COC__RX_HDR;
            if (c->rec) { /* what follows are records: hand them to the record layer */
                size_t room;
                memcpy(coc__rec_rx_space(c->rec, &room), c->rbuf + c->rpos, c->rlen - c->rpos);
                coc__rec_rx_fed(c->rec, c->rlen - c->rpos);
                c->rlen = c->rpos;
            }
            if (c->ring)
                c->rlen = c->rpos; /* what follows on the socket are doorbell bytes */
            break;
        case COC__RX_HDR:
            if (avail < COC__HDR_LEN)
                return 0;
            rc = frame_header(c);
            if (rc < 0)
                return rc;
            if (rc == 1) {
                c->rstate = COC__RX_PAUSED;
                return 0;
            }
            break;
        case COC__RX_PAYLOAD: {
            if (!avail)
                return 0;
            size_t n = avail < c->rleft ? avail : c->rleft;
            c->rpos += n;
            payload_bytes(c, c->rbuf + c->rpos - n, n);
            break;
        }
        default: /* paused */
            return 0;
        }
    }
}

#define READS_PER_EVENT 32 /* then let other connections have their turn */

/* Plaintext of the record layer into dst, reading the socket while no whole record is
 * buffered. Returns less than want only when the socket has nothing more now (or ended);
 * -1 with errno EBADMSG (c->why set) for a bad record. */
static ssize_t rec_rx(coc__conn *c, uint8_t *dst, size_t want)
{
    coc_engine *e = c->e;
    size_t done = 0;
    for (;;) {
        size_t wire, plain, room;
        const char *why = NULL;
        ssize_t n = coc__rec_rx_take(c->rec, dst + done, want - done, &why, &wire, &plain);
        if (n < 0) {
            c->why = why;
            errno = EBADMSG;
            return -1;
        }
        __atomic_fetch_add(&e->stats.record_wire_received, wire, __ATOMIC_RELAXED);
        __atomic_fetch_add(&e->stats.record_plain_received, plain, __ATOMIC_RELAXED);
        done += (size_t)n;
        uint8_t *space = coc__rec_rx_space(c->rec, &room);
        if (done == want || !room)
            return (ssize_t)done;
        ssize_t got = recv(c->fd, space, room, MSG_DONTWAIT);
        if (got > 0) {
            coc__rec_rx_fed(c->rec, (size_t)got);
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        return done ? (ssize_t)done : got; /* an end or error shows on the next call */
    }
}

/* Bytes of the stream into dst: > 0 read, 0 end of stream, -1 with errno. */
static ssize_t rx_bytes(coc__conn *c, uint8_t *dst, size_t want)
{
    if (c->rec)
        return rec_rx(c, dst, want);
    if (c->ring) {
        int bell;
        size_t n = coc__ring_read(&c->rx, dst, want, &bell);
        if (bell)
            doorbell(c);
        if (n)
            return (ssize_t)n;
        errno = EAGAIN;
        return -1;
    }
    if (c->rstate == COC__RX_HELLO && c->unix_ && !c->outgoing)
        return coc__hs_recv_hello(c, dst, want);
    /* recv, not read: the socket call skips the file layer's steps (about 0.1 us a frame).
     * It waits only when a blocked waiter asked (rx_wait, once: coc__progress_lone). */
    int flags = c->rx_wait ? 0 : MSG_DONTWAIT;
    c->rx_wait = 0;
    return recv(c->fd, dst, want, flags);
}

static int conn_read(coc__conn *c)
{
    /* records the layer holds are read on: no socket event would report them */
    for (int round = 0; round < READS_PER_EVENT || (c->rec && coc__rec_rx_ready(c->rec)); round++) {
        if (c->rstate == COC__RX_PAUSED || c->state == COC__CS_DEAD)
            return 0;
        uint8_t *dst = NULL;
        size_t want = 0;
        int direct = c->rstate == COC__RX_PAYLOAD && c->rpos == c->rlen && c->rleft >= COC__DIRECT_READ &&
                     (dst = direct_target(c, &want)) != NULL;
        if (!direct) {
            if (c->rpos) {
                if (c->rpos < c->rlen) /* as a rule all was parsed: nothing to move */
                    memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
            }
            dst = c->rbuf + c->rlen;
            want = COC__RBUF - c->rlen;
        }
        ssize_t n = rx_bytes(c, dst, want);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EBADMSG && c->rec)
                return COC_EPROTO; /* c->why names the bad record */
            c->why = "read failed";
            return -errno;
        }
        if (n == 0) {
            c->why = c->rstate == COC__RX_PAYLOAD ? "closed in the middle of a frame"
                     : !c->authed ? "closed during the handshake: the peer refused it (its log says why)"
                                  : "closed";
            return COC_EPEERLOST;
        }
        if (!c->ring)
            __atomic_fetch_add(&c->e->stats.socket_reads, 1, __ATOMIC_RELAXED);
        /* a short read emptied the socket: with the round's last event, no input follows */
        c->e->input_end = c->e->input_last && (size_t)n < want && !c->rec;
        if (direct) {
            payload_bytes(c, dst, (size_t)n);
        } else {
            c->rlen += (size_t)n;
            int rc = coc__conn_parse(c);
            if (rc < 0)
                return rc;
        }
        if ((size_t)n < want && !(c->rec && coc__rec_rx_ready(c->rec)))
            return 0;
    }
    return 0; /* more to read: level-triggered polling reports it again */
}

static void read_or_fail(coc_engine *e, coc__conn *c, int rc)
{
    if (rc >= 0)
        rc = conn_read(c);
    if (rc < 0) {
        pthread_mutex_lock(&e->lock);
        coc__conn_fail(c, rc, c->why ? c->why : "error");
        pthread_mutex_unlock(&e->lock);
    }
}

/* The socket of a shared-memory connection is readable: doorbells (data, or room for our
 * queued frames) or its end. The ring is read before an end is reported, so frames the
 * peer wrote before closing (its BYE) are not lost. */
static void ring_event(coc_engine *e, coc__conn *c)
{
    uint8_t bells[256];
    ssize_t n;
    while ((n = read(c->fd, bells, sizeof bells)) > 0)
        ;
    int rc = 0;
    if (n == 0) {
        c->why = "closed";
        rc = COC_EPEERLOST;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        c->why = "read failed";
        rc = -errno;
    }
    pthread_mutex_lock(&e->lock);
    if (c->queue.head)
        coc__conn_flush(c);
    pthread_mutex_unlock(&e->lock);
    if (rc < 0 && c->rstate != COC__RX_PAUSED)
        while (coc__ring_avail(&c->rx) && c->rstate != COC__RX_PAUSED && c->state != COC__CS_DEAD)
            if (conn_read(c) < 0)
                break;
    read_or_fail(e, c, rc);
}

void coc__conn_poll_rings(coc_engine *e)
{
    COC__EACH(c, &e->shm, coc__conn, shm_link)
        if (c->state != COC__CS_DEAD && c->rstate != COC__RX_PAUSED && coc__ring_avail(&c->rx))
            read_or_fail(e, c, 0);
}

int coc__conn_rings_idle(coc_engine *e, int on)
{
    int data = 0;
    COC__EACH(c, &e->shm, coc__conn, shm_link) {
        if (c->state == COC__CS_DEAD || c->rstate == COC__RX_PAUSED)
            continue;
        if (!on)
            coc__ring_wake(&c->rx);
        else
            data |= coc__ring_sleep(&c->rx);
    }
    return data;
}

void coc__conn_event(coc_engine *e, coc__conn *c, unsigned events)
{
    if (c->state == COC__CS_CONNECTING && (events & (COC__POLL_OUT | COC__POLL_ERR))) {
        int rc = coc__sock_error(c->fd);
        pthread_mutex_lock(&e->lock);
        if (rc < 0) {
            coc__log(e, "cannot connect to %s: %s", c->name, coc_strerror(rc));
            coc__conn_fail(c, rc, "connect failed");
        } else {
            c->state = COC__CS_HANDSHAKE;
            coc__conn_flush(c);
        }
        pthread_mutex_unlock(&e->lock);
        if (rc < 0)
            return;
    } else if (events & COC__POLL_OUT) {
        pthread_mutex_lock(&e->lock);
        coc__conn_flush(c);
        pthread_mutex_unlock(&e->lock);
    }
    if ((events & COC__POLL_ERR) && c->rstate == COC__RX_PAUSED && !c->ring &&
        c->state == COC__CS_OPEN) {
        /* The peer hung up while we do not read (a gateway's full forwarding window): the
         * poller reports a hang-up whatever we ask for, so a paused connection left in it
         * woke the progress thread at once, round after round (a gateway at 100 % CPU until
         * the window drained). Out of the poller until reading resumes, which then reads
         * what the peer sent before it hung up, and its end. */
        pthread_mutex_lock(&e->lock);
        if (c->rstate == COC__RX_PAUSED && !c->parked) {
            c->parked = 1;
            coc__poll_del(e->pfd, c->fd);
        }
        pthread_mutex_unlock(&e->lock);
        return;
    }
    if ((events & COC__POLL_IN) && c->ring && c->state != COC__CS_DEAD) {
        ring_event(e, c);
        return;
    }
    if ((events & COC__POLL_IN) && c->state != COC__CS_CONNECTING && c->state != COC__CS_DEAD) {
        int rc = conn_read(c);
        if (rc < 0) {
            pthread_mutex_lock(&e->lock);
            coc__conn_fail(c, rc, c->why ? c->why : "error");
            pthread_mutex_unlock(&e->lock);
        }
    }
}
