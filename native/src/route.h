/*
 * route.h — endpoint-id maps and the route table.
 *
 * A route names one or more next hops with weights, and is used in two ways:
 *  - pick: the hop for a message envelope is a pure function of (source, destination):
 *    hash the pair onto the cumulative weights. So every (source, destination) stream of
 *    envelopes always takes the same hop — MPI's order survives load sharing — while
 *    different pairs spread over the hops in proportion to their weights.
 *  - stripe: rendezvous DATA fragments are placed by offset, so their order does not
 *    matter; each fragment takes the hop that smooth weighted round-robin by bytes
 *    chooses, and one transfer spreads over all hops in proportion to their weights.
 * (Replacing a route may move a stream; callers set routes before traffic starts.)
 */
#ifndef COC_ROUTE_H
#define COC_ROUTE_H

#include <stddef.h>
#include <stdint.h>

/* An open-addressing map from a 32-bit endpoint id to a pointer. */
typedef struct coc__map {
    uint32_t *keys;
    void **vals;
    size_t cap, n; /* cap is a power of two; empty slots have vals[i] == NULL */
} coc__map;

void *coc__map_get(const coc__map *m, uint32_t key);
int coc__map_put(coc__map *m, uint32_t key, void *val); /* replaces; val != NULL; 0 or -ENOMEM */
void coc__map_free(coc__map *m, void (*free_val)(void *));
/* Iterate: for (size_t i = 0; i < m->cap; i++) if (m->vals[i]) ... */

#define COC__ROUTE_MAX_HOPS 64

typedef struct coc__route {
    size_t n;
    uint32_t hops[COC__ROUTE_MAX_HOPS];
    uint64_t cumulative[COC__ROUTE_MAX_HOPS]; /* running sum of the weights */
    int64_t credit[COC__ROUTE_MAX_HOPS];      /* striping: smooth weighted round-robin state */
} coc__route;

/* Build a route; COC_EINVAL for n == 0, n > COC__ROUTE_MAX_HOPS or all weights zero. */
int coc__route_make(coc__route *r, const uint32_t *hops, const uint32_t *weights, size_t n);
/* The next hop for the stream source -> dest. */
uint32_t coc__route_pick(const coc__route *r, uint32_t source, uint32_t dest);
/* Striping: the index of the hop that carries the next `bytes` (<= COC__MAX_PAYLOAD)
 * bytes. Over many calls each hop gets bytes in proportion to its weight, interleaved as
 * evenly as possible (smooth weighted round-robin, nginx-style, counted in bytes). */
size_t coc__route_stripe(coc__route *r, uint64_t bytes);
/* Is `hop` one of r's hops? */
int coc__route_has(const coc__route *r, uint32_t hop);
/* A number that changes whenever a route in use changes (set or rebuilt, in any engine of
 * the process): a next hop remembered with it holds while it stays the same. Never 0. */
uint64_t coc__route_gen(void);
/* A route in use changed: called under the lock of the engine that owns it, so a next hop
 * remembered under that lock (forward.c) is either older than the change or sees it. */
void coc__route_changed(void);

#endif
