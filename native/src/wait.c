/*
 * wait.c — waiting for requests and probes (coc_wait, coc_test, coc_probe, coc_iprobe),
 * cancelling and freeing requests.
 *
 * Waiting that fits the machine (issue 17; docs/engine.md, "Waiting"). A wait either spins
 * first or blocks at once, whichever way made this engine's waits end sooner lately, and
 * a spin lasts the engine's adaptive budget (way.c chooses and learns both); a yield that
 * ran other work ends the spin. After the spin, a waiter that finds no other thread
 * progressing blocks in the sockets' poller itself, as a byte relay blocks in epoll_wait:
 * when the message comes, the thread that wants it is the one woken, one wake-up instead
 * of two (the progress thread's, then the futex's). Otherwise it sleeps on the futex.
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

#define YIELD_TAKEN_NS 10000   /* a sched_yield that took this long ran another thread */
#define SOCKET_LOOK_EVERY 8    /* a spinner polls the sockets every this many looks at the rings */
#define YIELD_EVERY_NS 20000   /* a spinner with CPUs of its own yields this often (see spin) */
#define POLITE_NS 100000000    /* after a peer answered in our yield, yield at every look this long */
#define QUIET_LOOK_MS 1       /* the progress thread looks back this often while waiters hold pfd, */
#define QUIET_LOOK_MAX_MS 8   /* and up to this seldom (doubling) while waits come thick: */
#define THICK_WAITS_PER_MS 2  /* this many begun per ms since its last look */
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
 * looks back every QUIET_LOOK_MS (or further apart, below); when no wait began since its
 * last look and none is under way, it arms pfd again (one epoll_ctl). Back-to-back waits
 * (a ping-pong) so cost no epoll_ctl, where arming and disarming per wait cost two (four
 * with a spin before the block); what comes while nobody waits waits for the progress
 * thread's next look. A wait under way when the progress thread goes to sleep for long
 * (progress_away) arms pfd itself as it ends. Returns how long the progress thread may
 * sleep, given the `idle_ms` it needs otherwise (-1: no limit).
 *
 * A look back that nothing else woke costs the process a wake-up of the progress thread
 * (6.8 us of CPU each, pinned to one CPU with the rest of a cross-site job: 3 % of a
 * rank's CPU in a ping-pong). While waits come thick (THICK_WAITS_PER_MS or more per ms
 * since the last look: the caller does little but communicate), the look-backs grow
 * apart, doubling up to QUIET_LOOK_MAX_MS; thinner waits bring them back to
 * QUIET_LOOK_MS. So what comes while nobody waits is handled 1-2 ms later as before,
 * except in the first gap after thick waits (a computation that follows a ping-pong),
 * up to QUIET_LOOK_MAX_MS later. */
static int next_look_ms(coc_engine *e)
{
    uint64_t begun = e->wait_gen - e->gen_seen;
    int ms = e->look_ms > 0 ? e->look_ms : QUIET_LOOK_MS;
    if (begun < (uint64_t)THICK_WAITS_PER_MS * (uint64_t)ms)
        ms = QUIET_LOOK_MS;
    else if (ms < QUIET_LOOK_MAX_MS)
        ms *= 2;
    e->look_ms = ms;
    return ms;
}

int coc__progress_sleep_ms(coc_engine *e, int idle_ms)
{
    pthread_mutex_lock(&e->spin_lock);
    int ms = idle_ms;
    if (e->quiet) {
        if (!e->spinners && e->wait_gen == e->gen_seen) {
            quiet_locked(e, 0); /* nobody waited since the last look: the sockets are ours */
            e->look_ms = QUIET_LOOK_MS;
        } else if (!e->spinners || e->wait_gen != e->gen_seen) {
            int look = next_look_ms(e);
            e->gen_seen = e->wait_gen;
            if (idle_ms < 0 || idle_ms > look)
                ms = look;
        } /* else one wait is under way since the last look: it arms pfd as it ends */
    }
    e->progress_away = ms < 0 || ms > QUIET_LOOK_MAX_MS;
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

/* plock: the engine's only connection, when it is a shared-memory ring a blocked waiter
 * may nap on (coc__ring_nap): open, reading (not paused), nothing of ours waiting for room
 * on it (the peer's bell for room comes on the socket) or for the delay timer, and nothing else the poller would report but a listener:
 * no other connection (in its handshake, open, or dead and not reaped), no paused
 * connection to resume. Counts read without the lock are hints, as for the lone socket
 * (progress.c): what the poller would report meanwhile waits at most a slice. */
static coc__conn *lone_ring(coc_engine *e)
{
    coc__conn *c = COC__FIRST(&e->shm, coc__conn, shm_link);
    if (!c || c->shm_link.next ||
        __atomic_load_n(&e->stats.connections_open, __ATOMIC_RELAXED) != 1 ||
        atomic_load_explicit(&e->nhandshaking, memory_order_relaxed) || e->ndead ||
        atomic_load_explicit(&e->ncorked, memory_order_relaxed) ||
        __atomic_load_n(&e->resumed.head, __ATOMIC_RELAXED))
        return NULL;
    if (!c->ring || c->state != COC__CS_OPEN || c->rstate == COC__RX_PAUSED || c->delay_ns ||
        (__atomic_load_n(&c->events, __ATOMIC_RELAXED) & COC__POLL_OUT) ||
        coc__ring_waits_room(&c->tx))
        return NULL; /* room in a full ring is announced on the socket */
    return c;
}

/* plock: a blocked waiter's step when the engine's only connection is a ring (lone_ring):
 * nap on the ring for up to `ms` and read what came, one futex wait and one wake per frame
 * where the doorbell costs the writer a socket write and us a poller's wake-up and a read.
 * A nap that ended with nothing (a slice passed) is followed by a look at the poller and
 * the housekeeping, as a slice of the poller's wait would end. A nap that brought data
 * counts as a read made blocked (reads_blocked), as the lone socket's recv does. Returns
 * 0 when the engine has more to watch than the ring (nothing done). */
static int nap_on_lone_ring(coc_engine *e, int ms)
{
    coc__conn *c = lone_ring(e);
    if (!c)
        return 0;
    if (coc__ring_nap(&c->rx, ms)) {
        __atomic_fetch_add(&e->stats.reads_blocked, 1, __ATOMIC_RELAXED);
        coc__progress_rings(e);
    } else
        coc__progress(e, 0);
    return 1;
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
        uint64_t left_ms = (deadline - now + 999999u) / 1000000u;
        if (nap_on_lone_ring(e, left_ms < COC__BLOCK_SLICE_MS ? (int)left_ms : COC__BLOCK_SLICE_MS))
            continue;
        if (!coc__list_empty(&e->shm) && coc__conn_rings_idle(e, 1)) {
            coc__progress(e, 0); /* data came as we asked for doorbells */
            continue;
        }
        if (left_ms >= COC__BLOCK_SLICE_MS && coc__progress_lone(e) >= 0)
            continue; /* slept in the one connection's recv */
        coc__progress(e, left_ms < COC__BLOCK_SLICE_MS ? (int)left_ms : COC__BLOCK_SLICE_MS);
    }
    pthread_mutex_unlock(&e->plock);
    spinning(e, 0);
    return rc;
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
    coc__way_choice *w = coc__wait_class(r);
    int way = coc__way_of(e, w, start);
    if (spin(e, start, coc__spin_budget(e, way), deadline, &g, &busy)) {
        count_wait(e, COC__WAIT_SPUN);
        coc__wait_ended(e, w, way, start, coc__now_ns() - start, 1);
        return 0;
    }
    if (busy)
        atomic_fetch_add_explicit(&e->waits_contended, 1, memory_order_relaxed);
    int rc = block_in_poller(e, &g, deadline);
    if (rc != 0) {
        if (rc > 0) {
            count_wait(e, COC__WAIT_POLLED);
            coc__wait_ended(e, w, way, start, coc__now_ns() - start, 0);
            return 0;
        }
        coc__wait_unended(e);
        return rc;
    }
    for (;;) {
        if (done(r, st)) {
            count_wait(e, COC__WAIT_SLEPT);
            coc__wait_ended(e, w, way, start, coc__now_ns() - start, 0);
            return 0;
        }
        uint64_t now = coc__now_ns();
        if (now >= deadline) {
            coc__wait_unended(e);
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
    int way = coc__way_of(e, &e->ways[0], start);
    int found = spin(e, start, coc__spin_budget(e, way), deadline, &g, &busy);
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
