/*
 * coc_relay — a minimal single-threaded epoll byte relay: the ideal user-level gateway.
 *
 *   coc_relay [-b SOCKBUF] [-d UP_US] [-D DOWN_US] LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
 *
 * Accepts connections on LISTEN_HOST:LISTEN_PORT (0: any free port), connects each one to
 * TARGET_HOST:TARGET_PORT and copies bytes both ways through a page-aligned buffer per
 * direction. When the far side cannot take more, it stops reading the near side
 * (backpressure). -b sets SO_SNDBUF/SO_RCVBUF (default: the kernel's autotuning).
 * -d and -D hold every chunk read for that many microseconds before sending it on towards
 * the target (-d) or back to the client (-D): a one-way wide-area latency for kernels
 * without netem. A direction holds one buffer, so a delayed direction carries at most
 * BUF_SIZE bytes per delay (ample for latency; not a model of a long fat pipe).
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
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (256 * 1024)

/* One direction of a relayed connection: bytes read from `from` wait in buf for `to`. */
struct pipe {
    int from, to;
    char *buf;
    size_t start, end; /* unsent bytes are buf[start, end) */
    int eof;
    int drained; /* the last read was short: the socket is empty until epoll says otherwise */
    long long delay_ns; /* -d/-D: how long a chunk waits before it is sent */
    long long due_ns;   /* when the chunk in buf may be sent (CLOCK_MONOTONIC) */
};

/* A relayed connection: two directions. epoll data is the link's address with the low bit
 * telling which socket fired (0: client, 1: target). */
struct link {
    struct pipe up, down; /* up: client -> target, down: target -> client */
    int client, target;
    uint32_t armed[2]; /* events registered now for client, target */
    struct link *next, *prev; /* every open link, for the delay timer */
};

static int epfd, timer = -1; /* timer: a timerfd armed for the earliest held chunk */
static struct link *links;
static long long delay_up_ns, delay_down_ns;

/* The helpers below (now_ns, die, tune, addr_of) are coc_pingpong.c's too, on purpose: each
 * reference program stands alone, one file to read and check. */
static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

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
    if (out->end > out->start && (!out->due_ns || out->due_ns <= now_ns())) ev.events |= EPOLLOUT;
    int side = fd == l->target;
    if (ev.events == l->armed[side]) return; /* spare the syscall */
    l->armed[side] = ev.events;
    ev.data.u64 = (uint64_t)(uintptr_t)l | (uint64_t)side;
    epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

static void close_link(struct link *l) {
    if (l->prev) l->prev->next = l->next; else links = l->next;
    if (l->next) l->next->prev = l->prev;
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
            if (p->due_ns && p->due_ns > now_ns()) return 0; /* held: the timer sends it */
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
        if (p->delay_ns) p->due_ns = now_ns() + p->delay_ns;
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
    l->up = (struct pipe){.from = c, .to = t, .buf = l->up.buf, .delay_ns = delay_up_ns};
    l->down = (struct pipe){.from = t, .to = c, .buf = l->down.buf, .delay_ns = delay_down_ns};
    l->next = links;
    if (links) links->prev = l;
    links = l;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = (uint64_t)(uintptr_t)l;
    epoll_ctl(epfd, EPOLL_CTL_ADD, c, &ev);
    ev.data.u64 = (uint64_t)(uintptr_t)l | 1;
    epoll_ctl(epfd, EPOLL_CTL_ADD, t, &ev);
}

/* Arm the timer for the earliest held chunk (disarm it when none is held). */
static void arm_timer(void) {
    long long first = 0;
    for (struct link *l = links; l; l = l->next)
        for (struct pipe *p = &l->up; p; p = p == &l->up ? &l->down : NULL)
            if (p->end > p->start && p->due_ns && (!first || p->due_ns < first)) first = p->due_ns;
    struct itimerspec when = {.it_value = {.tv_sec = first / 1000000000LL,
                                           .tv_nsec = first % 1000000000LL}};
    timerfd_settime(timer, TFD_TIMER_ABSTIME, &when, NULL);
}

/* Send every held chunk whose time has come; close links that fail. */
static void send_due(void) {
    long long now = now_ns();
    for (struct link *l = links, *next; l; l = next) {
        next = l->next;
        int rc = 0, held = 0;
        for (struct pipe *p = &l->up; p; p = p == &l->up ? &l->down : NULL)
            if (p->end > p->start && p->due_ns) {
                held = 1;
                if (p->due_ns <= now) rc |= pump(p);
            }
        if (rc < 0) {
            close_link(l);
        } else if (held) {
            rearm(l, l->client);
            rearm(l, l->target);
        }
    }
}

int main(int argc, char **argv) {
    while (argc > 2 && argv[1][0] == '-' && argv[1][1] && !argv[1][2]) {
        if (argv[1][1] == 'b') sockbuf = atoi(argv[2]);
        else if (argv[1][1] == 'd') delay_up_ns = atoll(argv[2]) * 1000;
        else if (argv[1][1] == 'D') delay_down_ns = atoll(argv[2]) * 1000;
        else break;
        argc -= 2;
        argv += 2;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: coc_relay [-b SOCKBUF] [-d UP_US] [-D DOWN_US] LISTEN_HOST "
                        "LISTEN_PORT TARGET_HOST TARGET_PORT\n");
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
    if (delay_up_ns || delay_down_ns) {
        if ((timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0)
            die("timerfd_create");
        ev.data.u64 = 2; /* links are heap addresses, never 2 */
        epoll_ctl(epfd, EPOLL_CTL_ADD, timer, &ev);
    }
    struct epoll_event events[64];
    for (;;) {
        if (timer >= 0) arm_timer();
        int n = epoll_wait(epfd, events, 64, -1);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            if (events[i].data.u64 == 0) {
                accept_one(lfd, target);
                continue;
            }
            if (events[i].data.u64 == 2) { /* the timer: send what is due */
                uint64_t expirations;
                if (read(timer, &expirations, sizeof expirations) < 0) { /* EAGAIN: spurious */ }
                send_due();
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
