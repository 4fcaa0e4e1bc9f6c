/* test_match.c — MPI matching rules on the queues alone: posting order, wildcards,
 * contexts, and non-overtaking of one source's messages. */
#include <stdlib.h>

#include "check.h"
#include "engine.h"

static coc_request *recv_req(int32_t src, uint32_t ctx, int32_t tag)
{
    coc_request *r = calloc(1, sizeof *r);
    r->kind = COC__RECV;
    r->peer = src;
    r->context = ctx;
    r->tag = tag;
    return r;
}

static coc__umsg *msg(uint32_t src, uint32_t ctx, int32_t tag)
{
    coc__umsg *u = calloc(1, sizeof *u);
    *u = (coc__umsg){.type = COC__RTS, .source = src, .context = ctx, .tag = tag};
    return u;
}

int main(void)
{
    coc_engine *e = calloc(1, sizeof *e);
    CHECK(coc__matches(COC_ANY_SOURCE, 1, COC_ANY_TAG, 5, 1, 9));
    CHECK(!coc__matches(COC_ANY_SOURCE, 1, COC_ANY_TAG, 5, 2, 9)); /* context never wildcards */
    CHECK(!coc__matches(4, 1, COC_ANY_TAG, 5, 1, 9));
    CHECK(!coc__matches(5, 1, 8, 5, 1, 9));

    /* posted receives: the earliest that accepts wins */
    coc_request *any = recv_req(COC_ANY_SOURCE, 0, COC_ANY_TAG), *from3 = recv_req(3, 0, 7),
                *from3b = recv_req(3, 0, COC_ANY_TAG);
    coc__posted_add(e, from3);
    coc__posted_add(e, any);
    coc__posted_add(e, from3b);
    CHECK(coc__posted_take(e, 3, 1, 7) == NULL);   /* other context */
    CHECK(coc__posted_take(e, 4, 0, 7) == any);
    CHECK(coc__posted_take(e, 3, 0, 8) == from3b); /* from3 wants tag 7 */
    CHECK(coc__posted_take(e, 3, 0, 7) == from3);
    CHECK(coc__list_empty(&e->posted) && e->posted.tail == NULL);

    /* unexpected messages: the earliest accepted wins, so one source never overtakes */
    coc__umsg *m1 = msg(3, 0, 1), *m2 = msg(4, 0, 1), *m3 = msg(3, 0, 2), *m4 = msg(3, 0, 1);
    coc__unexp_add(e, m1);
    coc__unexp_add(e, m2);
    coc__unexp_add(e, m3);
    coc__unexp_add(e, m4);
    CHECK(e->stats.unexpected_messages == 4);
    CHECK(coc__unexp_find(e, 3, 0, COC_ANY_TAG) == m1);
    CHECK(coc__unexp_find(e, COC_ANY_SOURCE, 0, 2) == m3);
    coc__unexp_remove(e, m1);
    CHECK(coc__unexp_find(e, 3, 0, 1) == m4);
    CHECK(coc__unexp_find(e, COC_ANY_SOURCE, 0, COC_ANY_TAG) == m2);
    CHECK(coc__unexp_find(e, 3, 9, COC_ANY_TAG) == NULL);
    coc__unexp_remove(e, m2);
    coc__unexp_remove(e, m3);
    coc__unexp_remove(e, m4);
    CHECK(coc__list_empty(&e->unexp) && e->stats.unexpected_messages == 0);

    /* rendezvous handles: stale and forged ones find nothing */
    uint64_t c1 = coc__rdv_alloc(e, any);
    CHECK(c1 && coc__rdv_lookup(e, c1) == any);
    coc__rdv_free(e, c1);
    CHECK(coc__rdv_lookup(e, c1) == NULL);
    uint64_t c2 = coc__rdv_alloc(e, from3);
    CHECK(c2 != c1 && coc__rdv_lookup(e, c2) == from3);
    CHECK(coc__rdv_lookup(e, 0) == NULL && coc__rdv_lookup(e, ~0ull) == NULL);
    CHECK(coc__rdv_lookup(e, c2 + 1000) == NULL);
    free(e->rdv);
    free(e->rdv_gen);
    free(any); free(from3); free(from3b); free(m1); free(m2); free(m3); free(m4);
    free(e);
    CHECK_DONE();
}
