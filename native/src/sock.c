/* sock.c — socket helpers (see sock.h). */
#include "sock.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The system's cap for an explicit socket buffer size (net.core.{w,r}mem_max), or 0. */
static long sysctl_long(const char *path)
{
    long v = 0;
    FILE *f = fopen(path, "re");
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

/*
 * Socket buffers: an explicit SO_SNDBUF/SO_RCVBUF turns the kernel's autotuning off and is
 * capped by net.core.wmem_max/rmem_max (often 212992 B, far below what autotuning would
 * reach). So they are set only where the system lets them reach COC__SOCK_BUF; measured on
 * loopback here (caps 4 MiB) it makes no difference either way, it matters on long fat links.
 */
static void tune(int fd, int tcp)
{
    static _Atomic int big_buffers = -1;
    int one = 1, buf = COC__SOCK_BUF;
    if (tcp)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (big_buffers < 0) /* racy but idempotent */
        big_buffers = sysctl_long("/proc/sys/net/core/wmem_max") >= COC__SOCK_BUF &&
                      sysctl_long("/proc/sys/net/core/rmem_max") >= COC__SOCK_BUF;
    if (big_buffers) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    }
}

static int fail(int fd)
{
    int rc = -errno;
    close(fd);
    return rc;
}

int coc__sock_listen_tcp(const char *ip, uint16_t port_min, uint16_t port_max, uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return -EINVAL;
    if (port_max < port_min)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    tune(fd, 1); /* accepted sockets inherit the buffer sizes */
    int rc = -EADDRINUSE;
    for (uint32_t p = port_min; p <= port_max; p++) {
        sa.sin_port = htons((uint16_t)p);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            rc = 0;
            break;
        }
        rc = -errno;
        if (rc != -EADDRINUSE && rc != -EACCES)
            break;
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    if (listen(fd, 128) < 0)
        return fail(fd);
    socklen_t sl = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
        return fail(fd);
    *port = ntohs(sa.sin_port);
    return fd;
}

static socklen_t unix_addr(struct sockaddr_un *sa, const char *name)
{
    size_t n = strlen(name);
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (n + 1 > sizeof sa->sun_path)
        return 0;
    memcpy(sa->sun_path + 1, name, n); /* leading NUL: the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* A non-blocking unix stream socket and the abstract address `name`. */
static int unix_socket(const char *name, struct sockaddr_un *sa, socklen_t *sl)
{
    if (!(*sl = unix_addr(sa, name)))
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    tune(fd, 0);
    return fd;
}

int coc__sock_listen_unix(const char *name)
{
    struct sockaddr_un sa;
    socklen_t sl;
    int fd = unix_socket(name, &sa, &sl);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, sl) < 0 || listen(fd, 128) < 0))
        return fail(fd);
    return fd;
}

/*
 * A non-blocking AF_UNIX connect never is "in progress": it connects at once, or fails
 * with EAGAIN when the listener's backlog is full -- and then the socket is not connected
 * at all (writing it gives ENOTCONN). TCP would retry its SYN by itself; here the retry is
 * ours: again after pauses of 0.1, 0.2, 0.4 ... ms (at most COC__UNIX_BACKLOG_STEP_MS)
 * until they add up to COC__UNIX_BACKLOG_WAIT_MS. A live peer accepts its backlog within
 * microseconds; one that stays full that long is not accepting, and the caller gets -EAGAIN.
 * The dialing thread pauses meanwhile (the engine's lock held: conn.c dials under it) --
 * only in this rare case, and for 200 ms at most.
 */
static int connect_unix_retrying(int fd, const struct sockaddr *sa, socklen_t sl)
{
    const long most = COC__UNIX_BACKLOG_STEP_MS * 1000000L; /* ns */
    long paused = 0, step = 100000;
    while (connect(fd, sa, sl) < 0) {
        if (errno != EAGAIN || paused >= COC__UNIX_BACKLOG_WAIT_MS * 1000000L)
            return fail(fd);
        nanosleep(&(struct timespec){0, step}, NULL);
        paused += step;
        step = 2 * step < most ? 2 * step : most;
    }
    return fd;
}

int coc__sock_connect_tcp(const char *ip, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    tune(fd, 1);
    /* EAGAIN here is "no local port left", not a connect in progress */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS)
        return fail(fd);
    return fd;
}

int coc__sock_connect_unix(const char *name)
{
    struct sockaddr_un sa;
    socklen_t sl;
    int fd = unix_socket(name, &sa, &sl);
    return fd < 0 ? fd : connect_unix_retrying(fd, (struct sockaddr *)&sa, sl);
}

int coc__sock_accept(int lfd, int *reserve)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* fails harmlessly on unix */
            return fd;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if ((errno == EMFILE || errno == ENFILE) && *reserve >= 0) {
            /* Out of fds: free the reserve, accept and close the connection so the
             * listener stops reporting it, then take the reserve back (libuv's trick). */
            int rc = -errno;
            close(*reserve);
            int shed = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (shed >= 0)
                close(shed);
            *reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
            return rc;
        }
        return -errno;
    }
}

int coc__sock_block(int fd, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

int coc__sock_error(int fd)
{
    int err = 0;
    socklen_t sl = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
        return -errno;
    return -err;
}

int coc__host_token(char *buf, size_t len)
{
    char boot[64] = "";
    struct stat st;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "-\n")] = '\0'; /* first group of the boot id is plenty */
    if (stat("/proc/self/ns/net", &st) < 0)
        return -errno;
    int n = snprintf(buf, len, "%s.%lu", boot[0] ? boot : "noboot", (unsigned long)st.st_ino);
    return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}
