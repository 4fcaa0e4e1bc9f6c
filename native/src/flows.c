/* flows.c — the set of endpoint pairs that crossed a gateway connection (flows.h). */
#include <stdlib.h>

#include "flows.h"

static size_t home(uint32_t notify, uint32_t lost, size_t cap)
{
    uint64_t k = ((uint64_t)notify << 32 | lost) * 0x9E3779B97F4A7C15ull; /* Fibonacci */
    return (size_t)(k >> 32) & (cap - 1);
}

/* The slot of (notify, lost), or the empty slot where it would go. */
static coc__flow *find(coc__flow *slot, size_t cap, uint32_t notify, uint32_t lost)
{
    for (size_t i = home(notify, lost, cap);; i = (i + 1) & (cap - 1))
        if (!coc__flow_used(&slot[i]) || (slot[i].notify == notify && slot[i].lost == lost))
            return &slot[i];
}

static int grow(coc__flows *f)
{
    size_t cap = f->cap ? f->cap * 2 : 16;
    if (cap > COC__FLOWS_MAX)
        return -1;
    coc__flow *slot = calloc(cap, sizeof *slot); /* zeroed: every slot empty */
    if (!slot)
        return -1;
    for (size_t i = 0; i < f->cap; i++)
        if (coc__flow_used(&f->slot[i]))
            *find(slot, cap, f->slot[i].notify, f->slot[i].lost) = f->slot[i];
    free(f->slot);
    f->slot = slot;
    f->cap = cap;
    return 0;
}

int coc__flows_add(coc__flows *f, uint32_t notify, uint32_t lost)
{
    if (f->cap && coc__flow_used(find(f->slot, f->cap, notify, lost)))
        return 0;
    if ((f->n + 1) * 4 > f->cap * 3 && grow(f) < 0)
        return -1;
    *find(f->slot, f->cap, notify, lost) = (coc__flow){notify, lost};
    f->n++;
    return 1;
}

void coc__flows_free(coc__flows *f)
{
    free(f->slot);
    *f = (coc__flows){0};
}
