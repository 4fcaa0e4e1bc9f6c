/*
 * protocol.c — point-to-point messages: eager and rendezvous sends, receives, what a
 * frame addressed to this endpoint does, and how lost peers fail the requests that need
 * them.
 *
 * Eager (len <= eager_limit): one EAGER frame; the send completes at once (the bytes are
 * written or copied). An unmatched eager message waits in the unexpected queue.
 * Rendezvous (len > eager_limit): RTS (envelope only) -> the receiver matches it and
 * answers CTS with the number of bytes it wants (its capacity, for truncation) -> the
 * sender streams DATA frames of <= fragment_size straight from the user's buffer into
 * the user's receive buffer. An unmatched large message costs the receiver only its
 * envelope.
 *
 * Size classes (coc.h): EAGER, RTS, CTS, ERROR and BYE take the small route, one hop per
 * (source, destination) pair, so envelopes arrive in sending order; DATA takes the large
 * route, its fragments dealt over all of its hops by weight (striping). The receiver
 * places each fragment by (handle, offset) whatever connection brought it, and the
 * transfer completes when all bytes arrived.
 *
 * Credits bound what eager messages may take at a receiver: towards each endpoint a
 * sender may have e->credit bytes of eager messages (payload + header each) that the
 * receiver has not handed back in CREDIT frames; a message that finds too little credit
 * goes by rendezvous instead. The receiver returns credit when it delivers a message (half
 * the credit at a time) and fails the connection of a peer that sends beyond it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static coc_request *req_new(coc_engine *e, uint8_t kind)
{
    coc_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
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
    free(r);
}

/* A message buffer: 64-byte aligned (copies into it run at full speed, see
 * docs/performance.md), never of 0 bytes; free() releases it. */
static uint8_t *buf_alloc(uint64_t size)
{
    return aligned_alloc(64, size ? (size + 63) & ~(uint64_t)63 : 64);
}

/* Give receive r (coc_irecv_alloc) its buffer for a message of total bytes: the exact
 * size, at most its capacity. 0, or -ENOMEM. */
static int sink_alloc(coc_request *r, uint64_t total)
{
    if (!r->alloc || r->rbuf)
        return 0;
    r->rbuf = buf_alloc(total < r->len ? total : r->len);
    return r->rbuf ? 0 : -ENOMEM;
}

/* Receive r takes over unexpected eager message u's payload, when it fits: no copy. */
static void adopt(coc_request *r, coc__umsg *u)
{
    if (r->alloc && !r->rbuf && u->total <= r->len) {
        r->rbuf = u->data;
        u->data = NULL;
    }
}

static void fill_status(coc_request *r, uint32_t src, uint32_t ctx, int32_t tag, uint64_t total)
{
    r->st.source = (int32_t)src;
    r->st.context = ctx;
    r->st.tag = tag;
    r->st.count = total;
}

/* ---- eager credit ------------------------------------------------------------------------ */

static uint64_t eager_cost(uint64_t len)
{
    return len + COC__HDR_LEN;
}

/* An eager message of `total` bytes from `source` left our memory (delivered): its credit
 * goes back once half the credit is owed, in one CREDIT frame end to end. */
static void credit_delivered(coc_engine *e, uint32_t source, uint64_t total, uint64_t conn_key)
{
    coc__credit *cr = source != e->self ? coc__map_get(&e->credits, source) : NULL;
    if (!cr)
        return;
    cr->owed += eager_cost(total);
    if (cr->owed < e->credit / 2)
        return;
    /* the count is cumulative (mod 2^40): sent again after a failover, it leaks nothing */
    cr->returned = (cr->returned + cr->owed) % COC__CREDIT_MOD;
    coc__hdr h = {.type = COC__CREDIT, .source = e->self, .dest = source, .total = cr->returned,
                  .offset = cr->expect};
    coc__send_ctrl(e, &h, conn_key); /* if the peer is gone, so is its need for credit */
    cr->held -= cr->owed;
    cr->owed = 0;
}

/* A header of an eager frame from h->source arrived: within the eager limit and the
 * credit we granted, or a protocol error naming the sender. */
static int credit_take(coc__conn *c, const coc__hdr *h)
{
    coc_engine *e = c->e;
    if (h->len > e->cfg.eager_limit) {
        coc__log(e, "endpoint %u sent an eager message of %u bytes, above this endpoint's eager "
                 "limit of %zu bytes, without rendezvous", h->source, h->len, e->cfg.eager_limit);
        c->why = "eager frame above the receiver's eager limit";
        return COC_EPROTO;
    }
    coc__credit *cr = coc__credit_of(e, h->source);
    if (!cr)
        return -ENOMEM;
    if (cr->held + eager_cost(h->len) > e->credit) {
        coc__log(e, "endpoint %u sent eager messages beyond the %llu bytes of credit granted to it",
                 h->source, (unsigned long long)e->credit);
        c->why = "eager frames beyond the credit granted";
        return COC_EPROTO;
    }
    cr->held += eager_cost(h->len);
    return 0;
}

/* Deliver a complete eager message to a matched receive; its credit goes back to the
 * sender (conn_key: where it came from, if the route back is unknown). */
static void deliver(coc_engine *e, coc_request *r, uint32_t src, uint32_t ctx, int32_t tag,
                    const uint8_t *data, uint64_t total, uint64_t conn_key)
{
    credit_delivered(e, src, total, conn_key);
    fill_status(r, src, ctx, tag, total);
    if (sink_alloc(r, total) < 0) {
        coc__complete(e, r, -ENOMEM);
        return;
    }
    if (total && r->rbuf != data) /* adopted: already in place */
        memcpy(r->rbuf, data, total < r->len ? total : r->len);
    coc__complete(e, r, total > r->len ? COC_ETRUNC : 0);
}

int coc__send_ctrl(coc_engine *e, const coc__hdr *h, uint64_t fallback_conn)
{
    coc__dest *d = coc__map_get(&e->dests, h->dest);
    coc__conn *c = NULL;
    int rc = COC_ENOROUTE;
    if (d)
        c = coc__rel_conn_to(e, d, h->dest, &rc);
    if (!c)
        c = coc__conn_get(e, fallback_conn);
    if (!c || c->state == COC__CS_DEAD)
        return rc;
    e->stats.frames_sent++;
    return coc__conn_send(c, h, NULL, NULL);
}

/* A receive r matched a rendezvous envelope: ask the sender for the bytes r can hold. */
static void rdv_accept(coc_engine *e, coc_request *r, uint32_t src, uint32_t ctx, int32_t tag,
                       uint64_t total, uint64_t scookie, uint64_t conn_key, uint8_t flags)
{
    fill_status(r, src, ctx, tag, total);
    if (sink_alloc(r, total) < 0) {
        coc__complete(e, r, -ENOMEM);
        return;
    }
    r->want = total < r->len ? total : r->len;
    r->got = 0;
    r->conn_key = conn_key;
    r->phase = COC__RDV;
    r->cookie = coc__rdv_alloc(e, r);
    if (flags & COC__FLAG_CONFIRM) {
        /* the bytes cross a gateway: count each fragment once, answer DONE */
        r->keep = 1;
        r->peer_cookie = scookie;
    }
    if (!r->cookie) {
        coc__complete(e, r, -ENOMEM);
        return;
    }
    coc__hdr h = {.type = COC__CTS, .context = ctx, .source = e->self, .dest = src, .tag = tag,
                  .total = r->want, .scookie = scookie, .rcookie = r->cookie};
    coc__dest *d = coc__map_get(&e->dests, src);
    int kept = d && coc__rel_protected(e, d, src);
    int rc = d ? coc__rel_stamp(e, d, &h, NULL, kept) : 0;
    /* a kept CTS whose hop just died goes again when the route moves off that hop (the
     * sender then streams): failing the receive here would leave that stream no taker */
    if (rc == 0 && (rc = coc__send_ctrl(e, &h, conn_key)) < 0 && kept)
        rc = 0;
    if (rc < 0)
        coc__complete(e, r, COC_EPEERLOST);
    else if (r->want == 0)
        coc__complete(e, r, total ? COC_ETRUNC : 0);
}

static int self_send(coc_engine *e, coc_request *s, uint32_t ctx, int32_t tag, const void *buf,
                     size_t len)
{
    coc_request *r = coc__posted_take(e, e->self, ctx, tag);
    if (r) {
        deliver(e, r, e->self, ctx, tag, buf, len, 0);
    } else {
        coc__umsg *u = calloc(1, sizeof *u);
        uint8_t *data = buf_alloc(len);
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
static int isend(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const void *buf,
                 size_t len, uint8_t *joined, coc_iovec *iov, size_t niov, coc_request **out)
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
    fill_status(r, dest, context, tag, 0);
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
    if (cr && cr->avail >= eager_cost(len)) {
        cr->avail -= eager_cost(len);
        h.type = COC__EAGER;
        h.len = (uint32_t)len;
        h.total = len;
        r->keep = (uint8_t)keep;
        rc = coc__rel_stamp(e, d, &h, buf, keep);
        if (rc == 0) /* a kept message is copied: once connected, the send completes at once */
            rc = sent(d, keep, coc__conn_send(c, &h, buf, keep && c->state == COC__CS_OPEN ? NULL : r));
        if (rc < 0)
            cr->avail += eager_cost(len);
        if (rc >= 0) {
            e->stats.frames_sent++;
            e->stats.bytes_sent += len;
            r->st.count = len;
            r->conn_key = c->key;
            if (rc == 0)
                coc__complete(e, r, 0); /* written or copied */
        }
    } else {
        h.type = COC__RTS;
        h.total = len;
        r->cookie = h.scookie = coc__rdv_alloc(e, r);
        if (!r->cookie) {
            rc = -ENOMEM;
            goto out;
        }
        r->conn_key = c->key;
        r->phase = COC__RDV;
        r->keep = (uint8_t)keep;
        h.flags = keep ? COC__FLAG_CONFIRM : 0;
        rc = coc__rel_stamp(e, d, &h, NULL, keep);
        if (rc == 0)
            rc = sent(d, keep, coc__conn_send(c, &h, NULL, NULL));
        if (rc == 0)
            e->stats.frames_sent++;
    }
out:
    if (rc < 0) {
        coc__rdv_free(e, r->cookie);
        req_unlink_free(e, r);
    } else {
        *out = r;
    }
    pthread_mutex_unlock(&e->lock);
    return rc < 0 ? rc : 0;
}

int coc_isend(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const void *buf,
              size_t len, coc_request **out)
{
    if (!e || !out || tag < 0 || (len && !buf) || len > COC__MAX_MESSAGE)
        return COC_EINVAL;
    return isend(e, dest, context, tag, buf, len, NULL, NULL, 0, out);
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
        return isend(e, dest, context, tag, iov[0].base, iov[0].len, NULL, NULL, 0, out);
    if (total <= e->cfg.eager_limit || dest == e->self) {
        /* one frame (or a copy to ourselves) anyway: join, and own the copy */
        uint8_t *joined = buf_alloc(total);
        if (!joined)
            return -ENOMEM;
        uint8_t *at = joined;
        for (size_t i = 0; i < n; i++) {
            if (iov[i].len)
                memcpy(at, iov[i].base, iov[i].len);
            at += iov[i].len;
        }
        return isend(e, dest, context, tag, joined, total, joined, NULL, 0, out);
    }
    coc_iovec *list = malloc(n * sizeof *list);
    if (!list)
        return -ENOMEM;
    memcpy(list, iov, n * sizeof *list);
    return isend(e, dest, context, tag, NULL, total, NULL, list, n, out);
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
        adopt(r, u);
        if (u->type == COC__EAGER)
            deliver(e, r, u->source, u->context, u->tag, u->data ? u->data : r->rbuf, u->total,
                    u->conn_key);
        else
            rdv_accept(e, r, u->source, u->context, u->tag, u->total, u->scookie, u->conn_key,
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

/* ---- frames addressed to this endpoint --------------------------------------------------- */

static int bad(coc__conn *c, const char *why)
{
    c->why = why;
    return COC_EPROTO;
}

/* Deal a transfer's fragments over the hops of the large route towards dest: lane[i] is
 * the index (into hops[]) of the hop that carries fragment i. NULL without memory. */
static coc__stripe *stripe_plan(coc_engine *e, coc__route *large, uint64_t total)
{
    uint64_t frag = e->cfg.fragment_size;
    uint64_t nfrag = (total + frag - 1) / frag;
    coc__stripe *sp = malloc(sizeof *sp + nfrag);
    if (!sp)
        return NULL;
    sp->refs = 0;
    sp->nfrag = nfrag;
    for (uint64_t i = 0; i < nfrag; i++)
        sp->lane[i] = (uint8_t)coc__route_stripe(large, i + 1 < nfrag ? frag : total - i * frag);
    return sp;
}

/* A CTS came for send s: stream its bytes. A send that keeps its handle (its bytes cross a
 * gateway) completes on the receiver's DONE, and may stream again after a failover. */
static int start_stream(coc_engine *e, coc_request *s, const coc__hdr *cts)
{
    if (!s->keep || cts->total == 0) {
        coc__rdv_free(e, s->cookie); /* one CTS per send: the handle is spent */
        s->cookie = 0;
    }
    if (cts->total == 0) {
        s->st.count = s->len;
        coc__complete(e, s, 0);
        return 0;
    }
    s->want = cts->total;
    s->peer_cookie = cts->rcookie;
    return coc__stream_out(e, s, cts->total, cts->rcookie);
}

/* Stream `total` bytes of send s to the receive `rcookie`: one STREAM item per hop of the
 * large route that carries any of its fragments. */
int coc__stream_out(coc_engine *e, coc_request *s, uint64_t total, uint64_t rcookie)
{
    coc__dest *d = coc__map_get(&e->dests, (uint32_t)s->peer);
    if (!d) {
        coc__complete(e, s, COC_ENOROUTE);
        return 0;
    }
    coc__route *large = &d->route[COC_CLASS_LARGE];
    for (size_t i = 0; i < large->n && large->n > 1; i++) {
        int rc;
        if (large->hops[i] != (uint32_t)s->peer && !coc__conn_to(e, large->hops[i], &rc) &&
            rc != COC_ENOROUTE) {
            coc__rel_reroute(e, large->hops[i], coc_strerror(rc), 1); /* cannot reach it: gone */
            i = (size_t)-1;
        }
    }
    coc__stripe *sp = stripe_plan(e, large, total);
    if (!sp)
        return -ENOMEM;
    coc__conn *out[COC__ROUTE_MAX_HOPS] = {0};
    coc__item *items[COC__ROUTE_MAX_HOPS];
    size_t lanes = 0;
    for (uint64_t i = 0; i < sp->nfrag; i++) {
        uint8_t k = sp->lane[i];
        if (out[k])
            continue;
        int rc;
        out[k] = coc__conn_to(e, large->hops[k], &rc);
        items[lanes] = out[k] && out[k]->state != COC__CS_DEAD ? calloc(1, sizeof(coc__item)) : NULL;
        if (!items[lanes]) {
            while (lanes)
                free(items[--lanes]);
            free(sp);
            if (out[k] && out[k]->state != COC__CS_DEAD)
                return -ENOMEM;
            if (s->keep && s->busy)
                return 0; /* lanes still run; a later failover streams again */
            coc__stream_failed(e, s, rcookie);
            coc__complete(e, s, COC_EPEERLOST);
            return 0;
        }
        items[lanes++]->lane = k;
    }
    sp->refs = lanes;
    s->busy += (uint16_t)lanes; /* until every lane ends: a failure must not free the buffer */
    for (size_t j = 0; j < lanes; j++) {
        coc__item *it = items[j];
        it->kind = COC__IT_STREAM;
        it->req = s;
        it->stripe = sp;
        it->sh = (coc__hdr){.type = COC__DATA, .context = s->context, .source = e->self,
                            .dest = (uint32_t)s->peer, .tag = s->tag, .total = total,
                            .rcookie = rcookie};
        coc__stream_next(e, it); /* its first frame; frame_written builds the others */
        coc__conn_push(out[it->lane], it);
    }
    return 0;
}

static void fail(coc_engine *e, coc_request *r, int32_t source, int error);

int coc__frame_begin(coc__conn *c)
{
    coc_engine *e = c->e;
    const coc__hdr *h = &c->rh;
    coc_request *r;
    int rc = 0;
    pthread_mutex_lock(&e->lock);
    e->stats.frames_received++;
    e->stats.bytes_received += h->len;
    if (!coc__rel_accept(e, h)) {
        c->rdrop = 1; /* seen already, or overtook a lost frame: its payload is dropped */
        pthread_mutex_unlock(&e->lock);
        return 0;
    }
    switch (h->type) {
    case COC__EAGER:
        if ((rc = credit_take(c, h)) < 0)
            break;
        r = coc__posted_take(e, h->source, h->context, h->tag);
        if (r && sink_alloc(r, h->total) < 0) {
            coc__posted_add(e, r); /* keep it; this connection fails */
            rc = -ENOMEM;
            break;
        }
        if (r) {
            fill_status(r, h->source, h->context, h->tag, h->total);
            r->phase = COC__MATCHED;
            r->conn_key = c->key;
            r->busy = 1;
            c->rreq = r;
            c->sink = r->rbuf;
            c->sink_cap = r->len;
        } else {
            coc__umsg *u = calloc(1, sizeof *u);
            uint8_t *data = buf_alloc(h->total);
            if (!u || !data) {
                free(u);
                free(data);
                rc = -ENOMEM;
                break;
            }
            *u = (coc__umsg){.type = COC__EAGER, .source = h->source, .context = h->context,
                             .tag = h->tag, .total = h->total, .conn_key = c->key, .data = data};
            c->rumsg = u;
            c->sink = data;
            c->sink_cap = h->total;
        }
        break;
    case COC__RTS:
        r = coc__posted_take(e, h->source, h->context, h->tag);
        if (r) {
            rdv_accept(e, r, h->source, h->context, h->tag, h->total, h->scookie, c->key, h->flags);
        } else {
            coc__umsg *u = calloc(1, sizeof *u);
            if (!u) {
                rc = -ENOMEM;
                break;
            }
            *u = (coc__umsg){.type = COC__RTS, .source = h->source, .context = h->context,
                             .tag = h->tag, .total = h->total, .scookie = h->scookie,
                             .conn_key = c->key, .flags = h->flags};
            coc__unexp_add(e, u);
        }
        break;
    case COC__CTS:
        r = coc__rdv_lookup(e, h->scookie);
        if (!r || r->kind != COC__SEND || (uint32_t)r->peer != h->source || h->total > r->len)
            rc = bad(c, "clear to send for no pending send");
        else
            rc = start_stream(e, r, h);
        break;
    case COC__DATA:
        r = coc__rdv_lookup(e, h->rcookie);
        if (!r && coc__rdv_spent(e, h->rcookie)) {
            /* its receive already ended (done, or failed: a stripe's path died): read and
             * drop. Bytes sent again for a done receive mean its DONE did not get through:
             * send again what the sender has not acknowledged (once per restream) */
            coc__credit *cr = h->offset ? NULL : coc__map_get(&e->credits, h->source);
            if (cr && !coc__list_empty(&cr->kept))
                coc__rel_resend(e, h->source);
            break;
        }
        if (!r || r->kind != COC__RECV || r->phase != COC__RDV || (uint32_t)r->st.source != h->source ||
            h->total != r->want) {
            rc = bad(c, "data fragment for no pending receive");
            break;
        }
        if (r->keep && coc__rel_fragment(r, h, 0)) {
            c->rdrop = 1; /* sent again after a failover, but it came the first time */
            e->stats.duplicates_dropped++;
            break;
        }
        r->busy++; /* stripes: several connections may be mid-fragment into it */
        c->rreq = r;
        c->sink = r->rbuf + h->offset;
        c->sink_cap = h->len;
        break;
    case COC__ERROR:
        if (!h->rcookie) {
            /* from a gateway that cannot reach the source: another gateway may (failover) */
            if (c->peer_id == h->source || !coc__rel_avoid(e, h->source, c->peer_id))
                coc__lost_id(e, h->source, h->tag);
            break;
        }
        r = coc__rdv_lookup(e, h->rcookie); /* one transfer failed at its sender */
        if (r && r->kind == COC__RECV && r->phase == COC__RDV && (uint32_t)r->st.source == h->source) {
            coc__log(e, "endpoint %u could not send the bytes of a message (tag %d): a path of its "
                     "large route is lost", h->source, r->st.tag);
            fail(e, r, r->st.source, COC_EPEERLOST);
        }
        break;
    case COC__BYE:
        c->bye = 1;
        break;
    case COC__CREDIT: {
        /* a cumulative count: what it adds to the last one heard; an old or repeated count
         * adds nothing, and never above the whole credit, whatever a peer claims */
        coc__credit *cr = coc__credit_of(e, h->source);
        uint64_t more = cr ? (h->total - cr->seen) % COC__CREDIT_MOD : 0;
        if (cr && more <= e->credit) {
            cr->seen = h->total;
            cr->avail = more > e->credit - cr->avail ? e->credit : cr->avail + more;
        }
        break;
    }
    case COC__PATH: /* frames to h->source died on the way (a gateway's lost hop, a gap) */
        coc__log(e, "frames to endpoint %u were lost on the way (reported through %s): sending "
                 "again what it has not acknowledged", h->source, c->name);
        coc__rel_resend(e, h->source);
        break;
    case COC__PING:
        break;
    case COC__DONE:
        r = coc__rdv_lookup(e, h->scookie);
        if (r && r->kind == COC__SEND && r->keep && (uint32_t)r->peer == h->source) {
            r->confirmed = 1;
            coc__rdv_free(e, r->cookie);
            r->cookie = 0;
            if (!r->busy) {
                r->st.count = r->len;
                coc__complete(e, r, 0);
            }
        } else {
            /* taken by the sequence layer (acknowledged), so never sent again: say so */
            coc__log(e, "endpoint %u confirmed a transfer this endpoint does not know (handle "
                     "%llx): ignored", h->source, (unsigned long long)h->scookie);
        }
        break;
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void coc__frame_end(coc__conn *c)
{
    coc_engine *e = c->e;
    const coc__hdr *h = &c->rh;
    coc_request *r = c->rreq;
    if (c->rdrop) {
        c->rdrop = 0;
        return;
    }
    if (h->type != COC__EAGER && h->type != COC__DATA)
        return;
    pthread_mutex_lock(&e->lock);
    c->rreq = NULL;
    if (h->type == COC__EAGER && (r || !c->rumsg))
        credit_delivered(e, h->source, h->total, c->key); /* read into place: nothing held */
    if (r) {
        r->busy--;
        if (h->type == COC__DATA && (!r->keep || !coc__rel_fragment(r, h, 1)))
            r->got += h->len; /* two copies may race: count one */
        if (h->type == COC__EAGER && !r->doomed)
            coc__complete(e, r, r->st.count > r->len ? COC_ETRUNC : 0);
        else
            coc__recv_settle(e, r);
    } else if (c->rumsg) {
        coc__umsg *u = c->rumsg;
        c->rumsg = NULL;
        r = coc__posted_take(e, u->source, u->context, u->tag);
        if (r) {
            adopt(r, u);
            deliver(e, r, u->source, u->context, u->tag, u->data ? u->data : r->rbuf, u->total,
                    u->conn_key);
            free(u->data);
            free(u);
        } else {
            coc__unexp_add(e, u);
        }
    }
    pthread_mutex_unlock(&e->lock);
}

/* ---- failures ------------------------------------------------------------------------------ */

static void fail(coc_engine *e, coc_request *r, int32_t source, int error)
{
    if (r->phase == COC__POSTED)
        coc__posted_remove(e, r);
    if (r->kind == COC__RECV)
        r->st.source = source;
    if (r->busy)
        r->doomed = error; /* a connection is mid-frame into it: fail when that frame ends */
    else
        coc__complete(e, r, error);
}

void coc__stream_failed(coc_engine *e, coc_request *s, uint64_t rcookie)
{
    coc__hdr h = {.type = COC__ERROR, .source = e->self, .dest = (uint32_t)s->peer,
                  .tag = COC_EPEERLOST, .rcookie = rcookie};
    coc__send_ctrl(e, &h, 0); /* on the small route; if that is gone too, so is the receiver's */
}

static void send_done(coc_engine *e, coc_request *r)
{
    coc__dest *d = coc__map_get(&e->dests, (uint32_t)r->st.source);
    coc__hdr h = {.type = COC__DONE, .source = e->self, .dest = (uint32_t)r->st.source,
                  .scookie = r->peer_cookie};
    /* no route back (answers go where the RTS came from): unsequenced, not kept */
    if (!d || coc__rel_stamp(e, d, &h, NULL, 1) == 0)
        coc__send_ctrl(e, &h, r->conn_key);
}

void coc__recv_settle(coc_engine *e, coc_request *r)
{
    if (r->busy)
        return; /* a connection is still mid-fragment into it: that frame's end settles it */
    if (r->doomed) {
        coc__complete(e, r, r->doomed);
    } else if (r->got == r->want) {
        if (r->keep)
            send_done(e, r);
        coc__complete(e, r, r->st.count > r->len ? COC_ETRUNC : 0);
    }
}

static void drop_envelopes(coc_engine *e, uint64_t conn_key, int64_t source)
{
    for (coc__umsg *u = COC__FIRST(&e->unexp, coc__umsg, link), *next; u; u = next) {
        next = COC__NEXT(u, coc__umsg, link);
        if (u->type == COC__RTS && (u->conn_key == conn_key || (int64_t)u->source == source)) {
            coc__unexp_remove(e, u);
            free(u);
        }
    }
}

/* Does our route towards `src` leave through `hop`? (Then its messages come that way too:
 * routes are symmetric.) Envelopes take the small route's hop of the pair; rendezvous
 * bytes (data = 1) any hop of the large route. */
static int via(coc_engine *e, uint32_t src, uint32_t hop, int data)
{
    coc__dest *d = coc__map_get(&e->dests, src);
    if (!d)
        return 0;
    if (data)
        return src == hop || coc__route_has(&d->route[COC_CLASS_LARGE], hop);
    return coc__route_pick(&d->route[COC_CLASS_SMALL], e->self, src) == hop;
}

void coc__lost_conn(coc_engine *e, coc__conn *c, int failover)
{
    uint32_t peer = c->peer_id;
    int crashed = c->authed && !c->bye;
    /* a connection that failed the handshake fails its sends as such, not as a lost peer */
    int why = c->err == COC_EAUTH ? COC_EAUTH : COC_EPEERLOST;
    if (crashed) {
        e->stats.peers_lost++;
        coc__log(e, "%s lost: %s (%s)", c->name, c->why ? c->why : "closed", coc_strerror(c->err));
        coc__notify(e);
    }
    COC__EACH(r, &e->reqs, coc_request, link) {
        if (atomic_load(&r->state) == COC__REQ_DONE)
            continue;
        if (failover) {
            /* its traffic moved to another gateway and is sent again */
            int32_t other = r->kind == COC__SEND || r->phase == COC__POSTED ? r->peer : r->st.source;
            if (other == COC_ANY_SOURCE || coc__rel_rerouted(e, (uint32_t)other, peer))
                continue;
        }
        if (r == c->rreq) {
            r->busy--;
            fail(e, r, r->st.source, why);
        } else if (r->kind == COC__SEND) {
            if (r->conn_key == c->key)
                fail(e, r, r->peer, why);
        } else if (!c->authed && (failover || !c->outgoing || c->err == COC_EAUTH)) {
            continue; /* a stranger never fed a receive (but a hop that could not be
                       * reached, the last of some routes, strands the receives from them) */
        } else if (r->phase == COC__POSTED) {
            if (r->peer == COC_ANY_SOURCE ? crashed : ((uint32_t)r->peer == peer || via(e, r->peer, peer, 0)))
                fail(e, r, r->peer == COC_ANY_SOURCE ? (int32_t)peer : r->peer, COC_EPEERLOST);
        } else if (r->conn_key == c->key ||
                   (r->phase == COC__RDV && via(e, (uint32_t)r->st.source, peer, 1))) {
            /* its bytes were coming on c, or may be (striped over the large route) */
            fail(e, r, r->st.source, COC_EPEERLOST);
        }
    }
    c->rreq = NULL;
    drop_envelopes(e, c->key, -1);
}

void coc__lost_id(coc_engine *e, uint32_t id, int error)
{
    if (id == e->self)
        return;
    int lost = error == COC_EPEERLOST; /* else no route: the endpoint lives, a message died */
    if (lost)
        e->stats.peers_lost++;
    coc__log(e, "endpoint %u unreachable (%s, reported by a gateway)", id, coc_strerror(error));
    coc__fail_peer(e, id, error);
}

void coc__fail_peer(coc_engine *e, uint32_t id, int error)
{
    int lost = error == COC_EPEERLOST;
    coc__notify(e);
    COC__EACH(r, &e->reqs, coc_request, link) {
        if (atomic_load(&r->state) == COC__REQ_DONE)
            continue;
        if (r->kind == COC__SEND) {
            if ((uint32_t)r->peer == id)
                fail(e, r, r->peer, error);
        } else if (!lost) {
            continue;
        } else if (r->phase == COC__POSTED) {
            if (r->peer == COC_ANY_SOURCE || (uint32_t)r->peer == id)
                fail(e, r, (int32_t)id, error);
        } else if ((uint32_t)r->st.source == id) {
            fail(e, r, (int32_t)id, error);
        }
    }
    if (lost)
        drop_envelopes(e, 0, id);
}
