/*
 * conn.c — one connection: set-up (connect/accept), reading and parsing frames, and
 * writing the send queue. Its first bytes, the handshake, are handshake.c's.
 *
 * Writing (under e->lock) batches queued frames into one sendmsg. A caller whose frame
 * finds the queue empty writes it itself (coc__conn_send), so a small message leaves
 * without waking the progress thread. Reading (under e->plock) fills a page-aligned
 * buffer and parses frames from it; a large payload whose destination is known is read
 * straight into place (the user's buffer, or the forwarding buffer). On a connection with
 * a record layer (record.h) the same two places, rx_bytes and tx_bytes, go through it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "engine.h"
#include "poller.h"
#include "sock.h"

#define IOV_MAX_BATCH 16

coc__conn *coc__conn_get(coc_engine *e, uint64_t key)
{
    uint32_t slot = (uint32_t)key - COC__KEY_CONN_MIN;
    if ((uint32_t)key < COC__KEY_CONN_MIN || slot >= COC__MAX_CONNS)
        return NULL;
    coc__conn *c = __atomic_load_n(&e->conns[slot], __ATOMIC_ACQUIRE);
    return c && c->key == key ? c : NULL;
}

static void set_events(coc__conn *c, unsigned events)
{
    if (c->state == COC__CS_DEAD || events == c->events)
        return;
    c->events = events;
    coc__poll_mod(c->e->pfd, c->fd, events, c->key);
}

void coc__conn_set_in(coc__conn *c, int on)
{
    set_events(c, on ? c->events | COC__POLL_IN : c->events & ~COC__POLL_IN);
}

/* Frames of this connection go through its shared-memory ring (after the handshake). */
static int on_ring(const coc__conn *c)
{
    return c->authed && c->tx.ctl;
}

static void set_out(coc__conn *c, int on)
{
    if (on_ring(c))
        on = 0; /* the socket is always writable; a full ring's reader rings the bell */
    set_events(c, on ? c->events | COC__POLL_OUT : c->events & ~COC__POLL_OUT);
}

void coc__conn_fail(coc__conn *c, int err, const char *why)
{
    coc_engine *e = c->e;
    if (c->state == COC__CS_DEAD)
        return;
    if (c->state != COC__CS_OPEN)
        e->nhandshaking--;
    c->state = COC__CS_DEAD;
    c->err = err;
    c->why = why;
    coc__poll_del(e->pfd, c->fd);
    if (c->duplicate) {
        /* counted and logged by the handshake, which names both connections */
    } else if (err == COC_EAUTH) {
        e->stats.auth_failures++;
        coc__log(e, "%s failed authentication (%s); dropped, nothing it sent was delivered", c->name,
                 why);
    } else if (err == COC_EPROTO) {
        e->stats.protocol_errors++;
        coc__log(e, "%s broke the wire protocol (%s); dropped", c->name, why);
    } else if (!c->authed) {
        coc__log(e, "%s: connection failed before authentication: %s (%s)", c->name, why,
                 coc_strerror(err));
    }
    e->ndead++;
    coc__wake(e);
}

static void shm_unmap(coc__conn *c)
{
    coc__ring_unmap(&c->tx);
    coc__ring_unmap(&c->rx);
    if (c->shm_fd >= 0)
        close(c->shm_fd);
    c->shm_fd = -1;
}

static coc__conn *conn_new(coc_engine *e, int fd, int outgoing, int unix_, uint32_t peer_id,
                           const char *where)
{
    size_t slot;
    for (slot = 0; slot < COC__MAX_CONNS && e->conns[slot]; slot++)
        ;
    coc__conn *c = slot < COC__MAX_CONNS ? calloc(1, sizeof *c) : NULL;
    uint8_t *rbuf = c ? aligned_alloc(4096, COC__RBUF) : NULL;
    if (!rbuf) {
        free(c);
        close(fd);
        return NULL;
    }
    c->e = e;
    c->fd = fd;
    c->rbuf = rbuf;
    c->key = (uint64_t)++e->conn_gen << 32 | (uint32_t)(slot + COC__KEY_CONN_MIN);
    c->outgoing = (uint8_t)outgoing;
    c->unix_ = (uint8_t)unix_;
    c->peer_id = peer_id;
    c->state = outgoing ? COC__CS_CONNECTING : COC__CS_HANDSHAKE;
    c->rstate = COC__RX_HELLO;
    /* a peer we dial that does not answer for the liveness timeout is as dead as an open
     * connection that silent (a stopped gateway's kernel still accepts; failover waited
     * for the whole handshake timeout) */
    uint64_t limit = (uint64_t)e->cfg.handshake_timeout_ms * 1000000u;
    if (outgoing && e->liveness_ns && e->liveness_ns < limit)
        limit = e->liveness_ns;
    c->deadline_ns = coc__now_ns() + limit;
    snprintf(c->where, sizeof c->where, "%s", where);
    if (outgoing)
        snprintf(c->name, sizeof c->name, "endpoint %u (%s)", peer_id, where);
    else
        snprintf(c->name, sizeof c->name, "unauthenticated peer (%s)", where);
    c->shm_fd = -1;
    c->mine.role = outgoing ? COC__ROLE_CONNECTOR : COC__ROLE_ACCEPTOR;
    c->mine.flags = e->forward ? COC__HELLO_GATEWAY : 0;
    /* a marked link gets the record layer whatever carries it, so no shared memory */
    coc__peer *p = outgoing ? coc__map_get(&e->peers, peer_id) : NULL;
    if (p && p->wire)
        coc__hs_wire_offer(c, p->wire);
    else if (outgoing && unix_ && e->shm_ring)
        coc__hs_shm_offer(c);
    c->mine.id = e->self;
    if (getrandom(c->mine.nonce, sizeof c->mine.nonce, 0) != sizeof c->mine.nonce) {
        shm_unmap(c);
        free(rbuf);
        free(c);
        close(fd);
        return NULL;
    }
    coc__hello_encode(&c->mine, c->hs_out);
    c->hs_len = COC__HELLO_LEN;
    c->events = COC__POLL_IN | COC__POLL_OUT;
    /* published before the poller may report it, so the first event finds it */
    __atomic_store_n(&e->conns[slot], c, __ATOMIC_RELEASE);
    if (coc__poll_add(e->pfd, fd, c->events, c->key) < 0) {
        __atomic_store_n(&e->conns[slot], NULL, __ATOMIC_RELEASE);
        shm_unmap(c);
        free(rbuf);
        free(c);
        close(fd);
        return NULL;
    }
    e->nhandshaking++;
    return c;
}

coc__conn *coc__conn_to(coc_engine *e, uint32_t hop, int *rc)
{
    coc__peer *p = coc__map_get(&e->peers, hop);
    if (p && p->conn_key) {
        coc__conn *c = coc__conn_get(e, p->conn_key);
        if (c && c->state != COC__CS_DEAD)
            return c;
        p->conn_key = 0;
    }
    if (!p || (!p->ip[0] && !p->unix_name[0])) {
        coc__log(e, "no address known for endpoint %u (add_peer was not called)", hop);
        *rc = COC_ENOROUTE;
        return NULL;
    }
    char where[160];
    int fd;
    if (p->unix_name[0]) {
        fd = coc__sock_connect_unix(p->unix_name);
        snprintf(where, sizeof where, "unix:@%s", p->unix_name);
    } else {
        fd = coc__sock_connect_tcp(p->ip, p->port);
        snprintf(where, sizeof where, "tcp://%s:%u", p->ip, p->port);
    }
    if (fd == -EAGAIN && p->unix_name[0]) { /* sock.c waited for room in its backlog */
        coc__log(e, "cannot connect to endpoint %u at %s: its listen backlog stayed full for "
                 "%d ms (it accepts no connections)", hop, where, COC__UNIX_BACKLOG_WAIT_MS);
        fd = COC_ETIMEDOUT;
    } else if (fd < 0) {
        coc__log(e, "cannot connect to endpoint %u at %s: %s", hop, where, coc_strerror(fd));
    }
    if (fd < 0) {
        *rc = fd;
        return NULL;
    }
    coc__conn *c = conn_new(e, fd, 1, p->unix_name[0] != 0, hop, where);
    if (!c) {
        *rc = -ENOMEM;
        return NULL;
    }
    c->delay_ns = p->delay_ns;
    p->conn_key = c->key;
    return c;
}

/* Name an accepted connection's other end for log lines: its TCP address, or the process
 * at the other end of a unix socket. */
static void accepted_from(int fd, int unix_, char *where, size_t len)
{
    struct sockaddr_in sa;
    struct ucred cred;
    socklen_t n = unix_ ? sizeof cred : sizeof sa;
    if (unix_ && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0) {
        snprintf(where, len, "unix from pid %d", (int)cred.pid);
    } else if (!unix_ && getpeername(fd, (struct sockaddr *)&sa, &n) == 0 && sa.sin_family == AF_INET) {
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
        snprintf(where, len, "tcp from %s:%u", ip, ntohs(sa.sin_port));
    } else {
        snprintf(where, len, "%s, accepted", unix_ ? "unix" : "tcp");
    }
}

int coc__conn_accept(coc_engine *e, int lfd, int unix_)
{
    for (;;) {
        int fd = coc__sock_accept(lfd, &e->reserve_fd);
        if (fd == -EAGAIN || fd == -EWOULDBLOCK)
            return 0;
        if (fd < 0) {
            coc__log(e, "accept failed: %s", coc_strerror(fd));
            return fd;
        }
        char where[64];
        accepted_from(fd, unix_, where, sizeof where);
        conn_new(e, fd, 0, unix_, 0, where);
    }
}

/* ---- reading --------------------------------------------------------------------------- */

static void payload_end(coc__conn *c)
{
    c->rstate = COC__RX_HDR;
    if (c->rfwding) {
        c->rfwding = 0;
        c->rfwd = NULL;
        c->rfwd_out = NULL;
    } else {
        coc__frame_end(c);
    }
    c->sink = NULL;
    c->sink_cap = 0;
}

static void payload_start(coc__conn *c)
{
    c->rstate = COC__RX_HDR;
    c->rleft = c->rh.len - c->rpre; /* forward_begin may have taken some already */
    c->rdone = c->rpre;
    c->rpre = 0;
    if (c->rleft)
        c->rstate = COC__RX_PAYLOAD;
    else
        payload_end(c);
}

/* n payload bytes at src (which may already be their final place) */
static void payload_bytes(coc__conn *c, const uint8_t *src, size_t n)
{
    if (c->rfwding) {
        coc__forward_data(c, src, n);
    } else if (c->rdone < c->sink_cap) {
        uint64_t keep = c->sink_cap - c->rdone < n ? c->sink_cap - c->rdone : n;
        if (c->sink + c->rdone != src)
            memcpy(c->sink + c->rdone, src, keep);
    }
    c->rdone += n;
    c->rleft -= n;
    if (!c->rleft)
        payload_end(c);
}

/* Where the rest of the payload may be read straight into, or NULL. */
static uint8_t *direct_target(coc__conn *c, size_t *max)
{
    if (c->rfwding) {
        if (!c->rfwd)
            return NULL;
        *max = c->rleft;
        return c->rfwd->owned + c->rfwd->filled;
    }
    if (c->rdone >= c->sink_cap)
        return NULL;
    *max = c->sink_cap - c->rdone < c->rleft ? c->sink_cap - c->rdone : c->rleft;
    return c->sink + c->rdone;
}

static int frame_header(coc__conn *c)
{
    const char *why = NULL;
    if (coc__hdr_decode(c->rbuf + c->rpos, &c->rh, &why) < 0) {
        c->why = why;
        return COC_EPROTO;
    }
    c->rpos += COC__HDR_LEN;
    if (coc__hs_source_ok(c, &c->rh) < 0)
        return COC_EPROTO;
    if (c->rh.dest != c->e->self) {
        if (!c->e->forward) {
            c->why = "frame for another endpoint, and this one does not forward";
            return COC_EPROTO;
        }
        c->rfwding = 1;
        int rc = coc__forward_begin(c);
        if (rc != 0)
            return rc; /* 1: paused on a full window */
    } else {
        int rc = coc__frame_begin(c);
        if (rc < 0)
            return rc;
    }
    payload_start(c);
    return 0;
}

static int conn_read(coc__conn *c);

int coc__conn_unpause(coc__conn *c)
{
    int rc = coc__forward_begin(c);
    if (rc == 1)
        return 0; /* paused again */
    pthread_mutex_lock(&c->e->lock);
    coc__conn_set_in(c, 1);
    pthread_mutex_unlock(&c->e->lock);
    if (rc < 0)
        return rc;
    payload_start(c);
    rc = coc__conn_parse(c);
    if (rc >= 0 && c->rec && coc__rec_rx_ready(c->rec))
        rc = conn_read(c); /* records already read from the socket: no event will come */
    return rc;
}

int coc__conn_parse(coc__conn *c)
{
    c->rx_count++; /* liveness: bytes came (reliable.c) */
    for (;;) {
        size_t avail = c->rlen - c->rpos;
        int rc;
        switch (c->rstate) {
        case COC__RX_HELLO:
            if (avail < COC__HELLO_LEN)
                return 0;
            c->rpos += COC__HELLO_LEN;
            if ((rc = coc__hs_hello(c, c->rbuf + c->rpos - COC__HELLO_LEN)) < 0)
                return rc;
            c->rstate = COC__RX_PROOF;
            break;
        case COC__RX_PROOF:
            if (avail < COC__PROOF_LEN)
                return 0;
            c->rpos += COC__PROOF_LEN;
            if ((rc = coc__hs_proof(c, c->rbuf + c->rpos - COC__PROOF_LEN)) < 0)
                return rc;
            c->rstate = COC__RX_HDR;
            if (c->rec) { /* what follows are records: hand them to the record layer */
                size_t room;
                memcpy(coc__rec_rx_space(c->rec, &room), c->rbuf + c->rpos, c->rlen - c->rpos);
                coc__rec_rx_fed(c->rec, c->rlen - c->rpos);
                c->rlen = c->rpos;
            }
            if (c->ring)
                c->rlen = c->rpos; /* what follows on the socket are doorbell bytes */
            break;
        case COC__RX_HDR:
            if (avail < COC__HDR_LEN)
                return 0;
            rc = frame_header(c);
            if (rc < 0)
                return rc;
            if (rc == 1) {
                c->rstate = COC__RX_PAUSED;
                return 0;
            }
            break;
        case COC__RX_PAYLOAD: {
            if (!avail)
                return 0;
            size_t n = avail < c->rleft ? avail : c->rleft;
            c->rpos += n;
            payload_bytes(c, c->rbuf + c->rpos - n, n);
            break;
        }
        default: /* paused */
            return 0;
        }
    }
}

#define READS_PER_EVENT 32 /* then let other connections have their turn */

/* Ring the peer's doorbell. A full socket means a bell is pending already; a broken one
 * shows up on the reading side. */
static void doorbell(coc__conn *c)
{
    if (send(c->fd, "", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
    }
}

/* Plaintext of the record layer into dst, reading the socket while no whole record is
 * buffered. Returns less than want only when the socket has nothing more now (or ended);
 * -1 with errno EBADMSG (c->why set) for a bad record. */
static ssize_t rec_rx(coc__conn *c, uint8_t *dst, size_t want)
{
    coc_engine *e = c->e;
    size_t done = 0;
    for (;;) {
        size_t wire, plain, room;
        const char *why = NULL;
        ssize_t n = coc__rec_rx_take(c->rec, dst + done, want - done, &why, &wire, &plain);
        if (n < 0) {
            c->why = why;
            errno = EBADMSG;
            return -1;
        }
        __atomic_fetch_add(&e->stats.record_wire_received, wire, __ATOMIC_RELAXED);
        __atomic_fetch_add(&e->stats.record_plain_received, plain, __ATOMIC_RELAXED);
        done += (size_t)n;
        uint8_t *space = coc__rec_rx_space(c->rec, &room);
        if (done == want || !room)
            return (ssize_t)done;
        ssize_t got = read(c->fd, space, room);
        if (got > 0) {
            coc__rec_rx_fed(c->rec, (size_t)got);
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        return done ? (ssize_t)done : got; /* an end or error shows on the next call */
    }
}

/* Bytes of the stream into dst: > 0 read, 0 end of stream, -1 with errno. */
static ssize_t rx_bytes(coc__conn *c, uint8_t *dst, size_t want)
{
    if (c->rec)
        return rec_rx(c, dst, want);
    if (c->ring) {
        int bell;
        size_t n = coc__ring_read(&c->rx, dst, want, &bell);
        if (bell)
            doorbell(c);
        if (n)
            return (ssize_t)n;
        errno = EAGAIN;
        return -1;
    }
    if (c->rstate == COC__RX_HELLO && c->unix_ && !c->outgoing)
        return coc__hs_recv_hello(c, dst, want);
    return read(c->fd, dst, want);
}

static int conn_read(coc__conn *c)
{
    /* records the layer holds are read on: no socket event would report them */
    for (int round = 0; round < READS_PER_EVENT || (c->rec && coc__rec_rx_ready(c->rec)); round++) {
        if (c->rstate == COC__RX_PAUSED || c->state == COC__CS_DEAD)
            return 0;
        uint8_t *dst = NULL;
        size_t want = 0;
        int direct = c->rstate == COC__RX_PAYLOAD && c->rpos == c->rlen && c->rleft >= COC__DIRECT_READ &&
                     (dst = direct_target(c, &want)) != NULL;
        if (!direct) {
            if (c->rpos) {
                memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
            }
            dst = c->rbuf + c->rlen;
            want = COC__RBUF - c->rlen;
        }
        ssize_t n = rx_bytes(c, dst, want);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EBADMSG && c->rec)
                return COC_EPROTO; /* c->why names the bad record */
            c->why = "read failed";
            return -errno;
        }
        if (n == 0) {
            c->why = c->rstate == COC__RX_PAYLOAD ? "closed in the middle of a frame"
                     : !c->authed ? "closed during the handshake: the peer refused it (its log says why)"
                                  : "closed";
            return COC_EPEERLOST;
        }
        if (direct) {
            payload_bytes(c, dst, (size_t)n);
        } else {
            c->rlen += (size_t)n;
            int rc = coc__conn_parse(c);
            if (rc < 0)
                return rc;
        }
        if ((size_t)n < want && !(c->rec && coc__rec_rx_ready(c->rec)))
            return 0;
    }
    return 0; /* more to read: level-triggered polling reports it again */
}

static void read_or_fail(coc_engine *e, coc__conn *c, int rc)
{
    if (rc >= 0)
        rc = conn_read(c);
    if (rc < 0) {
        pthread_mutex_lock(&e->lock);
        coc__conn_fail(c, rc, c->why ? c->why : "error");
        pthread_mutex_unlock(&e->lock);
    }
}

/* The socket of a shared-memory connection is readable: doorbells (data, or room for our
 * queued frames) or its end. The ring is read before an end is reported, so frames the
 * peer wrote before closing (its BYE) are not lost. */
static void ring_event(coc_engine *e, coc__conn *c)
{
    uint8_t bells[256];
    ssize_t n;
    while ((n = read(c->fd, bells, sizeof bells)) > 0)
        ;
    int rc = 0;
    if (n == 0) {
        c->why = "closed";
        rc = COC_EPEERLOST;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        c->why = "read failed";
        rc = -errno;
    }
    pthread_mutex_lock(&e->lock);
    if (c->head)
        coc__conn_flush(c);
    pthread_mutex_unlock(&e->lock);
    if (rc < 0 && c->rstate != COC__RX_PAUSED)
        while (coc__ring_avail(&c->rx) && c->rstate != COC__RX_PAUSED && c->state != COC__CS_DEAD)
            if (conn_read(c) < 0)
                break;
    read_or_fail(e, c, rc);
}

void coc__conn_poll_rings(coc_engine *e)
{
    for (coc__conn *c = e->shm; c; c = c->next_shm)
        if (c->state != COC__CS_DEAD && c->rstate != COC__RX_PAUSED && coc__ring_avail(&c->rx))
            read_or_fail(e, c, 0);
}

int coc__conn_rings_idle(coc_engine *e, int on)
{
    int data = 0;
    for (coc__conn *c = e->shm; c; c = c->next_shm) {
        if (c->state == COC__CS_DEAD || c->rstate == COC__RX_PAUSED)
            continue;
        if (!on)
            coc__ring_wake(&c->rx);
        else
            data |= coc__ring_sleep(&c->rx);
    }
    return data;
}

void coc__conn_event(coc_engine *e, coc__conn *c, unsigned events)
{
    if (c->state == COC__CS_CONNECTING && (events & (COC__POLL_OUT | COC__POLL_ERR))) {
        int rc = coc__sock_error(c->fd);
        pthread_mutex_lock(&e->lock);
        if (rc < 0) {
            coc__log(e, "cannot connect to %s: %s", c->name, coc_strerror(rc));
            coc__conn_fail(c, rc, "connect failed");
        } else {
            c->state = COC__CS_HANDSHAKE;
            coc__conn_flush(c);
        }
        pthread_mutex_unlock(&e->lock);
        if (rc < 0)
            return;
    } else if (events & COC__POLL_OUT) {
        pthread_mutex_lock(&e->lock);
        coc__conn_flush(c);
        pthread_mutex_unlock(&e->lock);
    }
    if ((events & COC__POLL_IN) && c->ring && c->state != COC__CS_DEAD) {
        ring_event(e, c);
        return;
    }
    if ((events & COC__POLL_IN) && c->state != COC__CS_CONNECTING && c->state != COC__CS_DEAD) {
        int rc = conn_read(c);
        if (rc < 0) {
            pthread_mutex_lock(&e->lock);
            coc__conn_fail(c, rc, c->why ? c->why : "error");
            pthread_mutex_unlock(&e->lock);
        }
    }
}

/* ---- writing --------------------------------------------------------------------------- */

static void arm_timer(coc_engine *e, uint64_t due)
{
    if (e->timer_due && e->timer_due <= due)
        return;
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(due / 1000000000u),
                                          .tv_nsec = (long)(due % 1000000000u)}};
    timerfd_settime(e->tfd, TFD_TIMER_ABSTIME, &its, NULL);
    e->timer_due = due;
}

static size_t frame_len(const coc__item *it)
{
    return it->kind == COC__IT_FWD ? it->size : COC__HDR_LEN + it->len;
}

int coc__stream_next(coc_engine *e, coc__item *it)
{
    const coc__stripe *sp = it->stripe;
    if (!it->sub) {
        while (it->spos < sp->nfrag && sp->lane[it->spos] != it->lane)
            it->spos++;
        if (it->spos == sp->nfrag)
            return 0;
    }
    uint64_t end = (it->spos + 1) * e->cfg.fragment_size;
    if (end > it->sh.total)
        end = it->sh.total;
    uint64_t offset = it->spos * e->cfg.fragment_size + it->sub;
    uint64_t n = end - offset;
    it->data = coc__send_bytes(it->req, offset, &n); /* a gather's buffer may end first */
    if (offset + n == end) {
        it->spos++;
        it->sub = 0;
    } else {
        it->sub += n;
    }
    it->sh.offset = offset;
    it->sh.len = (uint32_t)n;
    coc__hdr_encode(&it->sh, it->hdr);
    it->len = n;
    it->off = 0;
    e->stats.frames_sent++;
    e->stats.bytes_sent += n;
    return 1;
}

/* An item leaves the queue: written (error 0) or dropped with its connection. */
static void item_release(coc__conn *c, coc__item *it, int error)
{
    coc_engine *e = c->e;
    coc_request *r = it->req;
    if (r) {
        /* a striped send completes when its last lane is done; one lost lane fails it,
         * and its receiver hears so (its other lanes may have delivered all they had) */
        if (error && r->keep && it->kind == COC__IT_STREAM)
            r->relane = 1; /* its fragments go again after the failover */
        if (error && !r->doomed && !r->keep) {
            r->doomed = error;
            if (it->kind == COC__IT_STREAM && atomic_load(&r->state) != COC__REQ_DONE)
                coc__stream_failed(e, r, it->sh.rcookie);
        }
        /* a send whose bytes cross a gateway (reliable.c) is kept: an eager one lost here
         * is sent again from its copy (it completes); a rendezvous one waits for the
         * receiver's DONE, and a lost lane is streamed again after the failover */
        if (r->busy && --r->busy == 0 &&
            (!r->keep || r->phase != COC__RDV || r->confirmed || r->doomed)) {
            r->st.count = r->len;
            coc__complete(e, r, r->doomed);
        }
    }
    if (it->stripe && --it->stripe->refs == 0)
        free(it->stripe);
    if (it->kind == COC__IT_FWD) {
        coc__forward_done(c, it);
    } else if (it->owned) {
        c->copied -= it->len;
        free(it->owned);
    }
    free(it);
}

/* The head item's current frame is written: move on. Returns 1 when the item is gone. */
static int frame_written(coc__conn *c, coc__item *it)
{
    coc_engine *e = c->e;
    if (it->kind == COC__IT_STREAM && !it->req->doomed && coc__stream_next(e, it))
        return 0;
    c->head = it->next;
    if (!c->head)
        c->tail = NULL;
    item_release(c, it, 0);
    return 1;
}

static void consume(coc__conn *c, size_t n)
{
    while (n && c->head) {
        coc__item *it = c->head;
        size_t end = it->kind == COC__IT_FWD ? it->filled : frame_len(it);
        size_t take = end - it->off < n ? end - it->off : n;
        it->off += take;
        n -= take;
        if (it->off == frame_len(it))
            frame_written(c, it);
    }
}

/* Write iov's bytes as records: first what is pending of the last record, then one record
 * after another while the socket takes them. Returns the iov bytes taken into records
 * (a record taken but not yet all written is pending: the socket is watched for room),
 * or -1 with errno (EAGAIN: none taken). */
static ssize_t rec_tx(coc__conn *c, const struct iovec *iov, int cnt)
{
    coc_engine *e = c->e;
    size_t total = 0, taken = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    for (;;) {
        const uint8_t *data;
        size_t pending = coc__rec_tx_pending(c->rec, &data);
        if (pending) {
            ssize_t n = send(c->fd, data, pending, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                return -1;
            if (n > 0)
                coc__rec_tx_done(c->rec, (size_t)n);
            if (n < 0 || (size_t)n < pending)
                break; /* the socket is full */
            continue;
        }
        if (taken == total)
            break;
        struct iovec rest[IOV_MAX_BATCH];
        int nrest = 0;
        size_t skip = taken;
        for (int i = 0; i < cnt; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            rest[nrest++] = (struct iovec){(uint8_t *)iov[i].iov_base + skip, iov[i].iov_len - skip};
            skip = 0;
        }
        size_t wire;
        int raw;
        ssize_t n = coc__rec_tx_seal(c->rec, rest, nrest, &wire, &raw);
        if (n < 0) {
            errno = EIO;
            return -1;
        }
        taken += (size_t)n;
        e->stats.record_plain_sent += (size_t)n;
        e->stats.record_wire_sent += wire;
        e->stats.records_raw += (unsigned)raw;
    }
    if (coc__rec_tx_pending(c->rec, NULL))
        set_out(c, 1);
    if (!taken && total) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)taken;
}

/* Write iov to the peer: into the ring once it is in use, else onto the socket.
 * Returns bytes written or -1 with errno (EAGAIN: full; a full ring's reader rings). */
static ssize_t tx_bytes(coc__conn *c, struct iovec *iov, int cnt)
{
    if (c->rec)
        return rec_tx(c, iov, cnt);
    if (!on_ring(c)) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
        return sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    }
    for (;;) {
        int bell;
        size_t n = coc__ring_write(&c->tx, iov, cnt, &bell);
        if (bell)
            doorbell(c);
        if (n)
            return (ssize_t)n;
        if (!coc__ring_want_room(&c->tx)) {
            errno = EAGAIN;
            return -1;
        }
    }
}

void coc__conn_flush(coc__conn *c)
{
    coc_engine *e = c->e;
    if (c->state == COC__CS_DEAD || c->state == COC__CS_CONNECTING)
        return;
    int rc = coc__hs_write(c);
    if (rc < 0) {
        coc__conn_fail(c, rc, "write failed");
        return;
    }
    if (rc == 1 || !c->authed) {
        set_out(c, rc == 1);
        return;
    }
    if (c->rec && !c->head) { /* only the rest of a record to write */
        if (rec_tx(c, NULL, 0) < 0)
            coc__conn_fail(c, -errno, "write failed");
        else
            set_out(c, coc__rec_tx_pending(c->rec, NULL) != 0);
        return;
    }
    uint64_t now = 0;
    while (c->head) {
        struct iovec iov[IOV_MAX_BATCH];
        int cnt = 0;
        size_t total = 0;
        for (coc__item *it = c->head; it && cnt + 2 <= IOV_MAX_BATCH; it = it->next) {
            if (it->due_ns) {
                if (!now)
                    now = coc__now_ns();
                if (it->due_ns > now) {
                    arm_timer(e, it->due_ns);
                    break;
                }
            }
            if (it->kind == COC__IT_FWD) {
                if (it->filled > it->off) {
                    iov[cnt++] = (struct iovec){it->owned + it->off, it->filled - it->off};
                    total += it->filled - it->off;
                }
                if (it->filled < it->size)
                    break; /* cut-through: the rest has not arrived yet */
                continue;
            }
            if (it->off < COC__HDR_LEN) {
                iov[cnt++] = (struct iovec){it->hdr + it->off, COC__HDR_LEN - it->off};
                total += COC__HDR_LEN - it->off;
            }
            size_t done = it->off > COC__HDR_LEN ? it->off - COC__HDR_LEN : 0;
            if (it->len > done) {
                iov[cnt++] = (struct iovec){(void *)(it->data + done), it->len - done};
                total += it->len - done;
            }
            if (it->kind == COC__IT_STREAM)
                break; /* its next frame's header is built when this one is out */
        }
        if (!cnt)
            break;
        ssize_t n = tx_bytes(c, iov, cnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_out(c, 1);
                return;
            }
            coc__conn_fail(c, -errno, "write failed");
            return;
        }
        consume(c, (size_t)n);
        if ((size_t)n < total) {
            if (on_ring(c) && coc__ring_want_room(&c->tx))
                continue; /* room again already; else the reader rings when it makes some */
            set_out(c, 1);
            return;
        }
    }
    set_out(c, coc__rec_tx_pending(c->rec, NULL) != 0);
}

/* A gateway's forwarded frame queued while the progress holder handles a batch of input
 * (e->corking) waits for the end of the batch, when coc__conn_uncork writes each queue
 * once: the frames of one read leave in one sendmsg, not one each (issue 17). Returns
 * 1 when the frame waits. */
static int cork(coc__conn *c, const coc__item *it)
{
    coc_engine *e = c->e;
    if (!e->corking || it->kind != COC__IT_FWD)
        return 0;
    for (int i = 0; i < e->ncorked; i++)
        if (e->corked[i] == c)
            return 1;
    if (e->ncorked == COC__CORK_MAX)
        return 0;
    e->corked[e->ncorked++] = c;
    return 1;
}

void coc__conn_uncork(coc_engine *e)
{
    for (int i = 0; i < e->ncorked; i++)
        coc__conn_flush(e->corked[i]); /* a dead one is not freed before housekeeping */
    e->ncorked = 0;
}

void coc__conn_push(coc__conn *c, coc__item *it)
{
    if (c->delay_ns)
        it->due_ns = coc__now_ns() + c->delay_ns;
    it->next = NULL;
    if (c->tail)
        c->tail->next = it;
    else
        c->head = it;
    c->tail = it;
    if (c->head == it && !cork(c, it)) /* else the queue waits for the socket or input */
        coc__conn_flush(c);
}

int coc__conn_send(coc__conn *c, const coc__hdr *h, const void *payload, coc_request *req)
{
    uint8_t hdr[COC__HDR_LEN];
    size_t off = 0;
    coc__hdr_encode(h, hdr);
    if (c->state == COC__CS_OPEN && !c->head && !c->delay_ns && c->hs_off == c->hs_len) {
        /* fast path: nothing queued, write from the caller's thread */
        struct iovec iov[2] = {{hdr, COC__HDR_LEN}, {(void *)payload, h->len}};
        ssize_t n = tx_bytes(c, iov, h->len ? 2 : 1);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            coc__conn_fail(c, -errno, "write failed");
            return COC_EPEERLOST;
        }
        if (n > 0)
            off = (size_t)n;
        if (off == COC__HDR_LEN + h->len)
            return 0;
    }
    coc__item *it = calloc(1, sizeof *it);
    if (!it)
        return -ENOMEM;
    it->kind = COC__IT_FRAME;
    memcpy(it->hdr, hdr, COC__HDR_LEN);
    it->len = h->len;
    it->off = off;
    it->data = payload;
    int pending = 0;
    if (req && (c->state != COC__CS_OPEN || c->copied + h->len > COC__COPY_BUDGET)) {
        /* not connected yet (if the set-up fails, the send must fail, not vanish), or
         * the receiver is not keeping up: do not copy, let the sender wait */
        it->req = req;
        req->busy = 1;
        pending = 1;
    } else if (h->len) {
        it->owned = malloc(h->len);
        if (!it->owned) {
            free(it);
            return -ENOMEM;
        }
        memcpy(it->owned, payload, h->len);
        it->data = it->owned;
        c->copied += h->len;
    }
    coc__conn_push(c, it);
    return pending;
}

void coc__conn_flush_delayed(coc_engine *e)
{
    e->timer_due = 0;
    for (size_t i = 0; i < COC__MAX_CONNS; i++) {
        coc__conn *c = e->conns[i];
        if (c && c->delay_ns && c->head)
            coc__conn_flush(c);
    }
}

/* ---- ending ---------------------------------------------------------------------------- */

static void conn_free(coc_engine *e, coc__conn *c)
{
    uint32_t slot = (uint32_t)c->key - COC__KEY_CONN_MIN;
    if (c->authed)
        e->stats.connections_open--;
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
    coc__peer *p = coc__map_get(&e->peers, c->peer_id);
    if (p && p->conn_key == c->key)
        p->conn_key = 0;
    while (c->head) {
        coc__item *it = c->head;
        c->head = it->next;
        item_release(c, it, COC_EPEERLOST);
    }
    if (failover)
        coc__rel_relane(e); /* its lanes go again now, not at the safety net's next tick */
    if (c->rumsg) {
        free(c->rumsg->data);
        free(c->rumsg);
    }
    for (coc__conn **pp = &e->shm; *pp; pp = &(*pp)->next_shm)
        if (*pp == c) {
            *pp = c->next_shm;
            break;
        }
    shm_unmap(c);
    coc__rec_free(c->rec);
    __atomic_store_n(&e->conns[slot], NULL, __ATOMIC_RELEASE);
    close(c->fd);
    free(c->rbuf);
    free(c->flows);
    free(c);
}

void coc__conn_reap(coc_engine *e)
{
    for (size_t i = 0; i < COC__MAX_CONNS && e->ndead; i++) {
        coc__conn *c = e->conns[i];
        if (c && c->state == COC__CS_DEAD) {
            e->ndead--;
            conn_free(e, c);
        }
    }
}

void coc__conn_sweep(coc_engine *e)
{
    uint64_t now = coc__now_ns();
    for (size_t i = 0; i < COC__MAX_CONNS && e->nhandshaking; i++) {
        coc__conn *c = e->conns[i];
        if (c && c->state != COC__CS_OPEN && c->state != COC__CS_DEAD && now > c->deadline_ns) {
            coc__log(e, "%s did not finish the handshake in time; dropped", c->name);
            coc__conn_fail(c, COC_ETIMEDOUT, "handshake deadline passed");
        }
    }
}
