/*
 * reliable.c — failover: a gateway of a set with two or more members may die (crash, stop,
 * lose its link) and no message is lost, none is delivered twice, and MPI order holds.
 * docs/wire-protocol.md "Failover" is the description; this is the code.
 *
 * End to end, per ordered pair of endpoints:
 *  - every frame that changes the receiver's matching state (EAGER, RTS, CTS, DONE) carries a
 *    sequence number (1, 2, ...) and, in its offset field, an acknowledgement: the next
 *    sequence number its sender expects from the frame's destination (cumulative);
 *  - the receiver takes a frame only when its number is the next expected one, and drops
 *    it otherwise (a duplicate, or one that overtook a lost frame: go-back-N). Its
 *    acknowledgement is taken in any case;
 *  - a sender whose message crosses a gateway keeps each such frame (an eager payload is
 *    copied) until acknowledged. What it keeps is bounded: eager payload by the credit
 *    (credit comes back in CREDIT frames, which carry the acknowledgement too), envelopes
 *    by the sends pending;
 *  - when a path loses frames — the sender's own connection to a gateway dies, or a gateway
 *    on the way loses a link and says so in a PATH frame — the sender sends again, in order
 *    and on the surviving route, everything not acknowledged, plus its cumulative credit
 *    count (so a CREDIT frame that died with the gateway leaks nothing), and streams again
 *    the bytes of its rendezvous sends to that destination not yet confirmed by DONE.
 *    The receiver counts each fragment once (a bit per fragment) and answers DONE when it
 *    has every byte; only then does the send complete, since its buffer may be needed again.
 *
 * Rerouting: when a connection to a gateway dies without BYE, that hop leaves every route
 * (both size classes) of every destination that has another hop; the weights of the others
 * keep their ratio. A destination whose only hop it was fails as before (COC_EPEERLOST).
 *
 * Liveness: every open connection that stays quiet gets a PING frame each quarter of
 * liveness_ns; a connection that brings nothing for liveness_ns (a stopped peer, a cut
 * link: TCP may stay open) is declared dead like a closed one. A connection we stopped
 * reading (a full forwarding window) is not judged; at an endpoint, a gateway's
 * connection stalled in the middle of a frame gets twice the timeout (stalled_mid_frame).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

struct coc__kept {
    coc__link link;                    /* on its coc__credit's kept list */
    coc__hdr h;
    uint8_t payload[];
};

coc__credit *coc__credit_of(coc_engine *e, uint32_t peer)
{
    coc__credit *cr = coc__map_get(&e->credits, peer);
    if (!cr && (cr = calloc(1, sizeof *cr)) != NULL) {
        cr->avail = e->credit;
        cr->expect = 1;
        cr->acked = 1;
        if (coc__map_put(&e->credits, peer, cr) < 0) {
            free(cr);
            cr = NULL;
        }
    }
    return cr;
}

void coc__rel_forget(coc__credit *cr)
{
    for (coc__link *l; (l = coc__list_pop(&cr->kept)) != NULL;)
        free(COC__ENTRY(l, coc__kept, link));
    cr->kept_bytes = 0;
}

int coc__rel_protected(coc_engine *e, const coc__dest *d, uint32_t dest)
{
    (void)e;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < d->route[k].n; i++)
            if (d->route[k].hops[i] != dest)
                return 1;
    return 0;
}

int coc__rel_stamp(coc_engine *e, coc__dest *d, coc__hdr *h, const void *payload, int keep)
{
    coc__credit *cr = coc__credit_of(e, h->dest);
    if (!cr)
        return -ENOMEM;
    h->seq = ++d->seq;
    h->offset = cr->expect;
    if (!keep)
        return 0;
    coc__kept *k = malloc(sizeof *k + h->len);
    if (!k) {
        d->seq--; /* not sent: its number must not leave a gap */
        return -ENOMEM;
    }
    k->h = *h;
    if (h->len)
        memcpy(k->payload, payload, h->len);
    coc__list_append(&cr->kept, &k->link);
    cr->kept_bytes += h->len;
    return 0;
}

void coc__rel_ack(coc_engine *e, uint32_t peer, uint64_t ack)
{
    coc__credit *cr = coc__map_get(&e->credits, peer);
    if (!cr || ack <= cr->acked)
        return;
    cr->acked = ack;
    for (coc__kept *k; (k = COC__FIRST(&cr->kept, coc__kept, link)) && k->h.seq < ack;) {
        coc__list_remove(&cr->kept, &k->link);
        cr->kept_bytes -= k->h.len;
        free(k);
    }
}

int coc__rel_accept(coc_engine *e, const coc__hdr *h)
{
    if (h->offset && h->type != COC__DATA) /* DATA: the offset is the fragment's place */
        coc__rel_ack(e, h->source, h->offset);
    if (!h->seq)
        return 1;
    coc__credit *cr = coc__credit_of(e, h->source);
    if (!cr)
        return 1;
    if (h->seq != cr->expect) {
        e->stats.duplicates_dropped++;
        if (h->seq > cr->expect && cr->nacked != cr->expect) {
            /* a gap: frames before it died on the way; ask for them (once per gap) */
            cr->nacked = cr->expect;
            coc__hdr p = {.type = COC__PATH, .source = e->self, .dest = h->source};
            coc__send_ctrl(e, &p, 0);
        } else if (h->seq < cr->expect && cr->dupacked != cr->expect) {
            /* sent again, but we had it: say what we have, so the sender stops keeping it */
            cr->dupacked = cr->expect;
            coc__hdr a = {.type = COC__CREDIT, .source = e->self, .dest = h->source,
                          .offset = cr->expect, .total = cr->returned};
            coc__send_ctrl(e, &a, 0);
        }
        return 0;
    }
    cr->expect++;
    return 1;
}

#define EVERY_DEST UINT32_MAX

/* Stream again the rendezvous sends to dest (or to EVERY_DEST) that lost a lane, and with
 * `written` those whose lanes were all written but that have no DONE (their bytes may have
 * died further on); lanes still running are not doubled. */
static void restream(coc_engine *e, uint32_t dest, int written)
{
    COC__EACH(r, &e->reqs, coc_request, link)
        if (r->kind == COC__SEND && (dest == EVERY_DEST || (uint32_t)r->peer == dest) && r->keep &&
            r->peer_cookie && !r->confirmed && !r->doomed &&
            atomic_load(&r->state) != COC__REQ_DONE && (r->relane || (written && !r->busy))) {
            r->relane = 0;
            e->stats.frames_resent++;
            if (coc__stream_out(e, r, r->want, r->peer_cookie) < 0)
                coc__complete(e, r, -ENOMEM);
        }
}

void coc__rel_resend(coc_engine *e, uint32_t dest)
{
    coc__dest *d = coc__map_get(&e->dests, dest);
    if (!d)
        return;
    e->lossy = 1;
    int rc;
    coc__conn *c = coc__rel_conn_to(e, d, dest, &rc);
    coc__credit *cr = coc__map_get(&e->credits, dest);
    if (c && c->state != COC__CS_DEAD && cr) {
        COC__EACH(k, &cr->kept, coc__kept, link) {
            k->h.offset = cr->expect;
            if (coc__conn_send(c, &k->h, k->payload, NULL) < 0)
                break;
            e->stats.frames_resent++;
        }
        /* the credit count is cumulative: a CREDIT that died on the way leaks nothing */
        coc__hdr h = {.type = COC__CREDIT, .source = e->self, .dest = dest,
                      .offset = cr->expect, .total = cr->returned};
        coc__conn_send(c, &h, NULL, NULL);
    }
    restream(e, dest, 1);
}

void coc__rel_relane(coc_engine *e)
{
    if (!e->forward && !atomic_load(&e->stopping))
        restream(e, EVERY_DEST, 0);
}

/* Fragments are cut by the sender at multiples of its fragment size, which only the
 * fragments tell: every fragment but the last has exactly that length, so it is fragment
 * offset / length; the last one (it ends the transfer) has a flag of its own. */
int coc__rel_fragment(coc_request *r, const coc__hdr *h, int mark)
{
    if (h->offset + h->len == r->want) {
        int seen = r->last_seen;
        r->last_seen |= (uint8_t)mark;
        return seen;
    }
    if (!r->frags) {
        if (!mark)
            return 0;
        r->funit = h->len;
        r->frags = calloc(r->want / h->len / 8 + 1, 1);
        if (!r->frags)
            return 0;
    }
    if (h->len != r->funit || h->offset % h->len)
        return 0; /* not cut like the others: cannot be a repeat of one of them */
    uint64_t i = h->offset / h->len;
    int seen = r->frags[i / 8] >> (i % 8) & 1;
    if (mark)
        r->frags[i / 8] |= (uint8_t)(1u << (i % 8));
    return seen;
}

/* The hops of route `from` but `gone`, with their weights, for which keep(e, hop) holds
 * (none: all), made into route `to`; 1 if any hop was left. */
static int rebuild(coc_engine *e, coc__route *to, const coc__route *from, uint32_t gone,
                   int (*keep)(coc_engine *, uint32_t))
{
    uint32_t hops[COC__ROUTE_MAX_HOPS], weights[COC__ROUTE_MAX_HOPS];
    size_t n = 0;
    uint64_t below = 0;
    for (size_t i = 0; i < from->n; i++) {
        uint64_t w = from->cumulative[i] - below;
        below = from->cumulative[i];
        if (from->hops[i] != gone && w && (!keep || keep(e, from->hops[i]))) {
            hops[n] = from->hops[i];
            weights[n++] = (uint32_t)w;
        }
    }
    if (!n || coc__route_make(to, hops, weights, n) < 0)
        return 0;
    coc__route_changed();
    return 1;
}

/* Take `hop` out of route r; 1 if it was there and others remain. */
static int drop_hop(coc__route *r, uint32_t hop)
{
    return coc__route_has(r, hop) && r->n >= 2 && rebuild(NULL, r, r, hop, NULL);
}

/* May `hop` come back into a route? Not when down; else when it can be dialed now (a
 * hop whose dial fails here is down; one whose dial fails later fails as any connection
 * that cannot be made, conn.c). */
static int answers(coc_engine *e, uint32_t hop)
{
    coc__peer *p = coc__map_get(&e->peers, hop);
    int rc;
    if (!p || p->down || atomic_load(&e->stopping))
        return 0;
    if (!coc__conn_to(e, hop, &rc))
        p->down = 1;
    return !p->down;
}

/* Route class k of d is about to lose `gone`, its last hop: put back the hops d was set
 * with that left it and still answer. A hop leaves a route when its connection ends, which
 * does not prove the gateway dead: one that must close a connection in the middle of a
 * frame (the frame's sender died) lives on, and when two gateways do that to one endpoint
 * at once, the second loss would strand routes that the first gateway still serves.
 * 1 if any came back. */
static int revive(coc_engine *e, coc__dest *d, int k, uint32_t gone)
{
    return d->set && rebuild(e, &d->route[k], &d->set[k], gone, answers);
}

size_t coc__rel_reroute(coc_engine *e, uint32_t hop, const char *why, int down)
{
    size_t moved = 0, stranded = 0, revived = 0, again = 0, n = e->dests.cap ? e->dests.cap : 1;
    coc__peer *gone = coc__map_get(&e->peers, hop);
    if (gone && down)
        gone->down = 1;
    /* dests: those that moved from the front, those left with no hop from the back */
    uint32_t *dests = calloc(n, sizeof *dests);
    for (size_t i = 0; i < e->dests.cap; i++) {
        coc__dest *d = e->dests.vals[i];
        uint32_t id = e->dests.keys[i];
        if (!d || id == hop)
            continue;
        int had = 0, back = 0, stays = 0;
        for (int k = 0; k < 2; k++)
            if (coc__route_has(&d->route[k], hop)) {
                if (!had && !d->set && (d->set = malloc(2 * sizeof *d->set)) != NULL)
                    memcpy(d->set, d->route, 2 * sizeof *d->set);
                had = 1;
                if (drop_hop(&d->route[k], hop) || d->route[k].n != 1)
                    continue;
                if (revive(e, d, k, hop))
                    back = 1;
                else if (answers(e, hop))
                    stays = 1; /* the last hop itself answers a new dial: it stays */
            }
        if (!had)
            continue;
        revived += back;
        again += stays;
        if (!stays && (coc__route_has(&d->route[0], hop) || coc__route_has(&d->route[1], hop))) {
            if (dests)
                dests[n - 1 - stranded] = id;
            stranded++;
            continue;
        }
        if (dests)
            dests[moved] = id;
        moved++;
    }
    if (again)
        coc__log(e, "connection to gateway %u ended (%s), but it answers a new one: %zu "
                 "destination%s stay with it", hop, why, again, again == 1 ? "" : "s");
    if (moved > again) {
        e->stats.failovers++;
        coc__log(e, "gateway %u lost (%s): %zu destination%s moved to the other gateways of "
                 "their routes%s%s", hop, why, moved, moved == 1 ? "" : "s",
                 revived ? " (back to gateways they had left before, which still answer)" : "",
                 stranded ? "; some had no other" : "");
    }
    /* routes first, then resend: a resend must not pick a hop that is about to go. Not
     * while the engine closes: its connections are failed on purpose, and a resend would
     * open new ones that nobody reaps */
    for (size_t i = 0; dests && i < moved; i++)
        if (!e->forward && !atomic_load(&e->stopping))
            coc__rel_resend(e, dests[i]);
    /* no hop left that answers: what needs those destinations fails, also what waited
     * for an earlier loss to be routed around (parked on a connection gone since) */
    for (size_t i = 0; dests && i < stranded && gone && gone->down && !e->forward &&
                       !atomic_load(&e->stopping); i++) {
        coc__log(e, "no gateway left towards endpoint %u", dests[n - 1 - i]);
        coc__fail_peer(e, dests[n - 1 - i], COC_EPEERLOST);
    }
    free(dests);
    return stranded;
}

coc__conn *coc__rel_conn_to(coc_engine *e, coc__dest *d, uint32_t dest, int *rc)
{
    for (;;) {
        uint32_t hop = coc__route_pick(&d->route[COC_CLASS_SMALL], e->self, dest);
        coc__conn *c = coc__conn_to(e, hop, rc);
        if (c || *rc == COC_ENOROUTE || hop == dest || d->route[COC_CLASS_SMALL].n < 2)
            return c;
        coc__rel_reroute(e, hop, coc_strerror(*rc), 1); /* unreachable: as good as dead */
    }
}

int coc__rel_avoid(coc_engine *e, uint32_t dest, uint32_t hop)
{
    coc__dest *d = coc__map_get(&e->dests, dest);
    if (!d || dest == hop || !coc__rel_protected(e, d, dest))
        return 0;
    for (int k = 0; k < 2; k++)
        drop_hop(&d->route[k], hop);
    if (coc__route_has(&d->route[0], hop) || coc__route_has(&d->route[1], hop))
        return 0;
    e->stats.failovers++;
    coc__log(e, "gateway %u cannot reach endpoint %u: its traffic moves to the other gateways "
             "of the route", hop, dest);
    coc__rel_resend(e, dest);
    return 1;
}

int coc__rel_rerouted(coc_engine *e, uint32_t dest, uint32_t hop)
{
    coc__dest *d = coc__map_get(&e->dests, dest);
    if (!d || dest == hop || !coc__rel_protected(e, d, dest))
        return 0;
    if (!coc__route_has(&d->route[0], hop) && !coc__route_has(&d->route[1], hop))
        return 1;
    /* still a hop: moved to a new connection to it (reroute: the hop answered again) */
    return coc__peer_conn(e, coc__map_get(&e->peers, hop)) != NULL;
}

/* Put a receive that was being filled back at the front of the posted queue. */
static void repost(coc_engine *e, coc_request *r)
{
    coc__list_prepend(&e->posted, &r->qlink);
    r->phase = COC__POSTED;
}

void coc__rel_unread(coc_engine *e, coc__conn *c)
{
    if (c->rstate != COC__RX_PAYLOAD || c->rfwding || c->rdrop)
        return;
    const coc__hdr *h = &c->rh;
    if (!coc__rel_rerouted(e, h->source, c->peer_id))
        return; /* not coming again: fails as before */
    coc_request *r = c->rreq;
    if (h->type == COC__EAGER && h->seq) {
        coc__credit *cr = coc__map_get(&e->credits, h->source);
        if (cr && cr->expect == h->seq + 1) {
            cr->expect = h->seq; /* it comes again on the other path */
            cr->held -= h->len + COC__HDR_LEN;
        }
        if (r) {
            c->rreq = NULL;
            r->busy--;
            if (!r->doomed)
                repost(e, r);
            else
                coc__recv_settle(e, r);
        }
        if (c->rumsg) {
            free(c->rumsg->data);
            free(c->rumsg);
            c->rumsg = NULL;
        }
    } else if (h->type == COC__DATA && r && r->keep) {
        /* this fragment was not counted; it comes again — unless a copy of it came on
         * another path meanwhile and was the last byte missing: then the receive ends now
         * (no later read would settle it, and its DONE is what stops the restreams) */
        c->rreq = NULL;
        r->busy--;
        coc__recv_settle(e, r);
    }
}

/* After a loss, a frame may still have died unnoticed (its gap seen by nobody, a DONE
 * lost): what stays unacknowledged for two ticks is sent again. */
static void retransmit_stuck(coc_engine *e)
{
    for (size_t i = 0; i < e->credits.cap; i++) {
        coc__credit *cr = e->credits.vals[i];
        if (!cr)
            continue;
        int waiting = !coc__list_empty(&cr->kept) && cr->acked == cr->acked_seen;
        for (coc_request *r = COC__FIRST(&e->reqs, coc_request, link); r && !waiting;
             r = COC__NEXT(r, coc_request, link))
            waiting = r->kind == COC__SEND && (uint32_t)r->peer == e->credits.keys[i] && r->keep &&
                      r->peer_cookie && !r->confirmed && !r->busy && !r->doomed &&
                      atomic_load(&r->state) != COC__REQ_DONE;
        cr->acked_seen = cr->acked;
        cr->stuck = waiting ? cr->stuck + 1 : 0;
        if (cr->stuck >= 2) {
            cr->stuck = 0;
            coc__rel_resend(e, e->credits.keys[i]);
        }
    }
}

/* Is c, at an endpoint, a gateway's connection that stopped in the middle of a frame? A
 * gateway cuts a frame through as it arrives, so when the link the frame comes from dies
 * (or the gateway there stops), the frame stops here too and no PING can come behind it.
 * The gateway judges its silent link within the liveness timeout and then closes this
 * connection itself (PATH frames follow: nothing is lost). Judging it here at the same
 * moment would race that verdict, and the gateway would see a connection end without BYE:
 * an endpoint that died, which it reports to every endpoint. So an endpoint gives such a
 * connection twice the timeout. Gateways do not: the verdict on a stalled link must come
 * first where the link is, and a gateway judging another one wrongly only moves routes. */
static int stalled_mid_frame(const coc_engine *e, const coc__conn *c)
{
    return !e->forward && (c->theirs.flags & COC__HELLO_GATEWAY) &&
           (c->rstate == COC__RX_PAYLOAD || (c->rstate == COC__RX_HDR && c->rlen > c->rpos));
}

void coc__rel_liveness(coc_engine *e)
{
    uint64_t now = coc__now_ns();
    if (e->lossy && !e->forward)
        retransmit_stuck(e);
    for (size_t i = 0; i < COC__MAX_CONNS; i++) {
        coc__conn *c = e->conns[i];
        if (!c || c->state != COC__CS_OPEN)
            continue;
        if (c->rx_count != c->rx_seen || c->rstate == COC__RX_PAUSED || !c->rx_stamp_ns) {
            c->rx_seen = c->rx_count;
            c->rx_stamp_ns = now;
        } else if (now - c->rx_stamp_ns > e->liveness_ns * (stalled_mid_frame(e, c) ? 2 : 1)) {
            coc__log(e, "%s sent nothing for %llu ms (liveness timeout): presumed dead", c->name,
                     (unsigned long long)((now - c->rx_stamp_ns) / 1000000u));
            coc__conn_fail(c, COC_ETIMEDOUT, "silent past the liveness timeout");
            continue;
        }
        if (!c->queue.head) {
            coc__hdr h = {.type = COC__PING, .source = e->self, .dest = c->peer_id};
            coc__conn_send(c, &h, NULL, NULL);
        }
    }
}
