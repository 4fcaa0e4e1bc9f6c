/*
 * forward.c — gateway mode: frames addressed to another endpoint go on to the next hop
 * by their header alone.
 *
 * Next hop by size class (coc.h): DATA frames are striped over the large route's hops by
 * weight (smooth weighted round-robin by bytes, state per destination); every other frame
 * takes the small route's hop for its (source, destination) pair, so envelopes stay in
 * order.
 *
 * Cut-through: as soon as a header is decoded, a page-aligned buffer for the whole frame
 * (at most 64 B + fragment) is queued on the outgoing connection and the header is
 * written; payload bytes are read straight into that buffer and written on as they
 * arrive, so the gateway never holds a message, only frames in flight.
 *
 * Bounded memory: each outgoing connection queues at most forward_window bytes of
 * forwarded frames (plus one frame per feeding connection). An incoming connection whose
 * next frame would overflow that window stops being read (EPOLLIN off, its header kept)
 * until the window drains to half; the kernel's socket buffers then fill and TCP slows the
 * sender. So a receiver that stops reading slows its sender and the gateway stays flat.
 * A paused socket whose sender hangs up leaves the poller until it is read again
 * (conn_rx.c coc__conn_event): the poller reports a hang-up whatever it is asked.
 * A shared-memory connection pauses by not reading its ring (its writer then finds the
 * ring full); its socket stays polled, because the doorbells on it also announce room in
 * the ring we write to, and the peer's reading of that ring must not wait for our input.
 *
 * Failures: when a directly connected endpoint dies (no BYE), every endpoint in the route
 * table gets an ERROR frame naming it, so requests that need it fail instead of hanging,
 * whether or not their traffic crossed this gateway. Since an endpoint also closes a
 * connection that it judges silent, the gateway first dials it back: one that answers is
 * alive, and only gets its pairs' senders to send again. When a link to another gateway dies,
 * the endpoints behind it are many: for every connection the gateway remembers which
 * (endpoint to tell, endpoint lost) pairs crossed it, and each endpoint to tell gets an
 * ERROR frame naming the lost one. A frame with no usable next hop is dropped and answered
 * with an ERROR frame (no route / peer lost) too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Record that the pair (notify, lost) crossed c (flows.h); a set that is full says so
 * once in the log, since a death of c cannot tell the pairs past it. */
static void add_flow(coc__conn *c, uint32_t notify, uint32_t lost)
{
    if (coc__flows_add(&c->flows, notify, lost) >= 0 || c->flows_full)
        return;
    c->flows_full = 1;
    coc__log(c->e, "connection to endpoint %u: no room for more than %zu endpoint pairs; "
             "pairs beyond them (first: %u to %u) are not told if it dies", c->peer_id,
             c->flows.n, lost, notify);
}

/*
 * Forwarding buffers are pooled: fresh page-aligned memory for every frame costs a page
 * fault per 4 KiB touched (glibc mmaps large aligned blocks), which halved a gateway's
 * bandwidth. Class k holds (4 KiB << k) + 4 KiB: a fragment plus its header. The pool
 * keeps at most twice the forward window.
 */
static int pool_class(size_t size)
{
    for (int k = 0; k < COC__POOL_CLASSES; k++)
        if (size <= ((size_t)4096 << k) + 4096)
            return k;
    return -1;
}

static uint8_t *pool_get(coc_engine *e, size_t size)
{
    int k = pool_class(size);
    if (k >= 0 && e->pool[k]) {
        uint8_t *buf = e->pool[k];
        memcpy(&e->pool[k], buf, sizeof(void *));
        e->pool_bytes -= ((size_t)4096 << k) + 4096;
        return buf;
    }
    return aligned_alloc(4096, k >= 0 ? ((size_t)4096 << k) + 4096 : (size + 4095) & ~(size_t)4095);
}

static void pool_put(coc_engine *e, uint8_t *buf, size_t size)
{
    int k = pool_class(size);
    size_t cap = k >= 0 ? ((size_t)4096 << k) + 4096 : 0;
    if (k < 0 || e->pool_bytes + cap > 2 * e->cfg.forward_window) {
        free(buf);
        return;
    }
    memcpy(buf, &e->pool[k], sizeof(void *));
    e->pool[k] = buf;
    e->pool_bytes += cap;
}

/*
 * A forwarded frame travels in an item of its own (coc__fwd), recycled through a free
 * list that the pool's bound counts too: a calloc and a free per frame were a tenth of a
 * gateway's user time. A frame of at most FWD_INLINE bytes (an envelope, a small eager
 * message: most frames) is held in its item, so an 8 B message touches one small block
 * rather than an item and a pooled buffer of two pages; a larger frame gets a pooled
 * page-aligned buffer (above).
 */
#define FWD_INLINE 448

typedef struct coc__fwd {
    coc__item it;                      /* first: the item is the coc__fwd */
    _Alignas(64) uint8_t bytes[FWD_INLINE];
} coc__fwd;

static coc__item *fwd_get(coc_engine *e, size_t size)
{
    coc__fwd *f = e->fwd_items;
    if (f) {
        memcpy(&e->fwd_items, f, sizeof(void *));
        e->pool_bytes -= sizeof *f;
    } else if (!(f = aligned_alloc(_Alignof(coc__fwd), sizeof *f))) {
        return NULL;
    }
    f->it = (coc__item){.kind = COC__IT_FWD, .size = size};
    f->it.owned = size <= FWD_INLINE ? f->bytes : pool_get(e, size);
    if (!f->it.owned) {
        free(f);
        return NULL;
    }
    return &f->it;
}

static void fwd_put(coc_engine *e, coc__item *it)
{
    coc__fwd *f = (coc__fwd *)(void *)it;
    if (it->owned != f->bytes)
        pool_put(e, it->owned, it->size);
    it->owned = NULL;
    if (e->pool_bytes + sizeof *f > 2 * e->cfg.forward_window) {
        free(f);
        return;
    }
    memcpy(f, &e->fwd_items, sizeof(void *));
    e->fwd_items = f;
    e->pool_bytes += sizeof *f;
}

void coc__pool_free(coc_engine *e)
{
    for (int k = 0; k < COC__POOL_CLASSES; k++)
        while (e->pool[k]) {
            uint8_t *buf = e->pool[k];
            memcpy(&e->pool[k], buf, sizeof(void *));
            free(buf);
        }
    while (e->fwd_items) {
        void *f = e->fwd_items;
        memcpy(&e->fwd_items, f, sizeof(void *));
        free(f);
    }
    e->pool_bytes = 0;
}

static void error_back(coc_engine *e, coc__conn *in, const coc__hdr *h, int code)
{
    if (h->type == COC__ERROR || h->type == COC__BYE || (h->type == COC__DATA && h->offset))
        return; /* never answer an error with an error; one answer per message */
    coc__hdr eh = {.type = COC__ERROR, .source = h->dest, .dest = h->source, .tag = code};
    coc__log(e, "cannot forward a frame from endpoint %u to endpoint %u: %s", h->source, h->dest,
             coc_strerror(code));
    coc__send_ctrl(e, &eh, in ? in->key : 0);
}

/* A DATA frame is placed by offset at its receiver, so it may take any hop of the large
 * route: stripe over them by bytes, never back where it came from. */
static uint32_t next_data_hop(coc__route *large, uint32_t len, uint32_t from)
{
    for (size_t tries = 0; tries < 2 * large->n; tries++) {
        uint32_t hop = large->hops[coc__route_stripe(large, len)];
        if (hop != from)
            return hop;
    }
    return from; /* only the way back: dropped and reported as no route */
}

/* A frame that is not DATA takes the hop its (source, destination) pair picks, which only
 * a route change moves: the connection it came in on remembers the last pair's hop, and
 * its next frame of that pair (a ping-pong's every frame) skips the two map look-ups and
 * the pick. The remembered hop holds while no route was made since, and its frames go on
 * the connection its peer entry names (the one coc__conn_to returns) while that lives. */
static coc__conn *remembered_out(coc__conn *c, const coc__hdr *h)
{
    if (h->type == COC__DATA || c->fwd_gen != coc__route_gen() || c->fwd_source != h->source ||
        c->fwd_dest != h->dest)
        return NULL;
    return coc__peer_conn(c->e, c->fwd_peer);
}

static void remember_out(coc__conn *c, const coc__hdr *h, uint32_t hop)
{
    if (h->type == COC__DATA) /* striped: its hop is no guide to the next frame's */
        return;
    coc__peer *p = coc__map_get(&c->e->peers, hop);
    c->fwd_out_key = 0; /* a new pair: its flows are not known to be added yet */
    c->fwd_gen = p ? coc__route_gen() : 0;
    c->fwd_source = h->source;
    c->fwd_dest = h->dest;
    c->fwd_peer = p;
}

/* lock: the connection to the next hop of frame h read from c, connecting if needed and
 * moving off hops that cannot be reached; NULL (rc set) when there is none. */
static coc__conn *next_hop(coc__conn *c, const coc__hdr *h, int *rc)
{
    coc_engine *e = c->e;
    coc__dest *d = coc__map_get(&e->dests, h->dest);
    for (;;) {
        coc__route *r = d ? &d->route[h->type == COC__DATA ? COC_CLASS_LARGE : COC_CLASS_SMALL] : NULL;
        uint32_t hop = !r ? 0
                       : h->type == COC__DATA ? next_data_hop(r, h->len, c->peer_id)
                       : coc__route_pick(r, h->source, h->dest);
        coc__conn *out = d && hop != c->peer_id ? coc__conn_to(e, hop, rc) : NULL;
        if (out)
            remember_out(c, h, hop);
        if (out || !d || hop == c->peer_id || hop == h->dest || *rc == COC_ENOROUTE || r->n < 2)
            return out;
        coc__rel_reroute(e, hop, coc_strerror(*rc), 1); /* cannot reach it: as good as dead */
    }
}

int coc__forward_begin(coc__conn *c)
{
    coc_engine *e = c->e;
    const coc__hdr *h = &c->rh;
    size_t size = COC__HDR_LEN + h->len;
    int rc = COC_ENOROUTE;
    pthread_mutex_lock(&e->lock);
    c->rfwd = NULL;
    c->rfwd_out = NULL;
    coc__conn *remembered = remembered_out(c, h);
    coc__conn *out = remembered ? remembered : next_hop(c, h, &rc);
    if (!out) {
        error_back(e, c, h, rc == COC_ENOROUTE ? COC_ENOROUTE : COC_EPEERLOST);
        pthread_mutex_unlock(&e->lock);
        return 0; /* the payload is read and dropped */
    }
    if (out->fwd_queued && out->fwd_queued + size > e->cfg.forward_window) {
        c->paused_on = out;
        coc__list_prepend(&out->waiters, &c->waiter_link);
        /* a ring connection's socket carries only doorbells, among them the one saying
         * its reader made room for what we write to it: keep hearing those (ring_event
         * reads no frame while paused), or two gateways each waiting for the other's
         * window to drain wait for ever */
        if (!c->ring)
            coc__conn_set_in(c, 0);
        pthread_mutex_unlock(&e->lock);
        return 1;
    }
    coc__item *it = fwd_get(e, size);
    if (!it) {
        pthread_mutex_unlock(&e->lock);
        c->why = "out of memory for forwarding";
        return -ENOMEM;
    }
    uint8_t *buf = it->owned;
    /* the header goes on as it came: decoding and encoding give back the same 64 bytes,
     * which still lie in rbuf right before rpos (frame_header; a paused connection reads
     * nothing until this call) */
    memcpy(buf, c->rbuf + c->rpos - COC__HDR_LEN, COC__HDR_LEN);
    /* payload bytes already read come along, so a small frame leaves in one write */
    size_t pre = c->rlen - c->rpos < h->len ? c->rlen - c->rpos : h->len;
    memcpy(buf + COC__HDR_LEN, c->rbuf + c->rpos, pre);
    c->rpos += pre;
    c->rpre = pre;
    it->filled = COC__HDR_LEN + pre;
    out->fwd_queued += size;
    e->stats.forward_bytes_buffered += size;
    if (e->stats.forward_bytes_buffered > e->stats.forward_bytes_buffered_max)
        e->stats.forward_bytes_buffered_max = e->stats.forward_bytes_buffered;
    e->stats.frames_forwarded++;
    e->stats.bytes_forwarded += h->len;
    /* the remembered pair's flows are on both connections once added (flows are only
     * ever added): a ping-pong's frames skip the two look-ups */
    if (!remembered || out->key != c->fwd_out_key) {
        add_flow(out, h->source, h->dest);
        add_flow(c, h->dest, h->source);
        if (h->type != COC__DATA) /* a DATA frame's pair is not the remembered one */
            c->fwd_out_key = out->key;
    }
    if (pre < h->len) {
        c->rfwd = it;
        c->rfwd_out = out;
    }
    /* The whole frame ends the round's input (progress.c) and nothing is corked before
     * it: it goes now, under this lock, not when the round ends, under another. */
    if (e->input_end && pre == h->len && c->rpos == c->rlen && !e->ncorked)
        e->corking = 0;
    coc__conn_push(out, it);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

void coc__forward_data(coc__conn *c, const uint8_t *src, size_t n)
{
    coc_engine *e = c->e;
    pthread_mutex_lock(&e->lock);
    coc__item *it = c->rfwd;
    coc__conn *out = c->rfwd_out;
    if (it) {
        if (it->owned + it->filled != src)
            memcpy(it->owned + it->filled, src, n);
        it->filled += n;
        if (it->filled == it->size) {
            c->rfwd = NULL;
            c->rfwd_out = NULL;
        }
        if (out->queue.head == &it->link)
            coc__conn_flush(out); /* may free it */
    }
    pthread_mutex_unlock(&e->lock);
}

void coc__forward_done(coc__conn *out, coc__item *it)
{
    coc_engine *e = out->e;
    out->fwd_queued -= it->size;
    e->stats.forward_bytes_buffered -= it->size;
    fwd_put(e, it);
    if (!coc__list_empty(&out->waiters) && out->fwd_queued <= e->cfg.forward_window / 2) {
        for (coc__link *l; (l = coc__list_pop(&out->waiters)) != NULL;) {
            coc__conn *w = COC__ENTRY(l, coc__conn, waiter_link);
            w->paused_on = NULL;
            coc__list_prepend(&e->resumed, &w->resumed_link);
        }
        coc__wake(e);
    }
}

/* Endpoint `id` is lost: tell every endpoint we route for, so one waiting on it hears even
 * if none of its traffic crossed this gateway. */
static void report_lost(coc_engine *e, uint32_t id)
{
    e->stats.peers_lost++;
    for (size_t i = 0; i < e->dests.cap; i++) {
        coc__hdr eh = {.type = COC__ERROR, .source = id, .dest = e->dests.keys[i],
                       .tag = COC_EPEERLOST};
        if (e->dests.vals[i] && eh.dest != eh.source && eh.dest != e->self)
            coc__send_ctrl(e, &eh, 0);
    }
}

/* The pairs that crossed c lost frames on the way: for each, tell the endpoint to tell that
 * its frames to the other one died (PATH: it sends again what was not acknowledged), or,
 * unless `moved`, that the other one is lost (ERROR). */
static void report_flows(coc_engine *e, const coc__conn *c, int moved)
{
    for (size_t i = 0; i < c->flows.cap; i++) {
        const coc__flow *f = &c->flows.slot[i];
        if (!coc__flow_used(f))
            continue;
        int path = moved || coc__rel_rerouted(e, f->lost, c->peer_id);
        coc__hdr eh = {.type = path ? COC__PATH : COC__ERROR, .source = f->lost,
                       .dest = f->notify, .tag = path ? 0 : COC_EPEERLOST};
        if (eh.source != eh.dest && eh.dest != e->self)
            coc__send_ctrl(e, &eh, 0);
    }
}

/*
 * The connection of a directly connected endpoint ended without BYE. That is how a dead
 * endpoint's connection ends, but also one the endpoint closed by its own verdict: it
 * judged us silent (we were stopped, or it was starved of CPU past the liveness timeout)
 * or we judged it so. So dial it once before reporting it: the verdict waits on that
 * connection (dialback), which carries the pairs that crossed the old one. A dial refused
 * at once reports it lost at once. A connection found that already said BYE (the endpoint
 * dialed us again, then began to leave) is an orderly close: nothing is reported.
 */
static void dial_back(coc_engine *e, coc__conn *c)
{
    int rc = 0;
    coc__conn *back = atomic_load(&e->stopping) ? NULL : coc__conn_to(e, c->peer_id, &rc);
    if (!back) {
        if (rc)
            coc__log(e, "endpoint %u cannot be dialed back after its connection ended without "
                     "BYE (%s): reported lost", c->peer_id, coc_strerror(rc));
        report_lost(e, c->peer_id);
        return;
    }
    if (back->bye) {
        /* it dialed again and said BYE there: it is leaving, and a connection that ends
         * after BYE reports nothing (not alive: no PATH sends its pairs to it again) */
        coc__log(e, "endpoint %u said BYE on its new connection after its last one ended "
                 "without BYE: an orderly close, not reported", c->peer_id);
        return;
    }
    for (size_t i = 0; i < c->flows.cap; i++)
        if (coc__flow_used(&c->flows.slot[i]))
            add_flow(back, c->flows.slot[i].notify, c->flows.slot[i].lost);
    back->dialback = 1;
    if (back->authed)
        coc__forward_opened(back); /* it has an open connection to us already */
}

void coc__forward_opened(coc__conn *c)
{
    coc_engine *e = c->e;
    if (!c->dialback)
        return;
    c->dialback = 0;
    e->stats.peers_dialed_back++;
    coc__log(e, "endpoint %u answers a new connection after its last one ended without BYE: "
             "alive, not reported lost; %zu pair%s that crossed the old one told to send again",
             c->peer_id, c->flows.n, c->flows.n == 1 ? "" : "s");
    report_flows(e, c, 1);
}

int coc__forward_dials_back(const coc_engine *e, const coc__conn *c)
{
    return e->forward && c->authed && !c->bye && !(c->theirs.flags & COC__HELLO_GATEWAY) && !c->cut;
}

void coc__forward_lost(coc_engine *e, coc__conn *c)
{
    if (!e->forward)
        return;
    if (c->dialback && !c->authed) {
        /* dialed back after its connection ended: no answer, so it is lost after all */
        coc__log(e, "endpoint %u does not answer a new connection after its last one ended "
                 "without BYE (%s): reported lost", c->peer_id,
                 c->why ? c->why : coc_strerror(c->err));
        report_lost(e, c->peer_id);
    } else if (coc__forward_dials_back(e, c)) {
        dial_back(e, c);
    } else if ((c->authed || c->outgoing) && !c->bye) {
        /* a gateway link died, or never came up with frames queued on it (or we cut one):
         * tell the endpoints of the pairs that crossed it. Where our route moved to another
         * hop (reliable.c), or the link was one we cut, the endpoint is alive; else it is
         * lost. */
        report_flows(e, c, c->cut);
    }
    if (c->rfwd) {
        /* c died mid-frame: the frame it was feeding can never be completed */
        coc__conn *out = c->rfwd_out;
        coc__item *it = c->rfwd;
        if (it->off == 0) {
            if (coc__list_has(&out->queue, &it->link)) {
                coc__list_remove(&out->queue, &it->link);
                coc__forward_done(out, it);
            }
        } else {
            out->cut = 1;
            coc__conn_fail(out, COC_EPEERLOST, "the frame being forwarded lost its sender");
        }
        c->rfwd = NULL;
    }
    for (size_t i = 0; i < COC__MAX_CONNS; i++) {
        coc__conn *x = e->conns[i];
        if (x && x->rfwd_out == c) {
            x->rfwd = NULL; /* the rest of its frame is read and dropped */
            x->rfwd_out = NULL;
        }
    }
    if (c->paused_on && coc__list_has(&c->paused_on->waiters, &c->waiter_link))
        coc__list_remove(&c->paused_on->waiters, &c->waiter_link);
    if (coc__list_has(&e->resumed, &c->resumed_link))
        coc__list_remove(&e->resumed, &c->resumed_link);
    for (coc__link *l; (l = coc__list_pop(&c->waiters)) != NULL;) {
        coc__conn *w = COC__ENTRY(l, coc__conn, waiter_link);
        w->paused_on = NULL;
        coc__list_prepend(&e->resumed, &w->resumed_link);
    }
}

void coc__forward_resume(coc_engine *e)
{
    for (;;) {
        pthread_mutex_lock(&e->lock);
        coc__link *l = coc__list_pop(&e->resumed);
        coc__conn *c = COC__ENTRY(l, coc__conn, resumed_link);
        pthread_mutex_unlock(&e->lock);
        if (!c)
            return;
        if (c->state == COC__CS_DEAD || c->rstate != COC__RX_PAUSED)
            continue;
        int rc = coc__conn_unpause(c);
        if (rc < 0) {
            pthread_mutex_lock(&e->lock);
            coc__conn_fail(c, rc, c->why ? c->why : "forwarding failed");
            pthread_mutex_unlock(&e->lock);
        }
    }
}
