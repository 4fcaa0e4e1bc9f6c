/*
 * protocol.c — point-to-point messages: what a frame addressed to this endpoint does
 * (matching, delivering, answering, streaming a rendezvous send's bytes) and the eager
 * credit. Posting sends and receives is post.c's; failing them when a peer is lost,
 * failures.c's.
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

uint8_t *coc__buf_alloc(uint64_t size)
{
    return aligned_alloc(64, size ? (size + 63) & ~(uint64_t)63 : 64);
}

/* A small held copy comes from plain malloc (16-byte aligned): aligned_alloc splits a
 * larger chunk at every call, several times malloc's cost per small message, and copies
 * of less than COC__HELD_ALIGNED_MIN bytes run as fast into either. */
#define COC__HELD_ALIGNED_MIN 1024

uint8_t *coc__held_alloc(uint64_t size)
{
    if (size < COC__HELD_ALIGNED_MIN)
        return malloc(size < 64 ? 64 : size);
    return coc__buf_alloc(size);
}

/* Give receive r (coc_irecv_alloc) its buffer for a message of total bytes: the exact
 * size, at most its capacity. 0, or -ENOMEM. */
static int sink_alloc(coc_request *r, uint64_t total)
{
    if (!r->alloc || r->rbuf)
        return 0;
    r->rbuf = coc__buf_alloc(total < r->len ? total : r->len);
    return r->rbuf ? 0 : -ENOMEM;
}

/* Receive r takes over unexpected eager message u's payload, when it fits: no copy. */
void coc__adopt(coc_request *r, coc__umsg *u)
{
    if (r->alloc && !r->rbuf && u->total <= r->len) {
        r->rbuf = u->data;
        u->data = NULL;
    }
}

void coc__fill_status(coc_request *r, uint32_t src, uint32_t ctx, int32_t tag, uint64_t total)
{
    r->st.source = (int32_t)src;
    r->st.context = ctx;
    r->st.tag = tag;
    r->st.count = total;
}

/* ---- eager credit ------------------------------------------------------------------------ */

uint64_t coc__eager_cost(uint64_t len)
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
    cr->owed += coc__eager_cost(total);
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
    if (cr->held + coc__eager_cost(h->len) > e->credit) {
        coc__log(e, "endpoint %u sent eager messages beyond the %llu bytes of credit granted to it",
                 h->source, (unsigned long long)e->credit);
        c->why = "eager frames beyond the credit granted";
        return COC_EPROTO;
    }
    cr->held += coc__eager_cost(h->len);
    return 0;
}

/* Deliver a complete eager message to a matched receive; its credit goes back to the
 * sender (conn_key: where it came from, if the route back is unknown). */
void coc__deliver(coc_engine *e, coc_request *r, uint32_t src, uint32_t ctx, int32_t tag,
                    const uint8_t *data, uint64_t total, uint64_t conn_key)
{
    credit_delivered(e, src, total, conn_key);
    coc__fill_status(r, src, ctx, tag, total);
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
void coc__rdv_accept(coc_engine *e, coc_request *r, uint32_t src, uint32_t ctx, int32_t tag,
                       uint64_t total, uint64_t scookie, uint64_t conn_key, uint8_t flags)
{
    coc__fill_status(r, src, ctx, tag, total);
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

/* EAGER: matched, its payload is read into the receive; else into an unexpected message. */
static int eager_begin(coc__conn *c, const coc__hdr *h)
{
    coc_engine *e = c->e;
    int rc;
    if ((rc = credit_take(c, h)) < 0)
        return rc;
    coc_request *r = coc__posted_take(e, h->source, h->context, h->tag);
    if (r && sink_alloc(r, h->total) < 0) {
        coc__posted_add(e, r); /* keep it; this connection fails */
        return -ENOMEM;
    }
    if (r) {
        coc__fill_status(r, h->source, h->context, h->tag, h->total);
        r->phase = COC__MATCHED;
        r->conn_key = c->key;
        r->busy = 1;
        c->rreq = r;
        c->sink = r->rbuf;
        c->sink_cap = r->len;
    } else {
        coc__umsg *u = calloc(1, sizeof *u);
        uint8_t *data = coc__held_alloc(h->total);
        if (!u || !data) {
            free(u);
            free(data);
            return -ENOMEM;
        }
        *u = (coc__umsg){.type = COC__EAGER, .source = h->source, .context = h->context,
                         .tag = h->tag, .total = h->total, .conn_key = c->key, .data = data};
        c->rumsg = u;
        c->sink = data;
        c->sink_cap = h->total;
    }
    return 0;
}

/* RTS: a matching receive asks for the bytes (CTS); else the envelope waits, unexpected. */
static int rts_begin(coc__conn *c, const coc__hdr *h)
{
    coc_engine *e = c->e;
    coc_request *r = coc__posted_take(e, h->source, h->context, h->tag);
    if (r) {
        coc__rdv_accept(e, r, h->source, h->context, h->tag, h->total, h->scookie, c->key, h->flags);
        return 0;
    }
    coc__umsg *u = calloc(1, sizeof *u);
    if (!u)
        return -ENOMEM;
    *u = (coc__umsg){.type = COC__RTS, .source = h->source, .context = h->context,
                     .tag = h->tag, .total = h->total, .scookie = h->scookie,
                     .conn_key = c->key, .flags = h->flags};
    coc__unexp_add(e, u);
    return 0;
}

/* DATA: a fragment of a rendezvous transfer, read into its place in the receive buffer. */
static int data_begin(coc__conn *c, const coc__hdr *h)
{
    coc_engine *e = c->e;
    coc_request *r = coc__rdv_lookup(e, h->rcookie);
    if (!r && coc__rdv_spent(e, h->rcookie)) {
        /* its receive already ended (done, or failed: a stripe's path died): read and
         * drop. Bytes sent again for a done receive mean its DONE did not get through:
         * send again what the sender has not acknowledged (once per restream) */
        coc__credit *cr = h->offset ? NULL : coc__map_get(&e->credits, h->source);
        if (cr && !coc__list_empty(&cr->kept))
            coc__rel_resend(e, h->source);
        return 0;
    }
    if (!r || r->kind != COC__RECV || r->phase != COC__RDV || (uint32_t)r->st.source != h->source ||
        h->total != r->want)
        return bad(c, "data fragment for no pending receive");
    if (r->keep && coc__rel_fragment(r, h, 0)) {
        c->rdrop = 1; /* sent again after a failover, but it came the first time */
        e->stats.duplicates_dropped++;
        return 0;
    }
    r->busy++; /* stripes: several connections may be mid-fragment into it */
    c->rreq = r;
    c->sink = r->rbuf + h->offset;
    c->sink_cap = h->len;
    return 0;
}

/* ERROR: an endpoint is lost (a gateway says so), or one transfer failed at its sender. */
static void error_heard(coc__conn *c, const coc__hdr *h)
{
    coc_engine *e = c->e;
    if (!h->rcookie) {
        /* from a gateway that cannot reach the source: another gateway may (failover) */
        if (c->peer_id == h->source || !coc__rel_avoid(e, h->source, c->peer_id))
            coc__lost_id(e, h->source, h->tag);
        return;
    }
    coc_request *r = coc__rdv_lookup(e, h->rcookie); /* one transfer failed at its sender */
    if (r && r->kind == COC__RECV && r->phase == COC__RDV && (uint32_t)r->st.source == h->source) {
        coc__log(e, "endpoint %u could not send the bytes of a message (tag %d): a path of its "
                 "large route is lost", h->source, r->st.tag);
        coc__fail_request(e, r, r->st.source, COC_EPEERLOST);
    }
}

/* CREDIT: a cumulative count: what it adds to the last one heard; an old or repeated count
 * adds nothing, and never above the whole credit, whatever a peer claims. */
static void credit_heard(coc_engine *e, const coc__hdr *h)
{
    coc__credit *cr = coc__credit_of(e, h->source);
    uint64_t more = cr ? (h->total - cr->seen) % COC__CREDIT_MOD : 0;
    if (cr && more <= e->credit) {
        cr->seen = h->total;
        cr->avail = more > e->credit - cr->avail ? e->credit : cr->avail + more;
    }
}

/* DONE: the receiver of a kept rendezvous send has all its bytes. */
static void done_heard(coc_engine *e, const coc__hdr *h)
{
    coc_request *r = coc__rdv_lookup(e, h->scookie);
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
}

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
        rc = eager_begin(c, h);
        break;
    case COC__RTS:
        rc = rts_begin(c, h);
        break;
    case COC__CTS:
        r = coc__rdv_lookup(e, h->scookie);
        if (!r || r->kind != COC__SEND || (uint32_t)r->peer != h->source || h->total > r->len)
            rc = bad(c, "clear to send for no pending send");
        else
            rc = start_stream(e, r, h);
        break;
    case COC__DATA:
        rc = data_begin(c, h);
        break;
    case COC__ERROR:
        error_heard(c, h);
        break;
    case COC__BYE:
        c->bye = 1;
        break;
    case COC__CREDIT:
        credit_heard(e, h);
        break;
    case COC__PATH: /* frames to h->source died on the way (a gateway's lost hop, a gap) */
        coc__log(e, "frames to endpoint %u were lost on the way (reported through %s): sending "
                 "again what it has not acknowledged", h->source, c->name);
        coc__rel_resend(e, h->source);
        break;
    case COC__PING:
        break;
    case COC__DONE:
        done_heard(e, h);
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
            coc__adopt(r, u);
            coc__deliver(e, r, u->source, u->context, u->tag, u->data ? u->data : r->rbuf, u->total,
                    u->conn_key);
            free(u->data);
            free(u);
        } else {
            coc__unexp_add(e, u);
        }
    }
    pthread_mutex_unlock(&e->lock);
}
