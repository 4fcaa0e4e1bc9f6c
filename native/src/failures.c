/*
 * failures.c — how lost peers and connections fail the requests that need them: sends to
 * a lost endpoint, receives from it (and with COC_ANY_SOURCE), its unmatched envelopes,
 * streams that lost a lane; and how a receive settles once nothing reads into it.
 * Moving traffic to other gateways instead is reliable.c's.
 */
#include <stdlib.h>

#include "engine.h"

void coc__fail_request(coc_engine *e, coc_request *r, int32_t source, int error)
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

/* Drop the unmatched rendezvous envelopes (RTS) that came on connection conn_key or from
 * endpoint `source` (-1: none): their bytes cannot come. Except, with `failover`, those
 * whose sender our routes now reach without `hop`: the sequence layer took (and
 * acknowledged) the envelope, so it is never sent again, and its receive would wait for it
 * for ever while the sender waited for the answer; it stays, and its answer takes the
 * route as any other. */
static void drop_envelopes(coc_engine *e, uint64_t conn_key, int64_t source, int failover,
                           uint32_t hop)
{
    for (coc__umsg *u = COC__FIRST(&e->unexp, coc__umsg, link), *next; u; u = next) {
        next = COC__NEXT(u, coc__umsg, link);
        if (u->type != COC__RTS || (u->conn_key != conn_key && (int64_t)u->source != source))
            continue;
        if (failover && coc__rel_rerouted(e, u->source, hop)) {
            u->conn_key = 0; /* that connection is gone: answer on the route */
            continue;
        }
        coc__unexp_remove(e, u);
        free(u);
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
    if (crashed && coc__forward_dials_back(e, c)) {
        coc__log(e, "%s ended without BYE: %s (%s); dialing it back before reporting it lost",
                 c->name, c->why ? c->why : "closed", coc_strerror(c->err));
    } else if (crashed) {
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
            coc__fail_request(e, r, r->st.source, why);
        } else if (r->kind == COC__SEND) {
            if (r->conn_key == c->key)
                coc__fail_request(e, r, r->peer, why);
        } else if (!c->authed && (failover || !c->outgoing || c->err == COC_EAUTH)) {
            continue; /* a stranger never fed a receive (but a hop that could not be
                       * reached, the last of some routes, strands the receives from them) */
        } else if (r->phase == COC__POSTED) {
            if (r->peer == COC_ANY_SOURCE ? crashed : ((uint32_t)r->peer == peer || via(e, r->peer, peer, 0)))
                coc__fail_request(e, r, r->peer == COC_ANY_SOURCE ? (int32_t)peer : r->peer, COC_EPEERLOST);
        } else if (r->conn_key == c->key ||
                   (r->phase == COC__RDV && via(e, (uint32_t)r->st.source, peer, 1))) {
            /* its bytes were coming on c, or may be (striped over the large route) */
            coc__fail_request(e, r, r->st.source, COC_EPEERLOST);
        }
    }
    c->rreq = NULL;
    drop_envelopes(e, c->key, -1, failover, peer);
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
                coc__fail_request(e, r, r->peer, error);
        } else if (!lost) {
            continue;
        } else if (r->phase == COC__POSTED) {
            if (r->peer == COC_ANY_SOURCE || (uint32_t)r->peer == id)
                coc__fail_request(e, r, (int32_t)id, error);
        } else if ((uint32_t)r->st.source == id) {
            coc__fail_request(e, r, (int32_t)id, error);
        }
    }
    if (lost)
        drop_envelopes(e, 0, id, 0, 0);
}
