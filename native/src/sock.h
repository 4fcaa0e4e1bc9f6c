/* sock.h — TCP and unix-socket helpers: non-blocking, close-on-exec, tuned for the data path. */
#ifndef COC_SOCK_H
#define COC_SOCK_H

#include <stddef.h>
#include <stdint.h>

#define COC__SOCK_BUF (4 << 20) /* SO_SNDBUF/SO_RCVBUF asked for (the kernel caps it) */

/* Listen on ip:port, trying port_min..port_max (0,0: any); *port gets the bound port. */
int coc__sock_listen_tcp(const char *ip, uint16_t port_min, uint16_t port_max, uint16_t *port);
/* Listen on the abstract unix name `name` (without the leading '@'). */
int coc__sock_listen_unix(const char *name);
#define COC__UNIX_BACKLOG_WAIT_MS 200 /* how long a full unix backlog is retried */
#define COC__UNIX_BACKLOG_STEP_MS 20  /* the longest pause between two tries */

/* Start a non-blocking connect; returns the fd (connection completes on writability). */
int coc__sock_connect_tcp(const char *ip, uint16_t port);
/* Connect to the abstract unix name `name`: done on return (unix connects do not wait).
 * A listener whose backlog is full is tried again for COC__UNIX_BACKLOG_WAIT_MS, then
 * -EAGAIN (see sock.c). */
int coc__sock_connect_unix(const char *name);
/* Accept one connection; -EAGAIN when none. On EMFILE/ENFILE, sheds the pending
 * connection using the reserve fd (*reserve is reopened) so the listener does not spin. */
int coc__sock_accept(int lfd, int *reserve);
/* Make a connected socket block, every call on it waiting at most timeout_ms (receive
 * and send timeouts): a caller may then sleep in its recv. Calls that must not wait pass
 * MSG_DONTWAIT. 0, or -errno (the socket is left non-blocking). */
int coc__sock_block(int fd, int timeout_ms);
/* The pending error of a socket whose non-blocking connect finished (0 or -errno). */
int coc__sock_error(int fd);
/* "host token" identifying this host's boot and network namespace, for the same-host path. */
int coc__host_token(char *buf, size_t len);

#endif
