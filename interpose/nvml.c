/* nvml.c -- other processes on the GPU, at an out-of-memory failure. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/dlagain.h"
#include "../common/fdkeep.h"
#include "nvml.h"

/* nvmlProcessInfo_t of the _v2/_v3 calls, and of the original call. */
struct nvml_proc_v2 { unsigned pid; unsigned long long used; unsigned gi, ci; };
struct nvml_proc_v1 { unsigned pid; unsigned long long used; };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int (*get_handle)(const char *, void **);
static int (*get_procs_v2)(void *, unsigned *, struct nvml_proc_v2 *);
static int (*get_procs_v1)(void *, unsigned *, struct nvml_proc_v1 *);
static int ready;

static void load(void) {
    void *h = vt_dlopen_again("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL, NULL, 0);
    if (!h) return;
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    *(void **)&get_handle = dlsym(h, "nvmlDeviceGetHandleByUUID");
    *(void **)&get_procs_v2 = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!get_procs_v2) *(void **)&get_procs_v2 = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    if (!get_procs_v2) *(void **)&get_procs_v1 = dlsym(h, "nvmlDeviceGetComputeRunningProcesses");
    if (init && get_handle && (get_procs_v2 || get_procs_v1) && init() == 0) ready = 1;
}

static void proc_name(int pid, char *out, size_t size) {
    char path[64];
    out[0] = '\0';
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    if (vt_fd_read_small(path, out, size) <= 0) {
        out[0] = '\0';
        return;
    }
    char *nl = strchr(out, '\n');
    if (nl) *nl = '\0';
}

int vt_nvml_processes(const char *uuid, struct vt_proc *out, int max) {
    pthread_once(&once, load);
    if (!ready || !uuid || !*uuid) return -1;
    void *dev = NULL;
    if (get_handle(uuid, &dev) != 0) return -1;
    enum { CAP = 64 };
    unsigned n = CAP;
    struct nvml_proc_v2 v2[CAP];
    struct nvml_proc_v1 v1[CAP];
    int rc = get_procs_v2 ? get_procs_v2(dev, &n, v2) : get_procs_v1(dev, &n, v1);
    if (rc != 0) return -1;
    int k = 0, self = (int)getpid();
    for (unsigned i = 0; i < n && i < CAP && k < max; i++) {
        unsigned pid = get_procs_v2 ? v2[i].pid : v1[i].pid;
        unsigned long long used = get_procs_v2 ? v2[i].used : v1[i].used;
        if ((int)pid == self) continue;
        out[k].pid = (int32_t)pid;
        out[k].used_bytes = used == ULLONG_MAX ? UINT64_MAX : used;
        proc_name((int)pid, out[k].name, sizeof out[k].name);
        k++;
    }
    return k;
}
