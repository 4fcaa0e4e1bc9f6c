/*
 * match.c — MPI matching: the posted-receive queue, the unexpected-message queue and the
 * rendezvous handle table. Both queues are FIFO and searched from the front, which gives
 * MPI's rules: a message matches the earliest posted receive that accepts it, and a
 * receive takes the earliest arrived message it accepts (messages of one source in one
 * context arrive in sending order, so they are never overtaken). All under e->lock.
 */
#include <stdlib.h>

#include "engine.h"

int coc__matches(int32_t want_src, uint32_t want_ctx, int32_t want_tag, uint32_t src,
                 uint32_t ctx, int32_t tag)
{
    return want_ctx == ctx && (want_src == COC_ANY_SOURCE || (uint32_t)want_src == src) &&
           (want_tag == COC_ANY_TAG || want_tag == tag);
}

coc_request *coc__posted_take(coc_engine *e, uint32_t src, uint32_t ctx, int32_t tag)
{
    COC__EACH(r, &e->posted, coc_request, qlink) {
        if (coc__matches(r->peer, r->context, r->tag, src, ctx, tag)) {
            coc__posted_remove(e, r);
            return r;
        }
    }
    return NULL;
}

void coc__posted_add(coc_engine *e, coc_request *r)
{
    coc__list_append(&e->posted, &r->qlink);
    r->phase = COC__POSTED;
}

void coc__posted_remove(coc_engine *e, coc_request *r)
{
    coc__list_remove(&e->posted, &r->qlink);
}

coc__umsg *coc__unexp_find(coc_engine *e, int32_t src, uint32_t ctx, int32_t tag)
{
    COC__EACH(u, &e->unexp, coc__umsg, link)
        if (coc__matches(src, ctx, tag, u->source, u->context, u->tag))
            return u;
    return NULL;
}

void coc__unexp_add(coc_engine *e, coc__umsg *u)
{
    coc__list_append(&e->unexp, &u->link);
    e->stats.unexpected_messages++;
    if (u->type == COC__EAGER)
        e->stats.unexpected_bytes += u->total;
    if (e->probe_waiters)
        pthread_cond_broadcast(&e->cond);
}

void coc__unexp_remove(coc_engine *e, coc__umsg *u)
{
    coc__list_remove(&e->unexp, &u->link);
    e->stats.unexpected_messages--;
    if (u->type == COC__EAGER)
        e->stats.unexpected_bytes -= u->total;
}

/* Rendezvous handles are (generation << 32 | slot + 1): a stale or forged one from the
 * wire finds either an empty slot or the wrong generation, never a dangling pointer. */
uint64_t coc__rdv_alloc(coc_engine *e, coc_request *r)
{
    size_t i;
    for (i = 0; i < e->rdv_cap && e->rdv[i]; i++)
        ;
    if (i == e->rdv_cap) {
        size_t cap = e->rdv_cap ? e->rdv_cap * 2 : 64;
        coc_request **rdv = realloc(e->rdv, cap * sizeof *rdv);
        if (!rdv)
            return 0;
        e->rdv = rdv;
        uint32_t *gen = realloc(e->rdv_gen, cap * sizeof *gen);
        if (!gen)
            return 0;
        e->rdv_gen = gen;
        for (size_t j = e->rdv_cap; j < cap; j++) {
            e->rdv[j] = NULL;
            e->rdv_gen[j] = 1;
        }
        e->rdv_cap = cap;
    }
    e->rdv[i] = r;
    return (uint64_t)e->rdv_gen[i] << 32 | (i + 1);
}

coc_request *coc__rdv_lookup(coc_engine *e, uint64_t cookie)
{
    uint64_t slot = (cookie & 0xffffffffu);
    if (slot == 0 || slot > e->rdv_cap || e->rdv_gen[slot - 1] != (uint32_t)(cookie >> 32))
        return NULL;
    return e->rdv[slot - 1];
}

void coc__rdv_free(coc_engine *e, uint64_t cookie)
{
    if (coc__rdv_lookup(e, cookie)) {
        size_t i = (cookie & 0xffffffffu) - 1;
        e->rdv[i] = NULL;
        e->rdv_gen[i]++;
    }
}

/* Was cookie a real handle, since spent (its request completed)? A late fragment of a
 * striped transfer that already failed carries one (the payload is then dropped). */
int coc__rdv_spent(coc_engine *e, uint64_t cookie)
{
    uint64_t slot = (cookie & 0xffffffffu);
    return slot != 0 && slot <= e->rdv_cap && (uint32_t)(cookie >> 32) != 0 &&
           (uint32_t)(cookie >> 32) < e->rdv_gen[slot - 1];
}
