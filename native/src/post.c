/*
 * post.c — posting point-to-point operations: coc_isend/coc_isendv (eager, rendezvous
 * or to this endpoint itself, within the eager credit), coc_irecv/coc_irecv_alloc
 * (matching what waits in the unexpected queue first), the buffers of allocated
 * receives, probing and releasing requests. What the frames then do is protocol.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* lock: a zeroed request, a spare one if the engine kept any: a blocking call makes and
 * releases one per message, and malloc, free and the zeroing of calloc were 9 % of a
 * ping-pong rank's user time (perf) */
static coc_request *req_new(coc_engine *e, uint8_t kind)
{
    coc_request *r = e->nspare ? e->spare[--e->nspare] : malloc(sizeof *r);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->e = e;
    r->kind = kind;
    coc__list_prepend(&e->reqs, &r->link);
    return r;
}

static void req_unlink_free(coc_engine *e, coc_request *r)
{
    coc__list_remove(&e->reqs, &r->link);
    if (r->alloc)
        free(r->rbuf);
    free(r->joined);
    free(r->iov);
    free(r->frags);
    if (e->nspare < COC__SPARE_REQS)
        e->spare[e->nspare++] = r;
    else
        free(r);
}

void coc__requests_drop(coc_engine *e)
{
    while (e->nspare)
        free(e->spare[--e->nspare]);
}

static int self_send(coc_engine *e, coc_request *s, uint32_t ctx, int32_t tag, const void *buf,
                     size_t len)
{
    coc_request *r = coc__posted_take(e, e->self, ctx, tag);
    if (r) {
        coc__deliver(e, r, e->self, ctx, tag, buf, len, 0);
    } else {
        coc__umsg *u = calloc(1, sizeof *u);
        uint8_t *data = coc__held_alloc(len);
        if (!u || !data) {
            free(u);
            free(data);
            return -ENOMEM;
        }
        memcpy(data, buf, len);
        *u = (coc__umsg){.type = COC__EAGER, .source = e->self, .context = ctx, .tag = tag,
                         .total = len, .data = data};
        coc__unexp_add(e, u);
    }
    s->st.count = len;
    coc__complete(e, s, 0);
    return 0;
}

/* What the first write of a stamped frame towards d returned (rc) means for its send.
 * A kept frame whose hop just died is not lost: its copy goes again when the route moves
 * off that hop (or the send fails with the hop, if it was the last), so the send goes on.
 * Otherwise the frame was never sent and its sequence number is given back: the receiver
 * must not wait for it. */
static int sent(coc__dest *d, int keep, int rc)
{
    if (rc < 0 && keep)
        return 0;
    if (rc < 0)
        d->seq--;
    return rc;
}

/* Start a send of len bytes: buf, or the gather list iov (then buf is NULL). The request
 * owns joined and iov from here on (freed with it, or now on failure). */
/* Send r eagerly on c, taking its credit cr: 0 complete, 1 pending, <0 error. */
static int send_eager(coc_engine *e, coc_request *r, coc__dest *d, coc__conn *c, coc__credit *cr,
                      coc__hdr *hp, int keep)
{
    coc__hdr h = *hp;
    size_t len = r->len;
    const void *buf = r->sbuf;
    cr->avail -= coc__eager_cost(len);
    h.type = COC__EAGER;
    h.len = (uint32_t)len;
    h.total = len;
    r->keep = (uint8_t)keep;
    int rc = coc__rel_stamp(e, d, &h, buf, keep);
    if (rc == 0) /* a kept message is copied: once connected, the send completes at once */
        rc = sent(d, keep, coc__conn_send(c, &h, buf, keep && c->state == COC__CS_OPEN ? NULL : r));
    if (rc < 0)
        cr->avail += coc__eager_cost(len);
    if (rc >= 0) {
        e->stats.frames_sent++;
        e->stats.bytes_sent += len;
        r->st.count = len;
        r->conn_key = c->key;
        if (rc == 0)
            coc__complete(e, r, 0); /* written or copied */
    }
    return rc;
}

/* Start r as a rendezvous send on c: its envelope (RTS) goes; the bytes follow the CTS. */
static int send_rts(coc_engine *e, coc_request *r, coc__dest *d, coc__conn *c, coc__hdr *hp,
                    int keep)
{
    coc__hdr h = *hp;
    h.type = COC__RTS;
    h.total = r->len;
    r->cookie = h.scookie = coc__rdv_alloc(e, r);
    if (!r->cookie)
        return -ENOMEM;
    r->conn_key = c->key;
    r->phase = COC__RDV;
    r->keep = (uint8_t)keep;
    h.flags = keep ? COC__FLAG_CONFIRM : 0;
    int rc = coc__rel_stamp(e, d, &h, NULL, keep);
    if (rc == 0)
        rc = sent(d, keep, coc__conn_send(c, &h, NULL, NULL));
    if (rc == 0)
        e->stats.frames_sent++;
    return rc;
}

/* lock: a send just posted (coc_isend_or_done) is done with at once: the held sends leave
 * (as coc_wait's look lets them), and r is released when it completed without error.
 * Returns r, or NULL when released. */
static coc_request *done_at_once(coc_engine *e, coc_request *r)
{
    if (atomic_load_explicit(&e->ncorked, memory_order_relaxed))
        coc__conn_uncork(e);
    if (atomic_load(&r->state) != COC__REQ_DONE || r->st.error)
        return r;
    req_unlink_free(e, r);
    return NULL;
}

/* Post a send (at_once: coc_isend_or_done's, done_at_once). */
static int isend(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const void *buf,
                 size_t len, uint8_t *joined, coc_iovec *iov, size_t niov, int at_once,
                 coc_request **out)
{
    pthread_mutex_lock(&e->lock);
    int rc = 0;
    coc_request *r = req_new(e, COC__SEND);
    if (!r) {
        pthread_mutex_unlock(&e->lock);
        free(joined);
        free(iov);
        return -ENOMEM;
    }
    r->joined = joined;
    r->iov = iov;
    r->niov = niov;
    r->peer = (int32_t)dest;
    r->context = context;
    r->tag = tag;
    r->sbuf = buf;
    r->len = len;
    coc__fill_status(r, dest, context, tag, 0);
    if (dest == e->self) {
        rc = self_send(e, r, context, tag, buf, len);
        goto out;
    }
    coc__dest *d = coc__map_get(&e->dests, dest);
    if (!d) {
        rc = COC_ENOROUTE;
        goto out;
    }
    coc__conn *c = coc__rel_conn_to(e, d, dest, &rc);
    if (!c)
        goto out;
    coc__hdr h = {.context = context, .source = e->self, .dest = dest, .tag = tag};
    int keep = coc__rel_protected(e, d, dest); /* crosses a gateway: kept until acknowledged */
    coc__credit *cr = len <= e->cfg.eager_limit ? coc__credit_of(e, dest) : NULL;
    if (cr && cr->avail >= coc__eager_cost(len))
        rc = send_eager(e, r, d, c, cr, &h, keep);
    else
        rc = send_rts(e, r, d, c, &h, keep);
out:
    if (rc < 0) {
        coc__rdv_free(e, r->cookie);
        req_unlink_free(e, r);
    } else {
        *out = at_once ? done_at_once(e, r) : r;
    }
    pthread_mutex_unlock(&e->lock);
    return rc < 0 ? rc : 0;
}

int coc_isend(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const void *buf,
              size_t len, coc_request **out)
{
    if (!e || !out || tag < 0 || (len && !buf) || len > COC__MAX_MESSAGE)
        return COC_EINVAL;
    return isend(e, dest, context, tag, buf, len, NULL, NULL, 0, 0, out);
}

int coc_isend_or_done(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag,
                      const void *buf, size_t len, coc_request **out)
{
    if (!e || !out || tag < 0 || (len && !buf) || len > COC__MAX_MESSAGE)
        return COC_EINVAL;
    return isend(e, dest, context, tag, buf, len, NULL, NULL, 0, 1, out);
}

int coc_isendv(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const coc_iovec *iov,
               size_t n, coc_request **out)
{
    if (!e || !out || tag < 0 || (n && !iov) || n > COC_IOV_MAX)
        return COC_EINVAL;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (iov[i].len && !iov[i].base)
            return COC_EINVAL;
        total += iov[i].len;
        if (total > COC__MAX_MESSAGE)
            return COC_EINVAL;
    }
    if (n == 1)
        return isend(e, dest, context, tag, iov[0].base, iov[0].len, NULL, NULL, 0, 0, out);
    if (total <= e->cfg.eager_limit || dest == e->self) {
        /* one frame (or a copy to ourselves) anyway: join, and own the copy */
        uint8_t *joined = coc__buf_alloc(total);
        if (!joined)
            return -ENOMEM;
        uint8_t *at = joined;
        for (size_t i = 0; i < n; i++) {
            if (iov[i].len)
                memcpy(at, iov[i].base, iov[i].len);
            at += iov[i].len;
        }
        return isend(e, dest, context, tag, joined, total, joined, NULL, 0, 0, out);
    }
    coc_iovec *list = malloc(n * sizeof *list);
    if (!list)
        return -ENOMEM;
    memcpy(list, iov, n * sizeof *list);
    return isend(e, dest, context, tag, NULL, total, NULL, list, n, 0, out);
}

/* Post a receive into buf of capacity cap, or (alloc) into a buffer allocated at match
 * of at most cap bytes. */
static int irecv(coc_engine *e, int32_t source, uint32_t context, int32_t tag, void *buf,
                 size_t cap, int alloc, coc_request **out)
{
    pthread_mutex_lock(&e->lock);
    coc_request *r = req_new(e, COC__RECV);
    if (!r) {
        pthread_mutex_unlock(&e->lock);
        return -ENOMEM;
    }
    r->peer = source;
    r->context = context;
    r->tag = tag;
    r->rbuf = buf;
    r->len = cap;
    r->alloc = (uint8_t)alloc;
    coc__umsg *u = coc__unexp_find(e, source, context, tag);
    if (!u) {
        coc__posted_add(e, r);
    } else {
        coc__unexp_remove(e, u);
        coc__adopt(r, u);
        if (u->type == COC__EAGER)
            coc__deliver(e, r, u->source, u->context, u->tag, u->data ? u->data : r->rbuf, u->total,
                    u->conn_key);
        else
            coc__rdv_accept(e, r, u->source, u->context, u->tag, u->total, u->scookie, u->conn_key,
                       u->flags);
        free(u->data);
        free(u);
    }
    *out = r;
    pthread_mutex_unlock(&e->lock);
    return 0;
}

int coc_irecv(coc_engine *e, int32_t source, uint32_t context, int32_t tag, void *buf, size_t cap,
              coc_request **out)
{
    if (!e || !out || source < COC_ANY_SOURCE || tag < COC_ANY_TAG || (cap && !buf))
        return COC_EINVAL;
    return irecv(e, source, context, tag, buf, cap, 0, out);
}

int coc_irecv_alloc(coc_engine *e, int32_t source, uint32_t context, int32_t tag, size_t max,
                    coc_request **out)
{
    if (!e || !out || source < COC_ANY_SOURCE || tag < COC_ANY_TAG)
        return COC_EINVAL;
    return irecv(e, source, context, tag, NULL, max, 1, out);
}

void *coc_request_take_buffer(coc_request *r, size_t *len)
{
    void *buf = NULL;
    size_t n = 0;
    if (r && r->kind == COC__RECV && atomic_load(&r->state) == COC__REQ_DONE) {
        pthread_mutex_lock(&r->e->lock);
        if (r->alloc && r->rbuf) {
            buf = r->rbuf;
            n = r->st.count < r->len ? r->st.count : r->len;
            r->rbuf = NULL;
        }
        pthread_mutex_unlock(&r->e->lock);
    }
    if (len)
        *len = n;
    return buf;
}

void coc_buffer_free(void *buf)
{
    free(buf);
}

int coc__probe_locked(coc_engine *e, int32_t source, uint32_t context, int32_t tag, coc_status *st)
{
    coc__umsg *u = coc__unexp_find(e, source, context, tag);
    if (!u)
        return 0;
    if (st)
        *st = (coc_status){.source = (int32_t)u->source, .tag = u->tag, .context = u->context,
                           .count = u->total};
    return 1;
}

void coc__request_release(coc_engine *e, coc_request *r)
{
    req_unlink_free(e, r);
}
