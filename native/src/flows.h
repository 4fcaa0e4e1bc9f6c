/*
 * flows.h — a gateway connection's set of endpoint pairs that crossed it.
 *
 * When a connection dies, the frames on it died too: for every (endpoint to tell, endpoint
 * lost) pair that crossed it, the gateway tells the first that the second is lost, or that
 * its frames to it must be sent again (forward.c, report_flows). A pair is added per
 * forwarded frame, so the set is an open-addressing hash set (a look-up per frame, not a
 * scan), and it holds every pair a job makes up to COC__FLOWS_MAX: 64 ranks per site
 * already make 4096 pairs on a wide-area link. A pair is never its own reverse half:
 * the notify and lost of a pair differ (a frame's source and destination do), so a slot
 * whose two ids are equal is empty.
 */
#ifndef COC_FLOWS_H
#define COC_FLOWS_H

#include <stddef.h>
#include <stdint.h>

/* Slots at most (8 bytes each: 8 MiB), three quarters of them used at most. */
#define COC__FLOWS_MAX (1u << 20)

typedef struct coc__flow {
    uint32_t notify, lost;
} coc__flow;

typedef struct coc__flows {
    coc__flow *slot; /* cap slots, a power of two; notify == lost: empty */
    size_t n, cap;
} coc__flows;

/* Add (notify, lost), notify != lost: 1 added, 0 there already, -1 no room (the set is
 * full at COC__FLOWS_MAX, or out of memory; the pair is not recorded). */
int coc__flows_add(coc__flows *f, uint32_t notify, uint32_t lost);
/* Iterate: for (size_t i = 0; i < f->cap; i++) if (coc__flow_used(&f->slot[i])) ... */
static inline int coc__flow_used(const coc__flow *p) { return p->notify != p->lost; }
void coc__flows_free(coc__flows *f);

#endif
