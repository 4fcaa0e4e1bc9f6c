/* route.c — id maps, weighted order-keeping next-hop choice and striping (see route.h). */
#include "route.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coc/coc.h"

static size_t slot_of(uint32_t key, size_t cap)
{
    return (size_t)((key * 0x9E3779B1u) & (cap - 1));
}

void *coc__map_get(const coc__map *m, uint32_t key)
{
    if (!m->cap)
        return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->vals[i])
            return NULL;
        if (m->keys[i] == key)
            return m->vals[i];
    }
}

static int grow(coc__map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    uint32_t *keys = calloc(cap, sizeof *keys);
    void **vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    for (size_t j = 0; j < m->cap; j++) {
        if (!m->vals[j])
            continue;
        size_t i = slot_of(m->keys[j], cap);
        while (vals[i])
            i = (i + 1) & (cap - 1);
        keys[i] = m->keys[j];
        vals[i] = m->vals[j];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int coc__map_put(coc__map *m, uint32_t key, void *val)
{
    if ((m->n + 1) * 2 > m->cap) {
        int rc = grow(m);
        if (rc < 0)
            return rc;
    }
    size_t i = slot_of(key, m->cap);
    while (m->vals[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->vals[i])
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

void coc__map_free(coc__map *m, void (*free_val)(void *))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->vals[i] && free_val)
            free_val(m->vals[i]);
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}

static uint64_t route_gen = 1;

uint64_t coc__route_gen(void)
{
    return __atomic_load_n(&route_gen, __ATOMIC_RELAXED);
}

void coc__route_changed(void)
{
    __atomic_add_fetch(&route_gen, 1, __ATOMIC_RELAXED);
}

int coc__route_make(coc__route *r, const uint32_t *hops, const uint32_t *weights, size_t n)
{
    if (n == 0 || n > COC__ROUTE_MAX_HOPS || !hops)
        return COC_EINVAL;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        r->hops[i] = hops[i];
        sum += weights ? weights[i] : 1;
        r->cumulative[i] = sum;
    }
    if (sum == 0)
        return COC_EINVAL;
    r->n = n;
    memset(r->credit, 0, sizeof r->credit);
    return 0;
}

static uint64_t mix(uint64_t x) /* splitmix64 finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint32_t coc__route_pick(const coc__route *r, uint32_t source, uint32_t dest)
{
    if (r->n == 1)
        return r->hops[0];
    uint64_t point = mix((uint64_t)source << 32 | dest) % r->cumulative[r->n - 1];
    size_t i = 0;
    while (r->cumulative[i] <= point)
        i++;
    return r->hops[i];
}

/* Weights are below 2^32 and at most 64 of them, so their sum is below 2^38; fragments
 * are at most 2^24 bytes: every credit stays within +-2^62. */
size_t coc__route_stripe(coc__route *r, uint64_t bytes)
{
    if (r->n == 1)
        return 0;
    size_t best = 0;
    uint64_t below = 0;
    for (size_t i = 0; i < r->n; i++) {
        r->credit[i] += (int64_t)((r->cumulative[i] - below) * bytes);
        below = r->cumulative[i];
        if (r->credit[i] > r->credit[best])
            best = i;
    }
    r->credit[best] -= (int64_t)(r->cumulative[r->n - 1] * bytes);
    return best;
}

int coc__route_has(const coc__route *r, uint32_t hop)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->hops[i] == hop)
            return 1;
    return 0;
}
