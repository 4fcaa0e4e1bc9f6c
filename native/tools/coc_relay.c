/*
 * coc_relay — a minimal single-threaded epoll byte relay: the ideal user-level gateway.
 *
 *   coc_relay [-b SOCKBUF] LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
 *
 * Accepts connections on LISTEN_HOST:LISTEN_PORT (0: any free port), connects each one to
 * TARGET_HOST:TARGET_PORT and copies bytes both ways through a page-aligned buffer per
 * direction. When the far side cannot take more, it stops reading the near side
 * (backpressure). -b sets SO_SNDBUF/SO_RCVBUF (default: the kernel's autotuning).
 * Prints "port N" on stdout once listening; runs until killed.
 * Reference (b) of `coc bench engine`; two chained give PACX-MPI's two-daemon shape (c).
 * Self-contained: needs nothing of libcoc.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (256 * 1024)

/* One direction of a relayed connection: bytes read from `from` wait in buf for `to`. */
struct pipe {
    int from, to;
    char *buf;
    size_t start, end; /* unsent bytes are buf[start, end) */
    int eof;
    int drained; /* the last read was short: the socket is empty until epoll says otherwise */
};

/* A relayed connection: two directions. epoll data is the link's address with the low bit
 * telling which socket fired (0: client, 1: target). */
struct link {
    struct pipe up, down; /* up: client -> target, down: target -> client */
    int client, target;
    uint32_t armed[2]; /* events registered now for client, target */
};

static int epfd;

static void die(const char *what) {
    fprintf(stderr, "coc_relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* SO_SNDBUF/SO_RCVBUF to ask for (-b BYTES); 0 leaves the kernel's autotuning. */
static int sockbuf;

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (sockbuf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf);
    }
}

static struct sockaddr_in addr_of(const char *host, const char *port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "coc_relay: not an IPv4 address: %s\n", host);
        exit(2);
    }
    return a;
}

/* Register fd for the events each direction needs now. */
static void rearm(struct link *l, int fd) {
    struct pipe *in = fd == l->client ? &l->up : &l->down;   /* we read fd into `in` */
    struct pipe *out = fd == l->client ? &l->down : &l->up;  /* we write `out` to fd */
    struct epoll_event ev = {.events = 0};
    if (!in->eof && in->end == 0) ev.events |= EPOLLIN; /* read only into an empty buffer */
    if (out->end > out->start) ev.events |= EPOLLOUT;
    int side = fd == l->target;
    if (ev.events == l->armed[side]) return; /* spare the syscall */
    l->armed[side] = ev.events;
    ev.data.u64 = (uint64_t)(uintptr_t)l | (uint64_t)side;
    epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

static void close_link(struct link *l) {
    close(l->client);
    close(l->target);
    free(l->up.buf);
    free(l->down.buf);
    free(l);
}

/* Move bytes along one direction as far as the sockets allow; -1 when the link is done.
 * One readable event costs one recv and one send when the message fits the buffer. */
static int pump(struct pipe *p) {
    for (;;) {
        if (p->end > p->start) {
            ssize_t n = send(p->to, p->buf + p->start, p->end - p->start, MSG_NOSIGNAL);
            if (n < 0) return errno == EAGAIN ? 0 : -1;
            p->start += (size_t)n;
            if (p->start < p->end) return 0;
        }
        p->start = p->end = 0;
        if (p->eof) return -1;
        if (p->drained) return 0; /* spare the read that would say EAGAIN */
        ssize_t n = recv(p->from, p->buf, BUF_SIZE, 0);
        if (n == 0) p->eof = 1;
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        p->end = (size_t)n;
        p->drained = n < BUF_SIZE;
    }
}

static void accept_one(int lfd, struct sockaddr_in target) {
    int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return; /* EAGAIN, EMFILE, aborted: try again on the next event */
    int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t < 0 || connect(t, (struct sockaddr *)&target, sizeof target) < 0) {
        fprintf(stderr, "coc_relay: connect to target: %s\n", strerror(errno));
        close(c);
        if (t >= 0) close(t);
        return;
    }
    fcntl(t, F_SETFL, fcntl(t, F_GETFL) | O_NONBLOCK);
    tune(c);
    tune(t);
    struct link *l = calloc(1, sizeof *l);
    if (!l || posix_memalign((void **)&l->up.buf, 4096, BUF_SIZE) ||
        posix_memalign((void **)&l->down.buf, 4096, BUF_SIZE))
        die("out of memory");
    l->client = c;
    l->target = t;
    l->armed[0] = l->armed[1] = EPOLLIN;
    l->up = (struct pipe){.from = c, .to = t, .buf = l->up.buf};
    l->down = (struct pipe){.from = t, .to = c, .buf = l->down.buf};
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = (uint64_t)(uintptr_t)l;
    epoll_ctl(epfd, EPOLL_CTL_ADD, c, &ev);
    ev.data.u64 = (uint64_t)(uintptr_t)l | 1;
    epoll_ctl(epfd, EPOLL_CTL_ADD, t, &ev);
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "-b") == 0) {
        sockbuf = atoi(argv[2]);
        argc -= 2;
        argv += 2;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: coc_relay [-b SOCKBUF] LISTEN_HOST LISTEN_PORT TARGET_HOST "
                        "TARGET_PORT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in self = addr_of(argv[1], argv[2]), target = addr_of(argv[3], argv[4]);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&self, sizeof self) < 0 || listen(lfd, 64) < 0)
        die("listen");
    socklen_t len = sizeof self;
    getsockname(lfd, (struct sockaddr *)&self, &len);
    printf("port %d\n", ntohs(self.sin_port));
    fflush(stdout);

    epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[64];
    for (;;) {
        int n = epoll_wait(epfd, events, 64, -1);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            if (events[i].data.u64 == 0) {
                accept_one(lfd, target);
                continue;
            }
            struct link *l = (struct link *)(uintptr_t)(events[i].data.u64 & ~(uint64_t)1);
            int is_target = (int)(events[i].data.u64 & 1);
            /* Readable: move what it sent onward. Writable: flush what waits for it. */
            struct pipe *rd = is_target ? &l->down : &l->up, *wr = is_target ? &l->up : &l->down;
            int rc = 0;
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                rd->drained = 0;
                rc |= pump(rd);
            }
            if (events[i].events & EPOLLOUT) rc |= pump(wr);
            if (rc < 0) {
                close_link(l);
                continue;
            }
            rearm(l, l->client);
            rearm(l, l->target);
        }
    }
}
