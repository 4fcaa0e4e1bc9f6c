/*
 * wait.c — waiting for requests and probes (coc_wait, coc_test, coc_probe, coc_iprobe),
 * cancelling and freeing requests.
 *
 * Waiting that fits the machine (issue 17; docs/engine.md, "Waiting"). A wait either spins
 * first or blocks at once, whichever way made this engine's waits end sooner lately (way_of,
 * score: medians of 16 waits per way; the other way is tried in 2 ms slots of the machine's
 * clock that every engine shares, so the two ends of a ping-pong try spinning together;
 * waits for large messages choose apart from the rest, wait_class).
 * A spin lasts the engine's adaptive budget, which follows twice the recent waits that
 * ended while spinning, the cap (spin_ns) after waits that blocked but ended within it
 * (they hold a wake-up: learning 0 from them locked two ranks into blocking), and decays
 * when waits run longer than the cap; a yield that ran other work ends the spin. After
 * the spin, a waiter that finds no other thread progressing blocks in the sockets' poller
 * itself, as a byte relay blocks in epoll_wait: when the message comes, the thread that
 * wants it is the one woken, one wake-up instead of two (the progress thread's, then the
 * futex's). Otherwise it sleeps on the futex as before.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "poller.h"

#define SPIN_MIN_NS 2000       /* the adaptive spin budget never drops below this */
#define YIELD_TAKEN_NS 10000   /* a sched_yield that took this long ran another thread */
#define SLOT_NS 2000000        /* the spin-or-block choice tries the other way for this long, */
#define TRY_MIN 8              /* every this many slots at first (1 in 8), */
#define TRY_MAX 256            /* and at most this rarely (0.5 s) while it keeps losing */
#define SOCKET_LOOK_EVERY 8    /* a spinner polls the sockets every this many looks at the rings */
#define YIELD_EVERY_NS 20000   /* a spinner with CPUs of its own yields this often (see spin) */
#define POLITE_NS 100000000    /* after a peer answered in our yield, yield at every look this long */
#define BLOCK_SLICE_MS 10     /* a waiter blocked in the poller looks up at least this often */
#define WAIT_LARGE 65536     /* waits for more bytes than this choose their way apart */
#define QUIET_LOOK_MS 1       /* the progress thread looks back this often while waiters hold pfd */
/* Pinned to one CPU, spinning is the faster way only when its waits end in less than
 * SPIN_GAIN_NUM / SPIN_GAIN_DEN of blocking's: at about the same speed blocking wins, since
 * a spin's looks and yields cost CPU that the rest of the path, sharing that CPU, needs
 * (across sites, where the answer crosses two gateways whatever the waiter does, the two
 * ways scored within noise of each other and their tries kept 3-25 % of waits spinning in
 * vain). An engine that may run on several CPUs takes blocking only when it is faster: its
 * spin costs no CPU the path needs, and with the margin two ranks on one host, whose waits
 * end in ~1 us spinning together and ~5 us blocking, settled on blocking when a try of one
 * (its peer blocking meanwhile) made their spin scores equal to blocking's: the 8 B half
 * round trip went from ~1 to ~5 us in two quiet runs of three. */
#define SPIN_GAIN_NUM 7
#define SPIN_GAIN_DEN 8

/* spin_lock: stop (quiet) or resume waking the progress thread for socket events. A
 * progress thread that sleeps without looking back soon is woken when the sockets become
 * the waiters' (below: it must look back to take them again). */
static void quiet_locked(coc_engine *e, int quiet)
{
    if (e->quiet == quiet)
        return;
    e->quiet = quiet;
    coc__poll_mod(e->ofd, e->pfd, quiet ? 0 : COC__POLL_IN, COC__KEY_INNER);
    if (quiet && e->progress_away) {
        e->progress_away = 0;
        coc__wake(e);
    }
}

/* The hand-off of the sockets between the waiters and the progress thread is lazy: a
 * thread that starts polling them disarms pfd in ofd (one epoll_ctl) unless it is
 * disarmed already, and one that stops leaves it so. While it stays so the progress thread
 * looks back every QUIET_LOOK_MS; when no wait began since its last look and none is
 * under way, it arms pfd again (one epoll_ctl). Back-to-back waits (a ping-pong) so cost
 * no epoll_ctl, where arming and disarming per wait cost two (four with a spin before the
 * block); what comes while nobody waits waits at most QUIET_LOOK_MS for the progress
 * thread. A wait under way when the progress thread goes to sleep for long
 * (progress_away) arms pfd itself as it ends. Returns how long the progress thread may
 * sleep, given the `idle_ms` it needs otherwise (-1: no limit). */
int coc__progress_sleep_ms(coc_engine *e, int idle_ms)
{
    pthread_mutex_lock(&e->spin_lock);
    int ms = idle_ms;
    if (e->quiet) {
        if (!e->spinners && e->wait_gen == e->gen_seen) {
            quiet_locked(e, 0); /* nobody waited since the last look: the sockets are ours */
        } else if (!e->spinners || e->wait_gen != e->gen_seen) {
            e->gen_seen = e->wait_gen;
            if (idle_ms < 0 || idle_ms > QUIET_LOOK_MS)
                ms = QUIET_LOOK_MS;
        } /* else one wait is under way since the last look: it arms pfd as it ends */
    }
    e->progress_away = ms < 0 || ms > QUIET_LOOK_MS;
    pthread_mutex_unlock(&e->spin_lock);
    return ms;
}

/* A spinner that has spun a while, or a waiter about to block in the poller: the progress
 * thread need not (must not: two threads woken per frame) wake for socket events. */
static void hush(coc_engine *e)
{
    pthread_mutex_lock(&e->spin_lock);
    if (e->spinners)
        quiet_locked(e, 1);
    pthread_mutex_unlock(&e->spin_lock);
}

/* A thread starts or stops polling pfd (and the rings) itself: writers to our rings need
 * not ring while it spins, and the progress thread need not wake for socket events. Where
 * the sockets are not the traffic (the engine has rings), disarming pfd is left to hush,
 * after a spin has lasted YIELD_EVERY_NS; until then the progress thread looks after the
 * sockets (spin does not). The last thread to stop leaves pfd disarmed (the lazy hand-off,
 * coc__progress_sleep_ms) unless the progress thread is away. When the last spinner stops,
 * the doorbells are asked for again (and what came meanwhile is read). */
static void spinning(coc_engine *e, int on)
{
    pthread_mutex_lock(&e->spin_lock);
    int edge = on ? e->spinners++ == 0 : --e->spinners == 0;
    if (edge && on) {
        e->wait_gen++;
        if (!coc__has_rings(e))
            quiet_locked(e, 1);
    } else if (edge && e->progress_away) {
        quiet_locked(e, 0);
    }
    pthread_mutex_unlock(&e->spin_lock);
    if (!edge || coc__list_empty(&e->shm))
        return;
    /* never wait for the token here: whoever holds it (the progress thread, a poke) asks
     * for doorbells itself before letting go, unless it looked while we still spun, so
     * then the progress thread is woken to look again */
    if (pthread_mutex_trylock(&e->plock) != 0) {
        if (!on)
            coc__wake(e);
        return;
    }
    if (on)
        coc__conn_rings_idle(e, 0);
    else if (coc__going_idle(e))
        coc__wake(e); /* data came as we stopped: the progress thread takes it */
    pthread_mutex_unlock(&e->plock);
}

/* ---- requests ------------------------------------------------------------------------------ */

static int done(coc_request *r, coc_status *st)
{
    if (atomic_load_explicit(&r->state, memory_order_acquire) != COC__REQ_DONE)
        return 0;
    if (st)
        *st = r->st;
    return 1;
}

/* One non-blocking look, if no other thread is doing it: at the rings (memory reads) when
 * there are any, else, for a test (`sockets`), at the sockets. A wait's look (timeout 0:
 * the binding's post-and-look-once) leaves the sockets alone: their traffic wakes the
 * progress thread or the thread blocked in the poller anyway, and a wait that goes on
 * polls them first thing; an epoll_wait there cost every receive a system call. Reading a
 * ring may have used up its doorbell request (or a new connection's ring has none yet)
 * while the progress thread sleeps: ask for doorbells again before leaving. */
static void poke(coc_engine *e, int sockets)
{
    int rings = !coc__list_empty(&e->shm);
    if ((rings || sockets) && pthread_mutex_trylock(&e->plock) == 0) {
        if (rings)
            coc__progress_rings(e);
        else
            coc__progress(e, 0);
        if (coc__going_idle(e))
            coc__wake(e);
        pthread_mutex_unlock(&e->plock);
    }
}

/* What a spinning caller waits for: a request done, or a probe that found a message. */
typedef struct spin_goal {
    coc_request *r;
    int32_t source, tag;
    uint32_t context;
    coc_status *st;
} spin_goal;

/* What a spinner's look reads (look). */
enum {
    LOOK_RINGS,   /* the rings (memory reads); the sockets too when there are no rings */
    LOOK_SOCKETS, /* the rings and the sockets (epoll_wait) */
    LOOK_MEMORY,  /* the rings only: no system call */
    LOOK_HOT      /* the rings and the connection that brought the last frame (one read,
                     no epoll_wait); as LOOK_SOCKETS when there is none */
};

/* One look by a spinner, if no other thread is progressing: the shared-memory rings every
 * time (memory reads, no system call), the sockets as `how` says. While a thread spins,
 * writers to our rings ring no doorbell (spinning), so the spinner's looks are what reads
 * them. Returns 1 when a LOOK_HOT's read brought bytes. */
static int look(coc_engine *e, int how)
{
    if ((how == LOOK_MEMORY && !coc__has_rings(e)) || pthread_mutex_trylock(&e->plock) != 0)
        return 0;
    int hot = how == LOOK_HOT ? coc__progress_hot(e) : -1;
    if (hot >= 0)
        ; /* it was a progress step: the rings were read too */
    else if (how == LOOK_SOCKETS || how == LOOK_HOT ||
             (how == LOOK_RINGS && coc__list_empty(&e->shm)))
        coc__progress(e, 0);
    else
        coc__progress_rings(e);
    pthread_mutex_unlock(&e->plock);
    return hot > 0;
}

static int goal_now(coc_engine *e, spin_goal *g)
{
    if (g->r)
        return done(g->r, g->st);
    pthread_mutex_lock(&e->lock);
    int rc = coc__probe_locked(e, g->source, g->context, g->tag, g->st);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* Look (`how`, see look) and say whether the goal is met. A LOOK_HOT whose read brought
 * bytes that did not meet it (another request's frame) looks at the sockets after all;
 * one whose read found nothing does not: its caller stops spinning and blocks in the
 * poller, whose first epoll_wait returns at once if another socket has something. */
static int goal_met(coc_engine *e, spin_goal *g, int how)
{
    if (look(e, how)) {
        int rc = goal_now(e, g);
        if (rc)
            return rc;
        look(e, LOOK_SOCKETS);
    }
    return goal_now(e, g);
}

/* A pause between two looks at memory: no system call, lets a sibling hyperthread run. */
static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin for up to `budget` ns (not past deadline), looking at the rings and, once the
 * sockets are ours (no rings, or hushed), at them every SOCKET_LOOK_EVERY looks; returns
 * what goal_met last said (> 0: met, < 0: error). Between looks a spinner that may run
 * on one CPU only (pinned: a peer of the job likely shares it) yields every time, so that
 * peer runs and answers; one with CPUs of its own pauses, and yields only every
 * YIELD_EVERY_NS, to see whether other work wants its CPU — and every time for POLITE_NS
 * once a peer answered in such a yield (it shares our CPU: more ranks than cores).
 * A yield that took long ran another thread on this CPU: if the goal is still not met
 * then, that thread was not the peer bringing it (pinned ping-pong: the peer runs in our
 * yield and answers), so this core is wanted by other work: stop spinning at once, tell
 * the caller (*contended), and leave the CPU to that work. */
static int spin(coc_engine *e, uint64_t start, uint64_t budget, uint64_t deadline, spin_goal *g,
                int *contended)
{
    uint64_t until = start + budget;
    int rc = 0;
    if (start >= until || start >= deadline)
        return 0;
    spinning(e, 1);
    uint64_t yielded = start;
    int sockets = !coc__has_rings(e); /* ours to poll (see spinning) */
    /* A spinner that yields before its second look (pinned, or polite) yields before it
     * asks the sockets: what it waits for comes from a process that must run first (the
     * answer to the send it just made, through gateways), so an epoll_wait before the
     * yield finds nothing */
    int yield_first = e->cpus == 1 ||
                      start < atomic_load_explicit(&e->polite_until, memory_order_relaxed);
    for (unsigned n = 0;; n++) {
        int how = n == 0 && yield_first                         ? LOOK_MEMORY
                  : sockets && n % SOCKET_LOOK_EVERY == 0 ? LOOK_SOCKETS
                                                          : LOOK_RINGS;
        if ((rc = goal_met(e, g, how)) != 0)
            break;
        uint64_t now = coc__now_ns();
        if (now >= until || now >= deadline)
            break;
        if (!sockets && now - start >= YIELD_EVERY_NS) {
            hush(e);
            sockets = 1;
            continue;
        }
        if (e->cpus > 1 && now - yielded < YIELD_EVERY_NS &&
            now >= atomic_load_explicit(&e->polite_until, memory_order_relaxed)) {
            relax();
            continue;
        }
        sched_yield();
        yielded = coc__now_ns();
        if (yielded - now > YIELD_TAKEN_NS) {
            /* another process ran in our yield: the peer, answering, if it shares our
             * CPU; its answer is then on the connection the last frame came on */
            if ((rc = goal_met(e, g, LOOK_HOT)) == 0) {
                *contended = 1;
                break;
            }
            /* the peer ran in our yield and answered: it shares our CPU, so yield at
             * every look for a while (more ranks than cores: a pause holds the CPU the
             * peer needs, measured 6.7 -> 26.5 us half round trip, 4 ranks on 2 cores) */
            atomic_store_explicit(&e->polite_until, yielded + POLITE_NS, memory_order_relaxed);
        }
        if (rc)
            break;
    }
    spinning(e, 0);
    atomic_fetch_add_explicit(&e->spun_ns, coc__now_ns() - start, memory_order_relaxed);
    return rc;
}

/* Count how a wait ended (COC__WAIT_*), for coc_engine_stats: which waits paid a wake-up. */
static void count_wait(coc_engine *e, int how)
{
    atomic_fetch_add_explicit(&e->waits[how], 1, memory_order_relaxed);
}

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
static int way_of(coc_engine *e, coc__way_choice *w, uint64_t now)
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

/* A wait that started at `start` the way `way` ended after `waited` ns. Every
 * COC__WAY_SAMPLES such waits, the median of their durations moves the way's score half
 * way towards it: the median, since a wait that another program's time slice delayed (a
 * few ms) says nothing about how to wait and would outweigh a dozen spins in a mean; a way
 * last scored more than a slot ago (an earlier try) takes the new median as it is. The
 * faster way is then the one used outside the try slots (spinning until blocking has a
 * score: an engine starts spinning, as an MPI rank does, and first blocks in a try
 * slot), pinned to one CPU spinning only when it is faster by a margin (SPIN_GAIN_NUM). A try that did
 * not change the faster way makes tries rarer (doubling, up to TRY_MAX slots apart); a
 * change makes them frequent again (TRY_MIN).
 * Waits that ended at once, looks and timeouts are not scored. */
static void score(coc_engine *e, coc__way_choice *w, int way, uint64_t start, uint64_t waited)
{
    if (e->cfg.spin_ns <= 0 || (e->cfg.flags & COC_ENGINE_SPIN_ANY_LOAD))
        return;
    uint32_t i = atomic_fetch_add_explicit(&w->way_n[way], 1, memory_order_relaxed);
    if (i >= COC__WAY_SAMPLES)
        return; /* another thread is scoring this way */
    uint32_t ns_waited = waited < UINT32_MAX ? (uint32_t)waited : UINT32_MAX;
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
    uint64_t slot = start / SLOT_NS;
    uint64_t old = atomic_load_explicit(&w->way_ns[way], memory_order_relaxed);
    int fresh = !old || slot > w->way_slot[way] + 1; /* the score of an earlier try is stale */
    uint64_t now_ns = fresh ? median : (old + median) / 2;
    atomic_store_explicit(&w->way_ns[way], now_ns, memory_order_relaxed);
    w->way_slot[way] = slot;
    uint64_t spin = atomic_load_explicit(&w->way_ns[0], memory_order_relaxed);
    uint64_t block = atomic_load_explicit(&w->way_ns[1], memory_order_relaxed);
    int best = block && (!spin || (e->cpus > 1 ? block < spin
                                                : spin * SPIN_GAIN_DEN >= block * SPIN_GAIN_NUM));
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

/* The spin budget of a wait that waits the way `way` (way_of): none when it blocks at once,
 * else the learnt one. */
static uint64_t spin_budget(coc_engine *e, int way)
{
    if (way) {
        atomic_fetch_add_explicit(&e->waits_unspun, 1, memory_order_relaxed);
        return 0;
    }
    return (uint64_t)atomic_load_explicit(&e->spin_budget, memory_order_relaxed);
}

/* Wait for g->r blocked in the sockets' poller ourselves, if no other thread progresses
 * (1: done, 0: not possible now, COC_ETIMEDOUT). While we hold the token and count as a
 * spinner, the progress thread is not woken for socket events: every frame wakes us, and
 * we handle all of them (other threads' requests complete as usual). Shared-memory rings
 * are asked for doorbells first, as the progress thread does before it sleeps (what they
 * hold already is read then); the first epoll_wait returns at once when a socket has
 * something already. */
static int block_in_poller(coc_engine *e, spin_goal *g, uint64_t deadline)
{
    if (e->forward)
        return 0; /* a gateway's progress thread waits on the sockets itself */
    spinning(e, 1);
    if (pthread_mutex_trylock(&e->plock) != 0) {
        spinning(e, 0);
        return 0;
    }
    hush(e);
    int rc;
    for (;;) {
        if (done(g->r, g->st)) {
            rc = 1;
            break;
        }
        uint64_t now = coc__now_ns();
        if (now >= deadline) {
            rc = COC_ETIMEDOUT;
            break;
        }
        if (!coc__list_empty(&e->shm) && coc__conn_rings_idle(e, 1)) {
            coc__progress(e, 0); /* data came as we asked for doorbells */
            continue;
        }
        uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
        coc__progress(e, left_ms < BLOCK_SLICE_MS ? (int)left_ms : BLOCK_SLICE_MS);
    }
    pthread_mutex_unlock(&e->plock);
    spinning(e, 0);
    return rc;
}

/* A wait that started at `start` the way `way` ended after `waited` ns, `spun`: while
 * spinning. */
static void ended(coc_engine *e, coc__way_choice *w, int way, uint64_t start, uint64_t waited,
                  int spun)
{
    learn(e, waited, spun);
    score(e, w, way, start, waited);
}

/* The waits for a message of more than WAIT_LARGE bytes choose their way apart from the
 * rest: such a wait lasts about as long spun or blocked (its bytes take the time), so
 * their scores tie, and a short phase of small messages that came after them would
 * inherit the way they left (the other way is tried only every 16 ms or more) instead of
 * the one its own kind of wait chose before. */
static coc__way_choice *wait_class(coc_request *r)
{
    return &r->e->ways[!r->alloc && r->len > WAIT_LARGE];
}

int coc_wait(coc_request *r, int64_t timeout_ns, coc_status *st)
{
    if (!r)
        return COC_EINVAL;
    coc_engine *e = r->e;
    coc__conn_release_held(e); /* a caller that waits or looks ends its burst of sends */
    if (timeout_ns == 0) {
        /* a look, not a wait (the binding's post-and-look-once): it neither spins nor
         * teaches the spin budget, which would learn "did not end" from every look */
        if (!done(r, st))
            poke(e, 0);
        return done(r, st) ? 0 : COC_ETIMEDOUT;
    }
    if (done(r, st)) {
        count_wait(e, COC__WAIT_AT_ONCE);
        return 0;
    }
    uint64_t start = coc__now_ns();
    uint64_t deadline = timeout_ns < 0 ? UINT64_MAX : start + (uint64_t)timeout_ns;
    spin_goal g = {.r = r, .st = st};
    int busy = 0;
    coc__way_choice *w = wait_class(r);
    int way = way_of(e, w, start);
    if (spin(e, start, spin_budget(e, way), deadline, &g, &busy)) {
        count_wait(e, COC__WAIT_SPUN);
        ended(e, w, way, start, coc__now_ns() - start, 1);
        return 0;
    }
    if (busy)
        atomic_fetch_add_explicit(&e->waits_contended, 1, memory_order_relaxed);
    int rc = block_in_poller(e, &g, deadline);
    if (rc != 0) {
        if (rc > 0) {
            count_wait(e, COC__WAIT_POLLED);
            ended(e, w, way, start, coc__now_ns() - start, 0);
            return 0;
        }
        learn(e, UINT64_MAX, 0);
        return rc;
    }
    for (;;) {
        if (done(r, st)) {
            count_wait(e, COC__WAIT_SLEPT);
            ended(e, w, way, start, coc__now_ns() - start, 0);
            return 0;
        }
        uint64_t now = coc__now_ns();
        if (now >= deadline) {
            learn(e, UINT64_MAX, 0);
            return COC_ETIMEDOUT;
        }
        uint64_t left = deadline - now;
        if (left > 1000000000u)
            left = 1000000000u;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        int expected = COC__REQ_PENDING;
        atomic_compare_exchange_strong(&r->state, &expected, COC__REQ_SLEEPER);
        if (expected == COC__REQ_DONE)
            continue;
        syscall(SYS_futex, &r->state, FUTEX_WAIT_PRIVATE, COC__REQ_SLEEPER, &ts, NULL, 0);
    }
}

int coc_test(coc_request *r, coc_status *st)
{
    if (!r)
        return COC_EINVAL;
    coc__conn_release_held(r->e);
    if (done(r, st))
        return 1;
    poke(r->e, 1);
    return done(r, st);
}

int coc_cancel(coc_request *r)
{
    if (!r)
        return COC_EINVAL;
    coc_engine *e = r->e;
    int rc = COC_EINVAL;
    pthread_mutex_lock(&e->lock);
    if (r->kind == COC__RECV && r->phase == COC__POSTED && atomic_load(&r->state) != COC__REQ_DONE) {
        coc__posted_remove(e, r);
        coc__complete(e, r, COC_ECANCELED);
        rc = 0;
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int coc_request_free(coc_request *r)
{
    if (!r)
        return 0;
    coc_engine *e = r->e;
    int rc = 0;
    pthread_mutex_lock(&e->lock);
    if (atomic_load(&r->state) != COC__REQ_DONE) {
        if (r->kind == COC__RECV && r->phase == COC__POSTED)
            coc__posted_remove(e, r);
        else
            rc = COC_EINVAL;
    }
    if (rc == 0)
        coc__request_release(e, r);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int coc_iprobe(coc_engine *e, int32_t source, uint32_t context, int32_t tag, coc_status *st)
{
    if (!e || source < COC_ANY_SOURCE || tag < COC_ANY_TAG)
        return COC_EINVAL;
    poke(e, 1);
    pthread_mutex_lock(&e->lock);
    int rc = coc__probe_locked(e, source, context, tag, st);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int coc_probe(coc_engine *e, int32_t source, uint32_t context, int32_t tag, int64_t timeout_ns,
              coc_status *st)
{
    if (!e || source < COC_ANY_SOURCE || tag < COC_ANY_TAG)
        return COC_EINVAL;
    uint64_t start = coc__now_ns();
    uint64_t deadline = timeout_ns < 0 ? UINT64_MAX : start + (uint64_t)timeout_ns;
    spin_goal g = {.source = source, .context = context, .tag = tag, .st = st};
    int busy = 0;
    int found = spin(e, start, spin_budget(e, way_of(e, &e->ways[0], start)), deadline, &g, &busy);
    if (found)
        return found;
    pthread_mutex_lock(&e->lock);
    int rc;
    e->probe_waiters++;
    while ((rc = coc__probe_locked(e, source, context, tag, st)) == 0) {
        uint64_t now = coc__now_ns();
        if (now >= deadline) {
            rc = COC_ETIMEDOUT;
            break;
        }
        uint64_t until = deadline - now > 100000000u ? now + 100000000u : deadline;
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    e->probe_waiters--;
    pthread_mutex_unlock(&e->lock);
    return rc;
}
