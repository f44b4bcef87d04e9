/* metrics_serve.c -- where `vramtrace metrics` writes: a textfile for
 * node_exporter, or /metrics over HTTP (metrics.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

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
            fprintf(stderr, "vramtrace metrics: cannot write %s/vramtrace.prom: %s\n", o->textfile, strerror(errno));
            return 1;
        }
        if (o->once) break;
        sleep_s(o->interval);
    }
    return 0;
}

/* [HOST:]PORT, HOST 127.0.0.1 when left out; "[::1]:PORT" for IPv6. */
static int open_listener(const char *spec) {
    char host[256] = "127.0.0.1", port[32];
    const char *colon = strrchr(spec, ':');
    if (colon) {
        size_t hl = (size_t)(colon - spec);
        if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') { spec++; hl -= 2; }
        if (hl >= sizeof host) return -1;
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
    if (pl == 0 || pl > 5 || port[pl] != '\0' || atol(port) < 1 || atol(port) > 65535) {
        errno = EINVAL;
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
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

/* One request: its head read within 5 s, GET /metrics answered, anything
 * else 404 (or 405 for another method). */
static void serve_one(int c, const struct vt_metrics_opts *o) {
    char req[8192] = "";
    size_t n = 0;
    while (n < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
        struct pollfd p = {c, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0) return;
        ssize_t r = recv(c, req + n, sizeof req - 1 - n, 0);
        if (r <= 0) return;
        n += (size_t)r;
        req[n] = '\0';
    }
    char head[512];
    const char *status = "200 OK";
    char *body = NULL;
    size_t len = 0;
    struct vt_metrics_opts mine = *o;
    const char *type = "text/plain; version=0.0.4; charset=utf-8";
    if (strncmp(req, "GET ", 4) != 0) {
        status = "405 Method Not Allowed";
    } else if (strncmp(req + 4, "/metrics ", 9) != 0 && strncmp(req + 4, "/metrics?", 9) != 0) {
        status = "404 Not Found";
    } else {
        /* OpenMetrics to a client whose Accept names it. */
        for (char *line = strstr(req, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n"))
            if (strncasecmp(line + 2, "Accept:", 7) == 0) {
                char *end = strstr(line + 2, "\r\n");
                char *om = strstr(line + 2, "application/openmetrics-text");
                if (om && (!end || om < end)) mine.om = 1;
            }
        if (mine.om) type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
        body = vt_metrics_text(&mine, &len);
        if (!body) status = "500 Internal Server Error";
    }
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
                      body ? type : "text/plain; charset=utf-8", body ? len : strlen(status) + 1);
    send_all(c, head, (size_t)hl);
    if (body) send_all(c, body, len);
    else {
        send_all(c, status, strlen(status));
        send_all(c, "\n", 1);
    }
    free(body);
}

int vt_metrics_listen(const struct vt_metrics_opts *o) {
    int fd = open_listener(o->listen);
    if (fd < 0) {
        fprintf(stderr, "vramtrace metrics: cannot listen on %s: %s\n", o->listen, strerror(errno ? errno : EINVAL));
        return 1;
    }
    catch_stop();
    while (!stop) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 500) <= 0) continue;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        serve_one(c, o);
        close(c);
    }
    close(fd);
    return 0;
}
