/*
 * peers.c — what the engine knows of other endpoints: its own contact address, peers'
 * addresses (coc_engine_add_peer), routes by size class, connecting ahead of traffic,
 * and per-peer settings (emulated delay, record layer).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine.h"

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
    coc__route_changed();
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
    coc__conn *c = coc__peer_conn(e, p);
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
        coc__conn *c = coc__peer_conn(e, p);
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
