/*
 * conn.c — one connection's life: set-up (connect/accept), failure and the end (freeing
 * it, telling its users). Its first bytes, the handshake, are handshake.c's; reading and
 * parsing frames is conn_rx.c's, writing the send queue conn_tx.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "sock.h"

coc__conn *coc__conn_get(coc_engine *e, uint64_t key)
{
    uint32_t slot = (uint32_t)key - COC__KEY_CONN_MIN;
    if ((uint32_t)key < COC__KEY_CONN_MIN || slot >= COC__MAX_CONNS)
        return NULL;
    coc__conn *c = __atomic_load_n(&e->conns[slot], __ATOMIC_ACQUIRE);
    return c && c->key == key ? c : NULL;
}

coc__conn *coc__peer_conn(coc_engine *e, const coc__peer *p)
{
    coc__conn *c = p && p->conn_key ? coc__conn_get(e, p->conn_key) : NULL;
    return c && c->state != COC__CS_DEAD ? c : NULL;
}

void coc__conn_set_in(coc__conn *c, int on)
{
    set_events(c, on ? c->events | COC__POLL_IN : c->events & ~COC__POLL_IN);
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
    c->on = e->conn_calls;
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
    c->mine.incarnation = e->incarnation;
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
    coc__conn *live = coc__peer_conn(e, p);
    if (live)
        return live;
    if (p)
        p->conn_key = 0;
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

/* ---- ending ---------------------------------------------------------------------------- */

static void conn_free(coc_engine *e, coc__conn *c)
{
    uint32_t slot = (uint32_t)c->key - COC__KEY_CONN_MIN;
    if (c->authed)
        e->stats.connections_open--;
    int failover = c->on->on_closing(c);
    coc__peer *p = coc__map_get(&e->peers, c->peer_id);
    if (p && p->conn_key == c->key)
        p->conn_key = 0;
    for (coc__link *l; (l = coc__list_pop(&c->queue)) != NULL;)
        coc__item_release(c, COC__ENTRY(l, coc__item, link), COC_EPEERLOST);
    c->on->on_closed(e, failover);
    if (c->rumsg) {
        free(c->rumsg->data);
        free(c->rumsg);
    }
    if (coc__list_has(&e->shm, &c->shm_link))
        coc__list_remove(&e->shm, &c->shm_link);
    for (int i = 0; i < e->ncorked; i++)
        if (e->corked[i] == c)
            e->corked[i] = e->corked[--e->ncorked]; /* a held queue: never flushed now */
    shm_unmap(c);
    coc__rec_free(c->rec);
    __atomic_store_n(&e->conns[slot], NULL, __ATOMIC_RELEASE);
    close(c->fd);
    free(c->rbuf);
    coc__flows_free(&c->flows);
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
