/*
 * engine.c — the engine's life cycle, its progress thread, requests (wait/test/cancel/
 * free), probe, addresses, peers and routes, stats and the log ring.
 *
 * Progress. A dedicated thread waits in the poller and handles what comes, so traffic
 * moves while the caller computes. A thread blocked in coc_wait/coc_probe first spins
 * (below), and while it spins it takes the progress token (plock) when free and
 * polls the sockets itself: the message it waits for is then read by the thread that
 * wants it, with no cross-core wake-up (20-55 us on this machine, see MEASURING.md).
 * After the spin it blocks, so two busy processes sharing two cores never starve each
 * other for long.
 *
 * Waiting that fits the machine (issue 17; docs/engine.md, "Waiting"). A wait spins only
 * while every runnable thread of the machine has a core (cores_free: /proc/loadavg's
 * running count against the cores online, looked up once a millisecond): a spin on a
 * taken core delays the thread that has the work. It spins for the engine's adaptive
 * budget, which follows twice the recent waits that ended while spinning, the cap
 * (spin_ns) after waits that blocked but ended within it (they hold a wake-up: learning
 * 0 from them locked two ranks into blocking), and decays when waits run longer than the
 * cap; a yield that ran other work ends the spin. After the spin, a waiter that finds no
 * other thread progressing blocks in the sockets' poller itself, as a byte relay blocks
 * in epoll_wait: when the message comes, the thread that wants it is the one woken, one
 * wake-up instead of two (the progress thread's, then the futex's). Otherwise it sleeps
 * on the futex as before.
 *
 * The progress thread sleeps on an outer poller (ofd) that holds the sockets' poller
 * (pfd) and the wake eventfd. While some thread spins, pfd is disarmed in ofd, so the
 * progress thread is not woken for events the spinner handles anyway: measured here,
 * that redundant wake-up cost ~5 us per message pinned to one CPU (13 -> 10 us).
 * A gateway (COC_ENGINE_FORWARD), which has no waiters of its own as a rule, waits on pfd
 * directly instead: one system call less per forwarded frame (pinned, 21.2 -> 20.5 us
 * through one gateway, 31.8 -> 30.1 us through two).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "poller.h"
#include "sock.h"

#define DEFAULT_SPIN_NS 200000 /* the spin cap: longer than a wake-up across cores (45-55 us) */
#define SPIN_MIN_NS 2000       /* the adaptive spin budget never drops below this */
#define YIELD_TAKEN_NS 10000   /* a sched_yield that took this long ran another thread */
#define LOAD_CHECK_NS 1000000  /* how often waits look whether the machine has a core free */
#define BLOCK_SLICE_MS 10     /* a waiter blocked in the poller looks up at least this often */
#define DEFAULT_SHM 1 /* see docs/engine.md "Same-host transport" */
#define HOUSEKEEPING_MS 100
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

static void drain(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof v) > 0)
        ;
}

static void housekeeping(coc_engine *e)
{
    pthread_mutex_lock(&e->lock);
    int resumed = e->resumed != NULL;
    if (e->nhandshaking) {
        uint64_t now = coc__now_ns();
        if (now - e->last_sweep_ns > HOUSEKEEPING_MS * 1000000ull) {
            e->last_sweep_ns = now;
            coc__conn_sweep(e);
        }
    }
    if (e->liveness_ns) {
        uint64_t now = coc__now_ns();
        if (now - e->last_ping_ns > e->liveness_ns / 4) {
            e->last_ping_ns = now;
            coc__rel_liveness(e);
        }
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
            drain(e->wfd);
            break;
        case COC__KEY_TIMER:
            drain(e->tfd);
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
            if (c)
                coc__conn_event(e, c, ev[i].events);
        }
        }
    }
}

/* plock: handle `n` events and the rings. The frames a gateway forwards meanwhile are
 * corked and leave together at the end, one write per outgoing connection. */
static void handle(coc_engine *e, const coc__event *ev, int n)
{
    e->corking = e->forward;
    if (n > 0)
        dispatch(e, ev, n);
    coc__conn_poll_rings(e);
    e->corking = 0;
    if (e->ncorked) {
        pthread_mutex_lock(&e->lock);
        coc__conn_uncork(e);
        pthread_mutex_unlock(&e->lock);
    }
    housekeeping(e);
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
static int going_idle(coc_engine *e)
{
    if (!e->shm)
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

static void *progress_main(void *arg)
{
    coc_engine *e = arg;
    while (!atomic_load(&e->stopping)) {
        if (e->forward) {
            /* a gateway: wait on the sockets themselves, one system call less per frame */
            coc__event ev[64];
            pthread_mutex_lock(&e->plock);
            int again = going_idle(e);
            pthread_mutex_unlock(&e->plock);
            int n = coc__poll_wait(e->pfd, ev, 64, again ? 0 : idle_timeout_ms(e));
            pthread_mutex_lock(&e->plock);
            handle(e, ev, n);
            pthread_mutex_unlock(&e->plock);
            continue;
        }
        pthread_mutex_lock(&e->plock);
        int again = going_idle(e);
        pthread_mutex_unlock(&e->plock);
        coc__event ev[2];
        int n = coc__poll_wait(e->ofd, ev, 2, again ? 0 : idle_timeout_ms(e));
        for (int i = 0; i < n; i++)
            if (ev[i].key == COC__KEY_WAKE)
                drain(e->wfd);
        pthread_mutex_lock(&e->plock);
        coc__progress(e, 0);
        pthread_mutex_unlock(&e->plock);
        /* No busy-polling here: measured pinned to one CPU, a gateway's progress thread
         * that kept polling after activity made two gateways in a row slower (42.6 vs
         * 31.6 us half round trip) by taking turns with the other spinners. */
    }
    return NULL;
}

/* A thread starts or stops polling pfd (and the rings) itself: the progress thread need
 * not wake for it, and writers to our rings need not ring while it spins. When the last
 * spinner stops, the doorbells are asked for again (and what came meanwhile is read). */
static void spinning(coc_engine *e, int on)
{
    pthread_mutex_lock(&e->spin_lock);
    int edge = on ? e->spinners++ == 0 : --e->spinners == 0;
    if (edge)
        coc__poll_mod(e->ofd, e->pfd, on ? 0 : COC__POLL_IN, COC__KEY_INNER);
    pthread_mutex_unlock(&e->spin_lock);
    if (!edge || !e->shm)
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
    else if (going_idle(e))
        coc__wake(e); /* data came as we stopped: the progress thread takes it */
    pthread_mutex_unlock(&e->plock);
}

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
    e->load_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC); /* optional: see cores_free */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    e->ncores = cores > 0 ? (int)cores : 1;
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
    int *fds[] = {&e->ofd, &e->pfd, &e->wfd, &e->nfd, &e->tfd, &e->reserve_fd, &e->tcp_fd, &e->unix_fd,
                  &e->load_fd};
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
    e->forward = (cfg->flags & COC_ENGINE_FORWARD) != 0;
    e->shm_ring = shm_ring(cfg, e->forward);
    e->ofd = e->pfd = e->wfd = e->nfd = e->tfd = e->reserve_fd = e->tcp_fd = e->unix_fd = -1;
    e->load_fd = -1;
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
        rc = -pthread_create(&e->thread, NULL, progress_main, e);
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
        if (c && (c->state == COC__CS_OPEN || (c->state != COC__CS_DEAD && c->head))) {
            coc__hdr h = {.type = COC__BYE, .source = e->self, .dest = c->peer_id};
            coc__conn_send(c, &h, NULL, NULL);
        }
    }
    pthread_mutex_unlock(&e->lock);
    uint64_t until = coc__now_ns() + COC__CLOSE_LINGER_NS;
    for (;;) {
        int busy = 0;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < COC__MAX_CONNS && !busy; i++) {
            coc__conn *c = e->conns[i];
            busy = c && c->state != COC__CS_DEAD && (c->head || coc__rec_tx_pending(c->rec, NULL));
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
    for (coc_request *r = e->reqs; r; r = r->next)
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
    while (e->reqs)
        coc__request_release(e, e->reqs);
    while (e->unexp_head) {
        coc__umsg *u = e->unexp_head;
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

/* ---- addresses, peers, routes ------------------------------------------------------------- */

int coc_engine_address(coc_engine *e, char *buf, size_t len)
{
    if (!e || !buf)
        return COC_EINVAL;
    char tcp[80] = "";
    char ip[64] = "";
    if (e->tcp_fd >= 0) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(e->tcp_fd, (struct sockaddr *)&ss, &sl) == 0 &&
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip))
            snprintf(tcp, sizeof tcp, "tcp://%s:%u ", ip, e->tcp_port);
    }
    int n = snprintf(buf, len, "%sunix:@%s", tcp, e->unix_name);
    return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

static coc__peer *peer_entry(coc_engine *e, uint32_t id)
{
    coc__peer *p = coc__map_get(&e->peers, id);
    if (p)
        return p;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->id = id;
    if (coc__map_put(&e->peers, id, p) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

/* Parse "tcp://A.B.C.D:PORT unix:@NAME ..." ; unix names are used only when they carry
 * this host's token (same boot, same network namespace). */
static int parse_address(coc_engine *e, const char *address, coc__peer *tmp)
{
    char copy[512];
    if (strlen(address) >= sizeof copy)
        return COC_EINVAL;
    strcpy(copy, address);
    char prefix[96];
    snprintf(prefix, sizeof prefix, "coc/%s/", e->host_token);
    int usable = 0;
    for (char *save = NULL, *tok = strtok_r(copy, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
        if (strncmp(tok, "tcp://", 6) == 0) {
            char *colon = strrchr(tok + 6, ':');
            char *end = NULL;
            unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
            struct in_addr ia;
            if (!colon || !*(colon + 1) || *end || port == 0 || port > 65535 ||
                (size_t)(colon - tok - 6) >= sizeof tmp->ip)
                return COC_EINVAL;
            memcpy(tmp->ip, tok + 6, (size_t)(colon - tok - 6));
            tmp->ip[colon - tok - 6] = '\0';
            if (inet_pton(AF_INET, tmp->ip, &ia) != 1)
                return COC_EINVAL;
            tmp->port = (uint16_t)port;
            usable = 1;
        } else if (strncmp(tok, "unix:@", 6) == 0) {
            if (strlen(tok + 6) >= sizeof tmp->unix_name)
                return COC_EINVAL;
            if (strncmp(tok + 6, prefix, strlen(prefix)) == 0) {
                strcpy(tmp->unix_name, tok + 6);
                usable = 1;
            }
        } else {
            return COC_EINVAL;
        }
    }
    return usable ? 0 : COC_EINVAL;
}

int coc_engine_add_peer(coc_engine *e, uint32_t id, const char *address)
{
    if (!e || !address || id == e->self)
        return COC_EINVAL;
    coc__peer tmp = {0};
    int rc = parse_address(e, address, &tmp);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&e->lock);
    coc__peer *p = peer_entry(e, id);
    if (p) {
        memcpy(p->ip, tmp.ip, sizeof p->ip);
        p->port = tmp.port;
        memcpy(p->unix_name, tmp.unix_name, sizeof p->unix_name);
    }
    pthread_mutex_unlock(&e->lock);
    return p ? 0 : -ENOMEM;
}

/* Set the route of one size class (cls) or of both (cls < 0). A destination's first
 * route serves both classes until the other is set. */
static int set_route(coc_engine *e, uint32_t dest, int cls, const uint32_t *hops,
                     const uint32_t *weights, size_t n)
{
    coc__route route;
    if (!e || cls > COC_CLASS_LARGE)
        return COC_EINVAL;
    int rc = coc__route_make(&route, hops, weights, n);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&e->lock);
    coc__dest *d = coc__map_get(&e->dests, dest);
    if (!d && (d = calloc(1, sizeof *d)) != NULL && coc__map_put(&e->dests, dest, d) < 0) {
        free(d);
        d = NULL;
    }
    if (d) { /* new routes replace what failover left (reliable.c) */
        free(d->set);
        d->set = NULL;
    }
    for (int k = COC_CLASS_SMALL; d && k <= COC_CLASS_LARGE; k++) {
        if (cls < 0 || k == cls) {
            d->route[k] = route;
            d->has[k] = 1;
        } else if (!d->has[k]) {
            d->route[k] = route;
        }
    }
    pthread_mutex_unlock(&e->lock);
    return d ? 0 : -ENOMEM;
}

int coc_engine_set_route(coc_engine *e, uint32_t dest, const uint32_t *hops, const uint32_t *weights,
                         size_t n)
{
    return set_route(e, dest, -1, hops, weights, n);
}

int coc_engine_set_route_class(coc_engine *e, uint32_t dest, int size_class, const uint32_t *hops,
                               const uint32_t *weights, size_t n)
{
    return size_class < 0 ? COC_EINVAL : set_route(e, dest, size_class, hops, weights, n);
}

/* Is `hop` a next hop of some route, of either class? (The engine connects only to those.) */
static int is_hop(coc_engine *e, uint32_t hop)
{
    for (size_t i = 0; i < e->dests.cap; i++) {
        const coc__dest *d = e->dests.vals[i];
        if (d && (coc__route_has(&d->route[COC_CLASS_SMALL], hop) ||
                  coc__route_has(&d->route[COC_CLASS_LARGE], hop)))
            return 1;
    }
    return 0;
}

int coc_engine_connect(coc_engine *e, uint32_t hop)
{
    if (!e || hop == e->self)
        return COC_EINVAL;
    int rc = COC_ENOROUTE;
    pthread_mutex_lock(&e->lock);
    if (is_hop(e, hop) && coc__conn_to(e, hop, &rc))
        rc = 0;
    pthread_mutex_unlock(&e->lock);
    return rc;
}

int coc_engine_peer_connected(coc_engine *e, uint32_t id)
{
    if (!e)
        return COC_EINVAL;
    pthread_mutex_lock(&e->lock);
    coc__peer *p = coc__map_get(&e->peers, id);
    coc__conn *c = p && p->conn_key ? coc__conn_get(e, p->conn_key) : NULL;
    int open = c && c->authed && c->state == COC__CS_OPEN;
    pthread_mutex_unlock(&e->lock);
    return open;
}

int coc_engine_set_peer_delay(coc_engine *e, uint32_t id, uint64_t delay_ns)
{
    if (!e)
        return COC_EINVAL;
    pthread_mutex_lock(&e->lock);
    coc__peer *p = peer_entry(e, id);
    if (p) {
        p->delay_ns = delay_ns;
        coc__conn *c = coc__conn_get(e, p->conn_key);
        if (c)
            c->delay_ns = delay_ns;
    }
    pthread_mutex_unlock(&e->lock);
    return p ? 0 : -ENOMEM;
}

int coc_engine_set_peer_wire(coc_engine *e, uint32_t id, uint32_t flags)
{
    if (!e || id == e->self || flags & ~(uint32_t)(COC_WIRE_ENCRYPT | COC_WIRE_ZSTD | COC_WIRE_LZ4) ||
        ((flags & COC_WIRE_ZSTD) && (flags & COC_WIRE_LZ4)))
        return COC_EINVAL;
    pthread_mutex_lock(&e->lock);
    coc__peer *p = peer_entry(e, id);
    if (p)
        p->wire = flags; /* for connections made from now on */
    pthread_mutex_unlock(&e->lock);
    return p ? 0 : -ENOMEM;
}

int coc_engine_fd(coc_engine *e)
{
    return e ? e->nfd : COC_EINVAL;
}

int coc_engine_drain_fd(coc_engine *e)
{
    if (!e)
        return COC_EINVAL;
    atomic_store(&e->notified, 0);
    drain(e->nfd);
    return 0;
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

/* One non-blocking look at the sockets, if no other thread is doing it. Reading a ring
 * may have used up its doorbell request (or a new connection's ring has none yet) while
 * the progress thread sleeps: ask for doorbells again before leaving. */
static void poke(coc_engine *e)
{
    if (pthread_mutex_trylock(&e->plock) == 0) {
        coc__progress(e, 0);
        if (going_idle(e))
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

static int goal_met(coc_engine *e, spin_goal *g)
{
    if (g->r) {
        poke(e);
        return done(g->r, g->st);
    }
    return coc_iprobe(e, g->source, g->context, g->tag, g->st);
}

/* Spin for up to `budget` ns (not past deadline), polling the sockets ourselves and
 * yielding the CPU in between; returns what goal_met last said (> 0: met, < 0: error).
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
    for (uint64_t now = start; now < until && now < deadline; now = coc__now_ns()) {
        if ((rc = goal_met(e, g)) != 0)
            break;
        uint64_t before = coc__now_ns();
        sched_yield(); /* a peer sharing this CPU gets to run (pinned runs, busy machines) */
        if (coc__now_ns() - before > YIELD_TAKEN_NS && (rc = goal_met(e, g)) == 0) {
            *contended = 1;
            break;
        }
        if (rc)
            break;
    }
    spinning(e, 0);
    atomic_fetch_add_explicit(&e->spun_ns, coc__now_ns() - start, memory_order_relaxed);
    return rc;
}

/* How a wait ended, counted for coc_engine_stats (which waits paid a wake-up). */
enum { WAIT_AT_ONCE, WAIT_SPUN, WAIT_POLLED, WAIT_SLEPT };

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

/* Whether every runnable thread of the machine has a core of its own, looked up at most
 * every LOAD_CHECK_NS (the running count of /proc/loadavg, this thread included, against
 * the cores online). Without /proc/loadavg, waits spin as if a core were free. */
static int cores_free(coc_engine *e, uint64_t now)
{
    if (now - atomic_load_explicit(&e->load_at, memory_order_relaxed) < LOAD_CHECK_NS)
        return !atomic_load_explicit(&e->cores_taken, memory_order_relaxed);
    atomic_store_explicit(&e->load_at, now, memory_order_relaxed);
    char buf[128];
    ssize_t n = e->load_fd >= 0 ? pread(e->load_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    char *slash = strchr(buf, '/');
    if (!slash)
        return 1;
    char *p = slash;
    while (p > buf && p[-1] >= '0' && p[-1] <= '9')
        p--;
    long running = strtol(p, NULL, 10);
    int taken = running > e->ncores;
    atomic_store_explicit(&e->cores_taken, taken, memory_order_relaxed);
    return !taken;
}

/* The spin budget of a wait starting at `now`: none while more threads want to run than
 * the machine has cores (spinning then takes a core from one of them, and a rank that
 * spun loses its place to them when it blocks after all), else the learnt one. */
static uint64_t spin_budget(coc_engine *e, uint64_t now)
{
    if (e->cfg.spin_ns <= 0 || !cores_free(e, now)) {
        atomic_fetch_add_explicit(&e->waits_unspun, 1, memory_order_relaxed);
        return 0;
    }
    return (uint64_t)atomic_load_explicit(&e->spin_budget, memory_order_relaxed);
}

/* Wait for g->r blocked in the sockets' poller ourselves, if no other thread progresses
 * (1: done, 0: not possible now, COC_ETIMEDOUT). While we hold the token and count as a
 * spinner, the progress thread is not woken for socket events: every frame wakes us, and
 * we handle all of them (other threads' requests complete as usual). Shared-memory rings
 * are asked for doorbells first, as the progress thread does before it sleeps. */
static int block_in_poller(coc_engine *e, spin_goal *g, uint64_t deadline)
{
    if (e->forward)
        return 0; /* a gateway's progress thread waits on the sockets itself */
    spinning(e, 1);
    if (pthread_mutex_trylock(&e->plock) != 0) {
        spinning(e, 0);
        return 0;
    }
    int rc;
    coc__progress(e, 0);
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
        if (e->shm && coc__conn_rings_idle(e, 1)) {
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

int coc_wait(coc_request *r, int64_t timeout_ns, coc_status *st)
{
    if (!r)
        return COC_EINVAL;
    coc_engine *e = r->e;
    if (timeout_ns == 0) {
        /* a look, not a wait (the binding's post-and-look-once): it neither spins nor
         * teaches the spin budget, which would learn "did not end" from every look */
        if (!done(r, st))
            poke(e);
        return done(r, st) ? 0 : COC_ETIMEDOUT;
    }
    if (done(r, st)) {
        count_wait(e, WAIT_AT_ONCE);
        return 0;
    }
    uint64_t start = coc__now_ns();
    uint64_t deadline = timeout_ns < 0 ? UINT64_MAX : start + (uint64_t)timeout_ns;
    spin_goal g = {.r = r, .st = st};
    int busy = 0;
    if (spin(e, start, spin_budget(e, start), deadline, &g, &busy)) {
        count_wait(e, WAIT_SPUN);
        learn(e, coc__now_ns() - start, 1);
        return 0;
    }
    if (busy)
        atomic_fetch_add_explicit(&e->waits_contended, 1, memory_order_relaxed);
    int rc = block_in_poller(e, &g, deadline);
    if (rc != 0) {
        if (rc > 0)
            count_wait(e, WAIT_POLLED);
        learn(e, rc > 0 ? coc__now_ns() - start : UINT64_MAX, 0);
        return rc > 0 ? 0 : rc;
    }
    for (;;) {
        if (done(r, st)) {
            count_wait(e, WAIT_SLEPT);
            learn(e, coc__now_ns() - start, 0);
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
    if (done(r, st))
        return 1;
    poke(r->e);
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
    poke(e);
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
    int found = spin(e, start, spin_budget(e, start), deadline, &g, &busy);
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

/* ---- observation --------------------------------------------------------------------------- */

int coc_engine_stats(coc_engine *e, coc_stats *st)
{
    if (!e || !st)
        return COC_EINVAL;
    pthread_mutex_lock(&e->lock);
    *st = e->stats;
    pthread_mutex_unlock(&e->lock);
    st->waits_at_once = atomic_load(&e->waits[WAIT_AT_ONCE]);
    st->waits_spun = atomic_load(&e->waits[WAIT_SPUN]);
    st->waits_polled = atomic_load(&e->waits[WAIT_POLLED]);
    st->waits_slept = atomic_load(&e->waits[WAIT_SLEPT]);
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
