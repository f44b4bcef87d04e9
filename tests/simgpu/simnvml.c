/* simnvml.c -- a stand-in libnvidia-ml.so.1 for tests.
 *
 * It knows the simulated GPU's devices (SIMGPU_DEVICES of them, with the
 * UUIDs and PCI bus ids the simulated driver gives them, of SIMGPU_CAPACITY
 * bytes each) and the functions vramtrace and PyTorch call: init, device
 * handles by index, UUID and PCI bus id, memory information and the compute
 * processes. SIMNVML_PROCS="PID:SIZE,PID:SIZE" lists the compute processes
 * it reports on every device (SIZE with K, M or G; "self" as PID is the
 * caller; "?" as SIZE is NVML_VALUE_NOT_AVAILABLE); without it there are
 * none. SIMNVML_FAIL=1 makes nvmlInit fail with NVML_ERROR_DRIVER_NOT_LOADED,
 * as on a machine whose driver is unreachable; SIMNVML_INIT_MS=N makes it
 * take N milliseconds, as a real NVML's start can take hundreds. The memory it reports used is the sum of those sizes: NVML sees
 * other processes' memory, which this process's simulated driver does not.
 * NVLink and P2P queries answer NVML_ERROR_NOT_SUPPORTED; the device is on
 * no NVLink fabric. Return codes are NVML's: 0 success, 2 invalid argument,
 * 3 not supported, 6 not found, 7 insufficient size, 9 driver not loaded,
 * 25 argument version mismatch. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define NV_SUCCESS 0
#define NV_INVALID 2
#define NV_NOT_SUPPORTED 3
#define NV_NOT_FOUND 6
#define NV_INSUFFICIENT_SIZE 7
#define NV_DRIVER_NOT_LOADED 9
#define NV_ARGUMENT_VERSION_MISMATCH 25
#define NV_MAX_DEVICES 8

/* nvmlProcessInfo_t of the _v2/_v3 calls, and of the original call. */
struct proc { unsigned pid; unsigned long long used; unsigned gi, ci; };
struct proc_v1 { unsigned pid; unsigned long long used; };
struct memory { unsigned long long total, free, used; };

struct nv_device { int index; };
static struct nv_device nv_devices[NV_MAX_DEVICES] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

static int nv_count(void) {
    const char *n = getenv("SIMGPU_DEVICES");
    return n && atoi(n) >= 1 && atoi(n) <= NV_MAX_DEVICES ? atoi(n) : 1;
}

static unsigned long long nv_size(const char *s, char **end) {
    unsigned long long v = strtoull(s, end, 10);
    if (**end == 'K' || **end == 'k') v <<= 10;
    else if (**end == 'M' || **end == 'm') v <<= 20;
    else if (**end == 'G' || **end == 'g') v <<= 30;
    return v;
}

static struct nv_device *nv_dev(void *dev) {
    struct nv_device *d = dev;
    return d >= nv_devices && d < nv_devices + nv_count() ? d : NULL;
}

/* The UUID simcuda.c gives device d (bytes 0x10*d + i), in NVML's form. */
static void nv_uuid(int d, char *out, size_t len) {
    unsigned char b[16];
    for (int i = 0; i < 16; i++) b[i] = (unsigned char)(0x10 * d + i);
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int nv_init(void) {
    const char *ms = getenv("SIMNVML_INIT_MS");
    if (ms && atoi(ms) > 0) usleep((useconds_t)atoi(ms) * 1000);
    const char *f = getenv("SIMNVML_FAIL");
    return f && *f && strcmp(f, "0") != 0 ? NV_DRIVER_NOT_LOADED : NV_SUCCESS;
}

EXPORT int nvmlInit_v2(void) { return nv_init(); }
EXPORT int nvmlInit(void) { return nv_init(); }
EXPORT int nvmlInitWithFlags(unsigned flags) { (void)flags; return nv_init(); }
EXPORT int nvmlShutdown(void) { return NV_SUCCESS; }

EXPORT const char *nvmlErrorString(int r) {
    switch (r) {
    case NV_SUCCESS: return "Success";
    case NV_INVALID: return "Invalid Argument";
    case NV_NOT_SUPPORTED: return "Not Supported";
    case NV_NOT_FOUND: return "Not Found";
    case NV_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NV_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

EXPORT int nvmlSystemGetCudaDriverVersion_v2(int *v) {
    if (!v) return NV_INVALID;
    *v = 13000;
    return NV_SUCCESS;
}

EXPORT int nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }

EXPORT int nvmlDeviceGetCount_v2(unsigned *n) {
    if (!n) return NV_INVALID;
    *n = (unsigned)nv_count();
    return NV_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev) {
    if (!dev || i >= (unsigned)nv_count()) return NV_INVALID;
    *dev = &nv_devices[i];
    return NV_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev) {
    if (!uuid || strncmp(uuid, "GPU-", 4) != 0 || !dev) return NV_INVALID;
    char want[64];
    for (int d = 0; d < nv_count(); d++) {
        nv_uuid(d, want, sizeof want);
        if (strcasecmp(want, uuid) == 0) { *dev = &nv_devices[d]; return NV_SUCCESS; }
    }
    return NV_NOT_FOUND;
}

/* Bus ids as "domain:bus:device.function" in hex; the simulated device d
 * sits on bus d + 1 of domain 0. */
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **dev) {
    unsigned dom, bus, slot, fn;
    if (!id || !dev || sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4) return NV_INVALID;
    if (dom != 0 || slot != 0 || fn != 0 || bus < 1 || bus > (unsigned)nv_count()) return NV_NOT_FOUND;
    *dev = &nv_devices[bus - 1];
    return NV_SUCCESS;
}

EXPORT int nvmlDeviceGetUUID(void *dev, char *uuid, unsigned len) {
    struct nv_device *d = nv_dev(dev);
    if (!d || !uuid) return NV_INVALID;
    char s[64];
    nv_uuid(d->index, s, sizeof s);
    if (strlen(s) + 1 > len) return NV_INSUFFICIENT_SIZE;
    memcpy(uuid, s, strlen(s) + 1);
    return NV_SUCCESS;
}

EXPORT int nvmlDeviceGetName(void *dev, char *name, unsigned len) {
    if (!nv_dev(dev) || !name || len == 0) return NV_INVALID;
    const char *s = "vramtrace simulated GPU";
    if (strlen(s) + 1 > len) return NV_INSUFFICIENT_SIZE;
    memcpy(name, s, strlen(s) + 1);
    return NV_SUCCESS;
}

EXPORT int nvmlDeviceGetIndex(void *dev, unsigned *i) {
    struct nv_device *d = nv_dev(dev);
    if (!d || !i) return NV_INVALID;
    *i = (unsigned)d->index;
    return NV_SUCCESS;
}

/* SIMNVML_PROCS parsed into at most cap entries; returns how many it lists. */
static unsigned nv_procs(struct proc *out, unsigned cap) {
    const char *spec = getenv("SIMNVML_PROCS");
    if (!spec) return 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    unsigned n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) continue;
        *colon = '\0';
        unsigned pid = strcmp(tok, "self") == 0 ? (unsigned)getpid() : (unsigned)atoi(tok);
        char *end;
        unsigned long long v = nv_size(colon + 1, &end);
        if (colon[1] == '?') v = ~0ull;
        if (n < cap) out[n] = (struct proc){pid, v, 0, 0};
        n++;
    }
    return n;
}

/* The checks of every nvmlDeviceGetComputeRunningProcesses version: the
 * processes in all[0..*n) (at most 64 of them) and NV_SUCCESS when they
 * fit in out's *count entries (*count then says how many there are), else
 * the status to return. */
static int nv_proc_list(void *dev, unsigned *count, const void *out, struct proc *all, unsigned *n) {
    if (!nv_dev(dev) || !count) return NV_INVALID;
    *n = nv_procs(all, 64);
    if (*n > *count) { *count = *n; return NV_INSUFFICIENT_SIZE; }
    if (*n && !out) return NV_INVALID;
    *count = *n;
    if (*n > 64) *n = 64;
    return NV_SUCCESS;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned *count, struct proc *out) {
    struct proc all[64];
    unsigned n;
    int r = nv_proc_list(dev, count, out, all, &n);
    for (unsigned i = 0; r == NV_SUCCESS && i < n; i++) out[i] = all[i];
    return r;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v2(void *dev, unsigned *count, struct proc *out) {
    return nvmlDeviceGetComputeRunningProcesses_v3(dev, count, out);
}

/* The original call fills the smaller nvmlProcessInfo_v1_t. */
EXPORT int nvmlDeviceGetComputeRunningProcesses(void *dev, unsigned *count, struct proc_v1 *out) {
    struct proc all[64];
    unsigned n;
    int r = nv_proc_list(dev, count, out, all, &n);
    for (unsigned i = 0; r == NV_SUCCESS && i < n; i++) out[i] = (struct proc_v1){all[i].pid, all[i].used};
    return r;
}

EXPORT int nvmlDeviceGetMemoryInfo(void *dev, struct memory *m) {
    if (!nv_dev(dev) || !m) return NV_INVALID;
    char *end;
    const char *cap = getenv("SIMGPU_CAPACITY");
    unsigned long long total = cap && *cap ? nv_size(cap, &end) : 16ull << 30, used = 0;
    struct proc all[64];
    unsigned n = nv_procs(all, 64);
    for (unsigned i = 0; i < n && i < 64; i++)
        if (all[i].used != ~0ull) used += all[i].used;
    if (used > total) used = total;
    *m = (struct memory){total, total - used, used};
    return NV_SUCCESS;
}

EXPORT int nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned link, int *type) {
    (void)link; (void)type;
    return nv_dev(dev) ? NV_NOT_SUPPORTED : NV_INVALID;
}

EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, void *pci) {
    (void)link; (void)pci;
    return nv_dev(dev) ? NV_NOT_SUPPORTED : NV_INVALID;
}

EXPORT int nvmlDeviceGetP2PStatus(void *a, void *b, int index, int *status) {
    (void)index; (void)status;
    return nv_dev(a) && nv_dev(b) ? NV_NOT_SUPPORTED : NV_INVALID;
}

/* nvmlGpuFabricInfo_v2_t and _v3_t of NVML's header: the version word holds
 * the struct's size and, in its top byte, its version. */
struct fabric {
    unsigned version;
    unsigned char cluster_uuid[16];
    int status;
    unsigned clique_id;
    unsigned char state;
    unsigned health_mask;
    unsigned char health_summary; /* v3 */
};

/* The simulated device is on no NVLink fabric: the query succeeds with
 * NVML_GPU_FABRIC_STATE_NOT_SUPPORTED (0), as on a PCIe board. */
EXPORT int nvmlDeviceGetGpuFabricInfoV(void *dev, struct fabric *info) {
    if (!nv_dev(dev) || !info) return NV_INVALID;
    unsigned version = info->version >> 24, size = info->version & 0xffffff;
    size_t v3 = sizeof *info, v2 = offsetof(struct fabric, health_summary);
    if (!((version == 2 && size == v2) || (version == 3 && size == v3))) return NV_ARGUMENT_VERSION_MISMATCH;
    unsigned keep = info->version;
    memset(info, 0, size);
    info->version = keep;
    info->status = NV_SUCCESS;
    return NV_SUCCESS;
}
