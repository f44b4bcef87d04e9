/* simnvml.c -- a stand-in libnvidia-ml.so.1 for tests.
 *
 * SIMNVML_PROCS="PID:SIZE,PID:SIZE" lists the compute processes it reports
 * on every device (SIZE with K, M or G; "self" as PID is the caller; "?"
 * as SIZE is NVML_VALUE_NOT_AVAILABLE). Without SIMNVML_PROCS, nvmlInit
 * fails, as on a machine whose driver is unreachable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

struct proc { unsigned pid; unsigned long long used; unsigned gi, ci; };

EXPORT int nvmlInit_v2(void) { return getenv("SIMNVML_PROCS") ? 0 : 999; }

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev) {
    if (!uuid || strncmp(uuid, "GPU-", 4) != 0 || !dev) return 2;
    *dev = (void *)0x1;
    return 0;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned *count, struct proc *out) {
    (void)dev;
    const char *spec = getenv("SIMNVML_PROCS");
    if (!spec || !count) return 2;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    unsigned n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *colon = strchr(tok, ':');
        if (!colon) continue;
        *colon = '\0';
        unsigned pid = strcmp(tok, "self") == 0 ? (unsigned)getpid() : (unsigned)atoi(tok);
        char *end;
        unsigned long long v = strtoull(colon + 1, &end, 10);
        if (*end == 'K') v <<= 10;
        else if (*end == 'M') v <<= 20;
        else if (*end == 'G') v <<= 30;
        if (colon[1] == '?') v = ~0ull;
        if (n < *count) out[n] = (struct proc){pid, v, 0, 0};
        n++;
    }
    if (n > *count) { *count = n; return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */ }
    *count = n;
    return 0;
}
