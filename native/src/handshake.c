/*
 * handshake.c — the first bytes of a connection: hellos, proofs, and the shared-memory
 * segment a same-host connector offers with its hello (docs/wire-protocol.md, "Handshake").
 *
 * Each end sends its hello at once; on the other's hello it sends its proof, and on the
 * other's proof the connection is open. Nothing the peer sends after its hello is parsed
 * before its proof has checked out.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "engine.h"
#include "crypto.h"
#include "sock.h"

/* Map a segment's two rings: the connector writes ring 0, the acceptor ring 1. */
static int shm_map(coc__conn *c, int fd, size_t size)
{
    int rc = coc__ring_map(&c->tx, fd, size, !c->outgoing);
    if (rc >= 0)
        rc = coc__ring_map(&c->rx, fd, size, c->outgoing);
    if (rc < 0)
        coc__ring_unmap(&c->tx);
    return rc;
}

/* Connector to a same-host peer: offer a shared-memory segment with the hello; on any
 * failure the connection simply stays on the socket. */
void coc__hs_shm_offer(coc__conn *c)
{
    int fd = coc__shm_create(c->e->shm_ring);
    int rc = fd < 0 ? fd : shm_map(c, fd, c->e->shm_ring);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        coc__log(c->e, "%s: no shared memory (%s); using the socket", c->name, coc_strerror(rc));
        return;
    }
    c->shm_fd = fd;
    c->mine.flags |= COC__HELLO_SHM;
}

/* Connector to a peer whose link is marked (coc_engine_set_peer_wire), over TCP or a unix
 * socket alike: ask for the record layer in the hello. */
void coc__hs_wire_offer(coc__conn *c, uint32_t wire)
{
    c->mine.flags |= (wire & COC_WIRE_ENCRYPT ? COC__HELLO_SEAL : 0) |
                     (wire & COC_WIRE_ZSTD ? COC__HELLO_ZSTD : 0) |
                     (wire & COC_WIRE_LZ4 ? COC__HELLO_LZ4 : 0);
}

/* lock. Acceptor: its own marking of the peer whose hello came. A peer it must talk to
 * encrypted that does not ask for encryption is refused before any proof. */
static int wire_policy(coc__conn *c)
{
    const coc__peer *p = coc__map_get(&c->e->peers, c->peer_id);
    c->wire = p ? p->wire : 0;
    if ((c->wire & COC_WIRE_ENCRYPT) && !(c->theirs.flags & COC__HELLO_SEAL)) {
        c->why = "its link must be encrypted (the topology marks its network), but its hello "
                 "does not ask for encryption";
        return COC_EAUTH;
    }
    return 0;
}

/* lock: at a good proof, start the record layer when the connector asked for it. */
static int start_records(coc__conn *c)
{
    const coc__hello *conn = c->outgoing ? &c->mine : &c->theirs;
    const coc__hello *acc = c->outgoing ? &c->theirs : &c->mine;
    if (!(conn->flags & COC__HELLO_RECORDS))
        return 0;
    uint32_t own = c->outgoing ? 0 : c->wire;
    int codec = own & COC_WIRE_ZSTD               ? COC__CODEC_ZSTD
                : own & COC_WIRE_LZ4              ? COC__CODEC_LZ4
                : conn->flags & COC__HELLO_ZSTD   ? COC__CODEC_ZSTD
                : conn->flags & COC__HELLO_LZ4    ? COC__CODEC_LZ4
                                                  : COC__CODEC_NONE;
    int seal = (conn->flags & COC__HELLO_SEAL) != 0;
    c->rec = coc__rec_new(c->pair_key, COC_KEY_LEN, conn->nonce, acc->nonce, COC__NONCE_LEN,
                          conn->flags, c->outgoing, seal, codec);
    if (!c->rec)
        return -ENOMEM;
    static const char *const codecs[] = {"uncompressed", "zstd", "lz4"};
    coc__log(c->e, "%s: record layer, %s, %s", c->name, seal ? "encrypted" : "not encrypted",
             codecs[codec]);
    return 0;
}

static const coc_peer_key *issued_key(const coc_engine *e, uint32_t id)
{
    size_t lo = 0, hi = e->nkeys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->keys[mid].id == id)
            return &e->keys[mid];
        if (e->keys[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Find the key this connection's proofs use, for the id and kind the peer's hello claims:
 * derived from the job's secret by a trusted engine, else the one issued for that peer.
 * A peer whose id has no key here, or whose claimed kind differs from the one its key was
 * issued for, is refused before anything is proved (COC_EAUTH). */
static int find_pair_key(coc__conn *c)
{
    coc_engine *e = c->e;
    uint32_t kind = c->theirs.flags & COC__HELLO_GATEWAY ? COC_PEER_GATEWAY : 0;
    if (e->cfg.secret) {
        coc_pair_key(e->secret, e->cfg.secret_len, e->self, e->forward ? COC_PEER_GATEWAY : 0,
                     c->theirs.id, kind, c->pair_key);
        return 0;
    }
    const coc_peer_key *k = issued_key(e, c->theirs.id);
    if (!k) {
        c->why = "it claims an endpoint id this endpoint holds no key for "
                 "(not one of its direct peers)";
        return COC_EAUTH;
    }
    if (k->flags != kind) {
        c->why = kind ? "it claims to be a gateway, but its id was not issued as one"
                      : "its id was issued to a gateway, but it does not claim to forward";
        return COC_EAUTH;
    }
    memcpy(c->pair_key, k->key, COC_KEY_LEN);
    return 0;
}

int coc__hs_hello(coc__conn *c, const uint8_t *bytes)
{
    coc_engine *e = c->e;
    const char *why = NULL;
    if (coc__hello_decode(bytes, &c->theirs, &why) < 0) {
        c->why = why;
        return COC_EAUTH;
    }
    if (c->theirs.role == c->mine.role) {
        c->why = "both ends claim the same role";
        return COC_EAUTH;
    }
    if (c->outgoing && c->theirs.id != c->peer_id) {
        c->why = "the endpoint at that address has another id";
        return COC_EAUTH;
    }
    if (!c->outgoing && (c->theirs.flags & COC__HELLO_SHM)) {
        /* the segment came with the hello (SCM_RIGHTS); used only once the proofs pass */
        int fd = c->shm_fd;
        c->shm_fd = -1;
        int64_t size = fd >= 0 && c->unix_ ? coc__shm_ring_size(fd) : COC_EINVAL;
        int rc = size < 0 ? (int)size : shm_map(c, fd, (size_t)size);
        if (fd >= 0)
            close(fd);
        if (rc < 0) {
            c->why = "shared memory offered but not usable";
            return COC_EPROTO;
        }
    } else if (c->shm_fd >= 0 && !c->outgoing) {
        close(c->shm_fd); /* an fd nobody announced */
        c->shm_fd = -1;
    }
    if (!c->outgoing) {
        c->peer_id = c->theirs.id;
        snprintf(c->name, sizeof c->name, "endpoint %u (%s)", c->peer_id, c->where);
    }
    int rc = find_pair_key(c);
    if (rc < 0)
        return rc;
    const coc__hello *conn = c->outgoing ? &c->mine : &c->theirs;
    const coc__hello *acc = c->outgoing ? &c->theirs : &c->mine;
    pthread_mutex_lock(&e->lock);
    if (!c->outgoing && (rc = wire_policy(c)) < 0) {
        pthread_mutex_unlock(&e->lock);
        return rc;
    }
    coc__proof(c->pair_key, COC_KEY_LEN, c->mine.role, conn, acc, c->hs_out + c->hs_len);
    c->hs_len += COC__PROOF_LEN;
    coc__conn_flush(c);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

/* Has the other end of x closed it (or reset it)? Its end of stream decides, not whether
 * bytes wait: a peer that sent frames and then closed leaves both readable, and its FIN
 * may sit behind frames we have not read yet (a gateway stops reading a connection whose
 * forwarding window is full). POLLRDHUP reports that FIN whatever precedes it. */
static int ended(const coc__conn *x)
{
    struct pollfd p = {.fd = x->fd, .events = POLLRDHUP};
    int n;
    while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR)
        ;
    return n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/*
 * lock: another accepted, open connection from the same endpoint id that is still that
 * endpoint's, or NULL. An endpoint dials each peer once (it reuses the connection, or an
 * accepted one), so a second one while the first is alive is a second process claiming
 * the id: refused, whatever it proved. The first is no longer the endpoint's when it comes
 * from the same process (the same incarnation in its hello: the endpoint judged it dead and
 * dialed again) or when its other end closed it. Such a one is failed now, with any frames
 * of it still unread, and the new one accepted. The incarnation decides where the end of
 * stream cannot: over TCP, a close's FIN waits behind bytes the endpoint could not send yet
 * (our receive window is shut while we do not read a paused connection). The unread frames
 * are not lost: the endpoint that closed the connection by its verdict sends again what is
 * unacknowledged (or failed the sends).
 */
static const coc__conn *live_twin(coc__conn *c)
{
    coc_engine *e = c->e;
    for (size_t i = 0; i < COC__MAX_CONNS; i++) {
        coc__conn *x = e->conns[i];
        if (!x || x == c || x->outgoing || x->state != COC__CS_OPEN || x->bye ||
            x->peer_id != c->peer_id)
            continue;
        if (x->theirs.incarnation == c->theirs.incarnation)
            coc__conn_fail(x, COC_EPEERLOST, "replaced by its endpoint's new connection");
        else if (!ended(x))
            return x;
        else
            coc__conn_fail(x, COC_EPEERLOST, "closed; replaced by a new connection");
    }
    return NULL;
}

int coc__hs_source_ok(coc__conn *c, const coc__hdr *h)
{
    /* a gateway forwards frames of other endpoints: their sources were checked where they
     * entered the gateways (here, by this rule), and a gateway holds the job's secret */
    if (h->source == c->peer_id || (c->theirs.flags & COC__HELLO_GATEWAY))
        return 0;
    pthread_mutex_lock(&c->e->lock);
    coc__log(c->e, "%s sent a frame with source endpoint %u: only gateways send frames of "
             "other endpoints", c->name, h->source);
    pthread_mutex_unlock(&c->e->lock);
    c->why = "a frame whose source is not the sending endpoint";
    return COC_EPROTO;
}

int coc__hs_proof(coc__conn *c, const uint8_t *bytes)
{
    coc_engine *e = c->e;
    uint8_t want[COC__PROOF_LEN];
    const coc__hello *conn = c->outgoing ? &c->mine : &c->theirs;
    const coc__hello *acc = c->outgoing ? &c->theirs : &c->mine;
    coc__proof(c->pair_key, COC_KEY_LEN, c->theirs.role, conn, acc, want);
    if (!coc__ct_equal(want, bytes, COC__PROOF_LEN)) {
        c->why = "wrong proof: it does not hold the key of the endpoint id it claims";
        return COC_EAUTH;
    }
    pthread_mutex_lock(&e->lock);
    const coc__conn *twin = c->outgoing ? NULL : live_twin(c);
    if (twin) {
        c->duplicate = 1;
        c->why = "a second connection claiming an endpoint id that is connected";
        e->stats.duplicate_ids++;
        coc__log(e, "%s refused: endpoint %u is connected already (%s) and alive; a second "
                 "connection claiming its id is dropped", c->name, c->peer_id, twin->where);
        pthread_mutex_unlock(&e->lock);
        return COC_EAUTH;
    }
    int rc = c->state != COC__CS_DEAD ? start_records(c) : 0;
    if (rc < 0) {
        c->why = "no memory for its record layer";
        pthread_mutex_unlock(&e->lock);
        return rc;
    }
    if (c->state != COC__CS_DEAD) {
        c->authed = 1;
        c->state = COC__CS_OPEN;
        e->nhandshaking--;
        e->stats.connections_open++;
        coc__peer *p = coc__map_get(&e->peers, c->peer_id);
        if (!p && (p = calloc(1, sizeof *p)) != NULL) {
            p->id = c->peer_id;
            if (coc__map_put(&e->peers, p->id, p) < 0) {
                free(p);
                p = NULL;
            }
        }
        if (p && !coc__peer_conn(e, p)) {
            /* reuse an accepted connection for sending back (also in place of one the
             * twin check just failed: a dial back then finds this one) */
            p->conn_key = c->key;
            c->delay_ns = p->delay_ns;
        }
        if (c->tx.ctl) {
            c->ring = 1;
            coc__list_prepend(&e->shm, &c->shm_link);
            coc__log(e, "%s: shared memory, %zu KiB rings", c->name, c->rx.size >> 10);
        }
        /* an endpoint's waiter may sleep in this socket's recv (progress.c,
         * coc__progress_lone); a gateway's progress thread waits in the poller */
        if (!e->forward && !c->ring && !c->rec && coc__sock_block(c->fd, COC__BLOCK_SLICE_MS) == 0)
            c->blocking = 1;
        c->on->on_open(c);
        coc__conn_flush(c);
    }
    pthread_mutex_unlock(&e->lock);
    return 0;
}

/* The acceptor's first bytes: the hello may carry a shared-memory segment. */
ssize_t coc__hs_recv_hello(coc__conn *c, uint8_t *dst, size_t want)
{
    union { struct cmsghdr h; char buf[CMSG_SPACE(4 * sizeof(int))]; } ctl;
    struct iovec iov = {dst, want};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    for (struct cmsghdr *cm = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
            if (c->shm_fd < 0)
                c->shm_fd = fd;
            else
                close(fd); /* one segment per connection */
        }
    }
    return n;
}

/* The connector's hello carries its shared-memory segment (once sent, our copy of the
 * fd is closed; the mapping stays). */
static ssize_t send_hello(coc__conn *c)
{
    struct iovec iov = {c->hs_out + c->hs_off, c->hs_len - c->hs_off};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } ctl;
    if (c->shm_fd >= 0 && c->hs_off == 0) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &c->shm_fd, sizeof(int));
    }
    ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0 && c->shm_fd >= 0) {
        close(c->shm_fd);
        c->shm_fd = -1;
    }
    return n;
}

int coc__hs_write(coc__conn *c)
{
    while (c->hs_off < c->hs_len) {
        ssize_t n = send_hello(c);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 1;
            return -errno;
        }
        c->hs_off += (size_t)n;
    }
    return 0;
}
