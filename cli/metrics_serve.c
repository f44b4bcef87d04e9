/* metrics_serve.c -- where `vramtrace metrics` writes: a textfile for
 * node_exporter, or /metrics over HTTP (metrics.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "reporters.h"

static volatile sig_atomic_t stop;
static void on_stop(int sig) { (void)sig; stop = 1; }

static void catch_stop(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Written to DIR/.vramtrace.prom.PID, flushed, then renamed over
 * DIR/vramtrace.prom: the collector reads the old file or the new one. */
static int write_textfile(const struct vt_metrics_opts *o) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/vramtrace.prom", o->textfile);
    snprintf(tmp, sizeof tmp, "%s/.vramtrace.prom.%d", o->textfile, (int)getpid());
    size_t len;
    char *text = vt_metrics_text(o, &len);
    if (!text) return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    int ok = fd >= 0;
    for (size_t at = 0; ok && at < len;) {
        ssize_t w = write(fd, text + at, len - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = 0;
        else at += (size_t)w;
    }
    if (fd >= 0 && (close(fd) != 0)) ok = 0;
    free(text);
    if (ok && rename(tmp, path) == 0) return 0;
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
}

int vt_metrics_textfile(const struct vt_metrics_opts *o) {
    catch_stop();
    while (!stop) {
        if (write_textfile(o) != 0) {
            int e = errno;
            char safe[4 * PATH_MAX];
            fprintf(stderr, "vramtrace metrics: cannot write %s/vramtrace.prom: %s\n",
                    vr_safe(o->textfile, safe, sizeof safe), strerror(e));
            return 1;
        }
        if (o->once) break;
        sleep_s(o->interval);
    }
    return 0;
}

/* [HOST:]PORT, HOST 127.0.0.1 when left out; "[::1]:PORT" for IPv6. */
/* Why a host could not be resolved (open_listener's -3). */
static char listen_why[320];

/* The listening socket, or -1 (errno set) when it cannot be made, -2
 * when spec is no [HOST:]PORT (a port of 1 to 65535), -3 when its host
 * cannot be resolved (listen_why says why). */
static int open_listener(const char *spec) {
    char host[256] = "127.0.0.1", port[32];
    const char *colon = strrchr(spec, ':');
    if (colon) {
        size_t hl = (size_t)(colon - spec);
        if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') {
            spec++;
            hl -= 2;
            if (hl == 0) return -2; /* "[]": no host, not the default one */
        }
        if (hl >= sizeof host) return -2;
        if (hl) {
            memcpy(host, spec, hl);
            host[hl] = '\0';
        }
        snprintf(port, sizeof port, "%s", colon + 1);
    } else {
        snprintf(port, sizeof port, "%s", spec);
    }
    /* A port is a number from 1 to 65535: getaddrinfo would take a
     * service's name, and a bigger number modulo 65536 (70000: 4464). */
    size_t pl = strspn(port, "0123456789");
    if (pl == 0 || pl > 5 || port[pl] != '\0' || atol(port) < 1 || atol(port) > 65535) return -2;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) { /* a host that is no address, or none the resolver knows */
        snprintf(listen_why, sizeof listen_why, "%s: %s", host, gai_strerror(gai));
        return -3;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

static void send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

/* A media range's q ("...;q=0.5"; 1 when it gives none), from v to stop. */
static double range_q(const char *v, const char *stop) {
    double q = 1;
    for (const char *p = v; p + 2 < stop; p++)
        if (p[0] == ';') {
            const char *x = p + 1;
            while (x < stop && *x == ' ') x++;
            if (x + 2 <= stop && (x[0] == 'q' || x[0] == 'Q') && x[1] == '=') {
                char num[16] = "";
                size_t k = 0;
                for (x += 2; x < stop && k < sizeof num - 1 && *x != ';' && *x != ' '; x++) num[k++] = *x;
                q = strtod(num, NULL);
            }
        }
    return q;
}

/* Whether an Accept header's value asks for OpenMetrics: a media range
 * application/openmetrics-text whose q is above 0 and no lower than the
 * text format's (text/plain, text/ * or * / *; "...;q=0" refuses it, and
 * "text/plain;q=0.5, application/openmetrics-text;q=0.1" prefers text). */
static int asks_openmetrics(const char *v, const char *end) {
    double om_q = 0, text_q = 0;
    while (v < end) {
        const char *comma = memchr(v, ',', (size_t)(end - v));
        const char *stop_at = comma ? comma : end;
        while (v < stop_at && (*v == ' ' || *v == '\t')) v++;
        static const char om[] = "application/openmetrics-text", text[] = "text/plain", any_text[] = "text/*",
                          any[] = "*/*";
        size_t len = (size_t)(stop_at - v);
#define IS(s) (len >= sizeof s - 1 && strncasecmp(v, s, sizeof s - 1) == 0)
        double q = range_q(v, stop_at);
        if (IS(om) && q > om_q) om_q = q;
        if ((IS(text) || IS(any_text) || IS(any)) && q > text_q) text_q = q;
#undef IS
        v = stop_at + 1;
    }
    return om_q > 0 && om_q >= text_q;
}

/* Milliseconds from `then` to `now` (CLOCK_MONOTONIC). */
static long ms_between(const struct timespec *then, const struct timespec *now) {
    return (long)((now->tv_sec - then->tv_sec) * 1000 + (now->tv_nsec - then->tv_nsec) / 1000000);
}

/* Milliseconds left of `limit` since t0 (0 or less: none). */
static long ms_left(const struct timespec *t0, long limit) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return limit - ms_between(t0, &now);
}

/* The end of a request's head (a blank line, CRLF or LF) in p[0..n), or
 * NULL: bytes, a NUL among them (strstr stopped at it, and a request
 * that began with one waited out its 5 s unanswered). */
static const char *head_end(const char *p, size_t n) {
    const char *crlf = memmem(p, n, "\r\n\r\n", 4), *lf = memmem(p, n, "\n\n", 2);
    return crlf && (!lf || crlf < lf) ? crlf : lf;
}

/* After the answer: the client is told no more comes, and what it still
 * sends (a body, a second request, the rest of a head too long) is read
 * and dropped for up to a second, until it closes. A close with bytes
 * unread resets the connection, and a reset can drop the answer before
 * the client has read it. */
static void linger_out(int c) {
    shutdown(c, SHUT_WR);
    char sink[4096];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        long left = ms_left(&t0, 1000);
        struct pollfd p = {c, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0 || recv(c, sink, sizeof sink, 0) <= 0) return;
    }
}

/* The path of a request line's target: origin form ("/metrics?x") as it
 * is, absolute form ("http://host:9464/metrics", which HTTP/1.1 asks a
 * server to take too) from the path on; NULL when the line is no
 * "METHOD TARGET HTTP/x.y". */
static const char *target_path(const char *line, const char *eol) {
    const char *sp = memchr(line, ' ', (size_t)(eol - line));
    if (!sp || sp == line) return NULL;
    const char *t = sp + 1, *sp2 = memchr(t, ' ', (size_t)(eol - t));
    if (!sp2 || sp2 == t || eol - sp2 < 9 || strncmp(sp2 + 1, "HTTP/", 5) != 0) return NULL;
    if ((size_t)(sp2 - t) > 7 && strncasecmp(t, "http://", 7) == 0) {
        const char *slash = memchr(t + 7, '/', (size_t)(sp2 - (t + 7)));
        return slash ? slash : sp2; /* "http://host" asks for "/" */
    }
    return t;
}

/* One request on its own connection: its head read within 5 s in all (a
 * client that sends a byte now and then gets no more), ended by a blank
 * line (CRLF or LF), 8 KiB at most (431 past that); a head whose first
 * line is no "METHOD TARGET HTTP/x.y", or that holds a NUL, 400; GET
 * /metrics answered, HEAD /metrics with GET's head alone (HTTP asks every
 * server for both), other methods 405 with Allow, other paths 404. */
static void serve_one(int c, const struct vt_metrics_opts *o) {
    char req[8192] = "";
    size_t n = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *end = NULL;
    while (n < sizeof req - 1 && !(end = head_end(req, n))) {
        long left = ms_left(&t0, 5000);
        if (left <= 0) return;
        struct pollfd p = {c, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0) return;
        ssize_t r = recv(c, req + n, sizeof req - 1 - n, 0);
        if (r <= 0) return;
        n += (size_t)r;
        req[n] = '\0';
    }
    char head[512];
    const char *status = "200 OK", *allow = "";
    char *body = NULL;
    size_t len = 0;
    struct vt_metrics_opts mine = *o;
    const char *type = "text/plain; version=0.0.4; charset=utf-8";
    int head_only = strncmp(req, "HEAD ", 5) == 0;
    const char *eol = end ? memchr(req, '\n', n) : NULL; /* at or before the blank line's */
    const char *target = eol ? target_path(req, eol > req && eol[-1] == '\r' ? eol - 1 : eol) : NULL;
    if (!end) {
        status = "431 Request Header Fields Too Large";
    } else if (!target || memchr(req, '\0', (size_t)(end - req))) {
        status = "400 Bad Request";
        head_only = 0;
    } else if (strncmp(req, "GET ", 4) != 0 && !head_only) {
        status = "405 Method Not Allowed";
        allow = "Allow: GET, HEAD\r\n";
    } else if (strncmp(target, "/metrics ", 9) != 0 && strncmp(target, "/metrics?", 9) != 0) {
        status = "404 Not Found";
    } else {
        /* OpenMetrics to a client whose Accept asks for it. */
        for (char *line = strchr(req, '\n'); line && line < end && line[1]; line = strchr(line + 1, '\n'))
            if (strncasecmp(line + 1, "Accept:", 7) == 0) {
                char *stop_at = strchr(line + 1, '\n');
                if (!stop_at) stop_at = line + 1 + strlen(line + 1);
                if (asks_openmetrics(line + 8, stop_at)) mine.om = 1;
            }
        if (mine.om) type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
        body = vt_metrics_text(&mine, &len);
        if (!body) status = "500 Internal Server Error";
    }
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %s\r\n%sContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, allow, body ? type : "text/plain; charset=utf-8", body ? len : strlen(status) + 1);
    send_all(c, head, (size_t)hl);
    if (head_only) {
    } else if (body) {
        send_all(c, body, len);
    } else {
        send_all(c, status, strlen(status));
        send_all(c, "\n", 1);
    }
    free(body);
    linger_out(c);
}

/* At most this many connections served at once, each in a process of its
 * own: one client slow to send its request (or to read the answer) holds
 * its own connection only; one served in the accept loop held every other
 * scrape (an idle connection 5 s each, a slow one for an hour). */
#define MAX_CLIENTS 64

int vt_metrics_listen(const struct vt_metrics_opts *o) {
    int fd = open_listener(o->listen);
    if (fd == -3) {
        fprintf(stderr, "vramtrace metrics: --listen %s: cannot resolve %s\n", o->listen, listen_why);
        return 2;
    }
    if (fd == -2) { /* a bad value, refused as every other flag's is */
        fprintf(stderr, "vramtrace metrics: --listen takes [HOST:]PORT with a PORT of 1 to 65535, not '%s'\n",
                o->listen);
        return 2;
    }
    if (fd < 0) {
        fprintf(stderr, "vramtrace metrics: cannot listen on %s: %s\n", o->listen, strerror(errno ? errno : EINVAL));
        return 1;
    }
    catch_stop();
    int clients = 0;
    /* Connections answered 503, closing: what they send is read and
     * dropped until they close, for a second at most (linger_out's, here
     * without blocking the loop). */
    struct pollfd p[1 + MAX_CLIENTS];
    struct timespec refused_at[1 + MAX_CLIENTS];
    int refused = 0;
    while (!stop) {
        while (clients > 0 && waitpid(-1, NULL, WNOHANG) > 0) clients--;
        p[0] = (struct pollfd){fd, POLLIN, 0};
        if (poll(p, 1 + (nfds_t)refused, 200) < 0) continue;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (int i = 1; i <= refused;) {
            char sink[4096];
            long ms = ms_between(&refused_at[i], &now);
            ssize_t r = ms < 1000 && p[i].revents ? recv(p[i].fd, sink, sizeof sink, MSG_DONTWAIT) : 1;
            if (ms < 1000 && (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR)))) {
                i++;
                continue;
            }
            close(p[i].fd);
            p[i] = p[refused];
            refused_at[i] = refused_at[refused];
            refused--;
        }
        if (!(p[0].revents & POLLIN)) continue;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        if (clients >= MAX_CLIENTS) {
            static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                       "Connection: close\r\n\r\n";
            send_all(c, busy, sizeof busy - 1);
            shutdown(c, SHUT_WR);
            if (refused < MAX_CLIENTS) {
                refused++;
                p[refused] = (struct pollfd){c, POLLIN, 0};
                refused_at[refused] = now;
            } else {
                close(c);
            }
            continue;
        }
        pid_t child = fork();
        if (child == 0) {
            close(fd);
            for (int i = 1; i <= refused; i++) close(p[i].fd);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            alarm(60); /* a client that never reads the answer */
            serve_one(c, o);
            close(c);
            _exit(0);
        }
        if (child > 0) clients++;
        else serve_one(c, o); /* no process to spare: served here */
        close(c);
    }
    for (int i = 1; i <= refused; i++) close(p[i].fd);
    close(fd);
    return 0; /* a connection still being served ends by itself (alarm) */
}
