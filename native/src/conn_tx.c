/*
 * conn_tx.c — a connection's send path (under e->lock): queueing frames and forwarded
 * items, writing the queue in batches to the socket, the shared-memory ring or the record
 * layer (tx_bytes), corking a gateway's forwarded frames, holding an endpoint's bursts
 * (send coalescing), and emulated delay.
 *
 * Writing batches queued frames into one sendmsg. A caller whose frame finds the queue
 * empty writes it itself (coc__conn_send), so a small message leaves without waking the
 * progress thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <sys/uio.h>

#include "conn.h"

#define IOV_MAX_BATCH 64 /* iovecs per sendmsg: 32 frames of an endpoint, 64 forwarded */

void coc__conn_arm_timer(coc_engine *e, uint64_t due)
{
    if (e->timer_due && e->timer_due <= due)
        return;
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(due / 1000000000u),
                                          .tv_nsec = (long)(due % 1000000000u)}};
    timerfd_settime(e->tfd, TFD_TIMER_ABSTIME, &its, NULL);
    e->timer_due = due;
}

static size_t frame_len(const coc__item *it)
{
    return it->kind == COC__IT_FWD ? it->size : COC__HDR_LEN + it->len;
}

/* The bytes of send s at offset: a pointer and *n clipped to one buffer of a gather. */
static const uint8_t *send_bytes(const coc_request *s, uint64_t offset, uint64_t *n)
{
    if (!s->iov)
        return s->sbuf + offset;
    for (size_t i = 0; i < s->niov; i++) {
        if (offset < s->iov[i].len) {
            if (*n > s->iov[i].len - offset)
                *n = s->iov[i].len - offset;
            return (const uint8_t *)s->iov[i].base + offset;
        }
        offset -= s->iov[i].len;
    }
    *n = 0; /* not reached: offsets stay below the message's size */
    return NULL;
}

int coc__stream_next(coc_engine *e, coc__item *it)
{
    const coc__stripe *sp = it->stripe;
    if (!it->sub) {
        while (it->spos < sp->nfrag && sp->lane[it->spos] != it->lane)
            it->spos++;
        if (it->spos == sp->nfrag)
            return 0;
    }
    uint64_t end = (it->spos + 1) * e->cfg.fragment_size;
    if (end > it->sh.total)
        end = it->sh.total;
    uint64_t offset = it->spos * e->cfg.fragment_size + it->sub;
    uint64_t n = end - offset;
    it->data = send_bytes(it->req, offset, &n); /* a gather's buffer may end first */
    if (offset + n == end) {
        it->spos++;
        it->sub = 0;
    } else {
        it->sub += n;
    }
    it->sh.offset = offset;
    it->sh.len = (uint32_t)n;
    coc__hdr_encode(&it->sh, it->hdr);
    it->len = n;
    it->off = 0;
    e->stats.frames_sent++;
    e->stats.bytes_sent += n;
    return 1;
}

/* An item leaves the queue: written (error 0) or dropped with its connection. */
void coc__item_release(coc__conn *c, coc__item *it, int error)
{
    coc_engine *e = c->e;
    coc_request *r = it->req;
    if (r) {
        /* a striped send completes when its last lane is done; one lost lane fails it,
         * and its receiver hears so (its other lanes may have delivered all they had) */
        if (error && r->keep && it->kind == COC__IT_STREAM)
            r->relane = 1; /* its fragments go again after the failover */
        if (error && !r->doomed && !r->keep) {
            r->doomed = error;
            if (it->kind == COC__IT_STREAM && atomic_load(&r->state) != COC__REQ_DONE)
                c->on->on_stream_failed(e, r, it->sh.rcookie);
        }
        /* a send whose bytes cross a gateway (reliable.c) is kept: an eager one lost here
         * is sent again from its copy (it completes); a rendezvous one waits for the
         * receiver's DONE, and a lost lane is streamed again after the failover */
        if (r->busy && --r->busy == 0 &&
            (!r->keep || r->phase != COC__RDV || r->confirmed || r->doomed)) {
            r->st.count = r->len;
            coc__complete(e, r, r->doomed);
        }
    }
    if (it->stripe && --it->stripe->refs == 0)
        free(it->stripe);
    if (it->kind == COC__IT_FWD) {
        c->on->on_forward_written(c, it); /* takes the item */
        return;
    }
    if (it->owned) {
        c->copied -= it->len;
        free(it->owned);
    }
    free(it);
}

/* The head item's current frame is written: move on. Returns 1 when the item is gone. */
static int frame_written(coc__conn *c, coc__item *it)
{
    coc_engine *e = c->e;
    if (it->kind == COC__IT_STREAM && !it->req->doomed && coc__stream_next(e, it))
        return 0;
    coc__list_remove(&c->queue, &it->link);
    coc__item_release(c, it, 0);
    return 1;
}

static void consume(coc__conn *c, size_t n)
{
    while (n && c->queue.head) {
        coc__item *it = COC__FIRST(&c->queue, coc__item, link);
        size_t end = it->kind == COC__IT_FWD ? it->filled : frame_len(it);
        size_t take = end - it->off < n ? end - it->off : n;
        it->off += take;
        n -= take;
        if (it->off == frame_len(it))
            frame_written(c, it);
    }
}

/* Write iov's bytes as records: first what is pending of the last record, then one record
 * after another while the socket takes them. Returns the iov bytes taken into records
 * (a record taken but not yet all written is pending: the socket is watched for room),
 * or -1 with errno (EAGAIN: none taken). */
static ssize_t rec_tx(coc__conn *c, const struct iovec *iov, int cnt)
{
    coc_engine *e = c->e;
    size_t total = 0, taken = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    for (;;) {
        const uint8_t *data;
        size_t pending = coc__rec_tx_pending(c->rec, &data);
        if (pending) {
            ssize_t n = send(c->fd, data, pending, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                return -1;
            if (n > 0)
                coc__rec_tx_done(c->rec, (size_t)n);
            if (n < 0 || (size_t)n < pending)
                break; /* the socket is full */
            continue;
        }
        if (taken == total)
            break;
        struct iovec rest[IOV_MAX_BATCH];
        int nrest = 0;
        size_t skip = taken;
        for (int i = 0; i < cnt; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            rest[nrest++] = (struct iovec){(uint8_t *)iov[i].iov_base + skip, iov[i].iov_len - skip};
            skip = 0;
        }
        size_t wire;
        int raw;
        ssize_t n = coc__rec_tx_seal(c->rec, rest, nrest, &wire, &raw);
        if (n < 0) {
            errno = EIO;
            return -1;
        }
        taken += (size_t)n;
        e->stats.record_plain_sent += (size_t)n;
        e->stats.record_wire_sent += wire;
        e->stats.records_raw += (unsigned)raw;
    }
    if (coc__rec_tx_pending(c->rec, NULL))
        set_out(c, 1);
    if (!taken && total) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)taken;
}

/* Write iov to the peer: into the ring once it is in use, else onto the socket.
 * Returns bytes written or -1 with errno (EAGAIN: full; a full ring's reader rings). */
static ssize_t tx_bytes(coc__conn *c, struct iovec *iov, int cnt)
{
    if (c->rec)
        return rec_tx(c, iov, cnt);
    if (!on_ring(c)) {
        c->e->stats.socket_writes++;
        /* MSG_DONTWAIT: the socket may block (c->blocking), a write must not */
        if (cnt == 1) /* send, not sendmsg: no vector to copy in (a forwarded frame) */
            return send(c->fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
        return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    for (;;) {
        int bell;
        size_t n = coc__ring_write(&c->tx, iov, cnt, &bell);
        if (bell)
            doorbell(c);
        if (n)
            return (ssize_t)n;
        if (!coc__ring_want_room(&c->tx)) {
            errno = EAGAIN;
            return -1;
        }
    }
}

void coc__conn_flush(coc__conn *c)
{
    coc_engine *e = c->e;
    c->nheld = 0; /* whatever was held leaves now */
    if (c->state == COC__CS_DEAD || c->state == COC__CS_CONNECTING)
        return;
    int rc = coc__hs_write(c);
    if (rc < 0) {
        coc__conn_fail(c, rc, "write failed");
        return;
    }
    if (rc == 1 || !c->authed) {
        set_out(c, rc == 1);
        return;
    }
    if (c->rec && !c->queue.head) { /* only the rest of a record to write */
        if (rec_tx(c, NULL, 0) < 0)
            coc__conn_fail(c, -errno, "write failed");
        else
            set_out(c, coc__rec_tx_pending(c->rec, NULL) != 0);
        return;
    }
    uint64_t now = 0;
    while (c->queue.head) {
        struct iovec iov[IOV_MAX_BATCH];
        int cnt = 0;
        size_t total = 0;
        for (coc__item *it = COC__FIRST(&c->queue, coc__item, link); it && cnt + 2 <= IOV_MAX_BATCH;
             it = COC__NEXT(it, coc__item, link)) {
            if (it->due_ns) {
                if (!now)
                    now = coc__now_ns();
                if (it->due_ns > now) {
                    coc__conn_arm_timer(e, it->due_ns);
                    break;
                }
            }
            if (it->kind == COC__IT_FWD) {
                if (it->filled > it->off) {
                    iov[cnt++] = (struct iovec){it->owned + it->off, it->filled - it->off};
                    total += it->filled - it->off;
                }
                if (it->filled < it->size)
                    break; /* cut-through: the rest has not arrived yet */
                continue;
            }
            if (it->off < COC__HDR_LEN) {
                iov[cnt++] = (struct iovec){it->hdr + it->off, COC__HDR_LEN - it->off};
                total += COC__HDR_LEN - it->off;
            }
            size_t done = it->off > COC__HDR_LEN ? it->off - COC__HDR_LEN : 0;
            if (it->len > done) {
                iov[cnt++] = (struct iovec){(void *)(it->data + done), it->len - done};
                total += it->len - done;
            }
            if (it->kind == COC__IT_STREAM)
                break; /* its next frame's header is built when this one is out */
        }
        if (!cnt)
            break;
        ssize_t n = tx_bytes(c, iov, cnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_out(c, 1);
                return;
            }
            coc__conn_fail(c, -errno, "write failed");
            return;
        }
        consume(c, (size_t)n);
        if ((size_t)n < total) {
            if (on_ring(c) && coc__ring_want_room(&c->tx))
                continue; /* room again already; else the reader rings when it makes some */
            set_out(c, 1);
            return;
        }
    }
    set_out(c, coc__rec_tx_pending(c->rec, NULL) != 0);
}

/* A gateway's forwarded frame queued while the progress holder handles a batch of input
 * (e->corking) waits for the end of the batch, when coc__conn_uncork writes each queue
 * once: the frames of one read leave in one sendmsg, not one each (issue 17). Returns
 * 1 when the frame waits. */
static int cork(coc__conn *c, const coc__item *it)
{
    coc_engine *e = c->e;
    if (!e->corking || it->kind != COC__IT_FWD)
        return 0;
    for (int i = 0; i < e->ncorked; i++)
        if (e->corked[i] == c)
            return 1;
    if (e->ncorked == COC__CORK_MAX)
        return 0;
    e->corked[e->ncorked++] = c;
    return 1;
}

void coc__conn_uncork(coc_engine *e)
{
    /* from the end: a flush that fails its connection frees it, and conn_free moves the
     * last entry (flushed already) into its slot; walking forwards skipped that entry,
     * and its held frames then waited for a post that might never come */
    for (int i = e->ncorked - 1; i >= 0; i--)
        if (i < e->ncorked)
            coc__conn_flush(e->corked[i]);
    e->ncorked = 0;
}

/*
 * Send coalescing (issue 17). An endpoint that posts frames on a socket connection less
 * than hold_ns apart (a burst of Isends: a Python Isend costs a few microseconds, a
 * sendmsg through a veth and a bridge about as much again) writes the first at once and
 * holds the ones after it. The held frames leave together, one sendmsg, when the caller
 * next waits, tests or looks (coc_wait, coc_test, and so every blocking send and
 * receive), when a progress step runs (the progress thread or a waiter handles any event),
 * when HOLD_FRAMES_MAX wait, when the caller posts another once the first has waited
 * hold_ns, or at the latest HOLD_TIMER x hold_ns after the first (the delay timer). So a
 * lone frame (none posted on that connection for hold_ns) is never held, and a held one
 * waits only while its sender goes on posting without waiting, or, if it stops posting
 * and neither waits nor looks, until the timer. The timer is the backstop, not the rule:
 * its firing wakes the progress thread, which cost more than the writes it saved when it
 * fired every hold_ns of a long burst (docs/performance.md, "Session 5").
 * Gateways never hold (their input batches are corked instead, above), nor do
 * shared-memory rings (no system call to save) or hops with an emulated delay.
 */
#define HOLD_FRAMES_MAX 32
#define HOLD_TIMER 4
#define DEFAULT_HOLD_NS 50000

uint64_t coc__conn_hold_ns(const coc_engine_config *cfg, int forward)
{
    if (forward || cfg->send_hold_ns < 0)
        return 0;
    return cfg->send_hold_ns ? (uint64_t)cfg->send_hold_ns : DEFAULT_HOLD_NS;
}

/* Whether a frame posted now on c waits for the frames after it: 0 no, 1 yes, 2 it joins
 * the held ones, which then leave (the first has waited hold_ns). It records the post.
 * The first frame held registers the queue and arms the timer that bounds the wait. */
static int hold(coc__conn *c)
{
    coc_engine *e = c->e;
    if (!e->hold_ns || c->delay_ns || on_ring(c) || c->state != COC__CS_OPEN || c->hs_off != c->hs_len)
        return 0;
    uint64_t now = coc__now_ns();
    int burst = now - c->last_post_ns < e->hold_ns;
    c->last_post_ns = now;
    if (c->nheld)
        return now - c->held_since >= e->hold_ns ? 2 : 1;
    if (!burst || c->queue.head)
        return 0; /* a lone frame, or a queue that waits for room in the socket anyway */
    int listed = 0;
    for (int i = 0; i < e->ncorked && !listed; i++)
        listed = e->corked[i] == c;
    if (!listed) {
        if (e->ncorked == COC__CORK_MAX)
            return 0;
        e->corked[e->ncorked++] = c;
    }
    c->held_since = now;
    coc__conn_arm_timer(e, now + HOLD_TIMER * e->hold_ns);
    return 1;
}

void coc__conn_release_held(coc_engine *e)
{
    if (!atomic_load_explicit(&e->ncorked, memory_order_relaxed))
        return;
    pthread_mutex_lock(&e->lock);
    coc__conn_uncork(e);
    pthread_mutex_unlock(&e->lock);
}

/* A whole forwarded frame for an empty queue of an open plain socket: one send, and when
 * the socket took it all the item goes back at once, without the queue's walk (a gateway's
 * every small frame). Returns 1 when written; 0 leaves it to the queue, with what was
 * written counted (a failed send fails the connection there). */
static int send_whole(coc__conn *c, coc__item *it)
{
    if (it->kind != COC__IT_FWD || it->filled != it->size || c->rec || on_ring(c) || c->delay_ns ||
        c->state != COC__CS_OPEN || !c->authed || c->hs_off != c->hs_len)
        return 0;
    c->e->stats.socket_writes++;
    ssize_t n = send(c->fd, it->owned, it->size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == (ssize_t)it->size) {
        c->on->on_forward_written(c, it); /* takes the item */
        return 1;
    }
    if (n > 0)
        it->off = (size_t)n;
    return 0;
}

void coc__conn_push(coc__conn *c, coc__item *it)
{
    if (c->delay_ns)
        it->due_ns = coc__now_ns() + c->delay_ns;
    /* else the queue waits for the socket, the batch of input or the end of a burst */
    int now = !c->queue.head && !c->nheld && !cork(c, it);
    if (now && send_whole(c, it))
        return;
    coc__list_append(&c->queue, &it->link);
    if (now)
        coc__conn_flush(c);
}

/* A payload up to this size is written joined to its header on a plain socket: one
 * buffer, so `send`, and no vector for the kernel to copy in (conn_tx.c, tx_bytes). */
#define JOIN_MAX 512

int coc__conn_send(coc__conn *c, const coc__hdr *h, const void *payload, coc_request *req)
{
    uint8_t hdr[COC__HDR_LEN + JOIN_MAX]; /* the header, and a joined payload */
    size_t off = 0;
    coc__hdr_encode(h, hdr);
    int held = hold(c);
    if (!held && c->state == COC__CS_OPEN && !c->queue.head && !c->delay_ns && c->hs_off == c->hs_len) {
        /* fast path: nothing queued, write from the caller's thread */
        struct iovec iov[2] = {{hdr, COC__HDR_LEN}, {(void *)payload, h->len}};
        int cnt = h->len ? 2 : 1;
        if (cnt == 2 && h->len <= JOIN_MAX && !c->rec && !on_ring(c)) {
            memcpy(hdr + COC__HDR_LEN, payload, h->len);
            iov[0].iov_len += h->len;
            cnt = 1;
        }
        ssize_t n = tx_bytes(c, iov, cnt);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            coc__conn_fail(c, -errno, "write failed");
            return COC_EPEERLOST;
        }
        if (n > 0)
            off = (size_t)n;
        if (off == COC__HDR_LEN + h->len)
            return 0;
    }
    coc__item *it = calloc(1, sizeof *it);
    if (!it)
        return -ENOMEM;
    it->kind = COC__IT_FRAME;
    memcpy(it->hdr, hdr, COC__HDR_LEN);
    it->len = h->len;
    it->off = off;
    it->data = payload;
    int pending = 0;
    if (req && (c->state != COC__CS_OPEN || c->copied + h->len > COC__COPY_BUDGET)) {
        /* not connected yet (if the set-up fails, the send must fail, not vanish), or
         * the receiver is not keeping up: do not copy, let the sender wait */
        it->req = req;
        req->busy = 1;
        pending = 1;
    } else if (h->len) {
        it->owned = malloc(h->len);
        if (!it->owned) {
            free(it);
            return -ENOMEM;
        }
        memcpy(it->owned, payload, h->len);
        it->data = it->owned;
        c->copied += h->len;
    }
    if (held) {
        c->nheld++;
        c->e->stats.frames_held++;
    }
    coc__conn_push(c, it);
    if (held == 2 || c->nheld >= HOLD_FRAMES_MAX)
        coc__conn_flush(c);
    return pending;
}

void coc__conn_flush_delayed(coc_engine *e)
{
    e->timer_due = 0;
    for (size_t i = 0; i < COC__MAX_CONNS; i++) {
        coc__conn *c = e->conns[i];
        if (c && c->delay_ns && c->queue.head)
            coc__conn_flush(c);
    }
}
