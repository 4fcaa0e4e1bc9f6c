/* test_flows.c — the set of endpoint pairs a gateway connection records (flows.h): every
 * pair kept once, far past the 4096 pairs the list before it stopped at, and a full set
 * that refuses rather than forgets. */
#include <stdlib.h>

#include "check.h"
#include "flows.h"

int main(void)
{
    coc__flows f = {0};
    /* 300 x 300 endpoints, both directions: 179 400 pairs (a 300-rank job per site) */
    for (uint32_t a = 0; a < 300; a++)
        for (uint32_t b = 0; b < 300; b++)
            if (a != b)
                CHECK(coc__flows_add(&f, a, b) == 1);
    CHECK(f.n == 300 * 299);
    for (uint32_t a = 0; a < 300; a++) /* each one there already */
        CHECK(coc__flows_add(&f, a, (a + 1) % 300) == 0);
    size_t seen = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < f.cap; i++)
        if (coc__flow_used(&f.slot[i])) {
            seen++;
            sum += f.slot[i].notify * 1000u + f.slot[i].lost;
        }
    CHECK(seen == f.n && f.n * 4 <= f.cap * 3);
    /* sum over a != b of (1000 a + b) = 1001 * 299 * (0 + ... + 299) */
    CHECK(sum == 1001ull * 299 * (299 * 300 / 2));
    coc__flows_free(&f);
    CHECK(f.slot == NULL && f.n == 0 && f.cap == 0);

    /* endpoint ids anywhere in 32 bits (gateways' ids sit above the ranks') */
    CHECK(coc__flows_add(&f, 0xFFFFFFFFu, 0) == 1 && coc__flows_add(&f, 0, 0xFFFFFFFFu) == 1);
    CHECK(coc__flows_add(&f, 0xFFFFFFFFu, 0) == 0 && f.n == 2);
    coc__flows_free(&f);

    /* full: three quarters of COC__FLOWS_MAX slots, then refused, nothing lost */
    size_t most = (size_t)COC__FLOWS_MAX / 4 * 3;
    for (uint32_t i = 0; i < most; i++)
        CHECK(coc__flows_add(&f, i + 1, 0) == 1);
    CHECK(coc__flows_add(&f, most + 1, 0) == -1 && f.n == most);
    CHECK(coc__flows_add(&f, 7, 0) == 0);
    coc__flows_free(&f);
    CHECK_DONE();
}
