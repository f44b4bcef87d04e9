/* pools.h -- where stream-ordered memory lands: each memory pool's
 * location, and a stream's device.
 *
 * A pool is noted when the driver hands it out (cuMemPoolCreate, a
 * device's or a location's default or current pool) and forgotten when it
 * is destroyed; an allocation from it is then counted on the pool's device,
 * or as host memory for a pool on the host, whichever device is current.
 * Noted also while a runtime call runs (the runtime's cudaMemPoolCreate
 * reaches cuMemPoolCreate): noting records no allocation. */
#ifndef VT_INTERPOSE_POOLS_H
#define VT_INTERPOSE_POOLS_H

/* Pool `pool` (a CUmemoryPool, the same as a cudaMemPool_t) holds memory
 * of device `device`, or host memory (VT_HOST_DEVICE). */
void vt_pool_note(void *pool, int device);

/* Up to `max` pools noted as device `device`'s into out; how many. */
size_t vt_pools_of(int device, void **out, size_t max);

/* Pool `pool` was destroyed: its handle may name another pool later. */
void vt_pool_forget(void *pool);

/* Where an allocation from `pool` on stream `stream` lands: *device is the
 * pool's device, VT_HOST_DEVICE for a pool on the host, or (a pool never
 * noted) the stream's device, as vt_stream_device; returns the kind,
 * VT_KIND_HOST_ASYNC or VT_KIND_ASYNC (on a captured stream, the node's
 * kind: see vt_node_kind). */
int vt_pool_where(void *pool, void *stream, int *device);

/* The device an allocation from the current pool of `stream`'s device
 * lands on: VT_DEVICE_CURRENT for the default streams (0, legacy, per
 * thread) or when the process has one device, else the driver's
 * cuStreamGetDevice (VT_DEVICE_CURRENT when it cannot say). */
int vt_stream_device(void *stream);

/* A capture of a stream is beginning in this process (cuStreamBeginCapture
 * and its variants, the runtime's too), and a capture ended (its
 * cuStreamEndCapture succeeded, or its beginning failed): while any may be
 * in progress, each stream-ordered allocation asks whether its stream is
 * being captured. */
void vt_capture_began(void);
void vt_capture_ended(void);

/* A memory node is being added to a graph by hand (cuGraphAddMemAllocNode
 * and the like): from now on graphs are followed as after a capture. */
void vt_graph_nodes_added(void);

/* Whether a capture began, or a memory node was added to a graph by hand,
 * in this process (graphs are followed from then on). */
int vt_captures_began(void);

/* Whether `stream` is being captured (its stream-ordered allocations and
 * frees are then a graph's memory nodes, graphs.h), and into what: the
 * graph the driver captures into (cuStreamGetCaptureInfo_v2, so that a
 * stream joined to another's capture and each thread's per-thread default
 * stream name the right one), else the stream itself where the driver
 * cannot say (older than CUDA 11.3); NULL when not captured. Never asked
 * while no capture is in progress, nor for the legacy default stream,
 * which cannot be captured. */
void *vt_stream_capture_key(void *stream);

/* The kind of a stream-ordered allocation's node on a captured stream:
 * VT_KIND_GRAPH for device memory, else the kind itself (host). */
static inline int vt_node_kind(int kind) { return kind == VT_KIND_ASYNC ? VT_KIND_GRAPH : kind; }

/* After fork, in the child: the table's lock, which another thread of the
 * parent may have held, is free again. */
void vt_pools_reset_child(void);

#endif
