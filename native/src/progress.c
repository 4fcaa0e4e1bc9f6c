/*
 * progress.c — the progress loop: the engine's progress thread, what one round of it
 * does with the poller's events (dispatch to connections, listeners, the delay timer),
 * and housekeeping (handshake deadlines, liveness, reaping dead connections).
 *
 * Progress. A dedicated thread waits in the poller and handles what comes, so traffic
 * moves while the caller computes. A thread blocked in coc_wait/coc_probe first spins
 * (below), and while it spins it takes the progress token (plock) when free and
 * polls the sockets itself: the message it waits for is then read by the thread that
 * wants it, with no cross-core wake-up (20-55 us on this machine, see MEASURING.md).
 * After the spin it blocks, so two busy processes sharing two cores never starve each
 * other for long.
 *
 * The progress thread sleeps on an outer poller (ofd) that holds the sockets' poller
 * (pfd) and the wake eventfd. While some thread spins, pfd is disarmed in ofd, so the
 * progress thread is not woken for events the spinner handles anyway: measured here,
 * that redundant wake-up cost ~5 us per message pinned to one CPU (13 -> 10 us). It is
 * armed again lazily: the progress thread looks back every millisecond (further apart
 * while waits come thick) while pfd is disarmed and arms it once the waits have stopped
 * (wait.c, coc__progress_sleep_ms). A waiter whose engine has one connection sleeps in
 * its recv instead of the poller (coc__progress_lone).
 * A gateway (COC_ENGINE_FORWARD), which has no waiters of its own as a rule, waits on pfd
 * directly instead: one system call less per forwarded frame (pinned, 21.2 -> 20.5 us
 * through one gateway, 31.8 -> 30.1 us through two).
 */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "poller.h"

#define HOUSEKEEPING_MS 100

void coc__drain(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof v) > 0)
        ;
}

/* Housekeeping's clock. Its periods are a tenth of a second and more, and it runs every
 * round (a gateway: once per frame forwarded), so the coarse clock does: a read costs
 * ~8 ns here against ~49 for CLOCK_MONOTONIC (coc__now_ns). It lags by up to a tick, so
 * a look that a fine-clock timeout brought back one period later may see a little less
 * than the period pass: COARSE_SLACK_NS (a tick at HZ 100) counts as passed. */
#define COARSE_SLACK_NS 10000000ull

static uint64_t coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Has `period` passed since `last`, by the coarse clock? Its lag counts as passed, but
 * never more than half the period: a short liveness timeout (tests use tens of ms) would
 * otherwise make every round a ping round. */
static int due(uint64_t now, uint64_t last, uint64_t period)
{
    uint64_t slack = period / 2 < COARSE_SLACK_NS ? period / 2 : COARSE_SLACK_NS;
    return now + slack - last > period;
}

/* Housekeeping looks at the clock while handshakes are under way, and for liveness at
 * every round of an endpoint; a gateway's rounds come once per frame forwarded, and its
 * delay timer fires at least every liveness quarter (gateway_timeout_ms), so it looks for
 * liveness only in the rounds that timer fired in: no clock read per frame. */
static void housekeeping(coc_engine *e)
{
    int look = e->nhandshaking || (e->liveness_ns && (!e->forward || e->timer_fired));
    e->timer_fired = 0;
    uint64_t now = look ? coarse_ns() : 0;
    int sweep = e->nhandshaking && due(now, e->last_sweep_ns, HOUSEKEEPING_MS * 1000000ull);
    int ping = look && e->liveness_ns && due(now, e->last_ping_ns, e->liveness_ns / 4);
    /* what others leave here (dead connections, resumed ones) is read without the lock
     * as a hint: they set it under the lock and then wake this thread (coc__wake), so a
     * round that misses it is followed by one that sees it */
    if (!sweep && !ping && !__atomic_load_n(&e->ndead, __ATOMIC_RELAXED) &&
        !__atomic_load_n(&e->resumed.head, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&e->lock);
    int resumed = !coc__list_empty(&e->resumed);
    if (sweep) {
        e->last_sweep_ns = now;
        coc__conn_sweep(e);
    }
    if (ping) {
        e->last_ping_ns = now;
        coc__rel_liveness(e);
    }
    if (e->ndead)
        coc__conn_reap(e);
    pthread_mutex_unlock(&e->lock);
    if (resumed)
        coc__forward_resume(e);
}

static void dispatch(coc_engine *e, const coc__event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        switch (ev[i].key) {
        case COC__KEY_WAKE:
            coc__drain(e->wfd);
            break;
        case COC__KEY_TIMER:
            coc__drain(e->tfd);
            e->timer_fired = 1;
            pthread_mutex_lock(&e->lock);
            coc__conn_flush_delayed(e);
            pthread_mutex_unlock(&e->lock);
            break;
        case COC__KEY_LISTEN_TCP:
        case COC__KEY_LISTEN_UNIX:
            pthread_mutex_lock(&e->lock);
            coc__conn_accept(e, ev[i].key == COC__KEY_LISTEN_TCP ? e->tcp_fd : e->unix_fd,
                             ev[i].key == COC__KEY_LISTEN_UNIX);
            pthread_mutex_unlock(&e->lock);
            break;
        default: {
            coc__conn *c = coc__conn_get(e, ev[i].key);
            if (!c)
                break;
            if (ev[i].events & COC__POLL_IN)
                e->hot = ev[i].key;
            /* the round's last input, when no ring is read after it: the forwarder lets
             * the frame that ends it go at once (forward.c, coc__forward_begin) */
            e->input_last = e->corking && i == n - 1 && !coc__has_rings(e);
            coc__conn_event(e, c, ev[i].events);
            e->input_last = e->input_end = 0;
        }
        }
    }
}

/* plock: handle `n` events and the rings. The frames a gateway forwards meanwhile are
 * corked and leave together at the end, one write per outgoing connection; a frame that
 * ends the round's input with nothing corked before it leaves at once (input_last). */
static void handle(coc_engine *e, const coc__event *ev, int n)
{
    e->corking = e->forward;
    if (n > 0)
        dispatch(e, ev, n);
    coc__conn_poll_rings(e);
    e->corking = 0;
    coc__conn_release_held(e); /* and what an endpoint held (send coalescing, conn_tx.c) */
    housekeeping(e);
}

void coc__progress_rings(coc_engine *e)
{
    handle(e, NULL, 0);
}

/* plock: read the connection that brought the last frame (e->hot) without asking the
 * poller, and handle what it held as a progress step does. A spinner whose yield ran other
 * work (pinned: likely the peer, answering) finds the answer there in one read, where the
 * poller costs an epoll_wait before it. Returns 1 when the read brought bytes, 0 when it
 * found none (EAGAIN: one read spent), -1 when there was no such connection (nothing
 * done). Other sockets, a shared-memory connection and one not open yet are left to the
 * poller. */
int coc__progress_hot(coc_engine *e)
{
    coc__conn *c = e->hot ? coc__conn_get(e, e->hot) : NULL;
    if (!c || c->ring || c->state != COC__CS_OPEN)
        return -1;
    uint64_t reads = __atomic_load_n(&e->stats.socket_reads, __ATOMIC_RELAXED);
    coc__event ev = {.key = e->hot, .events = COC__POLL_IN};
    handle(e, &ev, 1);
    if (__atomic_load_n(&e->stats.socket_reads, __ATOMIC_RELAXED) == reads)
        return 0;
    __atomic_fetch_add(&e->stats.reads_unpolled, 1, __ATOMIC_RELAXED);
    return 1;
}

/* The engine's only connection, when a blocked waiter may sleep in its recv: open, made
 * blocking (handshake.c), reading (not paused), no frame of ours waiting for room on it
 * or for the delay timer (an emulated delay, frames held by send coalescing: the waiter
 * let its own go as its wait began), and nothing else the poller would report but a
 * listener or a stale firing of the delay timer: no other connection (in its handshake,
 * open, or dead and not reaped), no shared memory, no paused connection to resume. The
 * counts are read without the lock, as hints: a connection another thread dials, or
 * frames another thread posts and holds, meanwhile wait at most a slice for the poller. */
static coc__conn *lone_conn(coc_engine *e)
{
    if (__atomic_load_n(&e->stats.connections_open, __ATOMIC_RELAXED) != 1 ||
        atomic_load_explicit(&e->nhandshaking, memory_order_relaxed) ||
        __atomic_load_n(&e->ndead, __ATOMIC_RELAXED) || coc__has_rings(e) ||
        atomic_load_explicit(&e->ncorked, memory_order_relaxed) ||
        __atomic_load_n(&e->resumed.head, __ATOMIC_RELAXED))
        return NULL;
    coc__conn *c = e->hot ? coc__conn_get(e, e->hot) : NULL;
    if (!c || !c->blocking || c->state != COC__CS_OPEN || c->rstate == COC__RX_PAUSED ||
        c->delay_ns || (__atomic_load_n(&c->events, __ATOMIC_RELAXED) & COC__POLL_OUT))
        return NULL;
    return c;
}

/* plock: a blocked waiter's step when the engine has one connection (lone_conn): sleep in
 * that socket's recv for up to its timeout (COC__BLOCK_SLICE_MS) and handle what it brought,
 * one system call per frame as a C endpoint's blocking recv, where the poller costs an
 * epoll_wait before the read. A recv that timed out or was interrupted is followed by a
 * look at the poller (a listener's new connection, a hang-up) and housekeeping, as a
 * slice of the poller's wait would end. Returns 1 when bytes came, 0 when none did, -1
 * when the engine has more to watch than one socket (nothing done: use the poller). */
int coc__progress_lone(coc_engine *e)
{
    coc__conn *c = lone_conn(e);
    if (!c)
        return -1;
    uint64_t reads = __atomic_load_n(&e->stats.socket_reads, __ATOMIC_RELAXED);
    coc__event ev = {.key = c->key, .events = COC__POLL_IN};
    c->rx_wait = 1; /* its first read (conn_rx.c rx_bytes) takes it: c may be gone after */
    handle(e, &ev, 1);
    if (__atomic_load_n(&e->stats.socket_reads, __ATOMIC_RELAXED) != reads) {
        __atomic_fetch_add(&e->stats.reads_blocked, 1, __ATOMIC_RELAXED);
        return 1;
    }
    coc__progress(e, 0);
    return 0;
}

int coc__progress(coc_engine *e, int timeout_ms)
{
    coc__event ev[64];
    int n = coc__poll_wait(e->pfd, ev, 64, timeout_ms);
    handle(e, ev, n);
    return n;
}

/* plock: the progress thread is about to sleep. Unless a thread spins (and polls the
 * rings itself), writers to our rings must ring the doorbell; returns 1 when data came
 * meanwhile (do not sleep). */
int coc__going_idle(coc_engine *e)
{
    if (coc__list_empty(&e->shm))
        return 0;
    pthread_mutex_lock(&e->spin_lock);
    int idle = e->spinners == 0;
    pthread_mutex_unlock(&e->spin_lock);
    return idle && coc__conn_rings_idle(e, 1);
}

/* How long the progress thread may sleep: housekeeping needs it back for handshake
 * deadlines and for liveness (pings and the silence check, every quarter timeout). */
static int idle_timeout_ms(const coc_engine *e)
{
    if (e->nhandshaking)
        return HOUSEKEEPING_MS;
    return e->liveness_ns ? (int)(e->liveness_ns / 4000000u) + 1 : -1;
}

/* How long a gateway's progress thread may wait in the poller. A wait with a timeout sets
 * and cancels a kernel timer every time, once per frame forwarded (~90 ns of the gateway's
 * kernel time, perf); so while no handshake is under way, housekeeping's next look comes
 * from the delay timer (armed again after each firing) and the wait has none. The period
 * is worked out only when the timer is armed: a 64-bit division per frame otherwise. */
static int gateway_timeout_ms(coc_engine *e)
{
    if (e->nhandshaking || !e->liveness_ns)
        return idle_timeout_ms(e);
    if (!__atomic_load_n(&e->timer_due, __ATOMIC_RELAXED)) { /* fired (or never armed) */
        pthread_mutex_lock(&e->lock);
        coc__conn_arm_timer(e, coc__now_ns() + (uint64_t)idle_timeout_ms(e) * 1000000u);
        pthread_mutex_unlock(&e->lock);
    }
    return -1;
}

/* The progress thread is about to sleep: coc__going_idle with the token (1: do not sleep).
 * Without rings there is nothing to ask doorbells for, and the token is not taken: an
 * endpoint's waiter holds it while it blocks in the poller, and queueing for it cost a
 * futex sleep and a wake-up per look, on one CPU two context switches on the message's
 * path. A ring that comes meanwhile is the business of the thread that made it: it asks
 * for doorbells, or wakes this thread, as it lets go of the token (wait.c, spinning). */
static int going_idle(coc_engine *e)
{
    if (!coc__has_rings(e))
        return 0;
    pthread_mutex_lock(&e->plock);
    int again = coc__going_idle(e);
    pthread_mutex_unlock(&e->plock);
    return again;
}

void *coc__progress_main(void *arg)
{
    coc_engine *e = arg;
    pthread_setname_np(pthread_self(), "coc-progress"); /* seen in /proc, top -H, perf */
    while (!atomic_load(&e->stopping)) {
        if (e->forward) {
            /* a gateway: wait on the sockets themselves, one system call less per frame */
            coc__event ev[64];
            int n = coc__poll_wait(e->pfd, ev, 64, going_idle(e) ? 0 : gateway_timeout_ms(e));
            pthread_mutex_lock(&e->plock);
            handle(e, ev, n);
            pthread_mutex_unlock(&e->plock);
            continue;
        }
        coc__event ev[2];
        int sleep_ms = going_idle(e) ? 0 : coc__progress_sleep_ms(e, idle_timeout_ms(e));
        int n = coc__poll_wait(e->ofd, ev, 2, sleep_ms);
        for (int i = 0; i < n; i++)
            if (ev[i].key == COC__KEY_WAKE)
                coc__drain(e->wfd);
        /* A look back that nothing woke (the lazy hand-off's, or housekeeping's) while a
         * waiter holds the token: that waiter reads the sockets and does the housekeeping
         * (handle); the progress thread only had to see whether waits go on, which
         * coc__progress_sleep_ms does at the top. Woken (the wake eventfd, the sockets),
         * it takes the token as before: a wake asks it to look again. */
        if (n == 0) {
            if (pthread_mutex_trylock(&e->plock) != 0)
                continue;
        } else {
            pthread_mutex_lock(&e->plock);
        }
        coc__progress(e, 0);
        pthread_mutex_unlock(&e->plock);
        /* No busy-polling here: measured pinned to one CPU, a gateway's progress thread
         * that kept polling after activity made two gateways in a row slower (42.6 vs
         * 31.6 us half round trip) by taking turns with the other spinners. */
    }
    return NULL;
}
