/* test_route.c — id map, weighted next-hop choice that keeps each pair on one hop, and
 * striping by bytes in the weights' ratio. */
#include <stdlib.h>

#include "check.h"
#include "coc/coc.h"
#include "route.h"

int main(void)
{
    coc__map m = {0};
    for (uint32_t i = 0; i < 1000; i++)
        CHECK(coc__map_put(&m, i * 7919u, (void *)(uintptr_t)(i + 1)) == 0);
    for (uint32_t i = 0; i < 1000; i++)
        CHECK(coc__map_get(&m, i * 7919u) == (void *)(uintptr_t)(i + 1));
    CHECK(coc__map_get(&m, 3) == NULL);
    CHECK(coc__map_put(&m, 7919u, (void *)9) == 0 && coc__map_get(&m, 7919u) == (void *)9 && m.n == 1000);
    coc__map_free(&m, NULL);

    coc__route r;
    uint32_t hops[2] = {100, 200}, w[2] = {3, 1}, zero[2] = {0, 0};
    /* a route in use that changes moves the generation a remembered next hop is checked
     * against; making a route and using it do not */
    uint64_t gen = coc__route_gen();
    CHECK(gen != 0 && coc__route_make(&r, hops, w, 2) == 0 && coc__route_gen() == gen);
    coc__route_changed();
    CHECK(coc__route_gen() != gen);
    gen = coc__route_gen();
    CHECK(coc__route_pick(&r, 1, 2) != 0 && coc__route_stripe(&r, 8) < 2 && coc__route_gen() == gen);
    CHECK(coc__route_make(&r, hops, w, 0) == COC_EINVAL);
    CHECK(coc__route_make(&r, hops, zero, 2) == COC_EINVAL);
    CHECK(coc__route_make(&r, hops, w, 2) == 0);
    int count[2] = {0};
    for (uint32_t s = 0; s < 400; s++)
        for (uint32_t d = 400; d < 420; d++) {
            uint32_t h = coc__route_pick(&r, s, d);
            CHECK(h == 100 || h == 200);
            CHECK(h == coc__route_pick(&r, s, d)); /* stable per pair */
            count[h == 200]++;
        }
    /* 3:1 weights: the first hop gets about three quarters of the pairs */
    CHECK(count[0] > 5400 && count[0] < 6600);
    CHECK(coc__route_make(&r, hops, NULL, 1) == 0 && coc__route_pick(&r, 1, 2) == 100);

    /* striping 2:1 by bytes: exact ratio over each period, evenly interleaved (never more
     * than two fragments in a row on the heavier hop), also with uneven fragment sizes */
    uint32_t w21[2] = {2, 1};
    CHECK(coc__route_make(&r, hops, w21, 2) == 0);
    uint64_t bytes[2] = {0};
    int run = 0, last = -1;
    for (int i = 0; i < 300; i++) {
        size_t k = coc__route_stripe(&r, 4096);
        CHECK(k < 2);
        bytes[k] += 4096;
        run = (int)k == last ? run + 1 : 1;
        last = (int)k;
        CHECK(run <= 2);
    }
    CHECK(bytes[0] == 2 * bytes[1]);
    bytes[0] = bytes[1] = 0;
    for (int i = 0; i < 3000; i++) {
        uint64_t n = 1 + (uint64_t)(i * 7919) % 65536;
        bytes[coc__route_stripe(&r, n)] += n;
    }
    CHECK(bytes[0] > 19 * bytes[1] / 10 && bytes[0] < 21 * bytes[1] / 10);
    /* the largest weights and fragments do not overflow the credits */
    uint32_t big[2] = {0xffffffffu, 0x7fffffffu};
    CHECK(coc__route_make(&r, hops, big, 2) == 0);
    bytes[0] = bytes[1] = 0;
    for (int i = 0; i < 300; i++)
        bytes[coc__route_stripe(&r, 16u << 20)]++;
    CHECK(bytes[0] >= 199 && bytes[0] <= 201);
    CHECK(coc__route_has(&r, 200) && !coc__route_has(&r, 300));
    CHECK_DONE();
}
