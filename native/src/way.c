/*
 * way.c — how a wait waits: spin first or block at once, and how long a spin lasts
 * (docs/engine.md, "Waiting"; wait.c does the waiting).
 *
 * Each engine scores both ways by the medians of their recent waits (score) and waits the
 * faster way (coc__way_of), trying the other way in 2 ms slots of the machine's clock that
 * every engine shares, so the two ends of a ping-pong try spinning together. Waits for
 * large messages choose apart from the rest (coc__wait_class). The spin budget (learn)
 * follows twice the recent waits that ended while spinning, the cap (spin_ns) after waits
 * that blocked but ended within it, and decays when waits run longer than the cap.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "engine.h"

#define SPIN_MIN_NS 2000       /* the adaptive spin budget never drops below this */
#define SLOT_NS 2000000        /* the spin-or-block choice tries the other way for this long, */
#define TRY_MIN 8              /* every this many slots at first (1 in 8), */
#define TRY_MAX 256            /* and at most this rarely (0.5 s) while it keeps losing */
#define WAIT_LARGE 65536       /* waits for more bytes than this choose their way apart */

/* Spinning is the faster way only when its waits end in less than SPIN_GAIN_NUM /
 * SPIN_GAIN_DEN of blocking's: at about the same speed blocking wins, since a spin's looks
 * and yields cost CPU that, pinned to one CPU, the rest of the path needs (across sites,
 * where the answer crosses two gateways whatever the waiter does, the two ways scored
 * within noise of each other and their tries kept 3-25 % of waits spinning in vain). */
#define SPIN_GAIN_NUM 7
#define SPIN_GAIN_DEN 8

/* The spin budget learns from a wait that took `waited` ns (UINT64_MAX: did not end),
 * `spun` whether it ended while spinning. Several threads may update it; a lost update
 * only delays the learning. See docs/engine.md, "Waiting":
 * - it moves a quarter of the way to twice the wait when the wait ended while spinning;
 * - to the cap (spin_ns) when the wait blocked but ended within the cap: the message
 *   came in time to be caught by spinning, had this waiter and the peer both still spun
 *   (a wait that blocked holds a wake-up, 45-55 us across this machine's cores, and
 *   learning from it alone locks two ranks into blocking for every message);
 * - towards 0 when it took longer than the cap (gateways, a peer that computes);
 * bounded by [SPIN_MIN_NS, spin_ns]. */
static void learn(coc_engine *e, uint64_t waited, int spun)
{
    int64_t cap = e->cfg.spin_ns;
    if (cap <= 0)
        return;
    int64_t target = waited > (uint64_t)cap ? 0 : spun ? 2 * (int64_t)waited : cap;
    int64_t b = atomic_load_explicit(&e->spin_budget, memory_order_relaxed);
    b = (3 * b + target) / 4;
    if (b < SPIN_MIN_NS)
        b = SPIN_MIN_NS < cap ? SPIN_MIN_NS : cap;
    if (b > cap)
        b = cap;
    atomic_store_explicit(&e->spin_budget, b, memory_order_relaxed);
}

/* Which way a wait starting at `now` waits: 1 blocks at once, 0 spins first. The faster
 * way lately (score), except in the slots (SLOT_NS of the machine's monotonic clock) that
 * try the other way: every try_every-th. The slots are the same for every engine of the
 * machine, so two ranks try spinning in the same 2 ms: spinning pays only when the peer
 * spins too (a rank that spins alone waits for the peer's wake-up, and for its own time
 * slice when the peer was woken on its CPU), and a rank trying it alone would learn it
 * never pays. */
int coc__way_of(coc_engine *e, coc__way_choice *w, uint64_t now)
{
    if (e->cfg.spin_ns <= 0)
        return 1;
    if (e->cfg.flags & COC_ENGINE_SPIN_ANY_LOAD)
        return 0;
    uint64_t every = atomic_load_explicit(&w->try_every, memory_order_relaxed);
    int best = atomic_load_explicit(&w->block_best, memory_order_relaxed);
    return (now / SLOT_NS) % (every ? every : TRY_MIN) == 0 ? !best : best;
}

static int by_value(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A wait that started at `start` the way `way` ended after `waited` ns, `spun`: while
 * spinning. Every COC__WAY_SAMPLES such waits, the median of their durations moves the
 * way's score half way towards it: the median, since a wait that another program's time
 * slice delayed (a few ms) says nothing about how to wait and would outweigh a dozen spins
 * in a mean; a way last scored more than a slot ago (an earlier try) takes the new median
 * as it is. The faster way is then the one used outside the try slots (spinning until
 * blocking has a score: an engine starts spinning, as an MPI rank does, and first blocks
 * in a try slot), spinning only when it is faster by a margin (SPIN_GAIN_NUM) and its
 * median wait ended while spinning: one that ended blocked, after a spin that did not
 * shorten it, differs from blocking's only by the noise of the wake-ups (beside busy
 * loops, a fifth and more: the margin alone let that noise keep waits spinning in vain).
 * A sample keeps whether its wait ended spinning in its lowest bit. A try that did
 * not change the faster way makes tries rarer (doubling, up to TRY_MAX slots apart); a
 * change makes them frequent again (TRY_MIN).
 * Waits that ended at once, looks and timeouts are not scored. */
static void score(coc_engine *e, coc__way_choice *w, int way, uint64_t start, uint64_t waited,
                  int spun)
{
    if (e->cfg.spin_ns <= 0 || (e->cfg.flags & COC_ENGINE_SPIN_ANY_LOAD))
        return;
    uint32_t i = atomic_fetch_add_explicit(&w->way_n[way], 1, memory_order_relaxed);
    if (i >= COC__WAY_SAMPLES)
        return; /* another thread is scoring this way */
    uint32_t ns_waited = waited < UINT32_MAX ? (uint32_t)waited : UINT32_MAX;
    ns_waited = (ns_waited & ~1u) | (spun != 0); /* the lowest bit: ended while spinning */
    atomic_store_explicit(&w->way_sample[way][i], ns_waited, memory_order_relaxed);
    if (i != COC__WAY_SAMPLES - 1)
        return;
    uint32_t ns[COC__WAY_SAMPLES];
    for (unsigned k = 0; k < COC__WAY_SAMPLES; k++)
        ns[k] = atomic_load_explicit(&w->way_sample[way][k], memory_order_relaxed);
    atomic_store_explicit(&w->way_n[way], 0, memory_order_relaxed);
    qsort(ns, COC__WAY_SAMPLES, sizeof ns[0], by_value);
    uint64_t median = ns[COC__WAY_SAMPLES / 2] ? ns[COC__WAY_SAMPLES / 2] : 1;
    pthread_mutex_lock(&e->spin_lock);
    if (way == 0)
        atomic_store_explicit(&w->spin_median_spun, (int)(median & 1), memory_order_relaxed);
    uint64_t slot = start / SLOT_NS;
    uint64_t old = atomic_load_explicit(&w->way_ns[way], memory_order_relaxed);
    int fresh = !old || slot > w->way_slot[way] + 1; /* the score of an earlier try is stale */
    uint64_t now_ns = fresh ? median : (old + median) / 2;
    atomic_store_explicit(&w->way_ns[way], now_ns, memory_order_relaxed);
    w->way_slot[way] = slot;
    uint64_t spin = atomic_load_explicit(&w->way_ns[0], memory_order_relaxed);
    uint64_t block = atomic_load_explicit(&w->way_ns[1], memory_order_relaxed);
    int spin_ended = atomic_load_explicit(&w->spin_median_spun, memory_order_relaxed);
    int best = block && (!spin || !spin_ended || spin * SPIN_GAIN_DEN >= block * SPIN_GAIN_NUM);
    int was = atomic_load_explicit(&w->block_best, memory_order_relaxed);
    uint64_t every = atomic_load_explicit(&w->try_every, memory_order_relaxed);
    every = every ? every : TRY_MIN;
    if (best != was) {
        atomic_store_explicit(&w->block_best, best, memory_order_relaxed);
        every = TRY_MIN;
    } else if (way != best && slot != w->doubled_slot && every < TRY_MAX) {
        w->doubled_slot = slot; /* a try confirmed the faster way: try less often */
        every *= 2;
    }
    atomic_store_explicit(&w->try_every, every, memory_order_relaxed);
    pthread_mutex_unlock(&e->spin_lock);
}

/* The spin budget of a wait that waits the way `way` (coc__way_of): none when it blocks at once,
 * else the learnt one. */
uint64_t coc__spin_budget(coc_engine *e, int way)
{
    if (way) {
        atomic_fetch_add_explicit(&e->waits_unspun, 1, memory_order_relaxed);
        return 0;
    }
    return (uint64_t)atomic_load_explicit(&e->spin_budget, memory_order_relaxed);
}

/* A wait that started at `start` the way `way` ended after `waited` ns, `spun`: while
 * spinning. */
void coc__wait_ended(coc_engine *e, coc__way_choice *w, int way, uint64_t start, uint64_t waited,
                     int spun)
{
    learn(e, waited, spun);
    score(e, w, way, start, waited, spun);
}

/* The waits for a message of more than WAIT_LARGE bytes choose their way apart from the
 * rest: such a wait lasts about as long spun or blocked (its bytes take the time), so
 * their scores tie, and a short phase of small messages that came after them would
 * inherit the way they left (the other way is tried only every 16 ms or more) instead of
 * the one its own kind of wait chose before. */
coc__way_choice *coc__wait_class(coc_request *r)
{
    return &r->e->ways[!r->alloc && r->len > WAIT_LARGE];
}

/* A wait that did not end (timed out): the spin budget learns it ran past the cap. */
void coc__wait_unended(coc_engine *e)
{
    learn(e, UINT64_MAX, 0);
}
