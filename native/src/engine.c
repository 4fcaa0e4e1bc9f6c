/*
 * engine.c — the engine's life cycle (open, close, its file descriptors and defaults),
 * completing requests and waking whoever waits, the notify fd, stats and the log ring.
 * The rest of the engine: progress.c (the progress thread), wait.c (coc_wait and friends),
 * peers.c (addresses, peers, routes), conn*.c (connections), protocol.c and post.c (the
 * point-to-point protocol), forward.c (gateways).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "poller.h"
#include "sock.h"

#define DEFAULT_SPIN_NS 200000 /* the spin cap: longer than a wake-up across cores (45-55 us) */
#define DEFAULT_SHM 1 /* see docs/engine.md "Same-host transport" */
#define DEFAULT_LIVENESS_MS 5000

uint64_t coc__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void coc__log(coc_engine *e, const char *fmt, ...)
{
    size_t i = (e->log_head + e->log_count) % COC__LOG_LINES;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->log[i], COC__LOG_LINE, fmt, ap);
    va_end(ap);
    if (e->log_count < COC__LOG_LINES)
        e->log_count++;
    else
        e->log_head = (e->log_head + 1) % COC__LOG_LINES; /* the oldest line is overwritten */
}

static void futex_wake(_Atomic int *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void coc__complete(coc_engine *e, coc_request *r, int error)
{
    if (atomic_load(&r->state) == COC__REQ_DONE)
        return;
    if (r->cookie) {
        coc__rdv_free(e, r->cookie);
        r->cookie = 0;
    }
    r->st.error = error;
    r->phase = COC__FINISHED;
    __atomic_fetch_add(&e->stats.requests_completed, 1, __ATOMIC_RELAXED);
    if (atomic_exchange(&r->state, COC__REQ_DONE) == COC__REQ_SLEEPER)
        futex_wake(&r->state);
    coc__notify(e);
}

void coc__notify(coc_engine *e)
{
    if (!atomic_exchange(&e->notified, 1)) {
        uint64_t one = 1;
        if (write(e->nfd, &one, sizeof one) < 0) { /* full counter: already readable */
        }
    }
}

void coc__wake(coc_engine *e)
{
    uint64_t one = 1;
    if (write(e->wfd, &one, sizeof one) < 0) { /* full counter: already readable */
    }
}

/* ---- what connections call ------------------------------------------------------------------ */

/* A connection is being freed: its users let go of it. Returns 1 when the routes through
 * it failed over to other hops. */
static int conn_closing(coc__conn *c)
{
    coc_engine *e = c->e;
    int failover = 0;
    /* reliable.c: a gateway lost — crashed, stopped, or closed (BYE: a gateway leaving is
     * never the end of an endpoint) — or one that could not be reached (a hop that is not
     * the destination is a gateway): move to the other gateways of the routes */
    if (c->err != COC_EAUTH && (c->authed ? c->theirs.flags & COC__HELLO_GATEWAY : c->outgoing)) {
        /* down: never came up, went silent (stopped, cut off) or said BYE (leaving); a
         * connection that just ended may have been closed by a gateway that lives
         * (reliable.c, revive) */
        int down = !c->authed || c->err == COC_ETIMEDOUT || c->bye;
        failover = coc__rel_reroute(e, c->peer_id, c->why ? c->why : "closed", down) == 0;
        if (c->authed)
            coc__rel_unread(e, c);
    }
    coc__lost_conn(e, c, failover);
    coc__forward_lost(e, c);
    return failover;
}

/* The freed connection's queue is dropped: after a failover, its lanes go again now, not
 * at the safety net's next tick. */
static void conn_closed(coc_engine *e, int failover)
{
    if (failover)
        coc__rel_relane(e);
}

static const coc__conn_calls conn_calls = {
    .on_frame = coc__frame_begin,
    .on_frame_end = coc__frame_end,
    .on_forward = coc__forward_begin,
    .on_forward_bytes = coc__forward_data,
    .on_forward_written = coc__forward_done,
    .on_stream_failed = coc__stream_failed,
    .on_closing = conn_closing,
    .on_closed = conn_closed,
    .on_open = coc__forward_opened,
};

/* ---- life cycle ---------------------------------------------------------------------------- */

void coc_engine_config_init(coc_engine_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
}

static int open_fds(coc_engine *e)
{
    static _Atomic unsigned counter;
    int rc;
    if ((e->pfd = coc__poll_open()) < 0)
        return e->pfd;
    e->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->nfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    e->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cpu_set_t mine; /* the CPUs this process may run on (taskset), for spin's yields */
    e->cpus = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 2;
    if (e->wfd < 0 || e->nfd < 0 || e->tfd < 0 || e->reserve_fd < 0)
        return -errno;
    if ((e->ofd = coc__poll_open()) < 0)
        return e->ofd;
    if ((e->forward && (rc = coc__poll_add(e->pfd, e->wfd, COC__POLL_IN, COC__KEY_WAKE)) < 0) ||
        (rc = coc__poll_add(e->ofd, e->wfd, COC__POLL_IN, COC__KEY_WAKE)) < 0 ||
        (rc = coc__poll_add(e->ofd, e->pfd, COC__POLL_IN, COC__KEY_INNER)) < 0 ||
        (rc = coc__poll_add(e->pfd, e->tfd, COC__POLL_IN, COC__KEY_TIMER)) < 0)
        return rc;
    if ((rc = coc__host_token(e->host_token, sizeof e->host_token)) < 0)
        return rc;
    if (e->cfg.listen_host) {
        e->tcp_fd = coc__sock_listen_tcp(e->cfg.listen_host, e->cfg.port_min, e->cfg.port_max,
                                         &e->tcp_port);
        if (e->tcp_fd < 0)
            return e->tcp_fd;
        if ((rc = coc__poll_add(e->pfd, e->tcp_fd, COC__POLL_IN, COC__KEY_LISTEN_TCP)) < 0)
            return rc;
    }
    snprintf(e->unix_name, sizeof e->unix_name, "coc/%s/%d.%u", e->host_token, (int)getpid(),
             atomic_fetch_add(&counter, 1));
    e->unix_fd = coc__sock_listen_unix(e->unix_name);
    if (e->unix_fd < 0)
        return e->unix_fd;
    return coc__poll_add(e->pfd, e->unix_fd, COC__POLL_IN, COC__KEY_LISTEN_UNIX);
}

static void close_fds(coc_engine *e)
{
    int *fds[] = {&e->ofd, &e->pfd, &e->wfd, &e->nfd, &e->tfd, &e->reserve_fd, &e->tcp_fd, &e->unix_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (*fds[i] >= 0)
            close(*fds[i]);
}

/* Release the fds, locks and memory of an engine whose thread is not running. */
static void engine_free(coc_engine *e)
{
    close_fds(e);
    pthread_mutex_destroy(&e->plock);
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->spin_lock);
    pthread_cond_destroy(&e->cond);
    explicit_bzero(e->secret, sizeof e->secret);
    if (e->keys)
        explicit_bzero(e->keys, e->nkeys * sizeof *e->keys);
    free(e->keys);
    free(e);
}

/* Ring bytes per direction this engine offers same-host peers (0: none): shared memory
 * unless the flags say COC_ENGINE_NO_SHM (COC_ENGINE_SHM asks for the default), rings of
 * cfg->shm_ring bytes or the default. A gateway does not offer (it accepts what endpoints
 * offer). */
static size_t shm_ring(const coc_engine_config *cfg, int forward)
{
    int on = DEFAULT_SHM;
    if (cfg->flags & COC_ENGINE_SHM)
        on = 1;
    if (cfg->flags & COC_ENGINE_NO_SHM)
        on = 0;
    size_t bytes = cfg->shm_ring ? cfg->shm_ring : COC__SHM_RING_DEFAULT;
    return on && !forward ? bytes : 0;
}

/* A ring size is 0 (the default) or a power of two within the shm.h bounds. */
static int shm_ring_valid(size_t bytes)
{
    return !bytes || (bytes >= COC__SHM_RING_MIN && bytes <= COC__SHM_RING_MAX && !(bytes & (bytes - 1)));
}

static int key_order(const void *a, const void *b)
{
    uint32_t x = ((const coc_peer_key *)a)->id, y = ((const coc_peer_key *)b)->id;
    return (x > y) - (x < y);
}

/* Exactly one of a secret and a key table; ids in the table unique, flags known. */
static int identity_valid(const coc_engine_config *cfg)
{
    if (cfg->secret)
        return !cfg->keys && !cfg->nkeys && cfg->secret_len >= COC_SECRET_MIN &&
               cfg->secret_len <= COC_SECRET_MAX;
    if (cfg->secret_len || (!cfg->keys && cfg->nkeys) || cfg->nkeys > UINT32_MAX)
        return 0;
    for (size_t i = 0; i < cfg->nkeys; i++)
        if (cfg->keys[i].flags & ~(uint32_t)COC_PEER_GATEWAY || cfg->keys[i].id == cfg->self_id)
            return 0;
    return 1;
}

/* The liveness timeout (reliable.c): the config, else 5 s; <0: off. */
static uint64_t liveness_ns(int32_t ms)
{
    if (!ms)
        ms = DEFAULT_LIVENESS_MS;
    return ms < 0 ? 0 : (uint64_t)ms * 1000000u;
}

int coc_engine_open(const coc_engine_config *cfg, coc_engine **out)
{
    if (!cfg || !out || !identity_valid(cfg) || cfg->fragment_size > COC__MAX_PAYLOAD ||
        cfg->eager_limit > COC__MAX_PAYLOAD || !shm_ring_valid(cfg->shm_ring))
        return COC_EINVAL;
    coc_engine *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->cfg = *cfg;
    e->conn_calls = &conn_calls;
    if (cfg->nkeys) {
        e->keys = malloc(cfg->nkeys * sizeof *e->keys);
        if (!e->keys) {
            free(e);
            return -ENOMEM;
        }
        memcpy(e->keys, cfg->keys, cfg->nkeys * sizeof *e->keys);
        qsort(e->keys, cfg->nkeys, sizeof *e->keys, key_order);
        for (size_t i = 1; i < cfg->nkeys; i++)
            if (e->keys[i].id == e->keys[i - 1].id) {
                free(e->keys);
                free(e);
                return COC_EINVAL; /* one key per peer */
            }
        e->nkeys = cfg->nkeys;
    }
    e->cfg.keys = NULL; /* not kept: the caller's array (e->keys is the copy) */
    if (cfg->secret)
        memcpy(e->secret, cfg->secret, cfg->secret_len);
    e->cfg.secret = cfg->secret ? e->secret : NULL;
    e->cfg.listen_host = NULL; /* not kept: the caller's string */
    if (!e->cfg.fragment_size)
        e->cfg.fragment_size = COC__DEFAULT_FRAGMENT;
    if (!e->cfg.eager_limit)
        e->cfg.eager_limit = COC__DEFAULT_EAGER;
    if (e->cfg.eager_limit > e->cfg.fragment_size)
        e->cfg.eager_limit = e->cfg.fragment_size; /* an eager message is one frame */
    e->credit = COC__CREDIT_EAGERS * ((uint64_t)e->cfg.eager_limit + COC__HDR_LEN);
    if (!e->cfg.forward_window)
        e->cfg.forward_window = COC__DEFAULT_WINDOW;
    if (!e->cfg.handshake_timeout_ms)
        e->cfg.handshake_timeout_ms = COC__DEFAULT_HANDSHAKE_MS;
    if (!e->cfg.spin_ns)
        e->cfg.spin_ns = DEFAULT_SPIN_NS;
    atomic_store(&e->spin_budget, e->cfg.spin_ns > 0 ? e->cfg.spin_ns : 0);
    e->liveness_ns = liveness_ns(e->cfg.liveness_ms);
    e->self = cfg->self_id;
    while (!e->incarnation && getrandom(&e->incarnation, sizeof e->incarnation, 0) >= 0)
        ;
    e->forward = (cfg->flags & COC_ENGINE_FORWARD) != 0;
    e->hold_ns = coc__conn_hold_ns(&e->cfg, e->forward);
    e->shm_ring = shm_ring(cfg, e->forward);
    e->ofd = e->pfd = e->wfd = e->nfd = e->tfd = e->reserve_fd = e->tcp_fd = e->unix_fd = -1;
    pthread_mutex_init(&e->plock, NULL);
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->spin_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_condattr_destroy(&ca);
    e->cfg.listen_host = cfg->listen_host;
    int rc = open_fds(e);
    e->cfg.listen_host = NULL;
    if (rc >= 0)
        rc = -pthread_create(&e->thread, NULL, coc__progress_main, e);
    if (rc < 0) {
        engine_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

/* Queue a BYE on every open connection, then give queued frames a moment to leave. */
static void linger(coc_engine *e)
{
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < COC__MAX_CONNS; i++) {
        coc__conn *c = e->conns[i];
        /* also on connections still in their handshake that carry frames: a program
         * that ends right after its (eager, already complete) sends must not lose them */
        if (c && (c->state == COC__CS_OPEN || (c->state != COC__CS_DEAD && c->queue.head))) {
            coc__hdr h = {.type = COC__BYE, .source = e->self, .dest = c->peer_id};
            coc__conn_send(c, &h, NULL, NULL);
        }
    }
    coc__conn_uncork(e); /* what send coalescing holds, the BYEs included, leaves now */
    pthread_mutex_unlock(&e->lock);
    uint64_t until = coc__now_ns() + COC__CLOSE_LINGER_NS;
    for (;;) {
        int busy = 0;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < COC__MAX_CONNS && !busy; i++) {
            coc__conn *c = e->conns[i];
            busy = c && c->state != COC__CS_DEAD && (c->queue.head || coc__rec_tx_pending(c->rec, NULL));
        }
        pthread_mutex_unlock(&e->lock);
        if (!busy || coc__now_ns() > until)
            return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void free_peer(void *p)
{
    free(p);
}

static void free_dest(void *p)
{
    free(((coc__dest *)p)->set);
    free(p);
}

static void free_credit(void *p)
{
    coc__rel_forget(p);
    free(p);
}

int coc_engine_close(coc_engine *e)
{
    if (!e)
        return 0;
    linger(e);
    atomic_store(&e->stopping, 1);
    coc__wake(e);
    pthread_join(e->thread, NULL);
    pthread_mutex_lock(&e->plock);
    pthread_mutex_lock(&e->lock);
    COC__EACH(r, &e->reqs, coc_request, link)
        if (atomic_load(&r->state) != COC__REQ_DONE) {
            r->busy = 0;
            coc__complete(e, r, COC_ECLOSED);
        }
    for (size_t i = 0; i < COC__MAX_CONNS; i++) {
        coc__conn *c = e->conns[i];
        if (c) {
            c->bye = 1; /* we are the ones leaving: nothing to report */
            coc__conn_fail(c, COC_ECLOSED, "engine closed");
        }
    }
    coc__conn_reap(e);
    while (!coc__list_empty(&e->reqs))
        coc__request_release(e, COC__FIRST(&e->reqs, coc_request, link));
    coc__requests_drop(e);
    while (!coc__list_empty(&e->unexp)) {
        coc__umsg *u = COC__FIRST(&e->unexp, coc__umsg, link);
        coc__unexp_remove(e, u);
        free(u->data);
        free(u);
    }
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_unlock(&e->plock);
    coc__map_free(&e->peers, free_peer);
    coc__map_free(&e->dests, free_dest);
    coc__map_free(&e->credits, free_credit);
    free(e->rdv);
    free(e->rdv_gen);
    coc__pool_free(e);
    engine_free(e);
    return 0;
}

/* ---- the notify fd ------------------------------------------------------------------------ */

int coc_engine_fd(coc_engine *e)
{
    return e ? e->nfd : COC_EINVAL;
}

int coc_engine_drain_fd(coc_engine *e)
{
    if (!e)
        return COC_EINVAL;
    /* Empty the fd first, then clear the flag, with an exchange (a full barrier): a
     * completion whose coc__notify saw the flag still set is then visible to the caller's
     * tests that follow, and any later one finds the flag clear and writes the fd. Clearing
     * first lost wake-ups for good: a completion between the two wrote the fd, this read
     * it away, and the flag stayed set with the fd empty, so no completion ever wrote it
     * again (an asyncio loop waited forever on a receive that was done). */
    coc__drain(e->nfd);
    atomic_exchange(&e->notified, 0);
    return 0;
}

/* ---- observation --------------------------------------------------------------------------- */

int coc_engine_stats(coc_engine *e, coc_stats *st)
{
    if (!e || !st)
        return COC_EINVAL;
    pthread_mutex_lock(&e->lock);
    *st = e->stats;
    pthread_mutex_unlock(&e->lock);
    st->waits_at_once = atomic_load(&e->waits[COC__WAIT_AT_ONCE]);
    st->waits_spun = atomic_load(&e->waits[COC__WAIT_SPUN]);
    st->waits_polled = atomic_load(&e->waits[COC__WAIT_POLLED]);
    st->waits_slept = atomic_load(&e->waits[COC__WAIT_SLEPT]);
    st->spin_ns = atomic_load(&e->spun_ns);
    st->spin_budget_ns = (uint64_t)atomic_load(&e->spin_budget);
    st->waits_contended = atomic_load(&e->waits_contended);
    st->waits_unspun = atomic_load(&e->waits_unspun);
    return 0;
}

int coc_engine_take_log(coc_engine *e, char *buf, size_t len)
{
    if (!e || !buf || !len)
        return COC_EINVAL;
    size_t used = 0;
    pthread_mutex_lock(&e->lock);
    while (e->log_count) {
        const char *line = e->log[e->log_head];
        size_t n = strlen(line);
        if (used + n + 2 > len)
            break;
        memcpy(buf + used, line, n);
        buf[used + n] = '\n';
        used += n + 1;
        e->log_head = (e->log_head + 1) % COC__LOG_LINES;
        e->log_count--;
    }
    pthread_mutex_unlock(&e->lock);
    buf[used] = '\0';
    return (int)used;
}
